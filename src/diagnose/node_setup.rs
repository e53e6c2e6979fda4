//! What a rank reads of its node's setup before NCCL's init, for the ranks to compare
//! ([`super::consistency`]) and for `--expect auto` to know the network: the NVIDIA kernel
//! driver's version and each RDMA device's firmware and ports. Every reader takes the root of
//! the filesystem (`/` on a node), so that tests give it a tree of their own.

use crate::report::fingerprint::RdmaPort;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Under the simulation only: the directory a rank reads its node's setup from instead of `/`
/// (a test's fixture node: RDMA ports, a kernel driver). Never read with a real NCCL.
pub const SIM_SYSROOT_ENV: &str = "NCCL_SMOKE_SIM_SYSROOT";

/// Where a rank reads its node's setup: `/`, or with the simulated NCCL (`simulated`) the
/// directory [`SIM_SYSROOT_ENV`] names, when set.
pub fn root(simulated: bool) -> PathBuf {
    match std::env::var_os(SIM_SYSROOT_ENV) {
        Some(dir) if simulated && !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from("/"),
    }
}

/// Each RDMA device's firmware version under `root` (`sys/class/infiniband/DEV/fw_ver`).
pub fn nic_firmware(root: &Path) -> BTreeMap<String, String> {
    let Ok(devs) = std::fs::read_dir(root.join("sys/class/infiniband")) else {
        return BTreeMap::new();
    };
    devs.flatten()
        .filter_map(|d| {
            let fw = std::fs::read_to_string(d.path().join("fw_ver")).ok()?;
            Some((
                d.file_name().to_string_lossy().into_owned(),
                fw.trim().to_string(),
            ))
        })
        .collect()
}

/// The NVIDIA kernel driver's version (`570.86.15`) from `proc/driver/nvidia/version` under
/// `root`, whose first line reads `NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15
/// …` (or `… Open Kernel Module for x86_64  570.86.15 …`): its first word that is dotted
/// digits. Empty where there is no such file (no NVIDIA driver loaded).
pub fn kernel_driver(root: &Path) -> String {
    let Ok(text) = std::fs::read_to_string(root.join("proc/driver/nvidia/version")) else {
        return String::new();
    };
    text.lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .find(|w| {
            w.contains('.')
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .unwrap_or("")
        .to_string()
}

/// Each RDMA port under `root` (`sys/class/infiniband/DEV/ports/N/{rate,link_layer,state}`),
/// keyed `DEV/N`. The kernel writes `state` as `4: ACTIVE`; the name is kept. A port whose
/// files cannot be read is left out.
pub fn rdma_ports(root: &Path) -> BTreeMap<String, RdmaPort> {
    let mut out = BTreeMap::new();
    let Ok(devs) = std::fs::read_dir(root.join("sys/class/infiniband")) else {
        return out;
    };
    for dev in devs.flatten() {
        let Ok(ports) = std::fs::read_dir(dev.path().join("ports")) else {
            continue;
        };
        for port in ports.flatten() {
            let read = |f: &str| {
                std::fs::read_to_string(port.path().join(f))
                    .ok()
                    .map(|t| t.trim().to_string())
            };
            let (Some(rate), Some(state)) = (read("rate"), read("state")) else {
                continue;
            };
            let state = match state.split_once(':') {
                Some((_, name)) => name.trim().to_string(),
                None => state,
            };
            out.insert(
                format!(
                    "{}/{}",
                    dev.file_name().to_string_lossy(),
                    port.file_name().to_string_lossy()
                ),
                RdmaPort {
                    rate,
                    // A kernel that writes no link_layer leaves it empty (unknown): the
                    // comparison still sees the rate and the state.
                    link_layer: read("link_layer").unwrap_or_default(),
                    state,
                },
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(root: &Path, dev: &str, n: u32, rate: &str, layer: &str, state: &str) {
        let p = root.join(format!("sys/class/infiniband/{dev}/ports/{n}"));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("rate"), format!("{rate}\n")).unwrap();
        std::fs::write(p.join("link_layer"), format!("{layer}\n")).unwrap();
        std::fs::write(p.join("state"), format!("{state}\n")).unwrap();
    }

    #[test]
    fn firmware_is_read_per_device() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("sys/class/infiniband/mlx5_0");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("fw_ver"), "28.39.1002\n").unwrap();
        let fw = nic_firmware(root.path());
        assert_eq!(fw.get("mlx5_0").map(String::as_str), Some("28.39.1002"));
        assert!(nic_firmware(Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn the_kernel_driver_is_read_from_either_module_line() {
        let root = tempfile::tempdir().unwrap();
        let f = root.path().join("proc/driver/nvidia");
        std::fs::create_dir_all(&f).unwrap();
        for (line, want) in [
            (
                "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Wed Jan  1 00:00:00 UTC 2025",
                "570.86.15",
            ),
            (
                "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build  (dvs-builder@U16-I1-N08-12-3)",
                "580.65.06",
            ),
            ("NVRM version: something else", ""),
        ] {
            std::fs::write(
                f.join("version"),
                format!("{line}\nGCC version:  gcc 12.3\n"),
            )
            .unwrap();
            assert_eq!(kernel_driver(root.path()), want, "{line}");
        }
        assert_eq!(kernel_driver(Path::new("/nonexistent")), "");
    }

    #[test]
    fn ports_carry_rate_layer_and_state() {
        let root = tempfile::tempdir().unwrap();
        port(
            root.path(),
            "mlx5_0",
            1,
            "400 Gb/sec (4X NDR)",
            "InfiniBand",
            "4: ACTIVE",
        );
        port(
            root.path(),
            "mlx5_1",
            1,
            "200 Gb/sec (4X HDR)",
            "InfiniBand",
            "1: DOWN",
        );
        port(
            root.path(),
            "mlx5_2",
            1,
            "100 Gb/sec (4X EDR)",
            "Ethernet",
            "4: ACTIVE",
        );
        let p = rdma_ports(root.path());
        assert_eq!(p.len(), 3);
        let ndr = &p["mlx5_0/1"];
        assert_eq!(ndr.gbps(), Some(400.0));
        assert!(ndr.active());
        assert_eq!(ndr.line(), "400 Gb/sec (4X NDR), InfiniBand, ACTIVE");
        assert!(!p["mlx5_1/1"].active());
        assert_eq!(p["mlx5_2/1"].link_layer, "Ethernet");
        assert!(rdma_ports(Path::new("/nonexistent")).is_empty());
    }
}
