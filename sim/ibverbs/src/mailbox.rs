//! A queue pair's mailbox: a small shared-memory file that its peer, in another process, opens by
//! the queue pair number. It carries what a real HCA keeps on the card: the receives posted on
//! the queue pair (which a peer's SEND or WRITE_WITH_IMM consumes) and the receive completions
//! the peer's operations produce. Each ring has one producer and one consumer.
//!
//! Files live in `/dev/shm/nccl-smoke-ibv-<uid>/<qpn>`; the queue pair number is chosen at
//! random among those not taken (a file left by a process that died is taken over).

use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Entries per ring (NCCL posts at most a few hundred receives per queue pair).
pub const RING: usize = 1024;
const MAGIC: u64 = 0x6e63_636c_2d69_6276; // "nccl-ibv"

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct PostedRecv {
    pub wr_id: u64,
    /// The first scatter entry (NCCL posts receives with at most one).
    pub addr: u64,
    pub length: u32,
    pub nsge: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct RemoteCompletion {
    pub wr_id: u64,
    pub byte_len: u32,
    pub imm: u32,
    /// `ibv_wc_opcode`.
    pub opcode: u32,
    /// `ibv_wc_flags`.
    pub flags: u32,
    pub src_qp: u32,
    pub status: u32,
}

#[repr(C)]
struct Shared {
    magic: u64,
    pid: u32,
    /// 1 while the queue pair exists and is not in the error state.
    alive: AtomicU32,
    recvs: Ring<PostedRecv>,
    comps: Ring<RemoteCompletion>,
}

/// A ring in shared memory with one producer and one consumer, each in its own process.
#[repr(C)]
struct Ring<T> {
    head: AtomicU64,
    tail: AtomicU64,
    slots: [T; RING],
}

impl<T: Copy> Ring<T> {
    /// Appends `v` (the producer's side); false when the ring is full.
    fn push(&self, v: T) -> bool {
        let head = self.head.load(Ordering::Relaxed);
        if head - self.tail.load(Ordering::Acquire) >= RING as u64 {
            return false;
        }
        // SAFETY: the slot is the producer's until head moves past it.
        unsafe {
            let slot = std::ptr::addr_of!(self.slots[(head % RING as u64) as usize]) as *mut T;
            slot.write_volatile(v);
        }
        self.head.store(head + 1, Ordering::Release);
        true
    }

    /// Takes the oldest entry (the consumer's side).
    fn pop(&self) -> Option<T> {
        let tail = self.tail.load(Ordering::Relaxed);
        if tail == self.head.load(Ordering::Acquire) {
            return None;
        }
        // SAFETY: published by the producer before head moved.
        let v = unsafe {
            std::ptr::addr_of!(self.slots[(tail % RING as u64) as usize]).read_volatile()
        };
        self.tail.store(tail + 1, Ordering::Release);
        Some(v)
    }
}

/// One mapped mailbox (this process's own, or a peer's).
pub struct Mailbox {
    shared: *mut Shared,
    path: Option<CString>,
}

// SAFETY: the mapping is shared memory accessed through atomics and single-producer rings; the
// owner's queue pair serialises its own side.
unsafe impl Send for Mailbox {}
unsafe impl Sync for Mailbox {}

fn dir() -> String {
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        "/dev/shm"
    } else {
        "/tmp"
    };
    format!("{base}/nccl-smoke-ibv-{uid}")
}

fn path_of(qpn: u32) -> CString {
    CString::new(format!("{}/{qpn}", dir())).unwrap_or_default()
}

fn map(fd: libc::c_int) -> Result<*mut Shared, i32> {
    let len = std::mem::size_of::<Shared>();
    // SAFETY: fd is an open file at least `len` long; the mapping is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(errno());
    }
    Ok(p.cast())
}

pub fn errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn pid_alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks.
    unsafe { libc::kill(pid as libc::pid_t, 0) == 0 || errno() != libc::ESRCH }
}

/// Removes the mailboxes of processes that no longer exist.
fn sweep() {
    let Ok(entries) = std::fs::read_dir(dir()) else {
        return;
    };
    for e in entries.flatten() {
        let qpn = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok());
        if let Some(old) = qpn.and_then(|q| Mailbox::open(q).ok())
            && !pid_alive(old.pid())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

impl Mailbox {
    /// A new mailbox for a queue pair of this process, and its number. The first one a process
    /// creates also removes the mailboxes that processes which died (killed, aborted) left.
    pub fn create() -> Result<(Mailbox, u32), i32> {
        let d = CString::new(dir()).unwrap_or_default();
        // SAFETY: plain mkdir; EEXIST is fine.
        unsafe { libc::mkdir(d.as_ptr(), 0o700) };
        static SWEPT: std::sync::Once = std::sync::Once::new();
        SWEPT.call_once(sweep);
        let pid = std::process::id();
        let mut seed = (pid as u64) << 20
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
        for _ in 0..1000 {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let qpn = ((seed >> 33) as u32 & 0x00ff_ffff).max(0x100);
            let path = path_of(qpn);
            // SAFETY: open with O_EXCL; the fd is closed below.
            let fd = unsafe {
                libc::open(
                    path.as_ptr(),
                    libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd < 0 {
                if errno() == libc::EEXIST {
                    if let Ok(old) = Mailbox::open(qpn)
                        && !pid_alive(old.pid())
                    {
                        // SAFETY: unlinking a file left by a dead process.
                        unsafe { libc::unlink(path.as_ptr()) };
                    }
                    continue;
                }
                return Err(errno());
            }
            let len = std::mem::size_of::<Shared>();
            // SAFETY: fd is ours.
            let sized = unsafe { libc::ftruncate(fd, len as libc::off_t) } == 0;
            let mapped = if sized { map(fd) } else { Err(errno()) };
            // SAFETY: the mapping (if any) outlives the descriptor.
            unsafe { libc::close(fd) };
            let shared = match mapped {
                Ok(s) => s,
                Err(e) => {
                    // SAFETY: removing the file just created.
                    unsafe { libc::unlink(path.as_ptr()) };
                    return Err(e);
                }
            };
            // SAFETY: freshly mapped, zero-filled, ours alone until the number is handed out.
            unsafe {
                (*shared).pid = pid;
                (*shared).alive.store(1, Ordering::Release);
                std::ptr::write_volatile(&mut (*shared).magic, MAGIC);
            }
            return Ok((
                Mailbox {
                    shared,
                    path: Some(path),
                },
                qpn,
            ));
        }
        Err(libc::ENOSPC)
    }

    /// A peer's mailbox, by its queue pair number.
    pub fn open(qpn: u32) -> Result<Mailbox, i32> {
        let path = path_of(qpn);
        // SAFETY: open for reading and writing; closed below.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(errno());
        }
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open; st is ours.
        let ok = unsafe { libc::fstat(fd, &mut st) } == 0
            && st.st_size as usize >= std::mem::size_of::<Shared>();
        let mapped = if ok { map(fd) } else { Err(libc::ENOENT) };
        // SAFETY: closing our descriptor.
        unsafe { libc::close(fd) };
        let shared = mapped?;
        let mb = Mailbox { shared, path: None };
        // SAFETY: the mapping is valid.
        if unsafe { std::ptr::read_volatile(&(*shared).magic) } != MAGIC {
            return Err(libc::ENOENT);
        }
        Ok(mb)
    }

    fn s(&self) -> &Shared {
        // SAFETY: mapped for the mailbox's life.
        unsafe { &*self.shared }
    }

    pub fn pid(&self) -> u32 {
        self.s().pid
    }

    /// Whether the queue pair still exists, out of the error state, in a living process.
    pub fn alive(&self) -> bool {
        self.s().alive.load(Ordering::Acquire) == 1 && pid_alive(self.pid())
    }

    pub fn set_alive(&self, alive: bool) {
        self.s().alive.store(alive as u32, Ordering::Release);
    }

    /// Posts a receive (the owner's side); false when the ring is full.
    pub fn post_recv(&self, r: PostedRecv) -> bool {
        self.s().recvs.push(r)
    }

    /// Takes the oldest posted receive (the peer's side).
    pub fn take_recv(&self) -> Option<PostedRecv> {
        self.s().recvs.pop()
    }

    /// Delivers a receive completion (the peer's side); false when the ring is full.
    pub fn complete(&self, c: RemoteCompletion) -> bool {
        self.s().comps.push(c)
    }

    /// Takes the oldest receive completion (the owner's side).
    pub fn take_completion(&self) -> Option<RemoteCompletion> {
        self.s().comps.pop()
    }
}

impl Drop for Mailbox {
    fn drop(&mut self) {
        if let Some(p) = &self.path {
            self.set_alive(false);
            // SAFETY: our own file.
            unsafe { libc::unlink(p.as_ptr()) };
        }
        // SAFETY: unmapping what map() mapped.
        unsafe { libc::munmap(self.shared.cast(), std::mem::size_of::<Shared>()) };
    }
}
