//! Ranks over plain TCP, for jobs without MPI (`nccl-smoke launch`, or any launcher that sets
//! the variables below): rank 0 listens, every other rank connects once, and the collectives
//! nccl-smoke needs travel over that star.

use super::Bootstrap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// `host:port` where rank 0 listens.
pub const ADDR_ENV: &str = "NCCL_SMOKE_BOOTSTRAP";
pub const RANK_ENV: &str = "NCCL_SMOKE_RANK";
pub const SIZE_ENV: &str = "NCCL_SMOKE_WORLD_SIZE";
pub const LOCAL_RANK_ENV: &str = "NCCL_SMOKE_LOCAL_RANK";
pub const LOCAL_SIZE_ENV: &str = "NCCL_SMOKE_LOCAL_SIZE";
/// Largest message a rank may gather (per-size results are a few hundred bytes).
const MAX_MESSAGE: u64 = 64 << 20;

pub struct Tcp {
    rank: u32,
    size: u32,
    local_rank: u32,
    local_size: u32,
    /// Rank 0: one stream per other rank, in rank order. Others: the stream to rank 0.
    peers: Mutex<Vec<TcpStream>>,
}

fn env_u32(name: &str) -> Result<u32, String> {
    let v = std::env::var(name).map_err(|_| format!("{name} is not set"))?;
    v.trim()
        .parse()
        .map_err(|_| format!("{name}='{v}' is not a non-negative integer"))
}

impl Tcp {
    /// Whether the environment asks for this bootstrap.
    pub fn requested() -> bool {
        std::env::var_os(ADDR_ENV).is_some()
    }

    /// Joins the star within `deadline`.
    pub fn init(deadline: Duration) -> Result<Tcp, String> {
        let addr = std::env::var(ADDR_ENV).map_err(|_| format!("{ADDR_ENV} is not set"))?;
        let rank = env_u32(RANK_ENV)?;
        let size = env_u32(SIZE_ENV)?;
        if size == 0 || rank >= size {
            return Err(format!("{RANK_ENV}={rank} is not below {SIZE_ENV}={size}"));
        }
        let local_rank = env_u32(LOCAL_RANK_ENV).unwrap_or(rank);
        let local_size = env_u32(LOCAL_SIZE_ENV).unwrap_or(size);
        let start = Instant::now();
        let peers = if rank == 0 {
            accept_all(&addr, size, deadline)?
        } else {
            vec![connect(&addr, rank, start, deadline)?]
        };
        Ok(Tcp {
            rank,
            size,
            local_rank,
            local_size,
            peers: Mutex::new(peers),
        })
    }
}

fn accept_all(addr: &str, size: u32, deadline: Duration) -> Result<Vec<TcpStream>, String> {
    let listener =
        TcpListener::bind(addr).map_err(|e| format!("rank 0 cannot listen on {addr}: {e}"))?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut slots: Vec<Option<TcpStream>> = (1..size).map(|_| None).collect();
    while slots.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false).map_err(|e| e.to_string())?;
                let mut r = [0u8; 4];
                s.read_exact(&mut r)
                    .map_err(|e| format!("bootstrap handshake: {e}"))?;
                let r = u32::from_le_bytes(r);
                match slots.get_mut(r.wrapping_sub(1) as usize) {
                    Some(slot @ None) => *slot = Some(s),
                    _ => return Err(format!("bootstrap: unexpected or duplicate rank {r}")),
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if start.elapsed() > deadline {
                    let missing: Vec<String> = slots
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.is_none())
                        .map(|(i, _)| (i + 1).to_string())
                        .collect();
                    return Err(format!(
                        "ranks {} never connected to rank 0 at {addr} within {:.0} s",
                        missing.join(", "),
                        deadline.as_secs_f64()
                    ));
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(e) => return Err(format!("bootstrap accept: {e}")),
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

fn connect(addr: &str, rank: u32, start: Instant, deadline: Duration) -> Result<TcpStream, String> {
    loop {
        let attempt = addr
            .to_socket_addrs()
            .map_err(|e| format!("bootstrap address {addr}: {e}"))?
            .find_map(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).ok());
        if let Some(mut s) = attempt {
            s.write_all(&rank.to_le_bytes())
                .map_err(|e| e.to_string())?;
            let _ = s.set_nodelay(true);
            return Ok(s);
        }
        if start.elapsed() > deadline {
            return Err(format!(
                "rank {rank} could not reach rank 0 at {addr} within {:.0} s",
                deadline.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
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
        "nccl-smoke TCP bootstrap (no MPI)".into()
    }
    fn barrier(&self) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        let mut b = [0u8; 1];
        if self.rank == 0 {
            for p in peers.iter_mut() {
                io(p.read_exact(&mut b));
            }
            for p in peers.iter_mut() {
                io(p.write_all(b"g"));
            }
        } else {
            io(peers[0].write_all(b"b"));
            io(peers[0].read_exact(&mut b));
        }
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
