//! `gpudirect-rdma`: what NCCL's InfiniBand transport will decide about GPUDirect RDMA on this
//! node, from the very files NCCL reads, by release (seed 002: "old NCCL + peermem").
//!
//! NCCL's check (`ncclIbGdrSupport`) only asks whether a peer-memory module's file exists; which
//! files it asks about changed twice (NVIDIA/nccl, read in the tags):
//! * v2.19.3-1 to v2.21.5-1 (`src/transport/net_ib.cc`): `/sys/kernel/mm/memory_peers/nv_mem/version`
//!   or `/sys/kernel/mm/memory_peers/nvidia-peermem/version`;
//! * v2.22.3-1: `…/nv_mem/version` or `…/nv_mem_nc/version` (the nvidia-peermem path dropped);
//! * v2.23.4-1 on (`src/transport/net_ib/common.cc` in v2.30.7-1): those two or
//!   `/sys/module/nvidia_peermem/version`.
//!
//! A peer-memory module is one way; DMA-BUF is the other (NVIDIA's recommended one): NCCL enables
//! GPUDirect RDMA for an HCA also when `NCCL_DMABUF_ENABLE` is not 0, the driver reports
//! `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED` and the kernel registers DMA-BUF memory on the HCA
//! (v2.19.3-1 src/graph/topo.cc: `gdrSupport = (ptrSupport & NCCL_PTR_CUDA) ||
//! (comm->dmaBufSupport && (ptrSupport & NCCL_PTR_DMABUF))`; src/init.cc `dmaBufSupported`;
//! `ncclIbDmaBufSupport`'s probe, asked here by `ffi::ibverbs::dma_buf_support`).
//!
//! Observed with the real 2.19.3 and 2.32.3 over fake files in a private mount namespace
//! (tests/real_nccl_gdr.rs): `NET/IB : GPU Direct RDMA Enabled|Disabled for HCA 0 'mlx5_0'` as
//! predicted here, and channels `via NET/IB/0/GDRDMA` exactly when enabled (with the GPU–NIC
//! distance allowed by `NCCL_NET_GDR_LEVEL`).

use super::{Check, Node, Status, check};
use crate::ffi::nccl;

const NV_MEM: &str = "/sys/kernel/mm/memory_peers/nv_mem/version";
const NV_MEM_NC: &str = "/sys/kernel/mm/memory_peers/nv_mem_nc/version";
const PEERMEM_LEGACY: &str = "/sys/kernel/mm/memory_peers/nvidia-peermem/version";
const PEERMEM_MODULE: &str = "/sys/module/nvidia_peermem/version";

/// Every file any release looks at.
const ALL: [&str; 4] = [NV_MEM, NV_MEM_NC, PEERMEM_LEGACY, PEERMEM_MODULE];

/// The files NCCL `version` (`ncclGetVersion`'s code) looks for; any one enables GPUDirect RDMA.
pub fn gdr_files(version: i32) -> &'static [&'static str] {
    match version {
        ..22200 => &[NV_MEM, PEERMEM_LEGACY],
        22200..22300 => &[NV_MEM, NV_MEM_NC],
        _ => &[NV_MEM, NV_MEM_NC, PEERMEM_MODULE],
    }
}

/// What NCCL `version` will print on a node where `present` files exist: enabled or not.
pub fn gdr_enabled(version: i32, present: &[&str]) -> bool {
    gdr_files(version).iter().any(|f| present.contains(f))
}

/// The peer-memory files (any release's) that exist under `root` (`/` on the node itself).
pub fn present_under(root: &std::path::Path) -> Vec<&'static str> {
    ALL.iter()
        .copied()
        .filter(|p| root.join(p.trim_start_matches('/')).exists())
        .collect()
}

/// `2.19.3` as `ncclGetVersion` codes it (21903).
pub fn version_code(version: &str) -> Option<i32> {
    let mut it = version.trim().split('.').map(|p| p.parse::<i32>().ok());
    let (major, minor, patch) = (it.next()??, it.next()??, it.next().flatten().unwrap_or(0));
    Some(major * 10000 + minor * 100 + patch)
}

/// An HCA's name and whether its kernel registers DMA-BUF memory (`None`: not opened to ask).
pub type HcaAnswer = (String, Option<bool>);

/// What NCCL's DMA-BUF check would find on this node; `None`: not asked (no driver, no
/// libibverbs, or a node read from a directory).
#[derive(Debug, Clone, Default)]
pub struct DmaBuf {
    /// `NCCL_DMABUF_ENABLE=0`.
    pub disabled: bool,
    /// Every GPU's driver reports DMA-BUF export.
    pub gpu: Option<bool>,
    /// The kernel registers DMA-BUF memory on every HCA; where not, each HCA's name and its
    /// answer (`Some(false)`: refused; `None`: the device could not be opened to ask).
    pub nic: Option<Result<(), Vec<HcaAnswer>>>,
}

impl DmaBuf {
    /// Asks the driver (for the devices `gpus`) and libibverbs, and reads `NCCL_DMABUF_ENABLE`
    /// through `env`.
    pub fn probe(gpus: &[i32], env: impl Fn(&str) -> Option<String>) -> DmaBuf {
        use crate::ffi::{cuda::DeviceInfo, ibverbs};
        let disabled = env("NCCL_DMABUF_ENABLE").is_some_and(|v| v.trim() == "0");
        let gpu = every_gpu(gpus, DeviceInfo::dma_buf_supported);
        let nic = ibverbs::dma_buf_support()
            .ok()
            .filter(|d| !d.is_empty())
            .map(|d| {
                let not: Vec<HcaAnswer> =
                    d.into_iter().filter(|(_, ok)| *ok != Some(true)).collect();
                if not.is_empty() { Ok(()) } else { Err(not) }
            });
        DmaBuf { disabled, gpu, nic }
    }

    fn usable(&self) -> bool {
        !self.disabled && self.gpu == Some(true) && matches!(self.nic, Some(Ok(())))
    }

    /// Why NCCL will not use DMA-BUF, in words; empty where it was not asked.
    fn why_not(&self) -> String {
        if self.disabled {
            return "DMA-BUF is off (NCCL_DMABUF_ENABLE=0)".into();
        }
        let mut why = Vec::new();
        if self.gpu == Some(false) {
            why.push(
                "the GPU driver does not report DMA-BUF export (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)"
                    .to_string(),
            );
        }
        if let Some(Err(not)) = &self.nic {
            let names = |answer: Option<bool>| -> Vec<&str> {
                not.iter()
                    .filter(|(_, a)| *a == answer)
                    .map(|(n, _)| n.as_str())
                    .collect()
            };
            let (refused, unopened) = (names(Some(false)), names(None));
            if !refused.is_empty() {
                why.push(format!(
                    "the kernel does not register DMA-BUF memory on {} (ibv_reg_dmabuf_mr: not supported)",
                    refused.join(", ")
                ));
            }
            if !unopened.is_empty() {
                why.push(format!(
                    "{} could not be opened to ask (ibv_open_device or ibv_alloc_pd failed)",
                    unopened.join(", ")
                ));
            }
        }
        if why.is_empty() {
            String::new()
        } else {
            format!("no DMA-BUF either: {}", why.join("; "))
        }
    }
}

const DMA_BUF_HINT: &str = "or DMA-BUF, which needs no module: a kernel 5.12+ with rdma-core 34+ and a \
                            driver that exports it (the open GPU kernel module)";

/// What a release decides about GPUDirect RDMA on a node whose peer-memory files are
/// `present` and whose DMA-BUF support is `dmabuf`, in words: whether it enables it, why, and
/// what to do when it does not.
pub struct Prediction {
    /// What NCCL's line for the HCAs will say: `GPU Direct RDMA Enabled`.
    pub enabled: bool,
    /// Whether its channels can use it (the GPU–NIC distance aside).
    pub channels: bool,
    pub said: String,
    pub hint: String,
}

/// See [`Prediction`]; `version` `None`: the newest rules (no library to ask).
pub fn predict(version: Option<i32>, present: &[&str], dmabuf: &DmaBuf) -> Prediction {
    let (v, which) = match version {
        Some(v) => (v, format!("NCCL {}", nccl::version_string(v))),
        None => (
            i32::MAX,
            "NCCL (2.23 or later; no libnccl was loaded)".to_string(),
        ),
    };
    let looks = gdr_files(v).join(", ");
    if gdr_enabled(v, present) {
        let found: Vec<&str> = present
            .iter()
            .copied()
            .filter(|f| gdr_files(v).contains(f))
            .collect();
        return Prediction {
            enabled: true,
            channels: true,
            said: format!(
                "{which} will report 'GPU Direct RDMA Enabled' for this node's HCAs: it finds {} \
                 (channels via NET/IB/…/GDRDMA where the GPU–NIC distance is within \
                 NCCL_NET_GDR_LEVEL)",
                found.join(", ")
            ),
            hint: String::new(),
        };
    }
    if dmabuf.usable() {
        let unseen = if present.is_empty() {
            String::new()
        } else {
            format!(
                " (the peer-memory module's {} is not one this release looks for)",
                present.join(", ")
            )
        };
        return Prediction {
            enabled: true,
            channels: true,
            said: format!(
                "{which} will report 'GPU Direct RDMA Enabled' for this node's HCAs through \
                 DMA-BUF: the driver exports it and the kernel registers it on every HCA, no \
                 peer-memory module needed{unseen}"
            ),
            hint: String::new(),
        };
    }
    let no_dmabuf = match dmabuf.why_not() {
        w if w.is_empty() => String::new(),
        w => format!("; {w}"),
    };
    if present.is_empty() {
        return Prediction {
            enabled: false,
            channels: false,
            said: format!(
                "{which} will report 'GPU Direct RDMA Disabled': no peer-memory module's file is \
                 on this node ({which} looks for {looks}){no_dmabuf}"
            ),
            hint: format!(
                "no peer-memory module: load nvidia_peermem (modprobe nvidia_peermem) for \
                 GPUDirect RDMA, {DMA_BUF_HINT}; without either, inter-node data bounces \
                 through host memory"
            ),
        };
    }
    // A module is loaded, but not where this release looks (seed 002).
    let hint = if present.contains(&PEERMEM_MODULE) {
        "use NCCL 2.23 or later (it also looks for /sys/module/nvidia_peermem), or MLNX_OFED's \
         peer-memory module (nv_peer_mem), whose file every release finds"
    } else {
        "use a release that looks for that file, or load nvidia_peermem with NCCL 2.23 or later"
    };
    Prediction {
        enabled: false,
        channels: false,
        said: format!(
            "{which} will run InfiniBand without GPUDirect RDMA on this node ('GPU Direct RDMA \
             Disabled'): a peer-memory module is loaded ({}), but {which} looks only for \
             {looks}{no_dmabuf}",
            present.join(", ")
        ),
        hint: format!("{hint}; {DMA_BUF_HINT}"),
    }
}

impl Node {
    pub(super) fn peermem(&self, out: &mut Vec<Check>, nccl_version: Option<i32>, gpus: &[i32]) {
        let present = present_under(&self.root);
        if !self.has_ib() {
            let listed = if present.is_empty() {
                "no peer-memory file".to_string()
            } else {
                present.join(", ")
            };
            out.push(check(
                "gpudirect-rdma",
                Status::Skipped,
                format!("{listed}; no InfiniBand device"),
                "no InfiniBand device on this node",
            ));
            return;
        }
        // Only the node itself can be asked (a directory read as a node has no driver).
        let real = self.root == std::path::Path::new("/");
        let dmabuf = if real {
            DmaBuf::probe(gpus, |k: &str| (self.env)(k))
        } else {
            DmaBuf::default()
        };
        let gpu_gdr = real
            .then(|| {
                every_gpu(
                    gpus,
                    crate::ffi::cuda::DeviceInfo::gpu_direct_rdma_supported,
                )
            })
            .flatten();
        let p = for_the_gpus(predict(nccl_version, &present, &dmabuf), gpu_gdr);
        let status = if p.channels { Status::Ok } else { Status::Warn };
        out.push(check("gpudirect-rdma", status, p.said, p.hint));
    }
}

/// Whether every GPU of `gpus` answers yes to `ask` (a driver attribute; an error is a no);
/// `None` when there is no GPU to ask.
fn every_gpu<E>(gpus: &[i32], ask: impl Fn(i32) -> Result<bool, E>) -> Option<bool> {
    (!gpus.is_empty()).then(|| gpus.iter().all(|&g| ask(g).unwrap_or(false)))
}

/// A prediction for the HCAs, completed by what the GPUs say (`gpu_gdr`: every GPU reports
/// `GPU_DIRECT_RDMA_SUPPORTED`; `None`: not asked): NCCL takes that attribute as the GPU's own
/// "gdr" (NVIDIA/nccl v2.19.3-1 src/net.cc `ncclGpuGdrSupport`, src/graph/paths.cc
/// `ncclTopoCheckGdr`), so with it 0 no channel uses GPUDirect RDMA although the HCA line reads
/// Enabled (observed with the real 2.19.3 and 2.32.3).
pub fn for_the_gpus(mut p: Prediction, gpu_gdr: Option<bool>) -> Prediction {
    if p.enabled && gpu_gdr == Some(false) {
        p.channels = false;
        p.said.push_str(
            "; but no channel will use it: the GPU driver reports no GPUDirect RDMA support for \
             this node's GPUs (CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED 0), which NCCL takes \
             as the GPU's own answer",
        );
        p.hint = "a GPU, driver or platform without GPUDirect RDMA (some virtualised or consumer \
                  GPUs): check `nvidia-smi -q` and the driver; inter-node data bounces through \
                  host memory"
            .into();
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{IB_ACTIVE, fixture};
    use crate::diagnose::doctor::node_for_tests;

    /// FACTS' table, observed with the real 2.19.3 and 2.32.3 (Enabled = true).
    #[test]
    fn each_release_finds_the_files_it_looks_for() {
        for (file, v219, v232) in [
            (NV_MEM, true, true),
            (PEERMEM_LEGACY, true, false),
            (NV_MEM_NC, false, true),
            (PEERMEM_MODULE, false, true),
        ] {
            assert_eq!(gdr_enabled(21903, &[file]), v219, "{file}");
            assert_eq!(gdr_enabled(23203, &[file]), v232, "{file}");
        }
        assert!(!gdr_enabled(21903, &[]) && !gdr_enabled(23203, &[]));
        assert_eq!(version_code("2.19.3"), Some(21903));
        assert_eq!(version_code("2.32.3"), Some(23203));
        assert_eq!(version_code("x"), None);
        assert!(!gdr_enabled(22203, &[PEERMEM_LEGACY]) && gdr_enabled(22203, &[NV_MEM_NC]));
        assert!(!gdr_enabled(22203, &[PEERMEM_MODULE]) && gdr_enabled(22304, &[PEERMEM_MODULE]));
    }

    #[test]
    fn seed_002_peermem_present_but_old_nccl() {
        let root = fixture(&[("sys/module/nvidia_peermem/version", "1.0"), IB_ACTIVE]);
        let node = node_for_tests(&root, vec![]);
        let mut out = Vec::new();
        node.peermem(&mut out, Some(21903), &[]);
        assert_eq!(out[0].status, Status::Warn, "{:?}", out[0]);
        assert!(
            out[0]
                .evidence
                .contains("NCCL 2.19.3 will run InfiniBand without GPUDirect RDMA")
        );
        assert!(out[0].hint.contains("NCCL 2.23 or later"));
        out.clear();
        node.peermem(&mut out, Some(22304), &[]);
        assert_eq!(out[0].status, Status::Ok);
        assert!(
            out[0]
                .evidence
                .contains("will report 'GPU Direct RDMA Enabled'")
        );
        out.clear();
        node_for_tests(&fixture(&[]), vec![]).peermem(&mut out, Some(21903), &[]);
        assert_eq!(out[0].status, Status::Skipped);
        out.clear();
        node_for_tests(&fixture(&[IB_ACTIVE]), vec![]).peermem(&mut out, Some(22304), &[]);
        assert_eq!(
            out[0].status,
            Status::Warn,
            "no module at all: {:?}",
            out[0]
        );
        assert!(out[0].hint.contains("modprobe nvidia_peermem"));
    }

    #[test]
    fn dma_buf_enables_it_without_a_module_unless_something_refuses() {
        let usable = DmaBuf {
            disabled: false,
            gpu: Some(true),
            nic: Some(Ok(())),
        };
        let p = predict(Some(21903), &[], &usable);
        assert!(
            p.enabled && p.said.contains("through DMA-BUF"),
            "{}",
            p.said
        );
        // Seed 002 with DMA-BUF: enabled all the same, the unseen module named.
        let p = predict(Some(21903), &[PEERMEM_MODULE], &usable);
        assert!(
            p.enabled && p.said.contains("not one this release looks for"),
            "{}",
            p.said
        );
        for (dmabuf, says) in [
            (
                DmaBuf {
                    disabled: true,
                    ..usable.clone()
                },
                "NCCL_DMABUF_ENABLE=0",
            ),
            (
                DmaBuf {
                    gpu: Some(false),
                    ..usable.clone()
                },
                "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED",
            ),
            (
                DmaBuf {
                    nic: Some(Err(vec![("mlx5_1".into(), Some(false))])),
                    ..usable.clone()
                },
                "on mlx5_1 (ibv_reg_dmabuf_mr",
            ),
            (
                DmaBuf {
                    nic: Some(Err(vec![("mlx5_2".into(), None)])),
                    ..usable.clone()
                },
                "mlx5_2 could not be opened to ask",
            ),
        ] {
            let p = predict(Some(23203), &[], &dmabuf);
            assert!(!p.enabled && p.said.contains(says), "{}", p.said);
            assert!(
                p.hint.contains("DMA-BUF, which needs no module"),
                "{}",
                p.hint
            );
        }
        // Not asked (a directory read as a node): the files alone, as before.
        let p = predict(Some(23203), &[], &DmaBuf::default());
        assert!(!p.enabled && !p.said.contains("DMA-BUF"), "{}", p.said);
    }

    #[test]
    fn a_gpu_without_gpudirect_rdma_uses_no_channel_for_it() {
        let p = for_the_gpus(
            predict(Some(23203), &[NV_MEM], &DmaBuf::default()),
            Some(false),
        );
        assert!(p.enabled && !p.channels, "{}", p.said);
        assert!(p.said.contains("no channel will use it") && p.hint.contains("nvidia-smi -q"));
        let p = for_the_gpus(
            predict(Some(23203), &[NV_MEM], &DmaBuf::default()),
            Some(true),
        );
        assert!(p.enabled && p.channels && p.hint.is_empty());
        let p = for_the_gpus(predict(Some(23203), &[], &DmaBuf::default()), Some(false));
        assert!(!p.enabled && !p.said.contains("no channel will use it"));
    }
}
