//! The C library and the dynamic linker: the few POSIX calls std does not wrap.

use libloading::os::unix::{Library as RawLibrary, RTLD_GLOBAL, RTLD_NOW};
use std::ffi::{CStr, CString, c_char, c_void};

/// A shared library opened with `RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE`: its symbols resolve
/// immediately and become visible to later `dlopen`s by soname (how cudarc finds the driver
/// nccl-smoke chose), and it is never unmapped: NCCL leaves detached threads (proxy, async
/// jobs) running after a failed or aborted communicator, and `dlclose` under them would crash
/// the process after its verdict.
pub struct Library {
    raw: RawLibrary,
}

impl std::fmt::Debug for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Library")
    }
}

impl Library {
    /// Opens `name_or_path`; the error is the dynamic linker's own message.
    pub fn open_global(name_or_path: &str) -> Result<Library, String> {
        // SAFETY: loading a library runs its initialisers; that is the point of this tool and
        // the libraries it loads are the ones the operator asked to test.
        unsafe {
            RawLibrary::open(
                Some(name_or_path),
                RTLD_NOW | RTLD_GLOBAL | libc::RTLD_NODELETE,
            )
        }
        .map(|raw| Library { raw })
        .map_err(|e| error_chain(&e))
    }

    /// Whether the library exports `symbol`.
    pub fn has(&self, symbol: &str) -> bool {
        self.address(symbol).is_some()
    }

    /// The address `symbol` resolves to in this library.
    pub fn address(&self, symbol: &str) -> Option<*mut c_void> {
        // SAFETY: the symbol is only inspected as an address, never called here.
        unsafe { self.raw.get::<*mut c_void>(symbol.as_bytes()) }
            .ok()
            .map(|s| *s)
    }

    /// The absolute path of the file that defines `symbol` (dladdr), i.e. the library
    /// actually loaded, whatever name it was asked by.
    pub fn path_of(&self, symbol: &str) -> Option<String> {
        file_of(self.address(symbol)? as usize)
    }

    /// Calls a `const char *name(void)` marker function if the library exports one.
    pub fn marker(&self, symbol: &str) -> Option<String> {
        // SAFETY: marker symbols are `const char *(void)` by the simulation's contract; a
        // library without the symbol is not asked.
        let f = unsafe {
            self.raw
                .get::<unsafe extern "C" fn() -> *const c_char>(symbol.as_bytes())
        }
        .ok()?;
        // SAFETY: see above.
        let p = unsafe { f() };
        if p.is_null() {
            return None;
        }
        // SAFETY: a static NUL-terminated string.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// The underlying handle, for the typed symbol tables built on it.
    pub fn raw(&self) -> &RawLibrary {
        &self.raw
    }

    /// Hands the handle to a symbol table that will own it.
    pub fn into_raw(self) -> RawLibrary {
        self.raw
    }
}

/// The absolute path of the loaded file that holds the address `addr` (dladdr).
pub fn file_of(addr: usize) -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only looks the address up in the loader's tables, never dereferences
    // it; `info` is a valid out-pointer.
    let ok = unsafe { libc::dladdr(addr as *const c_void, info.as_mut_ptr()) };
    if ok == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so the struct is filled.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated string owned by the loader.
    let name = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    Some(
        std::fs::canonicalize(name.as_ref())
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| name.into_owned()),
    )
}

/// An error and its sources, joined: libloading puts the dynamic linker's words in the source.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        out.push_str(": ");
        out.push_str(&s.to_string());
        src = s.source();
    }
    out
}

/// This machine's host name (`gethostname`), or "unknown".
pub fn hostname() -> String {
    let mut buf = [0 as c_char; 256];
    // SAFETY: buffer and length match; the result is NUL-terminated on success.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len() - 1) };
    if rc != 0 {
        return "unknown".into();
    }
    // SAFETY: NUL-terminated by gethostname (last byte left zero).
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

/// Whether a process with this pid exists on this host (in this pid namespace): `kill(pid, 0)`
/// succeeds, or fails for want of permission (EPERM: it exists, another user's).
pub fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 sends nothing; it only checks that the process exists.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Sends signal `sig` to the process `pid` (a child of this one).
pub fn signal(pid: u32, sig: i32) -> std::io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    // SAFETY: kill(2) with a positive pid signals that process only; no memory is touched.
    match unsafe { libc::kill(pid, sig) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

/// Makes the process `cmd` starts die (SIGKILL) when this process dies, so that a worker never
/// outlives the supervisor that a launcher (mpirun, srun, kubectl) is tearing down.
///
/// Set between fork and exec, with no window: a worker that asked for it itself, once started,
/// stayed orphaned for ever if its supervisor was killed in the moments before it asked. The
/// signal follows the *thread* that spawns, so `cmd` must be spawned from one that lives as long
/// as the process (the supervisor's main thread).
pub fn dies_with_this_process(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before exec and calls only prctl, getppid
    // and _exit, which are async-signal-safe; it touches no memory of the parent's.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent died between fork and prctl: nothing will send the signal now.
            if libc::getppid() != parent {
                libc::_exit(libc::SIGKILL + 128);
            }
            Ok(())
        });
    }
}

/// Ends the process with `code` at once, flushing nothing: for a process whose own output may
/// be what blocks it (a pipe nobody reads).
pub fn exit_unflushed(code: u8) -> ! {
    // SAFETY: _exit takes a status and never returns.
    unsafe { libc::_exit(code as i32) }
}

/// The name of a signal number, e.g. "SIGSEGV".
pub fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a static or thread-local string.
    let p = unsafe { libc::strsignal(sig) };
    let desc = if p.is_null() {
        String::new()
    } else {
        // SAFETY: NUL-terminated string from libc.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    };
    let abbrev = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "",
    };
    match (abbrev.is_empty(), desc.is_empty()) {
        (false, false) => format!("{abbrev} ({desc})"),
        (false, true) => abbrev.to_string(),
        (true, false) => format!("signal {sig} ({desc})"),
        (true, true) => format!("signal {sig}"),
    }
}

/// Converts to a C string, refusing interior NULs with a message instead of a panic.
pub fn cstring(s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("'{s}' contains a NUL byte"))
}

/// Size and free bytes of the file system holding `path` (statvfs), e.g. `/dev/shm`.
pub fn fs_space(path: &str) -> Option<(u64, u64)> {
    let c = cstring(path).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: valid NUL-terminated path and out-pointer.
    if unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) } != 0 {
        return None;
    }
    // SAFETY: statvfs succeeded.
    let st = unsafe { st.assume_init() };
    let frsize = st.f_frsize;
    Some((st.f_blocks * frsize, st.f_bavail * frsize))
}

/// Reserves `len` bytes for the open file `f` (posix_fallocate), as NCCL does for its
/// shared-memory segments: on a full tmpfs this fails where a sparse `set_len` would not.
pub fn fallocate(f: &std::fs::File, len: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid open descriptor and a non-negative length.
    let rc = unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len as libc::off_t) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::from_raw_os_error(rc))
    }
}

/// The locked-memory limit of this process in bytes (`u64::MAX` for unlimited).
pub fn rlimit_memlock() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return None;
    }
    Some(if r.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_cur
    })
}

/// Raises this process's soft limit on open descriptors to `want`, or to the hard limit if that
/// is lower; never lowers it. Returns the soft limit in force afterwards. Processes started
/// earlier keep theirs.
pub fn raise_fd_limit(want: u64) -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return None;
    }
    if r.rlim_cur == libc::RLIM_INFINITY || r.rlim_cur >= want {
        return Some(r.rlim_cur);
    }
    let to = if r.rlim_max == libc::RLIM_INFINITY {
        want
    } else {
        want.min(r.rlim_max)
    };
    let raised = libc::rlimit {
        rlim_cur: to,
        rlim_max: r.rlim_max,
    };
    // SAFETY: valid in-pointer; the hard limit is left as it is.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Some(r.rlim_cur);
    }
    Some(to)
}

/// This machine's IPv4 addresses, loopback last (getifaddrs).
pub fn ipv4_addresses() -> Vec<std::net::Ipv4Addr> {
    let mut out: Vec<std::net::Ipv4Addr> = ipv4_interfaces().into_iter().map(|(_, a)| a).collect();
    out.sort_by_key(|a| a.is_loopback());
    out
}

/// This machine's interfaces with an IPv4 address: (name, address), in getifaddrs order.
pub fn ipv4_interfaces() -> Vec<(String, std::net::Ipv4Addr)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the list is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        // SAFETY: ifa_addr is checked for NULL; AF_INET means a sockaddr_in.
        if !ifa.ifa_addr.is_null() && unsafe { (*ifa.ifa_addr).sa_family } as i32 == libc::AF_INET {
            // SAFETY: as above.
            let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
            let name = if ifa.ifa_name.is_null() {
                String::new()
            } else {
                // SAFETY: NUL-terminated name owned by the list.
                unsafe { CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned()
            };
            out.push((
                name,
                std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
            ));
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// Sends `bytes` and one file descriptor over a Unix stream (SCM_RIGHTS).
pub fn send_fd(
    stream: &std::os::unix::net::UnixStream,
    bytes: &[u8],
    fd: std::os::fd::BorrowedFd,
) -> std::io::Result<()> {
    use sendfd::SendWithFd;
    use std::os::fd::AsRawFd;
    stream.send_with_fd(bytes, &[fd.as_raw_fd()]).map(|_| ())
}

/// Receives bytes into `buf` and at most one file descriptor, which the caller then owns.
pub fn recv_fd(
    stream: &std::os::unix::net::UnixStream,
    buf: &mut [u8],
) -> std::io::Result<(usize, Option<std::os::fd::OwnedFd>)> {
    use sendfd::RecvWithFd;
    use std::os::fd::FromRawFd;
    let mut fds = [-1; 1];
    let (n, nfds) = stream.recv_with_fd(buf, &mut fds)?;
    // SAFETY: a descriptor received with SCM_RIGHTS is new in this process and owned by no one
    // else.
    let fd =
        (nfds == 1 && fds[0] >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fds[0]) });
    Ok((n, fd))
}

/// Restores the default SIGPIPE action (Rust ignores it): a one-shot command whose output
/// goes into a closed pipe (`| head`) then ends quietly, as other Unix tools do, instead of
/// failing to print. Not for `run`, whose supervisor must outlive a closed stdout.
pub fn default_sigpipe() {
    // SAFETY: installs the default disposition for one signal; no handler code runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Ends the process at once with `code`: no atexit handlers, no static destructors. After a
/// failure, libnccl's own threads may still run, and its destructors racing them can crash
/// the process after the verdict was given (seen with NCCL 2.19 when CUDA init failed).
pub fn exit_now(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit takes a status and never returns; buffers were flushed above.
    unsafe { libc::_exit(code as i32) }
}
