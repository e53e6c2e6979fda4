//! NCCL-style logging.
//!
//! * `NCCL_DEBUG`: `VERSION`, `WARN`, `INFO` or `TRACE` (case-insensitive); unset: silent.
//! * `NCCL_DEBUG_SUBSYS`: comma list of subsystems for INFO lines, `^` to exclude, `ALL`;
//!   default `INIT,BOOTSTRAP,ENV`.
//! * `NCCL_DEBUG_FILE`: where lines go (only read above `VERSION`); `%h` host, `%p` pid, `%%`
//!   a percent sign; created afresh, as NCCL does. Unset or unopenable: stdout.
//! * `NCCL_DEBUG_TIMESTAMP_LEVELS` / `NCCL_DEBUG_TIMESTAMP_FORMAT`: timestamp prefixes as in
//!   NCCL 2.26 and later (WARN lines by default, `[%F %T] `, `%Nf` for sub-seconds, `_` for a
//!   space); releases before 2.26 print no timestamps unless asked.
//!
//! Lines: `host:pid:tid [dev] NCCL INFO msg`, `host:pid:tid [dev] file.cc:line NCCL WARN msg`
//! (preceded by an empty line, as NCCL's are), and bare `msg` at `VERSION` level.
//! Every WARN is kept, printed or not, for `ncclGetLastError`.

use std::ffi::{CString, c_char};
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// Subsystem flags for INFO lines.
pub mod sys {
    pub const INIT: u64 = 1 << 0;
    pub const COLL: u64 = 1 << 1;
    pub const P2P: u64 = 1 << 2;
    pub const SHM: u64 = 1 << 3;
    pub const NET: u64 = 1 << 4;
    pub const GRAPH: u64 = 1 << 5;
    pub const TUNING: u64 = 1 << 6;
    pub const ENV: u64 = 1 << 7;
    pub const ALLOC: u64 = 1 << 8;
    pub const CALL: u64 = 1 << 9;
    pub const PROXY: u64 = 1 << 10;
    pub const NVLS: u64 = 1 << 11;
    pub const BOOTSTRAP: u64 = 1 << 12;
    pub const REG: u64 = 1 << 13;
    pub const PROFILE: u64 = 1 << 14;
    pub const RAS: u64 = 1 << 15;
    pub const ALL: u64 = !0;

    pub const NAMES: [(&str, u64); 17] = [
        ("INIT", INIT),
        ("COLL", COLL),
        ("P2P", P2P),
        ("SHM", SHM),
        ("NET", NET),
        ("GRAPH", GRAPH),
        ("TUNING", TUNING),
        ("ENV", ENV),
        ("ALLOC", ALLOC),
        ("CALL", CALL),
        ("PROXY", PROXY),
        ("NVLS", NVLS),
        ("BOOTSTRAP", BOOTSTRAP),
        ("REG", REG),
        ("PROFILE", PROFILE),
        ("RAS", RAS),
        ("ALL", ALL),
    ];
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    None,
    Version,
    Warn,
    Info,
    Trace,
}

impl Level {
    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// `NCCL_DEBUG`.
pub fn parse_level(v: Option<&str>) -> Level {
    match v.map(|s| s.trim().to_ascii_uppercase()).as_deref() {
        Some("VERSION") => Level::Version,
        Some("WARN") => Level::Warn,
        Some("INFO") => Level::Info,
        Some("TRACE") => Level::Trace,
        _ => Level::None,
    }
}

/// `NCCL_DEBUG_SUBSYS` as a mask; unknown names are ignored, as NCCL ignores them.
pub fn parse_mask(v: Option<&str>) -> u64 {
    let Some(spec) = v else {
        return sys::INIT | sys::BOOTSTRAP | sys::ENV;
    };
    let (invert, list) = match spec.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let mut mask = if invert { sys::ALL } else { 0 };
    for name in list.split(',').map(str::trim) {
        if let Some((_, bits)) = sys::NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            if invert {
                mask &= !bits;
            } else {
                mask |= bits;
            }
        }
    }
    mask
}

/// `NCCL_DEBUG_TIMESTAMP_LEVELS` as a bit set of [`Level`]s; the default depends on the
/// release (2.26 brought timestamps on WARN lines).
pub fn parse_timestamp_levels(v: Option<&str>, version: i32) -> u32 {
    let Some(spec) = v else {
        return if version >= 22600 {
            Level::Warn.bit()
        } else {
            0
        };
    };
    let (invert, list) = match spec.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let mut bits = if invert { !0u32 } else { 0 };
    for name in list.split(',').map(str::trim) {
        let b = match name.to_ascii_uppercase().as_str() {
            "ALL" => !0u32,
            "VERSION" => Level::Version.bit(),
            "WARN" => Level::Warn.bit(),
            "INFO" => Level::Info.bit(),
            "TRACE" => Level::Trace.bit(),
            _ => 0,
        };
        if invert {
            bits &= !b;
        } else {
            bits |= b;
        }
    }
    bits
}

/// Expands an `NCCL_DEBUG_FILE` value: `%h` host, `%p` pid, `%%` a percent sign; any other
/// `%x` stays as written.
pub fn expand_file_name(pattern: &str, host: &str, pid: u32) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('h') => out.push_str(host),
            Some('p') => out.push_str(&pid.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// One formatted line (with its newline). `ts` is the timestamp prefix, possibly empty;
/// `site` is the `file.cc:line` of a WARN.
#[allow(clippy::too_many_arguments)]
pub fn format_line(
    ts: &str,
    host: &str,
    pid: u32,
    tid: u64,
    dev: i32,
    level: Level,
    site: &str,
    msg: &str,
) -> String {
    match level {
        Level::Warn => format!("\n{ts}{host}:{pid}:{tid} [{dev}] {site} NCCL WARN {msg}\n"),
        Level::Version => format!("{ts}{msg}\n"),
        _ => format!("{ts}{host}:{pid}:{tid} [{dev}] NCCL INFO {msg}\n"),
    }
}

/// A timestamp format with `_` read as a space, as NCCL reads it.
fn timestamp_format(v: Option<&str>) -> String {
    v.unwrap_or("[%F %T] ").replace('_', " ")
}

/// Replaces the first `%Nf` (N in 1..=9, not after `%%`) with N digits of `nanos`.
pub fn with_subseconds(format: &str, nanos: u64) -> String {
    let b = format.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && b.get(i + 1) == Some(&b'%') {
            i += 2;
            continue;
        }
        if b[i] == b'%'
            && matches!(b.get(i + 1), Some(d) if (b'1'..=b'9').contains(d))
            && b.get(i + 2) == Some(&b'f')
        {
            let digits = (b[i + 1] - b'0') as u32;
            let value = nanos / 10u64.pow(9 - digits);
            return format!(
                "{}{:0width$}{}",
                &format[..i],
                value,
                &format[i + 3..],
                width = digits as usize
            );
        }
        i += 1;
    }
    format.to_string()
}

/// The current local time in `format` (strftime, plus `%Nf`).
fn timestamp(format: &str) -> String {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    // SAFETY: an all-zero tm is a valid value to be overwritten.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointers; localtime_r is thread-safe.
    unsafe { libc::localtime_r(&ts.tv_sec, &mut tm) };
    let render = |fmt: &str| -> Option<String> {
        let c = CString::new(fmt).ok()?;
        let mut buf = [0u8; 256];
        // SAFETY: buffer and its length, a NUL-terminated format, a filled tm.
        let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), c.as_ptr(), &tm) };
        (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
    };
    let fmt = with_subseconds(format, ts.tv_nsec as u64);
    if fmt.is_empty() {
        return String::new();
    }
    render(&fmt)
        .or_else(|| render("[%F %T] "))
        .unwrap_or_default()
}

/// The host name up to its first dot, as NCCL prints it.
pub fn host() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    H.get_or_init(|| {
        let mut buf = [0u8; 256];
        // SAFETY: buffer and its length.
        let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let name = String::from_utf8_lossy(&buf[..end]).into_owned();
        let short = name.split('.').next().unwrap_or("").to_string();
        if rc != 0 || short.is_empty() {
            "localhost".into()
        } else {
            short
        }
    })
}

fn tid() -> u64 {
    // SAFETY: gettid takes no arguments.
    unsafe { libc::syscall(libc::SYS_gettid) as u64 }
}

struct Logger {
    level: Level,
    mask: u64,
    ts_levels: u32,
    ts_format: String,
    pid: u32,
    sink: Mutex<Box<dyn Write + Send>>,
}

fn logger() -> &'static Logger {
    static L: OnceLock<Logger> = OnceLock::new();
    L.get_or_init(|| {
        let env = |k: &str| std::env::var(k).ok();
        let level = parse_level(env("NCCL_DEBUG").as_deref());
        let pid = std::process::id();
        let sink: Box<dyn Write + Send> = match env("NCCL_DEBUG_FILE") {
            Some(p) if level > Level::Version => {
                let name = expand_file_name(&p, host(), pid);
                match std::fs::File::create(&name) {
                    Ok(f) => Box::new(f),
                    Err(_) => Box::new(std::io::stdout()),
                }
            }
            _ => Box::new(std::io::stdout()),
        };
        Logger {
            level,
            mask: parse_mask(env("NCCL_DEBUG_SUBSYS").as_deref()),
            ts_levels: parse_timestamp_levels(
                env("NCCL_DEBUG_TIMESTAMP_LEVELS").as_deref(),
                crate::version::code(),
            ),
            ts_format: timestamp_format(env("NCCL_DEBUG_TIMESTAMP_FORMAT").as_deref()),
            pid,
            sink: Mutex::new(sink),
        }
    })
}

fn emit(level: Level, dev: i32, site: &str, msg: &str) {
    let l = logger();
    if l.level < level {
        return;
    }
    let ts = if l.ts_levels & level.bit() != 0 {
        timestamp(&l.ts_format)
    } else {
        String::new()
    };
    let line = format_line(&ts, host(), l.pid, tid(), dev, level, site, msg);
    if let Ok(mut s) = l.sink.lock() {
        let _ = s.write_all(line.as_bytes());
        let _ = s.flush();
    }
}

/// The last WARN's text, NUL-terminated, in a buffer that never moves (NCCL keeps a 1024-byte
/// global too): a pointer handed out stays valid, its text is overwritten by the next WARN.
static LAST: Mutex<[u8; 1024]> = Mutex::new([0; 1024]);

/// Copies `msg` into `buf` as a C string, cut to fit.
fn store_c(buf: &mut [u8], msg: &str) {
    let bytes: Vec<u8> = msg.bytes().map(|b| if b == 0 { b' ' } else { b }).collect();
    let n = bytes.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&bytes[..n]);
    buf[n] = 0;
}

/// A warning from `site` (`file.cc:line`): printed at WARN and above, always kept for
/// `ncclGetLastError`.
pub fn warn(dev: i32, site: &str, msg: &str) {
    store_c(&mut *LAST.lock().unwrap_or_else(|e| e.into_inner()), msg);
    emit(Level::Warn, dev, site, msg);
}

/// An INFO line of the subsystems in `flags`.
pub fn info(dev: i32, flags: u64, msg: &str) {
    if logger().mask & flags != 0 {
        emit(Level::Info, dev, "", msg);
    }
}

/// NCCL's error-propagation line, `file.cc:line -> code`.
pub fn ret(dev: i32, site: &str, code: u32) {
    info(dev, sys::ALL, &format!("{site} -> {code}"));
}

/// The version banner, once per process: a bare line at VERSION and WARN, an INFO line above.
pub fn banner(dev: i32, msg: &str) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if matches!(logger().level, Level::Version | Level::Warn) {
            emit(Level::Version, dev, "", msg);
        } else {
            info(dev, sys::ALL, msg);
        }
    });
}

/// `ncclGetLastError`'s text: the last warning, or an empty string.
pub fn last_error_ptr() -> *const c_char {
    LAST.lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ptr()
        .cast()
}

#[cfg(test)]
mod tests;
