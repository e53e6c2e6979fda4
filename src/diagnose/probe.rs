//! Probes that repeat a step of NCCL's outside NCCL, so a finding rests on two kinds of
//! evidence: what NCCL said, and what the node does when asked directly.

use crate::ffi::cuda::{Device, Driver, SharedMem};
use crate::ffi::nccl::Nccl;
use crate::ffi::os;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Creates and fully reserves a segment of `bytes` in `dir` (normally /dev/shm), then removes
/// it. Returns a line of evidence.
pub fn shm_segment(dir: &Path, bytes: u64) -> String {
    let space = os::fs_space(&dir.display().to_string())
        .map(|(t, f)| format!(" ({} MiB total, {} MiB free)", t >> 20, f >> 20))
        .unwrap_or_default();
    let path = dir.join(format!("nccl-smoke-probe.{}", std::process::id()));
    let result = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .and_then(|f| os::fallocate(&f, bytes));
    let _ = std::fs::remove_file(&path);
    match result {
        Ok(()) => format!(
            "probe: a {bytes}-byte segment in {}{space} could be created and reserved",
            dir.display()
        ),
        Err(e) => format!(
            "probe: a {bytes}-byte segment in {}{space} could NOT be created: {e}",
            dir.display()
        ),
    }
}

/// The peer-memory paths NCCL looks for, legacy first, and whether each exists under `root`.
pub const PEERMEM_PATHS: [&str; 3] = [
    "sys/kernel/mm/memory_peers/nv_mem/version",
    "sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "sys/module/nvidia_peermem/version",
];

/// A line of evidence about GPUDirect RDMA kernel support under `root` (normally `/`).
pub fn peermem(root: &Path) -> String {
    let present: Vec<String> = PEERMEM_PATHS
        .iter()
        .filter(|p| root.join(p).exists())
        .map(|p| format!("/{p}"))
        .collect();
    if present.is_empty() {
        "probe: no peer-memory module (nvidia_peermem / nv_peer_mem) is loaded on this node".into()
    } else {
        format!(
            "probe: peer memory present on this node: {}",
            present.join(", ")
        )
    }
}

/// The hidden subcommand that imports in the second process.
pub const IMPORT_SUBCOMMAND: &str = "probe-import";
/// Bytes written by the exporter and checked by the importer.
const PATTERN_LEN: usize = 4096;
/// How long a probe's second process may take, start to answer.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

fn pattern() -> Vec<u8> {
    (0..PATTERN_LEN).map(|i| (i * 7 % 251) as u8).collect()
}

/// Repeats the step of NCCL's P2P transport that field report 000 saw fail: this process
/// exports a small cuMem buffer as a file descriptor, a second process on this node (`exe`,
/// nccl-smoke itself, with the same driver and device) imports it over a Unix socket and reads it back. Returns a
/// line of evidence: an import that works between two processes here, while NCCL's failed,
/// points at what separates the ranks (containers, device visibility), not at the driver.
pub fn shareable_import(driver: &Driver, dev: &Device, exe: &Path) -> String {
    if !driver.vmm {
        return "probe: cuMem export/import skipped: this driver has no cuMem (VMM) calls".into();
    }
    let ordinal = dev.info.ordinal;
    let outcome = match export_and_ask(driver, dev, exe) {
        Ok(reply) | Err(reply) => reply,
    };
    format!(
        "probe: cuMem buffer exported as a file descriptor on device {ordinal}, imported by a \
         second process on this node: {outcome}"
    )
}

fn export_and_ask(driver: &Driver, dev: &Device, exe: &Path) -> Result<String, String> {
    let mem = SharedMem::create(dev, PATTERN_LEN).map_err(|e| format!("export FAILED: {e}"))?;
    mem.write(&pattern())
        .map_err(|e| format!("export FAILED: {e}"))?;
    let fd = mem.export().map_err(|e| format!("export FAILED: {e}"))?;
    let sock = std::env::temp_dir().join(format!("nccl-smoke-probe.{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&sock);
    let listener =
        UnixListener::bind(&sock).map_err(|e| format!("no socket {}: {e}", sock.display()))?;
    let child = Command::new(exe)
        .args([IMPORT_SUBCOMMAND, "--socket"])
        .arg(&sock)
        .args([
            "--cuda-lib",
            &driver.path,
            "--device",
            &dev.info.ordinal.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start the second process: {e}"));
    let answer = child.and_then(|mut child| {
        let answer = serve_import(&listener, fd.as_fd(), mem.size);
        if answer.is_err() {
            let _ = child.kill();
        }
        let _ = child.wait();
        answer
    });
    let _ = std::fs::remove_file(&sock);
    answer
}

/// Hands the descriptor and size to the importer; its one-line answer.
fn serve_import(
    listener: &UnixListener,
    fd: std::os::fd::BorrowedFd,
    size: usize,
) -> Result<String, String> {
    let start = Instant::now();
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let stream = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > PROBE_DEADLINE {
                    return Err("the second process never connected".into());
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(format!("accept failed: {e}")),
        }
    };
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(PROBE_DEADLINE.saturating_sub(start.elapsed())));
    os::send_fd(&stream, &(size as u64).to_le_bytes(), fd)
        .map_err(|e| format!("could not pass the descriptor: {e}"))?;
    let mut line = String::new();
    match BufReader::new(&stream).read_line(&mut line) {
        Ok(n) if n > 0 => Ok(line.trim().to_string()),
        Ok(_) => Err("the second process ended without an answer (it crashed?)".into()),
        Err(e) => Err(format!("no answer from the second process: {e}")),
    }
}

/// The second process: receives the descriptor on `socket`, imports it on `device` of the
/// driver at `cuda_lib`, reads it back and answers with one line. Exit code 0 when it worked.
pub fn import_side(socket: &Path, cuda_lib: &str, device: i32) -> u8 {
    let Ok(stream) = UnixStream::connect(socket) else {
        return 1;
    };
    let answer = import_and_check(&stream, cuda_lib, device);
    let ok = answer.is_ok();
    let line = match answer {
        Ok(l) | Err(l) => l,
    };
    let _ = writeln!(&stream, "{line}");
    if ok { 0 } else { 1 }
}

fn import_and_check(stream: &UnixStream, cuda_lib: &str, device: i32) -> Result<String, String> {
    let mut size = [0u8; 8];
    let (n, fd) = os::recv_fd(stream, &mut size).map_err(|e| format!("no descriptor: {e}"))?;
    let fd = fd.filter(|_| n == 8).ok_or("no descriptor arrived")?;
    let size = u64::from_le_bytes(size) as usize;
    let _driver = Driver::load(Some(cuda_lib)).map_err(|e| format!("driver FAILED: {e}"))?;
    let dev = Device::open(device).map_err(|e| format!("device FAILED: {e}"))?;
    let mem =
        SharedMem::import(&dev, fd.as_fd(), size).map_err(|e| format!("import FAILED: {e}"))?;
    let mut back = vec![0u8; PATTERN_LEN];
    mem.read(&mut back)
        .map_err(|e| format!("imported, but reading it FAILED: {e}"))?;
    if back == pattern() {
        Ok(format!("import OK, {PATTERN_LEN} bytes read back intact"))
    } else {
        Err("imported, but the bytes read back differ from those written".into())
    }
}

/// The hidden subcommand that tries NCCL's own one-rank init in a second process.
pub const NCCL_INIT_SUBCOMMAND: &str = "probe-nccl-init";

/// What libnccl says of a one-rank communicator on this node.
#[derive(Debug, Clone, PartialEq)]
pub enum SoloInit {
    /// Init failed: `ncclGetLastError`'s text (or the error), and the call's error.
    Failed {
        said: String,
        error: String,
    },
    Succeeded,
    /// The second process gave no answer (it crashed, or hung past the deadline).
    NoAnswer(String),
}

/// Asks libnccl at `nccl_path`, in a second process (`exe probe-nccl-init`), to make a one-rank
/// communicator: its own opinion of the node, e.g. whether it finds a CUDA driver. In a child,
/// because a failed init can leave NCCL's threads running, and they have crashed the process
/// that asked (NCCL 2.19 without a driver).
pub fn nccl_solo_init(exe: &Path, nccl_path: &str) -> SoloInit {
    let child = Command::new(exe)
        .args([NCCL_INIT_SUBCOMMAND, "--nccl-lib", nccl_path])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => return SoloInit::NoAnswer(format!("cannot start it: {e}")),
    };
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < PROBE_DEADLINE => {
                std::thread::sleep(Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return SoloInit::NoAnswer(format!(
                    "no answer within {} s",
                    PROBE_DEADLINE.as_secs()
                ));
            }
        }
    }
    let mut out = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut out);
    }
    let line = out.lines().next().unwrap_or("");
    match line.split_once('\t') {
        Some(("failed", rest)) => {
            let (said, error) = rest.split_once('\t').unwrap_or((rest, rest));
            SoloInit::Failed {
                said: said.into(),
                error: error.into(),
            }
        }
        _ if line == "ok" => SoloInit::Succeeded,
        _ => SoloInit::NoAnswer("it ended without an answer (it crashed?)".into()),
    }
}

/// The second process of [`nccl_solo_init`]: one line, `ok` or `failed<TAB>said<TAB>error`.
pub fn nccl_solo_init_side(nccl_path: &str) -> u8 {
    let nccl = match Nccl::load(Some(nccl_path)) {
        Ok(n) => n,
        Err(e) => {
            println!("failed\t{e}\t{e}");
            return 1;
        }
    };
    let line = match nccl
        .get_unique_id()
        .and_then(|id| nccl.comm_init_rank(1, &id, 0, true))
    {
        Ok((comm, _)) => {
            let _ = nccl.comm_destroy(comm);
            "ok".to_string()
        }
        Err(e) => {
            let said = e
                .last_error()
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string());
            format!("failed\t{}\t{}", one_line(&said), one_line(&e.to_string()))
        }
    };
    println!("{line}");
    // The answer is out; NCCL's teardown must not turn it into a crash.
    os::exit_now(0)
}

fn one_line(s: &str) -> String {
    s.replace(['\t', '\n'], " ")
}

/// The peer addresses NCCL names in log lines (`10.1.2.3<43211>`), in order, without repeats.
pub fn logged_peers<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<SocketAddr> {
    let mut out = Vec::new();
    for line in lines {
        for (i, _) in line.match_indices('<') {
            let host = line[..i]
                .rsplit(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()
                .unwrap_or("");
            let port = line[i + 1..].split('>').next().unwrap_or("");
            if let (Ok(ip), Ok(port)) = (host.parse::<Ipv4Addr>(), port.parse::<u16>()) {
                let a = SocketAddr::from((ip, port));
                if !out.contains(&a) {
                    out.push(a);
                }
            }
        }
    }
    out
}

/// How long one TCP connect may take.
const CONNECT_DEADLINE: Duration = Duration::from_secs(2);

/// The first interface with an IPv4 address that `NCCL_SOCKET_IFNAME=spec` selects here, as
/// NCCL would; `Err` is the evidence line saying it selects none (naming the ones there are).
fn select_iface(spec: &str) -> Result<(String, Ipv4Addr), String> {
    let ifaces = os::ipv4_interfaces();
    let names: Vec<String> = ifaces.iter().map(|(n, _)| n.clone()).collect();
    let chosen = crate::diagnose::doctor::select_ifaces(spec, &names);
    ifaces
        .into_iter()
        .find(|(n, _)| chosen.contains(n))
        .ok_or_else(|| {
            format!(
                "probe: NCCL_SOCKET_IFNAME={spec} selects no interface with an IPv4 address \
                 here (interfaces: {})",
                names.join(", ")
            )
        })
}

/// The line saying that `NCCL_SOCKET_IFNAME=spec` selects no interface with an IPv4 address
/// on this host (naming the ones there are); nothing when it selects one.
pub fn ifname_selects(spec: &str) -> Option<String> {
    select_iface(spec).err()
}

/// Connects to each of `targets` (what it is, where) from the interface `NCCL_SOCKET_IFNAME` (`ifname`) selects,
/// as NCCL's socket transport and bootstrap would; without it, from wherever the routing
/// table says. One line of evidence per target (at most four).
pub fn tcp_reach(targets: &[(String, SocketAddr)], ifname: Option<&str>) -> Vec<String> {
    let source = match ifname.map(select_iface) {
        None => None,
        Some(Ok(chosen)) => Some(chosen),
        Some(Err(none)) => return vec![none],
    };
    let from = match &source {
        Some((n, a)) => format!("{n} ({a})"),
        None => "the default route".into(),
    };
    targets
        .iter()
        .take(4)
        .map(|(what, t)| {
            let outcome = match connect_from(source.as_ref().map(|(_, a)| *a), *t) {
                Ok(()) => "connected".to_string(),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    "refused: the host answers, nothing listens on that port now".into()
                }
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => format!(
                    "no answer within {} s: filtered, or no route that works",
                    CONNECT_DEADLINE.as_secs()
                ),
                Err(e) => format!("failed: {e}"),
            };
            format!("probe: TCP connect from {from} to {what} at {t}: {outcome}")
        })
        .collect()
}

fn connect_from(source: Option<Ipv4Addr>, target: SocketAddr) -> std::io::Result<()> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    if let Some(a) = source {
        s.bind(&SocketAddr::from((a, 0)).into())?;
    }
    s.connect_timeout(&target.into(), CONNECT_DEADLINE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_named_in_nccl_lines_are_found_once() {
        let lines = [
            "h:1:2 [0] misc/socket.cc:596 NCCL WARN socketStartConnect: connect to 10.1.2.3<43211> failed : Network is unreachable",
            "socketProgress: Connection closed by remote peer h<39909>",
            "again 10.1.2.3<43211> and 192.168.0.7<80>, not 1.2.3<4> nor 10.0.0.1<x>",
        ];
        assert_eq!(
            logged_peers(lines),
            vec![
                "10.1.2.3:43211".parse::<SocketAddr>().unwrap(),
                "192.168.0.7:80".parse().unwrap()
            ]
        );
    }

    #[test]
    fn tcp_probe_tells_a_listener_from_a_closed_port() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = listener.local_addr().unwrap();
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let peer = |a| ("a peer".to_string(), a);
        let lines = tcp_reach(&[peer(open), peer(closed)], Some("lo"));
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].ends_with(&format!(
                "from lo (127.0.0.1) to a peer at {open}: connected"
            )),
            "{}",
            lines[0]
        );
        assert!(lines[1].contains("refused"), "{}", lines[1]);
        let none = tcp_reach(&[peer(open)], Some("=no-such-interface0"));
        assert!(none[0].contains("selects no interface"), "{}", none[0]);
    }

    #[test]
    fn shm_probe_reports_success_and_failure() {
        let dir = std::env::temp_dir();
        assert!(shm_segment(&dir, 4096).contains("could be created"));
        let missing = Path::new("/nonexistent-dir-for-probe");
        assert!(shm_segment(missing, 4096).contains("could NOT be created"));
    }

    #[test]
    fn peermem_paths_are_read_under_a_root() {
        let root = std::env::temp_dir().join(format!("peermem-probe.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(peermem(&root).contains("no peer-memory module"));
        let p = root.join(PEERMEM_PATHS[2]);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "1.0\n").unwrap();
        assert!(peermem(&root).contains("/sys/module/nvidia_peermem/version"));
        let _ = std::fs::remove_dir_all(&root);
    }
}
