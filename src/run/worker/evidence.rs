//! What a failing worker adds to its failure before it reports it: NCCL's own log lines, the
//! probes that repeat the failed step, and the findings that explain a slow run.

use super::{Run, own_exe};
use crate::bench;
use crate::bootstrap;
use crate::comm::CommError;
use crate::diagnose::{causes, classify, doctor, probe};
use crate::error::Failure;
use crate::ffi::cuda::{Device, Driver};
use crate::ffi::nccl::{Nccl, NcclError};
use crate::run::env;
use crate::run::worker_line;
use crate::stage::Stage;

impl Run<'_> {
    /// A second opinion from libnccl itself: a one-rank communicator needs the driver, so its
    /// failure, in NCCL's words, confirms (or contradicts) that the driver is missing.
    pub(in crate::run) fn corroborate_missing_driver(&self, nccl: &Nccl, f: &mut Failure) {
        match probe::nccl_solo_init(&own_exe(), &nccl.path) {
            probe::SoloInit::Failed { said, error } => {
                f.error = format!("{}; NCCL's own init agrees: {said}", f.error);
                f.evidence.push(format!("ncclCommInitRank(nranks=1): {error}"));
            }
            probe::SoloInit::Succeeded => f.evidence.push("ncclCommInitRank(nranks=1) succeeded without the driver library nccl-smoke looked for: NCCL found another driver".into()),
            probe::SoloInit::NoAnswer(why) => f
                .evidence
                .push(format!("ncclCommInitRank(nranks=1) in a second process: {why}")),
        }
    }

    pub(in crate::run) fn nccl_failure(&self, stage: Stage, e: &NcclError) -> Failure {
        let mut f = Failure::new(stage, &self.who, e);
        f.evidence = self.log_warnings();
        f
    }

    /// `ncclGetUniqueId` failed on rank 0: NCCL's words classified (see
    /// [`causes::unique_id_failure`]), with what `NCCL_SOCKET_IFNAME` selects on this host.
    pub(in crate::run) fn unique_id_failure(&self, e: &NcclError) -> Failure {
        let mut f = causes::unique_id_failure(&self.who, e, self.log_warnings());
        if let Ok(spec) = std::env::var("NCCL_SOCKET_IFNAME") {
            f.evidence.extend(probe::ifname_selects(&spec));
        }
        f
    }

    /// A communicator failure (see [`causes::comm_failure`]), with the probes that repeat the
    /// failed step: a /dev/shm segment, a TCP reach to the peers and rank 0's host.
    pub(in crate::run) fn comm_failure(&self, stage: Stage, e: CommError) -> Failure {
        let node = causes::NodeFacts::here(self.versions.0.clone(), self.versions.1.clone());
        let log = self.log_warnings();
        let mut f =
            causes::comm_failure(&self.who, stage, &e, self.plan.deadline(stage), log, &node);
        // What NCCL's RAS said before the abort (lines only, never a change of verdict).
        if let CommError::Timeout { notes, .. } = e {
            f.evidence.extend(notes);
        }
        if causes::peer_first(&f) {
            return f;
        }
        if f.stage == Stage::ConnectShm {
            f.evidence.push(probe::shm_segment(
                std::path::Path::new("/dev/shm"),
                doctor::NCCL_SHM_SEGMENT,
            ));
        }
        if matches!(f.stage, Stage::Init | Stage::ConnectNet) {
            let probes = self.reach_probe(&f);
            unset_ifname(&mut f, &probes);
            f.evidence.extend(probes);
        }
        f
    }

    /// The host of `rank`, from the fingerprint (rank 0).
    /// A rank's value that could not be gathered to rank 0 (see
    /// [`crate::bootstrap::gather_json`]): a failure of that rank at `stage`.
    pub(in crate::run) fn gather_failure(&self, stage: Stage, rank: u32, text: String) -> Failure {
        let who = crate::error::Who {
            rank: Some(rank),
            host: self.host_of(rank).unwrap_or_else(|| self.who.host.clone()),
        };
        Failure::new(stage, &who, text)
            .cause("a rank's result did not reach rank 0 whole: it is not counted, so the run cannot pass")
            .hint("rerun; if it recurs, report it as a bug in nccl-smoke with the results file")
    }

    pub(in crate::run) fn host_of(&self, rank: u32) -> Option<String> {
        let info = self.ranks.iter().find(|i| i.rank == rank)?;
        Some(info.host.clone())
    }

    /// Can this rank reach, over TCP, the peers NCCL named and rank 0's host, from the
    /// interface NCCL_SOCKET_IFNAME selects?
    pub(in crate::run) fn reach_probe(&self, f: &Failure) -> Vec<String> {
        let lines = std::iter::once(f.error.as_str()).chain(f.evidence.iter().map(String::as_str));
        let mut targets: Vec<(String, std::net::SocketAddr)> = probe::logged_peers(lines)
            .into_iter()
            .map(|a| ("a peer NCCL named".to_string(), a))
            .collect();
        if self.who.rank != Some(0) {
            targets.extend(
                worker_line::status_addrs()
                    .iter()
                    .filter_map(crate::events::Address::ip)
                    .filter(|a| !a.ip().is_loopback())
                    .map(|a| ("rank 0's host (its supervisor)".to_string(), a)),
            );
        }
        if targets.is_empty() {
            return Vec::new();
        }
        probe::tcp_reach(
            &targets,
            std::env::var("NCCL_SOCKET_IFNAME").ok().as_deref(),
        )
    }

    /// Every rank reads its NCCL log for findings that explain a slow run; rank 0 prints and
    /// keeps them. `ordinal`: this rank's GPU.
    pub(in crate::run) fn advisories(&mut self, boot: &dyn bootstrap::Bootstrap, ordinal: i32) {
        let lines = self.nccl_log_lines(|l| classify::advise([l]).is_some());
        let mut mine: Vec<Failure> = classify::advise(lines.iter().map(String::as_str))
            .map(|found| {
                let mut f = Failure::new(Stage::Run, &self.who, &found.evidence)
                    .cause(found.cause)
                    .hint(found.hint);
                f.evidence = vec![
                    found.evidence.clone(),
                    probe::peermem(std::path::Path::new("/")),
                ];
                // NCCL's InfiniBand transport said Disabled: why, from the files this release
                // looks for and what its DMA-BUF check finds (as `doctor` predicts it).
                if found.signature == "gdr-disabled" && found.evidence.contains("NET/IB") {
                    let version = self
                        .versions
                        .1
                        .as_deref()
                        .and_then(doctor::gdr::version_code);
                    let present = doctor::gdr::present_under(std::path::Path::new("/"));
                    let dmabuf = doctor::gdr::DmaBuf::probe(&[ordinal], |k| std::env::var(k).ok());
                    let p = doctor::gdr::predict(version, &present, &dmabuf);
                    if !p.enabled {
                        f = f.cause(p.said).hint(p.hint);
                    }
                }
                f
            })
            .into_iter()
            .collect();
        mine.extend(self.ib_expected());
        mine.append(&mut self.preflight_warnings);
        let all = match bootstrap::gather_json(boot, &mine) {
            Ok(Some(all)) => all,
            Ok(None) => return,
            Err(e) => {
                // Advisories are not the verdict: say what could not be read, keep the run.
                self.console()
                    .own(format!("# WARNING: advisories incomplete: {e}"));
                return;
            }
        };
        // Gathered on rank 0 alone.
        let console = self.console();
        for w in all.iter().flatten() {
            let line = w.warning_line();
            console.job(crate::report::backing::verdict_line(
                &self.backing.backend(),
                &line,
            ));
            console.job_lines(w.evidence.iter().map(|l| format!("#   evidence: {l}")));
        }
        if let Some(r) = self.results.as_mut() {
            r.warnings = all.into_iter().flatten().collect();
        }
        self.send_doc();
    }

    /// `NCCL_IB_HCA` asks for InfiniBand or RoCE, yet NCCL ran its network over sockets (its
    /// `Using network Socket`, src/init.cc v2.19.3-1 and v2.30.7-1): no HCA it selects has an
    /// active port. A warning naming the RDMA devices this host has, as libibverbs lists them.
    fn ib_expected(&self) -> Option<Failure> {
        let asked = std::env::var("NCCL_IB_HCA")
            .ok()
            .filter(|v| !v.trim().is_empty())?;
        if std::env::var("NCCL_IB_DISABLE").is_ok_and(|v| v.trim() == "1") {
            return None;
        }
        const GID_TYPES: &str = "failed in ncclIbRoceGetVersionNum";
        let lines = self.nccl_log_lines(|l| {
            l.contains("Using network Socket")
                || l.contains("NET/IB : No device found")
                || l.contains(GID_TYPES)
        });
        let socket = lines.iter().find(|l| l.contains("Using network Socket"))?;
        // A RoCE HCA whose GID types NCCL could not read is left out (2.32.3, observed): that,
        // not the port, is why.
        let why = if lines.iter().any(|l| l.contains(GID_TYPES)) {
            "NCCL could not read the RoCE GID types from sysfs to choose a GID index \
             (NCCL_IB_GID_INDEX unset) and left the HCA out"
        } else {
            "no HCA that NCCL_IB_HCA selects has an active port"
        };
        let devices = match crate::ffi::ibverbs::device_names() {
            Ok(d) if d.is_empty() => "libibverbs lists no RDMA device on this host".to_string(),
            Ok(d) => format!("the RDMA devices on this host: {}", d.join(", ")),
            Err(e) => format!("the RDMA devices on this host are unknown: {e}"),
        };
        let mut f = Failure::new(
            Stage::Init,
            &self.who,
            format!(
                "NCCL_IB_HCA={asked} asks for InfiniBand/RoCE, but NCCL runs its network over \
                 TCP sockets"
            ),
        )
        .cause(format!(
            "{why} ({devices}); inter-node traffic goes over sockets, many times slower"
        ))
        .hint(
            "name devices from that list in NCCL_IB_HCA (a prefix; `=name` for an exact match, \
             `^name` to exclude), check their ports (`ibstat`: State Active, Physical state \
             LinkUp), for RoCE set NCCL_IB_GID_INDEX (show_gids) or give the container the \
             host's /sys/class/infiniband; or unset NCCL_IB_HCA where sockets are meant",
        );
        f.evidence = lines
            .iter()
            .filter(|l| l.contains("No device found") || l.contains(GID_TYPES))
            .chain(std::iter::once(socket))
            .cloned()
            .collect();
        Some(f)
    }

    /// Before any buffer is allocated: a sweep that cannot fit this GPU or this node's host
    /// memory is refused with the numbers; /dev/shm and the open-files limit are checked for the
    /// local rank count as `doctor` checks them, and what doctor would fail becomes a warning.
    pub(in crate::run) fn preflight(
        &mut self,
        device: &Device,
        driver: &Driver,
        (send, recv): (usize, usize),
        nccl_took: Option<u64>,
        local_ranks: u32,
    ) -> Result<(), Failure> {
        use crate::diagnose::{doctor, preflight};
        let need = preflight::Need {
            send: send as u64,
            recv: recv as u64,
            staging: (send.min(bench::STAGING_BYTES) + recv.min(bench::STAGING_BYTES)) as u64,
            device_in_host: driver.simulated.is_some(),
            local_ranks,
            nccl_took,
        };
        let free = device.memory().ok().map(|(free, _)| free as u64);
        need.check(free, preflight::host_available()).map_err(|why| {
            Failure::new(Stage::Alloc, &self.who, why)
                .cause("the sweep does not fit: its buffers were refused before any was allocated")
                .hint("lower -e/--maxbytes, or run fewer ranks per node; nvidia-smi shows what else holds GPU memory")
        })?;
        let node = doctor::Node {
            root: "/".into(),
            env: Box::new(|k| std::env::var(k).ok()),
            libs: (None, None),
            local_ranks,
        };
        // What doctor fails (not what it only warns of, which is about larger jobs than most)
        // is kept with the run's warnings, and said at once on the node's first rank.
        for c in node.resource_checks() {
            if c.status == doctor::Status::Fail {
                let f = Failure::new(
                    Stage::Alloc,
                    &self.who,
                    format!("preflight {}: {}", c.id, c.evidence),
                )
                .hint(c.hint);
                if self.local_rank == 0 {
                    eprintln!("{}", f.warning_line());
                }
                self.preflight_warnings.push(f);
            }
        }
        Ok(())
    }

    /// WARN lines this process's NCCL wrote to its debug file, when the supervisor set one up.
    pub(in crate::run) fn log_warnings(&self) -> Vec<String> {
        self.nccl_log_lines(|l| l.contains(" NCCL WARN "))
    }

    /// Lines of this process's NCCL debug file that `keep` selects (at most 20).
    pub(in crate::run) fn nccl_log_lines(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut lines = self.nccl_log_all(keep);
        lines.truncate(20);
        lines
    }

    /// Every line of this process's NCCL debug file that `keep` selects: the file the
    /// supervisor set up in the run folder, else the user's own `NCCL_DEBUG_FILE` (with NCCL's
    /// `%h` and `%p` filled in).
    pub(in crate::run) fn nccl_log_all(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        nccl_log_files()
            .into_iter()
            // Evidence, not a measurement: a log file that cannot be read adds no line.
            .filter_map(|p| std::fs::read(p).ok())
            .flat_map(|bytes| {
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter(|l| keep(l))
                    .map(|l| l.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .collect()
    }
}

/// This process's NCCL debug files (see [`Run::nccl_log_all`]).
fn nccl_log_files() -> Vec<std::path::PathBuf> {
    let pid = std::process::id().to_string();
    let injected = std::env::var(crate::report::fingerprint::INJECTED_ENV)
        .is_ok_and(|v| v.split(',').any(|k| k == "NCCL_DEBUG_FILE"));
    if !injected && let Ok(pattern) = std::env::var("NCCL_DEBUG_FILE") {
        // NCCL's own expansion (src/debug.cc): %h the host name up to its first dot, %p the
        // process id.
        let host = crate::ffi::os::hostname();
        let host = host.split('.').next().unwrap_or_default();
        return vec![pattern.replace("%h", host).replace("%p", &pid).into()];
    }
    let Some(dir) = env::run_dir() else {
        return Vec::new();
    };
    let suffix = format!(".{pid}.log");
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(&suffix))
        .map(|e| e.path())
        .collect()
}

/// A peer's address NCCL named is out of reach while rank 0's host answers on another, and
/// NCCL_SOCKET_IFNAME is not set for this rank: NCCL chose the interface itself (one whose
/// subnet does not route between the hosts, such as an RDMA network's IPoIB), often because a
/// launcher did not pass the variable on (mpirun without `-x NCCL_SOCKET_IFNAME`).
fn unset_ifname(f: &mut Failure, probes: &[String]) {
    let peer_unreached = probes.iter().any(|p| {
        p.contains("a peer NCCL named") && (p.contains(": failed") || p.contains(": no answer"))
    });
    let host_answers = probes
        .iter()
        .any(|p| p.contains("rank 0's host") && p.ends_with(": connected"));
    if !(peer_unreached && host_answers) || std::env::var_os("NCCL_SOCKET_IFNAME").is_some() {
        return;
    }
    f.evidence.push(
        "NCCL_SOCKET_IFNAME is not set in this rank's environment: NCCL chose the interface itself, \
         and rank 0's host answers on another address than the one NCCL named"
            .into(),
    );
    f.hint = Some(format!(
        "set NCCL_SOCKET_IFNAME to the interface that reaches the other hosts, in every rank's \
         environment (mpirun passes it only with -x NCCL_SOCKET_IFNAME; an MPIJob's launcher \
         command lists it){}",
        f.hint
            .as_deref()
            .map(|h| format!("; {h}"))
            .unwrap_or_default()
    ));
}
