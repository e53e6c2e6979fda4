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
    /// Device bytes the NCCL communicator took at init (free memory before init minus after),
    /// when both were read.
    pub nccl_took: Option<u64>,
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
                 size), and the GPU has {} free{}",
                mib(device),
                mib(self.send),
                mib(self.recv),
                mib(free),
                nccl_share(self.nccl_took),
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

/// What NCCL's communicator took at init, as a clause (empty when unknown).
fn nccl_share(took: Option<u64>) -> String {
    match took {
        Some(b) => format!(" after NCCL's communicator took {} at init", mib(b)),
        None => String::new(),
    }
}

/// Why nccl-smoke's buffers could not be allocated, with whose memory is whose: the sweep's
/// buffers (`send` + `recv`), what NCCL's communicator took at init, and what was free after.
pub fn alloc_cause(send: u64, recv: u64, nccl_took: Option<u64>, free: Option<u64>) -> String {
    let mut s = format!(
        "nccl-smoke's buffers ({} send + {} receive, at the largest size) could not be \
         allocated",
        mib(send),
        mib(recv)
    );
    if let Some(f) = free {
        s.push_str(&format!(": {} was free{}", mib(f), nccl_share(nccl_took)));
    }
    s
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

/// The first NCCL that lets ranks of one communicator share a GPU, and only with
/// `NCCL_MULTI_RANK_GPU_ENABLE=1` (`NCCL_PARAM(MultiRankGpuEnable, "MULTI_RANK_GPU_ENABLE", 0)`,
/// NVIDIA/nccl `src/init.cc` from v2.30.3-1); every earlier one fails init with "Duplicate GPU
/// detected : rank %d and rank %d both on CUDA device %lx" (`src/init.cc`, v2.19.3-1 to
/// v2.28.9-1; seen on an H200 with 2.28.9, `init.cc:904`).
pub const SHARED_GPU_FROM: (i32, &str) = (23003, "2.30.3");

/// One GPU that several ranks of the job share: its host, ordinal (as the first rank sees
/// it), UUID, and the ranks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedGpu {
    pub host: String,
    pub ordinal: i32,
    pub uuid: String,
    pub ranks: Vec<u32>,
}

impl std::fmt::Display for SharedGpu {
    /// `ranks 0, 1 on HOST share GPU 0 (GPU-…)`, as the warning and the failure say it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ranks: Vec<String> = self.ranks.iter().map(u32::to_string).collect();
        write!(
            f,
            "ranks {} on {} share GPU {} ({})",
            ranks.join(", "),
            self.host,
            self.ordinal,
            self.uuid
        )
    }
}

/// The GPUs more than one rank is on, by host and UUID, in rank order.
pub fn shared_gpus(ranks: &[crate::report::fingerprint::RankInfo]) -> Vec<SharedGpu> {
    let mut out: Vec<SharedGpu> = Vec::new();
    for r in ranks {
        match out
            .iter_mut()
            .find(|g| g.host == r.host && g.uuid == r.device.uuid)
        {
            Some(g) => g.ranks.push(r.rank),
            None => out.push(SharedGpu {
                host: r.host.clone(),
                ordinal: r.device.ordinal,
                uuid: r.device.uuid.clone(),
                ranks: vec![r.rank],
            }),
        }
    }
    out.retain(|g| g.ranks.len() > 1);
    out
}

/// Whether this NCCL lets ranks share a GPU: from [`SHARED_GPU_FROM`], with
/// `NCCL_MULTI_RANK_GPU_ENABLE` set to a non-zero number.
pub fn sharing_allowed(nccl_version_code: i32, multi_rank_env: Option<&str>) -> bool {
    nccl_version_code >= SHARED_GPU_FROM.0
        && multi_rank_env
            .and_then(|v| v.trim().parse::<i64>().ok())
            .is_some_and(|v| v != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(rank: u32, host: &str, uuid: &str) -> crate::report::fingerprint::RankInfo {
        crate::report::fingerprint::RankInfo {
            rank,
            host: host.into(),
            local_rank: 0,
            pid: 1,
            device: crate::ffi::cuda::DeviceInfo {
                ordinal: 0,
                name: "GPU".into(),
                uuid: uuid.into(),
                bus_id: "0000:00:06.0".into(),
                total_mem: 0,
                compute_capability: None,
            },
            setup: None,
        }
    }

    #[test]
    fn ranks_sharing_a_gpu_are_grouped_per_host() {
        let ranks = [
            on(0, "a", "GPU-1"),
            on(1, "a", "GPU-1"),
            on(2, "b", "GPU-1"),
            on(3, "a", "GPU-2"),
            on(4, "a", "GPU-1"),
        ];
        let shared = shared_gpus(&ranks);
        assert_eq!(shared.len(), 1, "{shared:?}");
        assert_eq!(
            (shared[0].host.as_str(), shared[0].ranks.clone()),
            ("a", vec![0, 1, 4])
        );
        assert!(shared_gpus(&ranks[2..4]).is_empty());
    }

    #[test]
    fn only_nccl_2_30_3_with_the_switch_lets_ranks_share_a_gpu() {
        assert!(!sharing_allowed(22809, Some("1")));
        assert!(!sharing_allowed(23003, None));
        assert!(!sharing_allowed(23003, Some("0")));
        assert!(!sharing_allowed(23203, Some("yes")));
        assert!(sharing_allowed(23003, Some("1")));
        assert!(sharing_allowed(23203, Some(" 1 ")));
    }

    const GIB: u64 = 1 << 30;

    fn need(send: u64, device_in_host: bool, local_ranks: u32) -> Need {
        Need {
            send,
            recv: send,
            staging: 2 * (64 << 20),
            device_in_host,
            local_ranks,
            nccl_took: None,
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
        // After init, what NCCL took is named beside what is left.
        let with_nccl = Need {
            nccl_took: Some(1536 << 20),
            ..need(4 * GIB, false, 8)
        };
        let e = with_nccl.check(Some(6 * GIB), None).unwrap_err();
        assert!(
            e.contains("6144 MiB free after NCCL's communicator took 1536 MiB at init"),
            "{e}"
        );
    }

    #[test]
    fn an_allocation_failure_says_whose_memory_is_whose() {
        let c = alloc_cause(4 * GIB, 4 * GIB, Some(700 << 20), Some(5 * GIB));
        assert_eq!(
            c,
            "nccl-smoke's buffers (4096 MiB send + 4096 MiB receive, at the largest size) could \
             not be allocated: 5120 MiB was free after NCCL's communicator took 700 MiB at init"
        );
        assert!(alloc_cause(1, 1, None, None).ends_with("could not be allocated"));
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
