//! Who printed a line: NCCL's `host:pid:tid [dev]` prefix, a wrapper's rank tag, and the
//! numbers and words read after a key.

use super::summary::clean;

/// NCCL's line prefix: `host:pid:tid [dev] NCCL LEVEL …`.
/// Launchers often put a timestamp or a rank tag before NCCL's own prefix, so the prefix is
/// found as the `host:pid:tid` word followed by a `[dev]` word, wherever it starts.
pub fn parse_prefix(line: &str) -> (Option<String>, Option<u32>, Option<u32>) {
    let Some(nccl_at) = line.find(" NCCL ") else {
        return (None, None, None);
    };
    let words: Vec<&str> = line[..nccl_at].split_whitespace().collect();
    for pair in words.windows(2) {
        let Some(device) = pair[1]
            .strip_prefix('[')
            .and_then(|w| w.strip_suffix(']'))
            .and_then(|d| d.parse::<u32>().ok())
        else {
            continue;
        };
        let mut parts = pair[0].rsplitn(3, ':');
        let tid = parts.next().and_then(|t| t.parse::<u64>().ok());
        let pid = parts.next().and_then(|p| p.parse::<u32>().ok());
        if let (Some(_), Some(pid)) = (tid, pid) {
            let host = parts
                .next()
                .filter(|h| !h.is_empty())
                .map(|h| clean(h.rsplit(':').next().unwrap_or(h)));
            return (host, Some(pid), Some(device));
        }
    }
    (None, None, None)
}

/// The node a launcher's line names when it could not reach it (OpenSSH's "ssh: connect to
/// host NODE port …", "ssh: Could not resolve hostname NODE: …"): the host of that failure.
pub fn unreached_host(line: &str) -> Option<String> {
    let rest = ["ssh: connect to host ", "Could not resolve hostname "]
        .iter()
        .find_map(|k| line.split_once(k).map(|(_, r)| r))?;
    let host = rest.split([' ', ':']).next()?;
    (!host.is_empty()).then(|| clean(host))
}

/// A rank a wrapper names: PyTorch's `[rank3]:` / `[Rank 3]` / `Rank 3]`, Open MPI's
/// `--tag-output` `[1,3]<stdout>:`.
pub fn wrapper_rank(line: &str) -> Option<u32> {
    fn digits(s: &str) -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    }
    let head = &line[..line.len().min(160)];
    if let Some(i) = head.find("[rank") {
        return digits(&head[i + 5..]);
    }
    if let Some(i) = head.find("Rank ") {
        let r = digits(&head[i + 5..]);
        if r.is_some()
            && head[i + 5..]
                .trim_start_matches(|c: char| c.is_ascii_digit())
                .starts_with(']')
        {
            return r;
        }
    }
    if head.starts_with("[1,") || head.starts_with("[0,") {
        let rest = &head[3..];
        if let Some(close) = rest.find("]<std") {
            return rest[..close].parse().ok();
        }
    }
    None
}

pub(super) fn number_after(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    let s = line[at..].trim_start();
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    s[..end].parse().ok()
}

pub(super) fn word_after<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let s = &line[at..];
    let end = s
        .find(|c: char| c == ',' || c == ')' || c.is_whitespace())
        .unwrap_or(s.len());
    Some(&s[..end]).filter(|w| !w.is_empty())
}

/// NCCL's own version line: `… NCCL INFO NCCL version 2.19.3+cuda12.3` or a bare
/// `NCCL version 2.18.1+cuda12.1` (not a wrapper's ", NCCL version 2.14.3" in an error text).
pub(super) fn nccl_version(line: &str) -> Option<&str> {
    let at = line.find("NCCL version ")?;
    let before = line[..at].trim_end();
    if !(before.is_empty() || before.ends_with("NCCL INFO") || before.ends_with(']')) {
        return None;
    }
    let v = &line[at + "NCCL version ".len()..];
    let end = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let v = &v[..end];
    (v.split('.').count() == 3 && v.split('.').all(|p| !p.is_empty())).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_gives_host_pid_device() {
        assert_eq!(
            parse_prefix(
                "gpu-node-3:12345:12399 [5] NCCL WARN Cuda failure 'invalid device ordinal'"
            ),
            (Some("gpu-node-3".into()), Some(12345), Some(5))
        );
        assert_eq!(parse_prefix("no prefix here"), (None, None, None));
        assert_eq!(
            parse_prefix("h1:10:11 [0] transport/p2p.cc:275 NCCL WARN Cuda failure 101"),
            (Some("h1".into()), Some(10), Some(0))
        );
        assert_eq!(
            parse_prefix("[2026-03-02 10:11:14] job-1:7:63 [3] proxy.cc:1 NCCL WARN x"),
            (Some("job-1".into()), Some(7), Some(3))
        );
        assert_eq!(
            parse_prefix(
                "[1,0]<stdout>:node-a:163608:163650 [0] transport/p2p.cc:1129 NCCL WARN x"
            ),
            (Some("node-a".into()), Some(163608), Some(0))
        );
    }

    #[test]
    fn wrapper_ranks() {
        assert_eq!(
            wrapper_rank("[rank3]:[E1206 18:44:12] ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog"),
            Some(3)
        );
        assert_eq!(
            wrapper_rank("[E ProcessGroupNCCL.cpp:458] [Rank 7] Watchdog caught"),
            Some(7)
        );
        assert_eq!(
            wrapper_rank("[1,12]<stdout>:host:1:2 [0] NCCL WARN x"),
            Some(12)
        );
        assert_eq!(wrapper_rank("plain line"), None);
    }
}
