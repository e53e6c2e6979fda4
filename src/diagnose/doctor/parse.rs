//! Pure parsers for the node's text files: mounts, limits, process status.

/// The `size=` of the last `/dev/shm` mount in a mounts table (`/proc/self/mounts`), in
/// bytes. `Ok(None)`: no such mount or no absolute size (then statvfs is the source).
pub fn shm_mount_size(mounts: &str) -> Result<Option<u64>, String> {
    let Some(options) = mounts
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 4 && f[1] == "/dev/shm").then(|| f[3].to_string())
        })
        .next_back()
    else {
        return Ok(None);
    };
    let Some(size) = options.split(',').find_map(|o| o.strip_prefix("size=")) else {
        return Ok(None);
    };
    if size.ends_with('%') {
        return Ok(None);
    }
    parse_size(size)
        .map(Some)
        .ok_or_else(|| format!("/dev/shm mount has an unreadable size '{size}' ({options})"))
}

/// A tmpfs size option: bytes, or with a k/m/g/t suffix (`65536k`, `64m`).
fn parse_size(s: &str) -> Option<u64> {
    let (digits, shift) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 10),
        (i, 'm' | 'M') => (&s[..i], 20),
        (i, 'g' | 'G') => (&s[..i], 30),
        (i, 't' | 'T') => (&s[..i], 40),
        _ => (s, 0),
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// A row of `/proc/<pid>/limits` (e.g. "Max open files") as (soft, hard); `u64::MAX` is
/// unlimited. `None` when the row is absent or not numbers.
pub fn parse_limit(limits: &str, row: &str) -> Option<(u64, u64)> {
    let rest = limits.lines().find_map(|l| l.strip_prefix(row))?;
    let mut fields = rest.split_whitespace();
    let value = |f: Option<&str>| match f? {
        "unlimited" => Some(u64::MAX),
        n => n.parse::<u64>().ok(),
    };
    Some((value(fields.next())?, value(fields.next())?))
}

/// The effective capability mask (`CapEff:` in `/proc/<pid>/status`).
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{CAPS_NO_IPC_LOCK, limits};
    use crate::diagnose::doctor::{hca_selects_any, select_ifaces};
    use proptest::prelude::*;

    #[test]
    fn parsers_read_real_formats() {
        let l = limits("8388608              8388608", "20000                20000");
        assert_eq!(parse_limit(&l, "Max open files"), Some((20000, 20000)));
        assert_eq!(
            parse_limit(&l, "Max locked memory"),
            Some((8 << 20, 8 << 20))
        );
        assert_eq!(parse_limit(&l, "Max stack size"), None);
        assert_eq!(parse_cap_eff(CAPS_NO_IPC_LOCK), Some(0xa80425fb));
        assert_eq!(parse_cap_eff("CapEff:\tzz\n"), None);
        assert_eq!(
            shm_mount_size("tmpfs /dev/shm tmpfs rw,relatime,size=24684092k 0 0\n"),
            Ok(Some(24684092 << 10))
        );
        assert_eq!(parse_size("64m"), Some(64 << 20));
        assert_eq!(parse_size("99999999999999999999g"), None);
        assert_eq!(parse_size(""), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn parsers_never_panic(text in "\\PC{0,200}", row in "[A-Za-z ]{0,20}") {
            let _ = parse_limit(&text, &row);
            let _ = parse_cap_eff(&text);
            let _ = shm_mount_size(&text);
            let _ = parse_size(&text);
            let _ = select_ifaces(&text, &["eth0".into(), "lo".into()]);
            let _ = hca_selects_any(&text, &["mlx5_0".into()]);
        }
    }
}
