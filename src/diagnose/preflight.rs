//! Before a run takes any GPU memory: does the sweep fit? Device buffers against the GPU's
//! free memory, host memory (the staging buffers; on the simulation, whose device memory is
//! host memory, the buffers too) against what this node, or its cgroup, has available for
//! the ranks it holds. A sweep that cannot fit is refused with the numbers, instead of an
//! allocation failing (or the OOM killer striking) halfway through.

/// What one rank needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    /// Device bytes: the send and receive buffers at the sweep's largest size.
    pub send: u64,
    pub recv: u64,
    /// Host bytes whatever the backend: the staging buffers.
    pub staging: u64,
    /// Device memory is host memory (the simulation).
    pub device_in_host: bool,
    /// Ranks on this node, each needing as much.
    pub local_ranks: u32,
}

fn mib(b: u64) -> String {
    format!("{} MiB", b.div_ceil(1 << 20))
}

impl Need {
    fn host_per_rank(&self) -> u64 {
        let device = if self.device_in_host {
            self.send.saturating_add(self.recv)
        } else {
            0
        };
        self.staging.saturating_add(device)
    }

    /// `Err` says what does not fit, with the numbers. `free_device` is the GPU's free memory
    /// (None: unknown); `host` what the node has available and where that figure comes from.
    pub fn check(
        &self,
        free_device: Option<u64>,
        host: Option<(u64, String)>,
    ) -> Result<(), String> {
        let device = self.send.saturating_add(self.recv);
        if let Some(free) = free_device
            && device > free
        {
            return Err(format!(
                "the sweep needs {} of device memory per rank (send {} + receive {} at the largest \
                 size), and the GPU has {} free",
                mib(device),
                mib(self.send),
                mib(self.recv),
                mib(free)
            ));
        }
        let per_rank = self.host_per_rank();
        let node = per_rank.saturating_mul(self.local_ranks.max(1) as u64);
        if let Some((available, from)) = host
            && node > available
        {
            return Err(format!(
                "the sweep needs {} of host memory on this node ({} ranks × {}{}), and {} is \
                 available ({from})",
                mib(node),
                self.local_ranks.max(1),
                mib(per_rank),
                if self.device_in_host {
                    ": the simulation's device memory is host memory"
                } else {
                    " of staging"
                },
                mib(available)
            ));
        }
        Ok(())
    }
}

/// Host memory available to this process: the smaller of the kernel's `MemAvailable` and what
/// is left under its cgroup's limit (v2 `memory.max`, v1 `memory.limit_in_bytes`).
pub fn host_available() -> Option<(u64, String)> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let mut best =
        mem_available(&meminfo).map(|b| (b, "MemAvailable in /proc/meminfo".to_string()));
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if let Some(left) = cgroup_left(&cgroup, |p| std::fs::read_to_string(p).ok())
        && best.as_ref().is_none_or(|(b, _)| left.0 < *b)
    {
        best = Some(left);
    }
    best
}

/// `MemAvailable:   123 kB` as bytes.
fn mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// What is left under this process's cgroup memory limit, from `/proc/self/cgroup` and a
/// reader of cgroup files; `None` when unlimited or unreadable.
fn cgroup_left(cgroup: &str, read: impl Fn(&str) -> Option<String>) -> Option<(u64, String)> {
    let num = |s: Option<String>| s.and_then(|t| t.trim().parse::<u64>().ok());
    for line in cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let (limit, usage) = if controllers.is_empty() {
            let dir = format!("/sys/fs/cgroup{path}");
            (format!("{dir}/memory.max"), format!("{dir}/memory.current"))
        } else if controllers.split(',').any(|c| c == "memory") {
            let dir = format!("/sys/fs/cgroup/memory{path}");
            (
                format!("{dir}/memory.limit_in_bytes"),
                format!("{dir}/memory.usage_in_bytes"),
            )
        } else {
            continue;
        };
        // "max" (v2) or a huge number (v1) means no limit.
        let Some(max) = num(read(&limit)).filter(|m| *m < (1u64 << 60)) else {
            continue;
        };
        let used = num(read(&usage)).unwrap_or(0);
        return Some((
            max.saturating_sub(used),
            format!("the cgroup limit in {limit}"),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    fn need(send: u64, device_in_host: bool, local_ranks: u32) -> Need {
        Need {
            send,
            recv: send,
            staging: 2 * (64 << 20),
            device_in_host,
            local_ranks,
        }
    }

    #[test]
    fn device_memory_is_checked_first_with_the_numbers() {
        let e = need(4 * GIB, false, 8)
            .check(Some(6 * GIB), None)
            .unwrap_err();
        assert!(e.contains("8192 MiB of device memory"), "{e}");
        assert!(
            e.contains("send 4096 MiB + receive 4096 MiB") && e.contains("6144 MiB free"),
            "{e}"
        );
        assert!(need(2 * GIB, false, 8).check(Some(6 * GIB), None).is_ok());
        assert!(need(2 * GIB, false, 8).check(None, None).is_ok());
    }

    #[test]
    fn host_memory_counts_every_local_rank_and_the_simulations_buffers() {
        // A GPU run needs only the staging on the host: 8 ranks × 128 MiB.
        let host = |b| Some((b, "test".to_string()));
        assert!(need(4 * GIB, false, 8).check(None, host(2 * GIB)).is_ok());
        assert!(
            need(4 * GIB, false, 8)
                .check(None, host(512 << 20))
                .is_err()
        );
        // On the simulation the buffers are host memory too.
        let e = need(GIB, true, 4)
            .check(Some(80 * GIB), host(4 * GIB))
            .unwrap_err();
        assert!(
            e.contains("8704 MiB of host memory") && e.contains("4 ranks × 2176 MiB"),
            "{e}"
        );
        assert!(e.contains("4096 MiB is available (test)"), "{e}");
    }

    #[test]
    fn meminfo_and_cgroups_are_read() {
        assert_eq!(
            mem_available("MemTotal: 10 kB\nMemAvailable:    2048 kB\n"),
            Some(2 << 20)
        );
        assert_eq!(mem_available("garbage"), None);
        let files = |p: &str| match p {
            "/sys/fs/cgroup/pod/memory.max" => Some("1073741824\n".to_string()),
            "/sys/fs/cgroup/pod/memory.current" => Some("73741824\n".to_string()),
            "/sys/fs/cgroup/free/memory.max" => Some("max\n".to_string()),
            "/sys/fs/cgroup/memory/job/memory.limit_in_bytes" => Some("2147483648".to_string()),
            "/sys/fs/cgroup/memory/job/memory.usage_in_bytes" => Some("147483648".to_string()),
            _ => None,
        };
        assert_eq!(cgroup_left("0::/pod\n", files).unwrap().0, 1_000_000_000);
        assert_eq!(cgroup_left("0::/free\n", files), None);
        assert_eq!(
            cgroup_left("4:memory:/job\n1:cpu:/x\n", files).unwrap().0,
            2_000_000_000
        );
        assert_eq!(cgroup_left("", files), None);
    }
}
