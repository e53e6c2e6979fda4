//! What this process may use on the node: `dev-shm`, `memlock` and `open-files`.

use super::parse::{parse_cap_eff, parse_limit, shm_mount_size};
use super::{Check, Node, Status, check, verdict};
use crate::ffi::os;

/// Below this hard open-files limit a many-rank all-to-all runs out of descriptors (NCCL
/// raises its soft limit to the hard one, and opens sockets per peer and channel).
pub const OPEN_FILES_WANTED: u64 = 65_536;
/// Below this hard open-files limit even small jobs do.
pub const OPEN_FILES_MIN: u64 = 1024;
/// Below this memlock limit NCCL's InfiniBand transport cannot register its buffers.
pub const MEMLOCK_MIN: u64 = 64 << 20;
/// `CAP_IPC_LOCK` in the CapEff mask: it lifts the memlock limit.
const CAP_IPC_LOCK: u64 = 1 << 14;

impl Node {
    pub(super) fn dev_shm(&self, out: &mut Vec<Check>) {
        let dir = self.path("/dev/shm");
        let Some((total, free)) = os::fs_space(&dir.display().to_string()) else {
            out.push(check(
                "dev-shm",
                Status::Fail,
                format!("{} does not exist", dir.display()),
                "NCCL's shared-memory transport needs /dev/shm",
            ));
            return;
        };
        let mounts = self.path("/proc/self/mounts");
        let text = std::fs::read_to_string(&mounts).unwrap_or_default();
        match shm_mount_size(&text) {
            // The mount's size is the limit; the free space is the file system's, within it.
            Ok(Some(size)) => out.push(shm_verdict(size, free.min(size), self.local_ranks)),
            Ok(None) => out.push(shm_verdict(total, free, self.local_ranks)),
            Err(bad) => out.push(check(
                "dev-shm",
                Status::Skipped,
                format!("{}: {bad}", mounts.display()),
                "could not read the size of /dev/shm: check `df -h /dev/shm`",
            )),
        }
    }

    /// A row of `<root>/proc/self/limits` as (soft, hard), or evidence of why not.
    fn limit(&self, row: &str) -> Result<(u64, u64), String> {
        let path = self.path("/proc/self/limits");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        parse_limit(&text, row).ok_or_else(|| {
            let line = text.lines().find(|l| l.starts_with(row)).unwrap_or("");
            format!("{}: no readable '{row}' row ('{line}')", path.display())
        })
    }

    /// CAP_IPC_LOCK from `<root>/proc/self/status`; `None` when unreadable.
    pub(super) fn cap_ipc_lock(&self) -> Option<bool> {
        let caps = parse_cap_eff(&self.read("/proc/self/status")?)?;
        Some(caps & CAP_IPC_LOCK != 0)
    }

    pub(super) fn memlock(&self, out: &mut Vec<Check>) {
        match self.limit("Max locked memory") {
            Ok((soft, _)) => out.push(memlock_verdict(soft, self.has_ib(), self.cap_ipc_lock())),
            Err(e) => out.push(check(
                "memlock",
                Status::Skipped,
                e,
                "could not read the locked-memory limit: check `ulimit -l` where the job runs",
            )),
        }
    }

    pub(super) fn open_files(&self, out: &mut Vec<Check>) {
        match self.limit("Max open files") {
            Ok((soft, hard)) => out.push(open_files_verdict(soft, hard)),
            Err(e) => out.push(check(
                "open-files",
                Status::Skipped,
                e,
                "could not read the open-files limit: check `ulimit -Hn` where the job runs",
            )),
        }
    }
}

/// The size of the segment NCCL's shared-memory transport creates per peer and channel set
/// (9637888 bytes in NCCL 2.2x logs).
pub const NCCL_SHM_SEGMENT: u64 = 9_637_888;

/// /dev/shm against a rough need: one 9.2 MiB segment per local peer in each direction, and
/// never less than 256 MiB (a pod's 64 MB default fails NCCL's SHM transport in the field).
pub fn shm_verdict(total: u64, free: u64, local_ranks: u32) -> Check {
    let n = local_ranks.max(1) as u64;
    let need = (n * n.saturating_sub(1) * 2 * NCCL_SHM_SEGMENT).max(256 << 20);
    let evidence = format!(
        "/dev/shm: {} MiB total, {} MiB free; about {} MiB wanted for {n} local ranks",
        total >> 20,
        free >> 20,
        need >> 20
    );
    let status = if free < need / 2 {
        Status::Fail
    } else if free < need {
        Status::Warn
    } else {
        Status::Ok
    };
    verdict(
        "dev-shm",
        status,
        evidence,
        "mount a memory-backed emptyDir at /dev/shm (Kubernetes) or raise --shm-size (Docker)",
    )
}

fn human_bytes(v: u64) -> String {
    match v {
        u64::MAX => "unlimited".into(),
        v if v >= 1 << 20 => format!("{} MiB", v >> 20),
        v => format!("{} KiB", v >> 10),
    }
}

/// memlock (soft limit, bytes) for NCCL's InfiniBand transport, which pins its buffers;
/// CAP_IPC_LOCK lifts the limit.
pub fn memlock_verdict(soft: u64, has_ib: bool, ipc_lock: Option<bool>) -> Check {
    let evidence = format!(
        "memlock (ulimit -l): {}; IPC_LOCK capability: {}; InfiniBand devices: {}",
        human_bytes(soft),
        ipc_lock.map_or("unknown", |c| if c { "yes" } else { "no" }),
        if has_ib { "yes" } else { "none" }
    );
    let status = if !has_ib || soft == u64::MAX || ipc_lock == Some(true) {
        Status::Ok
    } else if soft < MEMLOCK_MIN {
        Status::Fail
    } else {
        Status::Warn
    };
    verdict(
        "memlock",
        status,
        evidence,
        "NCCL's InfiniBand transport pins its buffers (ibv_reg_mr fails past the limit): set \
         ulimit -l unlimited (docker --ulimit memlock=-1, LimitMEMLOCK=infinity) or grant IPC_LOCK",
    )
}

/// The open-files limit. NCCL raises its soft limit to the hard one, so the hard one counts;
/// an all-to-all opens sockets per peer and channel.
pub fn open_files_verdict(soft: u64, hard: u64) -> Check {
    let show = |v: u64| {
        if v == u64::MAX {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let evidence = format!(
        "open files (ulimit -n): soft {}, hard {} (NCCL raises the soft limit to the hard one); \
         about {OPEN_FILES_WANTED} wanted for a many-rank all-to-all",
        show(soft),
        show(hard)
    );
    let status = if hard < OPEN_FILES_MIN {
        Status::Fail
    } else if hard < OPEN_FILES_WANTED {
        Status::Warn
    } else {
        Status::Ok
    };
    verdict(
        "open-files",
        status,
        evidence,
        "NCCL's proxy and socket transport run out of descriptors ('Accept failed Resource \
         temporarily unavailable', 'Too many open files', connection closed): raise the hard \
         limit (ulimit -Hn, docker --ulimit nofile=, LimitNOFILE=)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{
        CAPS_ALL, CAPS_NO_IPC_LOCK, IB_ACTIVE, bare_fixture, fixture, limits, one,
    };
    use crate::diagnose::doctor::node_for_tests;

    fn shm_with(mount_options: &str) -> Check {
        let mounts = format!("proc /proc proc rw 0 0\nshm /dev/shm tmpfs {mount_options} 0 0\n");
        let root = fixture(&[("proc/self/mounts", &mounts)]);
        one(&node_for_tests(&root, vec![]), Node::dev_shm)
    }

    #[test]
    fn seed_004_pod_with_64_mb_dev_shm() {
        let c = shm_with("rw,nosuid,nodev,noexec,relatime,size=65536k");
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.evidence.contains("64 MiB total") && c.hint.contains("emptyDir"));
        assert_eq!(shm_with("rw,size=800m").status, Status::Warn);
        assert_eq!(shm_with("rw,size=16g").status, Status::Ok);
        assert_eq!(shm_verdict(8 << 30, 8 << 30, 8).status, Status::Ok);
        assert_eq!(shm_verdict(1 << 30, 200 << 20, 2).status, Status::Warn);
    }

    #[test]
    fn dev_shm_missing_or_unreadable() {
        let c = one(&node_for_tests(&bare_fixture(&[]), vec![]), Node::dev_shm);
        assert_eq!(c.status, Status::Fail, "{c:?}");
        assert!(c.evidence.contains("does not exist"));
        let c = shm_with("rw,size=lots");
        assert_eq!(c.status, Status::Skipped, "{c:?}");
        assert!(c.evidence.contains("unreadable size 'lots'"), "{c:?}");
        // No size option: the file system's own numbers (whatever the test machine has).
        let c = shm_with("rw,nosuid");
        assert!(c.evidence.contains("MiB total"), "{c:?}");
        assert_eq!(
            shm_mount_size("shm /dev/shm tmpfs rw,size=50% 0 0"),
            Ok(None)
        );
        assert_eq!(shm_mount_size(""), Ok(None));
    }

    fn memlock_on(files: &[(&str, &str)]) -> Check {
        one(&node_for_tests(&fixture(files), vec![]), Node::memlock)
    }

    #[test]
    fn memlock_with_infiniband() {
        let small = limits("65536                65536", "1048576              1048576");
        let mid = limits("134217728            134217728", "1048576 1048576");
        let unlimited = limits("unlimited            unlimited", "1048576 1048576");
        let status = |l: &str, caps: &str| {
            memlock_on(&[
                ("proc/self/limits", l),
                ("proc/self/status", caps),
                IB_ACTIVE,
            ])
            .status
        };
        assert_eq!(status(&small, CAPS_NO_IPC_LOCK), Status::Fail);
        assert_eq!(status(&mid, CAPS_NO_IPC_LOCK), Status::Warn);
        assert_eq!(status(&unlimited, CAPS_NO_IPC_LOCK), Status::Ok);
        assert_eq!(status(&small, CAPS_ALL), Status::Ok, "IPC_LOCK lifts it");
        let c = memlock_on(&[("proc/self/limits", &small)]);
        assert_eq!(c.status, Status::Ok, "no InfiniBand: {c:?}");
        assert!(c.evidence.contains("64 KiB"), "{c:?}");
    }

    #[test]
    fn limits_that_cannot_be_read_are_skipped_with_evidence() {
        let garbage = "Max locked memory  lots  of\nMax open files  -1  x\n\u{0}\u{ff}";
        let root = fixture(&[("proc/self/limits", garbage)]);
        let node = node_for_tests(&root, vec![]);
        for f in [Node::memlock, Node::open_files] {
            let c = one(&node, f);
            assert_eq!(c.status, Status::Skipped, "{c:?}");
            assert!(c.evidence.contains("no readable") && c.evidence.contains("proc/self/limits"));
        }
        let c = one(&node_for_tests(&fixture(&[]), vec![]), Node::open_files);
        assert_eq!(c.status, Status::Skipped, "{c:?}");
        assert!(c.evidence.contains("cannot read"), "{c:?}");
    }

    #[test]
    fn seed_003_proxy_accept_fails_on_a_1024_descriptor_limit() {
        let l = limits("unlimited unlimited", "1024                 1024");
        let c = one(
            &node_for_tests(&fixture(&[("proc/self/limits", &l)]), vec![]),
            Node::open_files,
        );
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.evidence.contains("soft 1024, hard 1024"), "{c:?}");
        assert!(c.hint.contains("Resource temporarily unavailable"), "{c:?}");
        let status = |soft, hard| open_files_verdict(soft, hard).status;
        assert_eq!(status(256, 512), Status::Fail);
        assert_eq!(
            status(1024, 1 << 20),
            Status::Ok,
            "NCCL raises soft to hard"
        );
        assert_eq!(status(u64::MAX, u64::MAX), Status::Ok);
    }
}
