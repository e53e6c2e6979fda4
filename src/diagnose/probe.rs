//! Probes that repeat a step of NCCL's outside NCCL, so a finding rests on two kinds of
//! evidence: what NCCL said, and what the node does when asked directly.

use crate::ffi::os;
use std::path::Path;

/// The size of the segment NCCL's shared-memory transport creates per peer and channel set
/// (9637888 bytes in NCCL 2.2x logs).
pub const NCCL_SHM_SEGMENT: u64 = 9_637_888;

/// Creates and fully reserves a segment of `bytes` in `dir` (normally /dev/shm), then removes
/// it. Returns a line of evidence.
pub fn shm_segment(dir: &Path, bytes: u64) -> String {
    let space = os::fs_space(&dir.display().to_string())
        .map(|(t, f)| format!(" ({} MiB total, {} MiB free)", t >> 20, f >> 20))
        .unwrap_or_default();
    let path = dir.join(format!("nccl-smoke-probe.{}", std::process::id()));
    let result = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .and_then(|f| os::fallocate(&f, bytes));
    let _ = std::fs::remove_file(&path);
    match result {
        Ok(()) => format!(
            "probe: a {bytes}-byte segment in {}{space} could be created and reserved",
            dir.display()
        ),
        Err(e) => format!(
            "probe: a {bytes}-byte segment in {}{space} could NOT be created: {e}",
            dir.display()
        ),
    }
}

/// The peer-memory paths NCCL looks for, legacy first, and whether each exists under `root`.
pub const PEERMEM_PATHS: [&str; 3] = [
    "sys/kernel/mm/memory_peers/nv_mem/version",
    "sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "sys/module/nvidia_peermem/version",
];

/// A line of evidence about GPUDirect RDMA kernel support under `root` (normally `/`).
pub fn peermem(root: &Path) -> String {
    let present: Vec<String> = PEERMEM_PATHS
        .iter()
        .filter(|p| root.join(p).exists())
        .map(|p| format!("/{p}"))
        .collect();
    if present.is_empty() {
        "probe: no peer-memory module (nvidia_peermem / nv_peer_mem) is loaded on this node".into()
    } else {
        format!(
            "probe: peer memory present on this node: {}",
            present.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_probe_reports_success_and_failure() {
        let dir = std::env::temp_dir();
        assert!(shm_segment(&dir, 4096).contains("could be created"));
        let missing = Path::new("/nonexistent-dir-for-probe");
        assert!(shm_segment(missing, 4096).contains("could NOT be created"));
    }

    #[test]
    fn peermem_paths_are_read_under_a_root() {
        let root = std::env::temp_dir().join(format!("peermem-probe.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        assert!(peermem(&root).contains("no peer-memory module"));
        let p = root.join(PEERMEM_PATHS[2]);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "1.0\n").unwrap();
        assert!(peermem(&root).contains("/sys/module/nvidia_peermem/version"));
        let _ = std::fs::remove_dir_all(&root);
    }
}
