//! A communicator's shared state: identity, connections, the async error, abort, and the
//! handles C holds.

use crate::texts::Report;
use crate::transport::Peer;
use crate::{INPROGRESS, SUCCESS};
use nccl_smoke_fault::{FaultSet, Kind, Where};
use std::collections::HashMap;
use std::ffi::c_void;
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Who the communicator is; fixed at init.
pub struct Identity {
    pub rank: usize,
    pub nranks: usize,
    pub dev: i32,
    pub bus_id: String,
    pub comm_id: u64,
    /// NCCL's `commHash` of the unique id, as RAS names the communicator.
    pub hash: u64,
    /// This rank's bootstrap address, as RAS names its node.
    pub ip: std::net::Ipv4Addr,
    /// The NCCL release this library speaks as.
    pub version: i32,
    pub faults: FaultSet,
    /// Operation index of a `run` fault.
    pub run_fault_op: u64,
}

pub struct Comm {
    pub id: Identity,
    /// Init was blocking (NCCL's `config.blocking`).
    pub blocking: bool,
    peers: OnceLock<Vec<Option<Peer>>>,
    /// Clones of every socket, to shut them down from abort while others block on them.
    sockets: Mutex<Vec<TcpStream>>,
    async_err: AtomicU32,
    aborted: AtomicBool,
    gate: Mutex<()>,
    wake: Condvar,
    /// Operations accepted (NCCL's opCount, for COLL lines).
    pub op_count: AtomicU64,
    /// Stream tasks started (the operation index `run` faults count).
    pub executed: AtomicU64,
    /// Stream tasks queued and not finished.
    pending: AtomicUsize,
    /// Stream tasks running now.
    running: AtomicUsize,
    /// Transport setup not yet done for any operation / for a send-recv group.
    pub first_op: AtomicBool,
    pub first_p2p: AtomicBool,
    /// Transfer slowdown factor (f64 bits).
    slow: AtomicU64,
    /// A periodic data fault's runs of matching operations so far, and whether the last
    /// operation matched (see [`Comm::data_strikes`]).
    data_runs: Mutex<(u64, bool)>,
    /// Point-to-point connections made, as (peer, send side): a send/recv to a peer not in
    /// here still has a connection to make (NCCL's `peers[peer]->send[1].connected`).
    connected: Mutex<std::collections::HashSet<(usize, bool)>>,
    /// `ncclCommFinalize` was called (NCCL's `finalizeCalled`).
    pub finalize_called: AtomicBool,
    /// AllReduce operations launched (NCCL's `seqNumber[ncclFuncAllReduce]`, which RAS
    /// reports).
    pub allreduce_launched: AtomicU64,
    /// Splits made from this communicator (NCCL's `splitCount`).
    pub split_count: AtomicU32,
    /// The child a split job is bringing up: an abort of this communicator aborts it too
    /// (NCCL's `childAbortFlag`).
    split_child: Mutex<Option<Arc<Comm>>>,
    /// Split jobs not yet done: abort waits for them (they write the caller's `newcomm`).
    split_jobs: AtomicUsize,
}

impl Comm {
    pub fn new(id: Identity, blocking: bool) -> Comm {
        Comm {
            id,
            blocking,
            peers: OnceLock::new(),
            sockets: Mutex::new(Vec::new()),
            async_err: AtomicU32::new(if blocking { SUCCESS } else { INPROGRESS }),
            aborted: AtomicBool::new(false),
            gate: Mutex::new(()),
            wake: Condvar::new(),
            op_count: AtomicU64::new(0),
            executed: AtomicU64::new(0),
            pending: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            first_op: AtomicBool::new(true),
            first_p2p: AtomicBool::new(true),
            slow: AtomicU64::new(1.0f64.to_bits()),
            data_runs: Mutex::new((0, false)),
            connected: Mutex::new(Default::default()),
            finalize_called: AtomicBool::new(false),
            allreduce_launched: AtomicU64::new(0),
            split_count: AtomicU32::new(0),
            split_child: Mutex::new(None),
            split_jobs: AtomicUsize::new(0),
        }
    }

    /// Whether any of `links` (peer, send side) has no connection yet.
    pub fn p2p_pending(&self, links: &[(usize, bool)]) -> bool {
        let made = lock(&self.connected);
        links.iter().any(|l| !made.contains(l))
    }

    /// Records `links` as connected.
    pub fn p2p_connected(&self, links: &[(usize, bool)]) {
        lock(&self.connected).extend(links.iter().copied());
    }

    /// Marks work handed to a thread of the library's: the state is `ncclInProgress` until
    /// [`Comm::launch_done`] (NCCL's `ncclCommSetAsyncError(comm, ncclInProgress)` in
    /// `ncclGroupEndInternal`, `src/group.cc` v2.28.3-1).
    pub fn set_in_progress(&self) {
        let _ = self.async_err.compare_exchange(
            SUCCESS,
            INPROGRESS,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }

    /// The outcome of work handed to a thread: the state leaves `ncclInProgress`.
    pub fn launch_done(&self, code: u32) {
        self.init_done(code);
    }
}

/// Work the library does on a thread of its own while the communicators' state says
/// `ncclInProgress` (NCCL's `ncclAsyncLaunch` / group job): `work`'s result ends that state on
/// each of `comms`.
pub fn async_job(
    name: &str,
    comms: Vec<Arc<Comm>>,
    work: impl FnOnce() -> u32 + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            let rc = work();
            comms.iter().for_each(|c| c.launch_done(rc));
        })
        .map(|_| ())
}

impl Comm {
    /// The address C knows this communicator by.
    pub fn addr(&self) -> usize {
        self as *const Comm as usize
    }

    /// `comm 0x… rank R nranks N cudaDev D busId B`, as NCCL's INIT lines start.
    pub fn describe(&self) -> String {
        format!(
            "comm {:#x} rank {} nranks {} cudaDev {} busId {}",
            self.addr(),
            self.id.rank,
            self.id.nranks,
            self.id.dev,
            self.id.bus_id
        )
    }

    /// The fault at `at` for this rank, if any.
    pub fn fault(&self, at: Where) -> Option<Kind> {
        self.id
            .faults
            .find(at, Some(self.id.rank as u32))
            .map(|f| f.kind)
    }

    pub fn async_error(&self) -> u32 {
        self.async_err.load(Ordering::SeqCst)
    }

    /// Records a runtime error (the first one sticks). Once init is done, an error also ends
    /// an `ncclInProgress` launch state; during init, init's own outcome decides.
    pub fn fail(&self, code: u32) {
        let from_success =
            self.async_err
                .compare_exchange(SUCCESS, code, Ordering::SeqCst, Ordering::SeqCst);
        if from_success.is_err() && self.peers.get().is_some() && code != SUCCESS {
            let _ = self.async_err.compare_exchange(
                INPROGRESS,
                code,
                Ordering::SeqCst,
                Ordering::SeqCst,
            );
        }
    }

    /// Records the outcome of a non-blocking init.
    pub fn init_done(&self, code: u32) {
        let _ =
            self.async_err
                .compare_exchange(INPROGRESS, code, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Logs `r` (unless aborted: an abort's broken sockets are not news) and records its code.
    pub fn report(&self, r: &Report) {
        if !self.aborted() {
            r.emit(self.id.dev);
        }
        self.fail(r.code);
    }

    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// Keeps a clone of `s` so abort can shut it down. False when already aborted.
    pub fn track(&self, s: &TcpStream) -> bool {
        let mut socks = lock(&self.sockets);
        if self.aborted() {
            let _ = s.shutdown(Shutdown::Both);
            return false;
        }
        if let Ok(c) = s.try_clone() {
            socks.push(c);
        }
        true
    }

    pub fn set_peers(&self, peers: Vec<Option<Peer>>) {
        let _ = self.peers.set(peers);
    }

    pub fn peers(&self) -> &[Option<Peer>] {
        self.peers.get().map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn peer(&self, j: usize) -> Option<&Peer> {
        self.peers().get(j).and_then(Option::as_ref)
    }

    /// Whether some peer runs on this host (where NCCL would use P2P or SHM).
    pub fn local_peer(&self) -> Option<usize> {
        let me = crate::log::host();
        self.peers()
            .iter()
            .enumerate()
            .find(|(_, p)| p.as_ref().is_some_and(|p| p.host == me))
            .map(|(j, _)| j)
    }

    /// Links (or unlinks) the child of a split in progress to this communicator's abort.
    pub fn link_child(&self, child: Option<Arc<Comm>>) {
        let aborted = self.aborted();
        if let (true, Some(c)) = (aborted, &child) {
            c.abort_now();
        }
        *lock(&self.split_child) = child;
    }

    /// A split job starts / ends (abort waits for the ones running).
    pub fn split_job(&self, running: bool) {
        if running {
            self.split_jobs.fetch_add(1, Ordering::SeqCst);
        } else {
            self.split_jobs.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Stops everything: sets the flag every wait checks, shuts every socket down.
    pub fn abort_now(&self) {
        if let Some(c) = lock(&self.split_child).as_ref() {
            c.abort_now();
        }
        {
            let socks = lock(&self.sockets);
            self.aborted.store(true, Ordering::SeqCst);
            for s in socks.iter() {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
        let _g = lock(&self.gate);
        self.wake.notify_all();
    }

    /// Drops every connection (after a failure: the peers see them close, and senders blocked
    /// on this rank's sockets let go).
    pub fn break_links(&self) {
        for s in lock(&self.sockets).iter() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Sleeps up to `d`; returns early (true) when aborted.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = lock(&self.gate);
        loop {
            if self.aborted() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .wake
                .wait_timeout(g, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }

    /// A simulated hang: waits until aborted.
    pub fn hang(&self) {
        while !self.sleep(Duration::from_secs(3600)) {}
    }

    pub fn slow(&self) -> f64 {
        f64::from_bits(self.slow.load(Ordering::SeqCst))
    }

    pub fn set_slow(&self, f: f64) {
        self.slow.store(f.to_bits(), Ordering::SeqCst);
    }

    /// Whether a data fault strikes this operation: every matching one without `every`, else
    /// those of every `every`-th run of matching operations (a run begins at a matching
    /// operation after one that did not match). Called for every operation, matching or not.
    pub fn data_strikes(&self, matches: bool, every: Option<u32>) -> bool {
        let mut runs = self.data_runs.lock().unwrap_or_else(|p| p.into_inner());
        if matches && !runs.1 {
            runs.0 += 1;
        }
        runs.1 = matches;
        matches && every.is_none_or(|k| runs.0.is_multiple_of(u64::from(k)))
    }

    /// A task was queued on a stream.
    pub fn queued(&self) {
        self.pending.fetch_add(1, Ordering::SeqCst);
    }

    /// A task the stream refused after all.
    pub fn unqueued(&self) {
        self.pending.fetch_sub(1, Ordering::SeqCst);
    }

    /// Marks a queued task running until the guard drops (then it is no longer pending).
    pub fn start_task(self: &Arc<Comm>) -> TaskGuard {
        self.running.fetch_add(1, Ordering::SeqCst);
        TaskGuard(self.clone())
    }

    /// Waits until every queued task has run, unless an error or an abort makes waiting moot.
    pub fn drain(&self) {
        let mut spins = 0u64;
        while self.pending.load(Ordering::SeqCst) > 0
            && !self.aborted()
            && matches!(self.async_error(), SUCCESS | INPROGRESS)
        {
            spins += 1;
            self.sleep(Duration::from_micros((spins * 20).min(2000)));
        }
    }

    /// Aborts, then waits (a while) for running tasks to let go of user buffers.
    pub fn quiesce(&self) {
        self.abort_now();
        let start = Instant::now();
        while (self.running.load(Ordering::SeqCst) > 0
            || self.split_jobs.load(Ordering::SeqCst) > 0)
            && start.elapsed() < Duration::from_secs(10)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// A task on the stream, from start to end.
pub struct TaskGuard(Arc<Comm>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        self.0.running.fetch_sub(1, Ordering::SeqCst);
        self.0.pending.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Live communicators by handle. A handle is the communicator's address, so NCCL's
/// `comm 0x…` lines name what the caller holds; a stale or foreign handle is found missing
/// instead of being dereferenced.
static LIVE: Mutex<Option<HashMap<usize, Arc<Comm>>>> = Mutex::new(None);

pub fn register(c: &Arc<Comm>) -> *mut c_void {
    let h = c.addr();
    lock(&LIVE)
        .get_or_insert_with(HashMap::new)
        .insert(h, c.clone());
    h as *mut c_void
}

pub fn get(h: *mut c_void) -> Option<Arc<Comm>> {
    lock(&LIVE).as_ref()?.get(&(h as usize)).cloned()
}

pub fn unregister(h: *mut c_void) -> Option<Arc<Comm>> {
    lock(&LIVE).as_mut()?.remove(&(h as usize))
}

/// Every live communicator of this process.
pub fn all() -> Vec<Arc<Comm>> {
    lock(&LIVE)
        .as_ref()
        .map(|m| m.values().cloned().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn comm() -> Arc<Comm> {
        Arc::new(Comm::new(
            Identity {
                rank: 0,
                nranks: 2,
                dev: 3,
                bus_id: "18000".into(),
                comm_id: 7,
                hash: 7,
                ip: std::net::Ipv4Addr::LOCALHOST,
                version: 22803,
                faults: FaultSet::parse("import@0:error,run@1:hang").unwrap(),
                run_fault_op: 60,
            },
            false,
        ))
    }

    #[test]
    fn state_and_handles() {
        let c = comm();
        assert_eq!(c.async_error(), INPROGRESS);
        c.fail(crate::SYSTEM_ERROR); // not while init is in progress
        assert_eq!(c.async_error(), INPROGRESS);
        c.init_done(SUCCESS);
        c.fail(crate::REMOTE_ERROR);
        c.fail(crate::SYSTEM_ERROR);
        assert_eq!(c.async_error(), crate::REMOTE_ERROR);
        assert_eq!(c.fault(Where::Import), Some(Kind::Error));
        assert_eq!(c.fault(Where::Run), None);
        assert!(
            c.describe()
                .ends_with("rank 0 nranks 2 cudaDev 3 busId 18000")
        );
        let h = register(&c);
        assert!(Arc::ptr_eq(&get(h).unwrap(), &c));
        assert!(unregister(h).is_some());
        assert!(get(h).is_none() && unregister(h).is_none());
    }

    #[test]
    fn abort_ends_hangs_and_sleeps() {
        let c = comm();
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.hang());
        assert!(!c.sleep(Duration::from_millis(5)));
        c.abort_now();
        t.join().unwrap();
        assert!(c.sleep(Duration::from_secs(5)));
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let s = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        assert!(!c.track(&s));
    }

    #[test]
    fn tasks_are_counted() {
        let c = comm();
        c.init_done(SUCCESS);
        c.queued();
        let g = c.start_task();
        let c2 = c.clone();
        let t = std::thread::spawn(move || c2.drain());
        std::thread::sleep(Duration::from_millis(5));
        assert!(!t.is_finished());
        drop(g);
        t.join().unwrap();
        c.quiesce();
    }
}
