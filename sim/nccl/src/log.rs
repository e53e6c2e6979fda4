//! NCCL-style logging: `NCCL_DEBUG`, `NCCL_DEBUG_SUBSYS`, `NCCL_DEBUG_FILE` (`%h`, `%p`), lines
//! shaped `host:pid:tid [dev] NCCL LEVEL …`, WARN lines carrying `file.cc:line` like NCCL's.
//! The last WARN is kept for `ncclGetLastError`.

use std::ffi::{CString, c_char};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Version,
    Warn,
    Info,
    Trace,
}

pub fn parse_level(v: Option<&str>) -> Level {
    match v.map(|s| s.trim().to_ascii_uppercase()).as_deref() {
        Some("VERSION") => Level::Version,
        Some("WARN") => Level::Warn,
        Some("INFO") => Level::Info,
        Some("TRACE") => Level::Trace,
        _ => Level::None,
    }
}

/// Whether subsystem `sys` is logged under the NCCL_DEBUG_SUBSYS value `spec` (default INIT).
pub fn subsys_enabled(spec: Option<&str>, sys: &str) -> bool {
    let spec = spec.unwrap_or("INIT,BOOTSTRAP,ENV");
    let (invert, list) = match spec.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let hit = list
        .split(',')
        .map(|s| s.trim().to_ascii_uppercase())
        .any(|s| s == "ALL" || s == sys);
    hit != invert
}

/// Expands `%h` (host) and `%p` (pid) in an NCCL_DEBUG_FILE value.
pub fn expand_file_name(pattern: &str, host: &str, pid: u32) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.peek() {
                Some('h') => {
                    chars.next();
                    out.push_str(host);
                }
                Some('p') => {
                    chars.next();
                    out.push_str(&pid.to_string());
                }
                _ => out.push('%'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// One formatted line.
pub fn format_line(
    host: &str,
    pid: u32,
    tid: u64,
    dev: i32,
    level: &str,
    site: Option<&str>,
    msg: &str,
) -> String {
    match site {
        Some(s) => format!("{host}:{pid}:{tid} [{dev}] {s} NCCL {level} {msg}\n"),
        None => format!("{host}:{pid}:{tid} [{dev}] NCCL {level} {msg}\n"),
    }
}

struct Logger {
    level: Level,
    subsys: Option<String>,
    host: String,
    pid: u32,
    sink: Mutex<Box<dyn Write + Send>>,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().split('.').next().unwrap_or("").to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

pub fn host() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    H.get_or_init(hostname)
}

fn logger() -> &'static Logger {
    static L: OnceLock<Logger> = OnceLock::new();
    L.get_or_init(|| {
        let level = parse_level(std::env::var("NCCL_DEBUG").ok().as_deref());
        let pid = std::process::id();
        let sink: Box<dyn Write + Send> = match std::env::var("NCCL_DEBUG_FILE") {
            Ok(p) if level > Level::None => {
                let name = expand_file_name(&p, host(), pid);
                match std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&name)
                {
                    Ok(f) => Box::new(f),
                    Err(_) => Box::new(std::io::stdout()),
                }
            }
            _ => Box::new(std::io::stdout()),
        };
        Logger {
            level,
            subsys: std::env::var("NCCL_DEBUG_SUBSYS").ok(),
            host: host().to_string(),
            pid,
            sink: Mutex::new(sink),
        }
    })
}

fn tid() -> u64 {
    // SAFETY: gettid takes no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

fn emit(level: Level, name: &str, dev: i32, site: Option<&str>, msg: &str) {
    let l = logger();
    if l.level < level {
        return;
    }
    let line = format_line(&l.host, l.pid, tid(), dev, name, site, msg);
    if let Ok(mut s) = l.sink.lock() {
        let _ = s.write_all(line.as_bytes());
        let _ = s.flush();
    }
}

static LAST: Mutex<Option<CString>> = Mutex::new(None);

/// A warning: logged at WARN, and remembered for `ncclGetLastError`.
pub fn warn(dev: i32, site: &str, msg: &str) {
    if let Ok(mut last) = LAST.lock() {
        *last = CString::new(msg.replace('\0', " ")).ok();
    }
    emit(Level::Warn, "WARN", dev, Some(site), msg);
}

pub fn info(dev: i32, subsys: &str, msg: &str) {
    if subsys_enabled(logger().subsys.as_deref(), subsys) {
        emit(Level::Info, "INFO", dev, None, msg);
    }
}

/// The version banner NCCL prints once per process (at VERSION level and above).
pub fn version(dev: i32, msg: &str) {
    emit(Level::Version, "INFO", dev, None, msg);
}

/// `ncclGetLastError`'s text: the last warning, or an empty string.
pub fn last_error_ptr() -> *const c_char {
    static EMPTY: &[u8] = b"\0";
    match LAST.lock() {
        // The CString stays in place until the next warning replaces it, as NCCL's buffer does.
        Ok(g) => g
            .as_ref()
            .map(|c| c.as_ptr())
            .unwrap_or(EMPTY.as_ptr().cast()),
        Err(_) => EMPTY.as_ptr().cast(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_subsystems() {
        assert_eq!(parse_level(Some("info")), Level::Info);
        assert_eq!(parse_level(Some("WARN")), Level::Warn);
        assert_eq!(parse_level(None), Level::None);
        assert!(subsys_enabled(Some("INIT,NET"), "NET"));
        assert!(!subsys_enabled(Some("INIT,NET"), "P2P"));
        assert!(subsys_enabled(Some("^INIT"), "NET"));
        assert!(!subsys_enabled(Some("^INIT"), "INIT"));
        assert!(subsys_enabled(Some("ALL"), "SHM"));
    }

    #[test]
    fn file_names_expand_host_and_pid() {
        assert_eq!(
            expand_file_name("/tmp/nccl.%h.%p.log", "n1", 42),
            "/tmp/nccl.n1.42.log"
        );
        assert_eq!(expand_file_name("100%", "n1", 42), "100%");
    }

    #[test]
    fn lines_have_nccl_shape() {
        assert_eq!(
            format_line(
                "n1",
                7,
                9,
                3,
                "WARN",
                Some("transport/p2p.cc:275"),
                "Cuda failure 101 'invalid device ordinal'"
            ),
            "n1:7:9 [3] transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'\n"
        );
        assert_eq!(
            format_line("n1", 7, 9, 0, "INFO", None, "x"),
            "n1:7:9 [0] NCCL INFO x\n"
        );
    }
}
