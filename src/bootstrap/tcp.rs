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

/// What a rank says when it connects.
#[derive(Debug, Clone)]
struct Hello {
    rank: u32,
    size: u32,
    pid: u32,
    host: String,
}

impl Hello {
    fn who(&self) -> String {
        format!("pid {} on {}", self.pid, self.host)
    }
    fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(self.rank.to_le_bytes());
        b.extend(self.size.to_le_bytes());
        b.extend(self.pid.to_le_bytes());
        put_str(&mut b, &self.host);
        b
    }
    fn read(s: &mut TcpStream) -> std::io::Result<Hello> {
        expect_magic(s)?;
        Ok(Hello {
            rank: get_u32(s)?,
            size: get_u32(s)?,
            pid: get_u32(s)?,
            host: get_str(s)?,
        })
    }
}

/// Rank 0's answer: the local rank and size, or why the job was refused.
enum Answer {
    Welcome { local_rank: u32, local_size: u32 },
    Refused(String),
}

impl Answer {
    fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        match self {
            Answer::Welcome {
                local_rank,
                local_size,
            } => {
                b.push(0);
                b.extend(local_rank.to_le_bytes());
                b.extend(local_size.to_le_bytes());
            }
            Answer::Refused(why) => {
                b.push(1);
                put_str(&mut b, why);
            }
        }
        b
    }
    fn read(s: &mut TcpStream) -> std::io::Result<Answer> {
        expect_magic(s)?;
        let mut kind = [0u8; 1];
        s.read_exact(&mut kind)?;
        Ok(match kind[0] {
            0 => Answer::Welcome {
                local_rank: get_u32(s)?,
                local_size: get_u32(s)?,
            },
            _ => Answer::Refused(get_str(s)?),
        })
    }
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    b.extend((s.len() as u16).to_le_bytes());
    b.extend(s);
}

fn get_u32(s: &mut TcpStream) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn get_str(s: &mut TcpStream) -> std::io::Result<String> {
    let mut n = [0u8; 2];
    s.read_exact(&mut n)?;
    let mut v = vec![0u8; u16::from_le_bytes(n) as usize];
    s.read_exact(&mut v)?;
    Ok(String::from_utf8_lossy(&v).into_owned())
}

fn expect_magic(s: &mut TcpStream) -> std::io::Result<()> {
    let mut m = [0u8; 8];
    s.read_exact(&mut m)?;
    if &m != MAGIC {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            "not nccl-smoke's rendezvous",
        ));
    }
    Ok(())
}

fn secs(d: Duration) -> String {
    format!("{:.0} s", d.as_secs_f64())
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

    /// [`Tcp::grow_tree`], with the address a rank advertises passed through `advertise` (a
    /// test makes one unreachable).
    fn grow_tree_advertising(
        &mut self,
        wait: Duration,
        advertise: impl Fn(SocketAddr) -> SocketAddr,
    ) {
        let (rank, size) = (self.rank, self.size);
        if !tree::beyond_star(size) {
            return;
        }
        let start = Instant::now();
        let peers = self.peers.get_mut().unwrap_or_else(|p| p.into_inner());
        // This rank's listener, when it has children below rank 0.
        let mut problem = String::new();
        let (listener, mine) = if rank != 0 && !tree::children(rank, size).is_empty() {
            let bound = peers[0]
                .local_addr()
                .and_then(|a| TcpListener::bind(SocketAddr::new(a.ip(), 0)))
                .and_then(|l| {
                    l.set_nonblocking(true)?;
                    let at = l.local_addr()?;
                    Ok((l, at))
                });
            match bound {
                Ok((l, at)) => (Some(l), advertise(at).to_string()),
                Err(e) => {
                    problem = format!("rank {rank} cannot listen for its children: {e}");
                    (None, String::new())
                }
            }
        } else {
            (None, String::new())
        };
        // Rank 0 learns every address and tells each rank its parent's.
        let parent_addr = if rank == 0 {
            let mut addrs = vec![String::new()];
            for p in peers.iter_mut() {
                addrs.push(io(get_str(p)));
            }
            for (i, p) in peers.iter_mut().enumerate() {
                let child = i as u32 + 1;
                let at = tree::parent(child)
                    .map(|q| addrs[q as usize].as_str())
                    .unwrap_or("");
                let mut b = Vec::new();
                put_str(&mut b, at);
                io(p.write_all(&b));
            }
            String::new()
        } else {
            let mut b = Vec::new();
            put_str(&mut b, &mine);
            io(peers[0].write_all(&b));
            io(get_str(&mut peers[0]))
        };
        let mut t = Tree {
            parent: None,
            children: Vec::new(),
        };
        // Up first, then down: a parent's listener exists before any address is told, so
        // every connect completes in its backlog whether or not the parent accepts yet.
        match tree::parent(rank) {
            Some(0) => t.parent = Some(Edge::Star(0)),
            Some(p) if problem.is_empty() => {
                match connect_parent(rank, p, &parent_addr, start, wait) {
                    Ok(s) => t.parent = Some(Edge::Own(s)),
                    Err(e) => problem = e,
                }
            }
            _ => {}
        }
        let kids = tree::children(rank, size);
        if rank == 0 {
            t.children = kids.map(|c| Edge::Star(c as usize - 1)).collect();
        } else if let Some(l) = listener {
            match accept_children(&l, rank, kids, start, wait) {
                Ok(c) => t.children = c,
                Err(e) if problem.is_empty() => problem = e,
                Err(_) => {}
            }
        }
        // The vote: the tree only when every rank has its edges.
        let agreed = if rank == 0 {
            let mut trouble = Vec::new();
            for p in peers.iter_mut() {
                let said = io(get_str(p));
                if !said.is_empty() {
                    trouble.push(said);
                }
            }
            let go = trouble.is_empty();
            for p in peers.iter_mut() {
                io(p.write_all(&[u8::from(go)]));
            }
            if !go {
                let shown: Vec<&str> = trouble.iter().take(3).map(String::as_str).collect();
                eprintln!(
                    "nccl-smoke: bootstrap: {} rank(s) could not set up the barrier's tree ({}{}); \
                     the stage barrier goes through rank 0, one rank at a time (slower at \
                     scale, as correct)",
                    trouble.len(),
                    shown.join("; "),
                    if trouble.len() > shown.len() {
                        "; …"
                    } else {
                        ""
                    }
                );
            }
            go
        } else {
            let mut b = Vec::new();
            put_str(&mut b, &problem);
            io(peers[0].write_all(&b));
            let mut go = [0u8; 1];
            io(peers[0].read_exact(&mut go));
            go[0] == 1
        };
        if agreed {
            *self.tree.get_mut().unwrap_or_else(|p| p.into_inner()) = t;
            self.grown = true;
        }
    }
}

/// A rank's tree connection to its parent `p` (not rank 0) at `addr`.
fn connect_parent(
    rank: u32,
    p: u32,
    addr: &str,
    start: Instant,
    wait: Duration,
) -> Result<TcpStream, String> {
    let to: SocketAddr = addr
        .parse()
        .map_err(|_| format!("rank {rank}: its parent, rank {p}, has no address ('{addr}')"))?;
    let left = wait
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(100));
    let mut s = TcpStream::connect_timeout(&to, left)
        .map_err(|e| format!("rank {rank} cannot reach its parent, rank {p}, at {to}: {e}"))?;
    let mut hello = TREE_MAGIC.to_vec();
    hello.extend(rank.to_le_bytes());
    s.write_all(&hello)
        .map_err(|e| format!("rank {rank} lost its parent, rank {p}, at {to}: {e}"))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// A parent's side: its children's connections, in rank order, within the wait.
fn accept_children(
    l: &TcpListener,
    rank: u32,
    kids: std::ops::Range<u32>,
    start: Instant,
    wait: Duration,
) -> Result<Vec<Edge>, String> {
    let mut got: Vec<Option<TcpStream>> = kids.clone().map(|_| None).collect();
    while got.iter().any(Option::is_none) {
        match l.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut m = [0u8; 8];
                let Ok(()) = s.read_exact(&mut m) else {
                    continue;
                };
                let Ok(child) = get_u32(&mut s) else { continue };
                // Anything else that connects (a port scan, a stray rank) is not placed.
                if &m == TREE_MAGIC && kids.contains(&child) {
                    let _ = s.set_read_timeout(None);
                    let _ = s.set_nodelay(true);
                    got[(child - kids.start) as usize] = Some(s);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if start.elapsed() > wait {
                    let missing: Vec<String> = kids
                        .clone()
                        .zip(&got)
                        .filter(|(_, g)| g.is_none())
                        .map(|(c, _)| c.to_string())
                        .collect();
                    return Err(format!(
                        "rank {rank} heard nothing within {} from its children {}",
                        secs(wait),
                        missing.join(", ")
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(format!("rank {rank}: accepting its children: {e}")),
        }
    }
    Ok(got.into_iter().flatten().map(Edge::Own).collect())
}

/// Rank 0's side of the rendezvous.
struct Rank0 {
    /// One slot per rank; slot 0 is rank 0 itself.
    slots: Vec<Option<(Hello, Option<TcpStream>)>>,
    /// Connected processes refused or not yet placed, to be told why the job ended.
    others: Vec<TcpStream>,
}

impl Rank0 {
    fn assemble(
        world: &EnvWorld,
        me: &Hello,
        deadline: Duration,
    ) -> Result<(Vec<TcpStream>, u32), String> {
        let mut r = Rank0 {
            slots: (0..world.size).map(|_| None).collect(),
            others: Vec::new(),
        };
        r.slots[0] = Some((me.clone(), None));
        if world.size == 1 {
            return Ok((Vec::new(), 1));
        }
        let listener = listen(world)?;
        let start = Instant::now();
        while r.slots.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((s, from)) => {
                    if let Err(why) = r.admit(s, from, me) {
                        return Err(r.refuse_all(why));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if start.elapsed() > deadline {
                        let missing = r.missing();
                        let (s, they, were) = match missing.len() {
                            1 => ("", "it", "was"),
                            _ => ("s", "they", "were"),
                        };
                        let why = format!(
                            "rank{s} {} never connected to rank 0 at {} ({}) within {}: {they} \
                             did not start, or {were} given a different address",
                            missing.join(", "),
                            world.address,
                            world.address_from,
                            secs(deadline),
                        );
                        return Err(r.refuse_all(why));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(r.refuse_all(format!("rendezvous accept: {e}"))),
            }
        }
        // Every slot is filled. Local ranks: a rank's index among the ranks on its host, in
        // rank order.
        let hellos: Vec<Hello> = r.slots.iter().flatten().map(|(h, _)| h.clone()).collect();
        let local_size = |host: &str| hellos.iter().filter(|h| h.host == host).count() as u32;
        let mut peers = Vec::new();
        for (rank, slot) in r.slots.iter_mut().enumerate() {
            let host = &hellos[rank].host;
            let local_rank = hellos[..rank].iter().filter(|h| h.host == *host).count() as u32;
            let local_size = local_size(host);
            if let Some((_, Some(mut s))) = slot.take() {
                let answer = Answer::Welcome {
                    local_rank,
                    local_size,
                };
                s.write_all(&answer.encode())
                    .map_err(|e| format!("rendezvous: rank {rank} went away: {e}"))?;
                let _ = s.set_read_timeout(None);
                let _ = s.set_nodelay(true);
                peers.push(s);
            }
        }
        let mine = local_size(&me.host);
        let taken: Vec<String> = hellos.iter().map(Hello::who).collect();
        std::thread::spawn(move || late_arrivals(listener, taken));
        Ok((peers, mine))
    }

    /// Reads a connected process's hello and places it, or says why the job cannot go on.
    fn admit(
        &mut self,
        mut s: TcpStream,
        from: std::net::SocketAddr,
        me: &Hello,
    ) -> Result<(), String> {
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(HELLO_WAIT));
        let hello = match Hello::read(&mut s) {
            Ok(h) => h,
            Err(e) => {
                // A port scan or a health check is no rank: note it and go on waiting.
                eprintln!(
                    "nccl-smoke: rendezvous: ignored a connection from {from} that is not an \
                     nccl-smoke rank ({e})"
                );
                return Ok(());
            }
        };
        if hello.size != me.size {
            self.others.push(s);
            return Err(format!(
                "rank {} ({}) was started with a world of {} ranks, rank 0 ({}) with {}: \
                 the ranks do not belong to one launch",
                hello.rank,
                hello.who(),
                hello.size,
                me.who(),
                me.size
            ));
        }
        match self.slots.get_mut(hello.rank as usize) {
            Some(slot @ None) => {
                *slot = Some((hello, Some(s)));
                Ok(())
            }
            Some(Some((first, _))) => {
                let why = format!(
                    "two processes claim rank {}: {} and {}",
                    hello.rank,
                    first.who(),
                    hello.who()
                );
                self.others.push(s);
                Err(why)
            }
            None => {
                self.others.push(s);
                Err(format!(
                    "{} claims rank {} of a world of {}",
                    hello.who(),
                    hello.rank,
                    me.size
                ))
            }
        }
    }

    fn missing(&self) -> Vec<String> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
            .map(|(i, _)| i.to_string())
            .collect()
    }

    /// Tells every connected process why the job ends; returns the reason.
    fn refuse_all(&mut self, why: String) -> String {
        let answer = Answer::Refused(why.clone()).encode();
        let placed = self
            .slots
            .iter_mut()
            .filter_map(|s| s.as_mut().and_then(|(_, s)| s.take()));
        for mut s in placed.chain(self.others.drain(..)) {
            let _ = s.write_all(&answer);
        }
        why
    }
}

/// Rank 0 keeps its port for the whole job: a process that arrives after the job assembled (a
/// second process claiming a rank, a copy started twice) is refused with the holder named, and
/// rank 0 says so; a second job given the same port is refused when it tries to listen.
fn late_arrivals(listener: TcpListener, taken: Vec<String>) {
    let _ = listener.set_nonblocking(false);
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { continue };
        let _ = s.set_read_timeout(Some(HELLO_WAIT));
        let Ok(hello) = Hello::read(&mut s) else {
            continue;
        };
        let why = match taken.get(hello.rank as usize) {
            Some(holder) => format!(
                "two processes claim rank {}: {holder} (in the job, which had assembled) and {}",
                hello.rank,
                hello.who()
            ),
            None => format!(
                "{} claims rank {} of a world of {}",
                hello.who(),
                hello.rank,
                taken.len()
            ),
        };
        eprintln!("nccl-smoke: rendezvous: refused a late process: {why}");
        let why = format!("this process came after the job had assembled: {why}");
        let _ = s.write_all(&Answer::Refused(why).encode());
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
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Every rank grows the tree (rank `bad`, when given, advertising a closed port), then
    /// runs `rounds` barriers; no rank may leave barrier `k` before every rank has reached
    /// it. Returns each rank's barrier description.
    fn barriers(n: u32, rounds: u32, bad: Option<u32>) -> Vec<String> {
        let arrived = Arc::new(AtomicU32::new(0));
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let handles: Vec<_> = Tcp::loopback_star(n)
            .unwrap()
            .into_iter()
            .map(|mut t| {
                let arrived = arrived.clone();
                std::thread::spawn(move || {
                    let me = t.rank;
                    t.grow_tree_advertising(Duration::from_secs(2), |a| {
                        if Some(me) == bad { closed } else { a }
                    });
                    for k in 0..rounds {
                        arrived.fetch_add(1, Ordering::SeqCst);
                        t.barrier();
                        let seen = arrived.load(Ordering::SeqCst);
                        assert!(seen >= (k + 1) * n, "rank {me} left barrier {k} at {seen}");
                        t.barrier();
                    }
                    t.describe()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    }

    #[test]
    fn the_tree_barrier_holds_every_rank_until_all_arrive() {
        let said = barriers(83, 20, None);
        assert!(
            said.iter()
                .all(|d| d.contains("a tree of fan-out 8, 3 level(s)")),
            "{said:?}"
        );
    }

    #[test]
    fn a_job_within_the_fanout_is_its_own_tree() {
        let said = barriers(9, 20, None);
        assert!(said.iter().all(|d| !d.contains("barrier")), "{said:?}");
    }

    #[test]
    fn a_parent_nobody_can_reach_leaves_the_star_for_every_rank() {
        // Rank 2's children (17..=24) are told a port nobody listens on.
        let said = barriers(30, 10, Some(2));
        assert!(
            said.iter()
                .all(|d| d.contains("rank 0's star (the tree's connections")),
            "{said:?}"
        );
    }
}
