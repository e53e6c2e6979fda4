//! A communicator: bootstrap through the root in the unique id, a full mesh of TCP connections,
//! and the operations that move bytes over it on the caller's stream.

use crate::faults;
use crate::log;
use crate::net::{self, Iface};
use crate::reduce;
use crate::{INPROGRESS, INTERNAL_ERROR, INVALID_USAGE, REMOTE_ERROR, SUCCESS, SYSTEM_ERROR};
use nccl_smoke_fault::{FaultSet, Kind, Where};
use std::net::{Shutdown, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One peer's connection: a read half and a write half, used by different threads.
pub struct Peer {
    pub host: String,
    pub addr: SocketAddrV4,
    read: Mutex<TcpStream>,
    write: Mutex<TcpStream>,
}

pub struct Comm {
    pub rank: usize,
    pub nranks: usize,
    pub dev: i32,
    pub bus_id: String,
    pub id_hash: u64,
    peers: OnceLock<Vec<Option<Peer>>>,
    /// Messages this rank sent to itself, in order.
    self_queue: Mutex<std::collections::VecDeque<Vec<u8>>>,
    pub async_err: AtomicU32,
    pub aborted: AtomicBool,
    ops: AtomicU64,
    first_op: AtomicBool,
    first_p2p: AtomicBool,
    slow_bits: AtomicU64,
    pub faults: FaultSet,
}

/// A buffer address passed between threads (device memory is host memory here).
#[derive(Clone, Copy)]
pub struct Ptr(pub usize);

/// One queued operation.
#[derive(Clone, Copy)]
pub enum Op {
    AllReduce {
        send: Ptr,
        recv: Ptr,
        count: usize,
        dtype: u32,
        op: u32,
    },
    AllToAll {
        send: Ptr,
        recv: Ptr,
        count: usize,
        dtype: u32,
    },
    Send {
        buf: Ptr,
        count: usize,
        dtype: u32,
        peer: usize,
    },
    Recv {
        buf: Ptr,
        count: usize,
        dtype: u32,
        peer: usize,
    },
}

fn bytes_of(count: usize, dtype: u32) -> usize {
    count * reduce::elem_size(dtype).unwrap_or(1)
}

/// Reads `len` bytes at `p`.
///
/// # Safety
/// `p` must be valid for `len` bytes (a device buffer of the simulated driver).
unsafe fn slice<'a>(p: Ptr, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: per the function contract.
    unsafe { std::slice::from_raw_parts(p.0 as *const u8, len) }
}

/// # Safety
/// As [`slice`], and nothing else writes the range meanwhile.
unsafe fn slice_mut<'a>(p: Ptr, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: per the function contract.
    unsafe { std::slice::from_raw_parts_mut(p.0 as *mut u8, len) }
}

impl Comm {
    pub fn new(rank: usize, nranks: usize, faults: FaultSet, id_hash: u64, blocking: bool) -> Comm {
        let dev = crate::cuda::current_device().unwrap_or(0);
        Comm {
            rank,
            nranks,
            dev,
            bus_id: crate::cuda::bus_id(dev),
            id_hash,
            peers: OnceLock::new(),
            self_queue: Mutex::new(Default::default()),
            async_err: AtomicU32::new(if blocking { SUCCESS } else { INPROGRESS }),
            aborted: AtomicBool::new(false),
            ops: AtomicU64::new(0),
            first_op: AtomicBool::new(true),
            first_p2p: AtomicBool::new(true),
            slow_bits: AtomicU64::new(1.0f64.to_bits()),
            faults,
        }
    }

    fn strike(&self, at: Where) -> Option<Kind> {
        self.faults.find(at, Some(self.rank as u32)).map(|f| f.kind)
    }

    pub fn describe(&self) -> String {
        format!(
            "comm {:#x} rank {} nranks {} cudaDev {} busId {}",
            self as *const _ as usize, self.rank, self.nranks, self.dev, self.bus_id
        )
    }

    fn peers(&self) -> &[Option<Peer>] {
        self.peers.get().map(Vec::as_slice).unwrap_or(&[])
    }

    fn fail(&self, code: u32) {
        let _ = self
            .async_err
            .compare_exchange(SUCCESS, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Waits until aborted (a simulated hang that `ncclCommAbort` can end).
    pub fn hang(&self) {
        while !self.aborted.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn abort(&self) {
        self.aborted.store(true, Ordering::SeqCst);
        for p in self.peers().iter().flatten() {
            if let Ok(s) = p.write.lock() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        self.fail(REMOTE_ERROR);
    }

    /// Bootstraps through the root and connects to every peer. Returns an ncclResult_t.
    pub fn connect_all(&self, root: SocketAddrV4, iface: &Iface) -> u32 {
        match self.try_connect_all(root, iface) {
            Ok(()) => SUCCESS,
            Err((code, site, msg)) => {
                if !self.aborted.load(Ordering::SeqCst) {
                    log::warn(self.dev, site, &msg);
                }
                code
            }
        }
    }

    fn try_connect_all(
        &self,
        root: SocketAddrV4,
        iface: &Iface,
    ) -> Result<(), (u32, &'static str, String)> {
        let sys = |site: &'static str, e: std::io::Error| (SYSTEM_ERROR, site, e.to_string());
        let listener = TcpListener::bind(SocketAddrV4::new(iface.addr, 0))
            .map_err(|e| sys("misc/socket.cc:410", e))?;
        let my_addr = match listener.local_addr() {
            Ok(std::net::SocketAddr::V4(a)) => a,
            _ => {
                return Err((
                    INTERNAL_ERROR,
                    "bootstrap.cc:220",
                    "no IPv4 listen address".into(),
                ));
            }
        };
        let mut rs = connect_retry(root, Duration::from_secs(30), &self.aborted).map_err(|e| {
            (
                REMOTE_ERROR,
                "misc/socket.cc:484",
                format!(
                    "socketStartConnect: Connect to {}<{}> failed : {e}",
                    root.ip(),
                    root.port()
                ),
            )
        })?;
        let io = |e: std::io::Error| {
            (
                REMOTE_ERROR,
                "bootstrap.cc:253",
                format!("Bootstrap : root connection failed : {e}"),
            )
        };
        net::write_u32(&mut rs, self.rank as u32).map_err(io)?;
        net::write_u32(&mut rs, self.nranks as u32).map_err(io)?;
        net::write_str(&mut rs, &my_addr.to_string()).map_err(io)?;
        net::write_str(&mut rs, log::host()).map_err(io)?;
        let status = net::read_u32(&mut rs).map_err(io)?;
        if status != 0 {
            let msg = net::read_str(&mut rs).unwrap_or_default();
            return Err((INVALID_USAGE, "bootstrap.cc:301", msg));
        }
        let mut table = Vec::with_capacity(self.nranks);
        for _ in 0..self.nranks {
            let addr: SocketAddrV4 = net::read_str(&mut rs)
                .map_err(io)?
                .parse()
                .map_err(|_| io(std::io::Error::other("bad address")))?;
            let host = net::read_str(&mut rs).map_err(io)?;
            table.push((addr, host));
        }
        // Lower ranks listen, higher ranks connect: the listen backlog makes the order safe.
        let mut streams: Vec<Option<TcpStream>> = (0..self.nranks).map(|_| None).collect();
        for (j, (addr, _)) in table.iter().enumerate().take(self.rank) {
            let mut s =
                connect_retry(*addr, Duration::from_secs(30), &self.aborted).map_err(|e| {
                    (
                        REMOTE_ERROR,
                        "misc/socket.cc:484",
                        format!(
                            "socketStartConnect: Connect to {}<{}> failed : {e}",
                            addr.ip(),
                            addr.port()
                        ),
                    )
                })?;
            net::write_u32(&mut s, self.rank as u32).map_err(io)?;
            streams[j] = Some(s);
        }
        listener
            .set_nonblocking(true)
            .map_err(|e| sys("misc/socket.cc:420", e))?;
        let start = Instant::now();
        let mut missing = self.nranks - 1 - self.rank;
        while missing > 0 {
            if self.aborted.load(Ordering::SeqCst) {
                return Err((REMOTE_ERROR, "init.cc:1", "aborted".into()));
            }
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false)
                        .map_err(|e| sys("misc/socket.cc:430", e))?;
                    let j = net::read_u32(&mut s).map_err(io)? as usize;
                    if j >= self.nranks || j <= self.rank || streams[j].is_some() {
                        return Err((
                            INTERNAL_ERROR,
                            "transport.cc:90",
                            format!("unexpected connection from rank {j}"),
                        ));
                    }
                    streams[j] = Some(s);
                    missing -= 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > Duration::from_secs(60) {
                        return Err((
                            REMOTE_ERROR,
                            "misc/socket.cc:550",
                            "socketAccept: timed out waiting for peers".into(),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(sys("misc/socket.cc:540", e)),
            }
        }
        let mut peers = Vec::with_capacity(self.nranks);
        for (j, s) in streams.into_iter().enumerate() {
            peers.push(match s {
                Some(s) => {
                    let _ = s.set_nodelay(true);
                    let w = s.try_clone().map_err(|e| sys("misc/socket.cc:600", e))?;
                    Some(Peer {
                        host: table[j].1.clone(),
                        addr: table[j].0,
                        read: Mutex::new(s),
                        write: Mutex::new(w),
                    })
                }
                None => None,
            });
        }
        let _ = self.peers.set(peers);
        Ok(())
    }

    /// The checks NCCL's transport setup would fail at, made when an operation is enqueued:
    /// `Err(code)` is returned to the caller, as NCCL returns it from the call.
    /// `Ok((first operation, first point-to-point operation))`.
    pub fn setup_faults(&self, p2p: bool) -> Result<(bool, bool), u32> {
        let first = self.first_op.swap(false, Ordering::SeqCst);
        let first_p2p = p2p && self.first_p2p.swap(false, Ordering::SeqCst);
        let local_peer = self.peers().iter().flatten().any(|p| p.host == log::host());
        let checks: [(bool, Where); 4] = [
            (first && local_peer, Where::Import),
            (first && local_peer, Where::Shm),
            (first, Where::Net),
            (first_p2p, Where::Proxy),
        ];
        for (due, at) in checks {
            if !due {
                continue;
            }
            match self.strike(at) {
                Some(Kind::Error) => {
                    let code = faults::log_transport_error(self, at);
                    self.fail(code);
                    return Err(code);
                }
                Some(Kind::Crash) => std::process::abort(),
                Some(Kind::Slow(f)) => self.slow_bits.store(f.to_bits(), Ordering::SeqCst),
                _ => {}
            }
        }
        Ok((first, first_p2p))
    }

    /// Whether an enqueued task must hang at transport setup (a `hang` at import/proxy/shm/net).
    fn setup_hangs(&self, first: bool, first_p2p: bool) -> bool {
        let wheres: &[Where] = match (first, first_p2p) {
            (true, true) => &[Where::Import, Where::Shm, Where::Net, Where::Proxy],
            (true, false) => &[Where::Import, Where::Shm, Where::Net],
            (false, true) => &[Where::Proxy],
            (false, false) => &[],
        };
        wheres.iter().any(|w| self.strike(*w) == Some(Kind::Hang))
    }

    fn slow(&self) -> f64 {
        f64::from_bits(self.slow_bits.load(Ordering::SeqCst))
    }

    /// Runs a batch of operations (one collective, or one group's) in stream order.
    pub fn run_batch(self: &Arc<Comm>, ops: Vec<Op>, (first, first_p2p): (bool, bool)) {
        let index = self.ops.fetch_add(1, Ordering::SeqCst);
        if self.aborted.load(Ordering::SeqCst) || self.async_err.load(Ordering::SeqCst) != SUCCESS {
            return;
        }
        if self.setup_hangs(first, first_p2p) {
            self.hang();
            return;
        }
        if index == faults::run_fault_op() {
            match self.strike(Where::Run) {
                Some(Kind::Error) => {
                    faults::log_run_error(self);
                    self.fail(SYSTEM_ERROR);
                    // The peers see this rank's connections drop, as when a NIC fails.
                    for p in self.peers().iter().flatten() {
                        if let Ok(s) = p.write.lock() {
                            let _ = s.shutdown(Shutdown::Both);
                        }
                    }
                    return;
                }
                Some(Kind::Hang) => {
                    self.hang();
                    return;
                }
                Some(Kind::Crash) => std::process::abort(),
                Some(Kind::Slow(f)) => self.slow_bits.store(f.to_bits(), Ordering::SeqCst),
                _ => {}
            }
        }
        let corrupt = index >= 1 && self.strike(Where::Verify) == Some(Kind::Corrupt);
        let start = Instant::now();
        let result = self.execute(&ops, corrupt);
        let slow = self.slow();
        if slow > 1.0 {
            std::thread::sleep(start.elapsed().mul_f64(slow - 1.0));
        }
        if let Err((code, site, msg)) = result {
            if !self.aborted.load(Ordering::SeqCst) {
                log::warn(self.dev, site, &msg);
            }
            self.fail(code);
        }
    }

    fn execute(&self, ops: &[Op], corrupt: bool) -> Result<(), (u32, &'static str, String)> {
        let mut sends: Vec<(usize, Vec<u8>)> = Vec::new();
        let mut recvs: Vec<(usize, Ptr, usize)> = Vec::new();
        let mut post: Vec<Op> = Vec::new();
        for op in ops {
            match *op {
                Op::Send {
                    buf,
                    count,
                    dtype,
                    peer,
                } => {
                    // SAFETY: a device buffer of `count` elements, per the NCCL contract.
                    let mut data = unsafe { slice(buf, bytes_of(count, dtype)) }.to_vec();
                    if corrupt {
                        flip_middle(&mut data, dtype);
                    }
                    sends.push((peer, data));
                }
                Op::Recv {
                    buf,
                    count,
                    dtype,
                    peer,
                } => recvs.push((peer, buf, bytes_of(count, dtype))),
                Op::AllReduce {
                    send, count, dtype, ..
                } => {
                    // SAFETY: as above.
                    let mut data = unsafe { slice(send, bytes_of(count, dtype)) }.to_vec();
                    if corrupt {
                        flip_middle(&mut data, dtype);
                    }
                    for peer in (0..self.nranks).filter(|&p| p != self.rank) {
                        sends.push((peer, data.clone()));
                    }
                    post.push(*op);
                }
                Op::AllToAll {
                    send,
                    recv,
                    count,
                    dtype,
                } => {
                    let chunk = bytes_of(count, dtype);
                    for peer in 0..self.nranks {
                        // SAFETY: as above; chunk `peer` of the send buffer.
                        let mut data = unsafe { slice(Ptr(send.0 + peer * chunk), chunk) }.to_vec();
                        if corrupt {
                            flip_middle(&mut data, dtype);
                        }
                        sends.push((peer, data));
                        recvs.push((peer, Ptr(recv.0 + peer * chunk), chunk));
                    }
                }
            }
        }
        // Every receive buffer of an all_reduce gets each peer's contribution; gather them here.
        let mut reduce_inputs: Vec<Vec<Vec<u8>>> = Vec::new();
        // One sender thread per peer keeps each peer's messages in issue order, and sending
        // while receiving means no two ranks wait on each other's full socket buffers.
        let mut by_peer: Vec<Vec<Vec<u8>>> = (0..self.nranks).map(|_| Vec::new()).collect();
        for (peer, data) in sends {
            if peer == self.rank {
                if let Ok(mut q) = self.self_queue.lock() {
                    q.push_back(data);
                }
            } else if let Some(v) = by_peer.get_mut(peer) {
                v.push(data);
            }
        }
        std::thread::scope(|scope| {
            let mut handles = Vec::new();
            for (peer, msgs) in by_peer
                .into_iter()
                .enumerate()
                .filter(|(_, m)| !m.is_empty())
            {
                handles
                    .push(scope.spawn(move || msgs.iter().try_for_each(|m| self.send_to(peer, m))));
            }
            let mut result = Ok(());
            for (peer, buf, len) in &recvs {
                // SAFETY: the caller's receive buffer of `len` bytes.
                let out = unsafe { slice_mut(*buf, *len) };
                if let Err(e) = self.recv_from(*peer, out) {
                    result = Err(e);
                    break;
                }
            }
            for op in &post {
                if let Op::AllReduce {
                    send, count, dtype, ..
                } = *op
                {
                    let len = bytes_of(count, dtype);
                    let mut bufs = Vec::with_capacity(self.nranks);
                    for peer in 0..self.nranks {
                        if peer == self.rank {
                            // SAFETY: as above.
                            bufs.push(unsafe { slice(send, len) }.to_vec());
                        } else {
                            let mut b = vec![0u8; len];
                            if let Err(e) = self.recv_from(peer, &mut b) {
                                result = Err(e);
                                break;
                            }
                            bufs.push(b);
                        }
                    }
                    reduce_inputs.push(bufs);
                }
            }
            for h in handles {
                match h.join() {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        if result.is_ok() {
                            result = Err(e);
                        }
                    }
                    Err(_) => {
                        result = Err((INTERNAL_ERROR, "proxy.cc:1", "send thread panicked".into()))
                    }
                }
            }
            result
        })?;
        for (op, mut bufs) in post.iter().zip(reduce_inputs) {
            if let Op::AllReduce {
                recv,
                dtype,
                op: redop,
                ..
            } = *op
            {
                if bufs.len() != self.nranks {
                    continue;
                }
                let out = reduce::reduce_all(&mut bufs, dtype, redop);
                // SAFETY: the caller's receive buffer (may alias send: the inputs were copied).
                unsafe { slice_mut(recv, out.len()) }.copy_from_slice(&out);
            }
        }
        Ok(())
    }

    fn peer(&self, j: usize) -> Result<&Peer, (u32, &'static str, String)> {
        self.peers().get(j).and_then(Option::as_ref).ok_or((
            INTERNAL_ERROR,
            "transport.cc:60",
            format!("no connection to rank {j}"),
        ))
    }

    fn io_error(&self, peer: &Peer, e: std::io::Error) -> (u32, &'static str, String) {
        if e.kind() == std::io::ErrorKind::InvalidData {
            return (INVALID_USAGE, "transport/net_socket.cc:520", e.to_string());
        }
        match e.kind() {
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::BrokenPipe => (
                REMOTE_ERROR,
                "misc/socket.cc:49",
                format!(
                    "socketProgress: Connection closed by remote peer {}<{}>",
                    peer.host,
                    peer.addr.port()
                ),
            ),
            _ => (
                SYSTEM_ERROR,
                "misc/socket.cc:60",
                format!("socketProgress: {e}"),
            ),
        }
    }

    fn send_to(&self, j: usize, data: &[u8]) -> Result<(), (u32, &'static str, String)> {
        let p = self.peer(j)?;
        let mut w = p
            .write
            .lock()
            .map_err(|_| (INTERNAL_ERROR, "proxy.cc:1", "poisoned".into()))?;
        net::send_msg(&mut w, data).map_err(|e| self.io_error(p, e))
    }

    fn recv_from(&self, j: usize, out: &mut [u8]) -> Result<(), (u32, &'static str, String)> {
        if j == self.rank {
            let data = self.self_queue.lock().ok().and_then(|mut q| q.pop_front());
            return match data {
                Some(d) if d.len() == out.len() => {
                    out.copy_from_slice(&d);
                    Ok(())
                }
                Some(d) => Err((
                    INVALID_USAGE,
                    "enqueue.cc:1",
                    format!(
                        "Message truncated : received {} bytes instead of {}",
                        d.len(),
                        out.len()
                    ),
                )),
                None => Err((
                    INVALID_USAGE,
                    "enqueue.cc:1",
                    "receive from self without a matching send".into(),
                )),
            };
        }
        let p = self.peer(j)?;
        let mut r = p
            .read
            .lock()
            .map_err(|_| (INTERNAL_ERROR, "proxy.cc:1", "poisoned".into()))?;
        net::recv_msg(&mut r, out).map_err(|e| self.io_error(p, e))
    }
}

/// Inverts every bit of the middle element: a corruption the receiver can see and attribute.
fn flip_middle(data: &mut [u8], dtype: u32) {
    let sz = reduce::elem_size(dtype).unwrap_or(1);
    let n = data.len() / sz;
    if n == 0 {
        return;
    }
    let at = (n / 2) * sz;
    for b in &mut data[at..at + sz] {
        *b = !*b;
    }
}

fn connect_retry(
    addr: SocketAddrV4,
    limit: Duration,
    aborted: &AtomicBool,
) -> std::io::Result<TcpStream> {
    let start = Instant::now();
    loop {
        match TcpStream::connect_timeout(&addr.into(), Duration::from_secs(2)) {
            Ok(s) => return Ok(s),
            Err(e) if start.elapsed() > limit || aborted.load(Ordering::SeqCst) => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// The root of a unique id: collects every rank's address and hands out the table.
pub fn run_root(listener: TcpListener) {
    let mut joined: Vec<(u32, TcpStream, String, String)> = Vec::new();
    let mut nranks: Option<u32> = None;
    let mut problem: Option<String> = None;
    loop {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let hello = (|| -> std::io::Result<(u32, u32, String, String)> {
            Ok((
                net::read_u32(&mut s)?,
                net::read_u32(&mut s)?,
                net::read_str(&mut s)?,
                net::read_str(&mut s)?,
            ))
        })();
        let Ok((rank, n, addr, host)) = hello else {
            continue;
        };
        match nranks {
            None => nranks = Some(n),
            Some(m) if m != n => {
                problem = Some(format!(
                    "Bootstrap : rank {rank} reports nranks {n}, others {m}"
                ))
            }
            _ => {}
        }
        if rank >= n || joined.iter().any(|j| j.0 == rank) {
            problem = Some(format!(
                "Bootstrap : duplicate or invalid rank {rank} of {n}"
            ));
        }
        joined.push((rank, s, addr, host));
        if joined.len() as u32 >= nranks.unwrap_or(u32::MAX) {
            break;
        }
    }
    joined.sort_by_key(|j| j.0);
    let table: Vec<(String, String)> = joined.iter().map(|j| (j.2.clone(), j.3.clone())).collect();
    for (_, s, _, _) in joined.iter_mut() {
        let _ = match &problem {
            Some(msg) => net::write_u32(s, 1).and_then(|_| net::write_str(s, msg)),
            None => net::write_u32(s, 0).and_then(|_| {
                table
                    .iter()
                    .try_for_each(|(a, h)| net::write_str(s, a).and_then(|_| net::write_str(s, h)))
            }),
        };
    }
}
