//! Ranks over plain TCP, for jobs without MPI (`nccl-smoke launch`, Slurm without PMIx,
//! torchrun-style variables, a Kubernetes indexed Job; see [`super::launcher`]): rank 0
//! listens, every other rank connects with retries until the launch deadline, and the
//! collectives nccl-smoke needs travel over that star.
//!
//! The rendezvous is also where absence is named: rank 0 names the ranks that never
//! connected, a rank names the rank 0 it could not reach, and two processes claiming one rank
//! (or ranks started with different world sizes) are refused with both named, on every rank
//! that got that far. Local ranks come from the hosts the ranks report, so no launcher needs to
//! say them.

use super::launcher::EnvWorld;
use super::tree::{self, Edge, Tree};
use super::{Bootstrap, Info};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

mod grow;
mod rank0;
mod wire;
use rank0::Rank0;
use wire::{Answer, Hello, get_str, get_u32, put_str, secs};

/// Largest message a rank may gather (per-size results are a few hundred bytes).
const MAX_MESSAGE: u64 = 64 << 20;
/// Opens every hello and every answer: what is not nccl-smoke's rendezvous is told apart.
const MAGIC: &[u8; 8] = b"ncclsmk1";
/// How much longer than the deadline a connected rank waits for rank 0's answer, so that rank
/// 0's own verdict at the deadline (which ranks never came) reaches it; within the
/// supervisor's grace (see `run::supervisor::GRACE`).
const ANSWER_GRACE: Duration = Duration::from_millis(500);
/// How long rank 0 waits for a connected process's hello.
const HELLO_WAIT: Duration = Duration::from_secs(5);
/// Opens a tree connection's first message (see [`super::tree`]).
const TREE_MAGIC: &[u8; 8] = b"ncclsmkT";
/// The most the barrier tree's connections may take to set up before the ranks fall back to
/// the star (which always works: the rendezvous made it).
const TREE_WAIT: Duration = Duration::from_secs(5);

pub struct Tcp {
    rank: u32,
    size: u32,
    local_rank: u32,
    local_size: u32,
    info: Info,
    /// Rank 0: one stream per other rank, in rank order. Others: the stream to rank 0.
    peers: Mutex<Vec<TcpStream>>,
    /// The stage barrier's tree ([`Tree::star`] until [`Tcp::grow_tree`] makes a deeper one).
    tree: Mutex<Tree>,
    /// Whether the tree is deeper than the star.
    grown: bool,
}

impl Tcp {
    /// Joins the star at `world.address` within `deadline`.
    pub fn join(world: &EnvWorld, deadline: Duration) -> Result<Tcp, String> {
        let began = Instant::now();
        let me = Hello {
            rank: world.rank,
            size: world.size,
            pid: std::process::id(),
            host: crate::ffi::os::hostname(),
        };
        let info = Info {
            kind: "env".into(),
            source: world.family.label.into(),
            rendezvous: Some(format!("{} ({})", world.address, world.address_from)),
        };
        let (local_rank, local_size, peers) = if world.rank == 0 {
            let (peers, local_size) = Rank0::assemble(world, &me, deadline)?;
            (0, local_size, peers)
        } else {
            let (stream, local_rank, local_size) = connect(world, &me, deadline)?;
            (local_rank, local_size, vec![stream])
        };
        let mut tcp = Tcp {
            rank: world.rank,
            size: world.size,
            // The launcher's local rank, when it gives one, picks the GPU as it intends.
            local_rank: world.local_rank.unwrap_or(local_rank),
            local_size,
            info,
            peers: Mutex::new(peers),
            tree: Mutex::new(Tree::star(world.rank, world.size)),
            grown: false,
        };
        // What is left of the launch deadline (half a second at least, within the
        // supervisor's grace): the tree never makes a healthy launch late.
        let left = deadline.saturating_sub(began.elapsed());
        tcp.grow_tree(left.min(TREE_WAIT).max(Duration::from_millis(500)));
        Ok(tcp)
    }
}

impl Tcp {
    /// A star that is already connected (rank 0: one stream per other rank, in rank order;
    /// another rank: its stream to rank 0), without the rendezvous.
    fn from_star(rank: u32, size: u32, peers: Vec<TcpStream>) -> Tcp {
        for p in &peers {
            let _ = p.set_nodelay(true);
        }
        Tcp {
            rank,
            size,
            local_rank: rank,
            local_size: size,
            info: Info {
                kind: "env".into(),
                source: "a star built by hand".into(),
                rendezvous: None,
            },
            peers: Mutex::new(peers),
            tree: Mutex::new(Tree::star(rank, size)),
            grown: false,
        }
    }

    /// A star of `size` ranks over loopback, rank 0 first, as the rendezvous would leave it:
    /// for tests and the barrier's bench.
    #[doc(hidden)]
    pub fn loopback_star(size: u32) -> std::io::Result<Vec<Tcp>> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let mut accepted = Vec::new();
        let mut others = Vec::new();
        for rank in 1..size {
            let s = TcpStream::connect(addr)?;
            accepted.push(listener.accept()?.0);
            others.push(Tcp::from_star(rank, size, vec![s]));
        }
        let mut all = vec![Tcp::from_star(0, size, accepted)];
        all.extend(others);
        Ok(all)
    }

    /// Sets up the stage barrier's tree ([`super::tree`]), collectively: every rank of the
    /// star calls it. Rank `i` listens (on the address it reaches rank 0 from) when it has
    /// children and is not rank 0, rank 0 tells each rank its parent's address, each rank
    /// connects to its parent and accepts its children, all within `wait`; then every rank
    /// says whether its edges are up, and rank 0 decides for all: the tree, or (when any rank
    /// could not reach its parent) the star, with the ranks that could not named on rank 0.
    pub fn grow_tree(&mut self, wait: Duration) {
        self.grow_tree_advertising(wait, |a| a);
    }
}

/// How many connections may wait to be accepted. std's `TcpListener::bind` asks for 128:
/// thousands of ranks connecting at once overflow that, and each dropped handshake costs its
/// rank a retransmission of a second or more. The kernel caps this at `net.core.somaxconn`
/// (4096 by default since Linux 5.4).
pub const BACKLOG: i32 = 65535;

/// A listening TCP socket on `addr` with [`BACKLOG`] (and SO_REUSEADDR, as std sets it).
pub fn listen_wide(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    s.set_reuse_address(true)?;
    s.bind(&addr.into())?;
    s.listen(BACKLOG)?;
    Ok(s.into())
}

fn listen(world: &EnvWorld) -> Result<TcpListener, String> {
    let port = world
        .address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse::<u16>().ok())
        .ok_or_else(|| format!("rendezvous address '{}' has no port", world.address))?;
    // Every interface: the address may name this host by a name or an address the host
    // does not hold itself (a Service's DNS name, a NAT).
    let any = if world.address.starts_with('[') {
        format!("[::]:{port}")
    } else {
        format!("0.0.0.0:{port}")
    };
    let bind = any
        .parse()
        .map_err(|e| format!("rank 0 cannot listen on {any}: {e}"))
        .map(listen_wide)?;
    let listener = bind.map_err(|e| {
        if e.kind() == ErrorKind::AddrInUse {
            format!(
                "rank 0 cannot listen on port {port} ({}): {e}: another process holds it — a \
                 second process claiming rank 0, or another job on the same port",
                world.address_from
            )
        } else {
            format!("rank 0 cannot listen on {any}: {e}")
        }
    })?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    Ok(listener)
}

/// A non-zero rank's side: connect (retrying until the deadline: rank 0 may start later, its
/// name may not resolve yet), say hello, and wait for the job to assemble.
fn connect(
    world: &EnvWorld,
    me: &Hello,
    deadline: Duration,
) -> Result<(TcpStream, u32, u32), String> {
    let start = Instant::now();
    let addr = &world.address;
    let mut last = String::from("no attempt");
    let mut stream = loop {
        match addr.to_socket_addrs() {
            Ok(mut addrs) => {
                let attempt = addrs.find_map(|a| {
                    match TcpStream::connect_timeout(&a, Duration::from_secs(1)) {
                        Ok(s) => Some(s),
                        Err(e) => {
                            last = e.to_string();
                            None
                        }
                    }
                });
                if let Some(s) = attempt {
                    break s;
                }
            }
            Err(e) => last = format!("cannot resolve {addr}: {e}"),
        }
        if start.elapsed() > deadline {
            return Err(format!(
                "rank {} could not reach rank 0 at {addr} ({}) within {} (last: {last}): rank 0 \
                 is not running there, or the address is not the one it listens on",
                me.rank,
                world.address_from,
                secs(deadline)
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let lost = |e: std::io::Error| {
        if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
            format!(
                "rank {} reached rank 0 at {addr}, but the job did not assemble within {}: \
                 ranks are missing (rank 0's report names them)",
                me.rank,
                secs(deadline)
            )
        } else if e.kind() == ErrorKind::InvalidData {
            format!(
                "the process at {addr} ({}) is not nccl-smoke's rank 0: the address or port \
                 names another service",
                world.address_from
            )
        } else {
            format!(
                "rank {}: the connection to rank 0 at {addr} closed before the job assembled \
                 ({e}): rank 0 ended, or {addr} is not nccl-smoke's rendezvous",
                me.rank
            )
        }
    };
    stream.write_all(&me.encode()).map_err(lost)?;
    let left = deadline.saturating_sub(start.elapsed()) + ANSWER_GRACE;
    let _ = stream.set_read_timeout(Some(left));
    match Answer::read(&mut stream).map_err(lost)? {
        Answer::Welcome {
            local_rank,
            local_size,
        } => {
            let _ = stream.set_read_timeout(None);
            let _ = stream.set_nodelay(true);
            Ok((stream, local_rank, local_size))
        }
        Answer::Refused(why) => Err(format!("rank 0 at {addr} ended the rendezvous: {why}")),
    }
}

/// The bootstrap traffic is the harness's own; a broken connection means a rank died, which
/// the supervisors report. Here it ends the process's part quietly.
fn io<T>(r: std::io::Result<T>) -> T {
    match r {
        Ok(v) => v,
        Err(e) => {
            eprintln!("nccl-smoke: bootstrap connection lost: {e}");
            std::process::exit(crate::stage::Stage::Launch.exit_code() as i32)
        }
    }
}

impl Bootstrap for Tcp {
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn local_rank(&self) -> u32 {
        self.local_rank
    }
    fn local_size(&self) -> u32 {
        self.local_size
    }
    fn describe(&self) -> String {
        let mut d = format!(
            "nccl-smoke TCP bootstrap (no MPI): {}; rendezvous {}",
            self.info.source,
            self.info.rendezvous.as_deref().unwrap_or("-")
        );
        if self.grown {
            d.push_str(&format!(
                "; barrier: a tree of fan-out {}, {} level(s) below rank 0",
                tree::FANOUT,
                tree::depth(self.size)
            ));
        } else if tree::beyond_star(self.size) {
            d.push_str("; barrier: rank 0's star (the tree's connections could not all be made)");
        }
        d
    }
    fn info(&self) -> Info {
        self.info.clone()
    }
    fn barrier(&self) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let mut tree = self.tree.lock().unwrap_or_else(|p| p.into_inner());
        io(tree.barrier(&mut peers));
    }
    fn broadcast(&self, buf: &mut [u8]) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if self.rank == 0 {
            for p in peers.iter_mut() {
                io(p.write_all(buf));
            }
        } else {
            io(peers[0].read_exact(buf));
        }
    }
    fn gather(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if self.rank != 0 {
            io(peers[0].write_all(&(bytes.len() as u64).to_le_bytes()));
            io(peers[0].write_all(bytes));
            return None;
        }
        let mut all = vec![bytes.to_vec()];
        for p in peers.iter_mut() {
            let mut len = [0u8; 8];
            io(p.read_exact(&mut len));
            let len = u64::from_le_bytes(len);
            if len > MAX_MESSAGE {
                io::<()>(Err(std::io::Error::other(format!(
                    "a rank sent {len} bytes"
                ))));
            }
            let mut v = vec![0u8; len as usize];
            io(p.read_exact(&mut v));
            all.push(v);
        }
        Some(all)
    }
}

#[cfg(test)]
mod tests;
