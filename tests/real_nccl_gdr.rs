//! Seed 002 end to end: whether NCCL's InfiniBand transport uses GPUDirect RDMA depends only on
//! which peer-memory files exist, and which it looks for changed between releases. Each row of
//! that table is acted out with the real 2.19.3 and 2.32.3 over the stand-in libibverbs, the file
//! faked in a private mount namespace (a tmpfs over /sys/kernel/mm and /sys/module); `doctor`,
//! in the same namespace, must predict what NCCL then prints (`NET/IB : GPU Direct RDMA
//! Enabled|Disabled for HCA 0 'mlx5_0'`), and the channels must read `/GDRDMA` exactly when it is
//! enabled (NCCL_NET_GDR_LEVEL=SYS: the stand-in HCA has no PCI path, so no distance to the GPU).
//! DMA-BUF, the other way to GPUDirect RDMA, is varied too: an HCA whose kernel registers it
//! (`mlx5_0:dmabuf`), a driver that does not export it (`NCCL_SMOKE_SIM_DMA_BUF=0`), and
//! `NCCL_DMABUF_ENABLE=0`; and a GPU whose driver reports no GPUDirect RDMA
//! (`NCCL_SMOKE_SIM_GPU_DIRECT_RDMA=0`): the HCA line Enabled, no channel using it.
//! Needs root (mounts).

mod common;
mod stand_in;
use common::*;
use stand_in::*;
use std::path::Path;

/// The files, under /sys; `None` is a node without any.
const ROWS: [Option<&str>; 5] = [
    None,
    Some("kernel/mm/memory_peers/nv_mem/version"),
    Some("kernel/mm/memory_peers/nvidia-peermem/version"),
    Some("kernel/mm/memory_peers/nv_mem_nc/version"),
    Some("module/nvidia_peermem/version"),
];

/// The shell that fakes `row` in the namespace it runs in.
fn fake_sysfs(row: Option<&str>) -> String {
    let mut s = "mount -t tmpfs none /sys/kernel/mm && mount -t tmpfs none /sys/module".to_string();
    if let Some(f) = row {
        let dir = Path::new(f).parent().unwrap().display().to_string();
        s.push_str(&format!(" && mkdir -p /sys/{dir} && echo 1.0 > /sys/{f}"));
    }
    s
}

/// Whether NCCL printed GPUDirect RDMA as enabled for the HCA, and the transports it printed.
fn nccl_said(dir: &Path) -> (Vec<bool>, Vec<String>) {
    let mut gdr = Vec::new();
    let mut via = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        for l in std::fs::read_to_string(e.path()).unwrap().lines() {
            if l.contains("GPU Direct RDMA Enabled for HCA 0 'mlx5_0'") {
                gdr.push(true);
            }
            if l.contains("GPU Direct RDMA Disabled for HCA 0 'mlx5_0'") {
                gdr.push(false);
            }
            if l.contains(" NCCL INFO Channel ")
                && let Some((_, v)) = l.split_once(" via ")
            {
                via.push(v.trim().to_string());
            }
        }
    }
    (gdr, via)
}

/// `doctor`'s `gpudirect-rdma` evidence for release `lib`, run in a namespace faking `row`,
/// with the variables `env`.
fn doctor_said(lib: &Path, libs: &Path, row: Option<&str>, env: &[(&str, &str)]) -> String {
    let script = format!("{} && exec \"$@\"", fake_sysfs(row));
    let mut cmd = std::process::Command::new("unshare");
    cmd.args(["-m", "sh", "-c", &script, "sh"])
        .arg(bin())
        .args([
            "doctor",
            "--backend",
            "control-plane",
            "--json",
            "--nccl-lib",
        ])
        .arg(lib)
        .env("LD_LIBRARY_PATH", libs)
        .envs(env.iter().copied());
    let o = bounded(cmd, 60);
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    let doc: serde_json::Value =
        serde_json::from_str(&t).unwrap_or_else(|e| panic!("doctor --json: {e}\n{}", text(&o)));
    let check = doc["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["id"] == "gpudirect-rdma"))
        .unwrap_or_else(|| panic!("no gpudirect-rdma check:\n{t}"));
    check["evidence"].as_str().unwrap().to_string()
}

/// The DMA-BUF cases: (peer-memory file, variables). An HCA whose kernel registers DMA-BUF gives
/// GPUDirect RDMA with no module, unless the driver does not export it or NCCL is told not to.
const DMA_BUF_ROWS: [(Option<&str>, Env); 4] = [
    (None, &[]),
    (None, &[("NCCL_SMOKE_SIM_DMA_BUF", "0")]),
    (None, &[("NCCL_DMABUF_ENABLE", "0")]),
    (Some("module/nvidia_peermem/version"), &[]),
];

/// A GPU whose driver reports no GPUDirect RDMA support, with a module every release finds: the
/// HCA line reads Enabled, and no channel uses it.
const GPU_ROWS: [(Option<&str>, Env); 1] = [(
    Some("kernel/mm/memory_peers/nv_mem/version"),
    &[("NCCL_SMOKE_SIM_GPU_DIRECT_RDMA", "0")],
)];

type Env = &'static [(&'static str, &'static str)];

#[test]
fn doctor_predicts_what_each_release_decides_about_gpudirect_rdma() {
    let libs = ib_lib_dir();
    let no_dmabuf: Env = &[];
    let cases = ROWS
        .iter()
        .map(|&row| (row, "mlx5_0", no_dmabuf))
        .chain(
            DMA_BUF_ROWS
                .iter()
                .map(|&(row, env)| (row, "mlx5_0:dmabuf", env)),
        )
        .chain(GPU_ROWS.iter().map(|&(row, env)| (row, "mlx5_0", env)));
    for version in ["2.19.3", "2.32.3"] {
        let lib = wheel(version);
        for (row, hcas, vars) in cases.clone() {
            let name = format!(
                "{version} with {}, HCAs {hcas} {vars:?}",
                row.unwrap_or("no peer-memory file")
            );
            let logs = scratch("real-nccl-gdr");
            let file = logs.join("nccl.%h.%p.log").display().to_string();
            let mut env = NET_ONLY.to_vec();
            env.extend([
                ("NCCL_NET_GDR_LEVEL", "SYS"),
                ("NCCL_DEBUG", "INFO"),
                ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
                ("NCCL_DEBUG_FILE", &file),
                ("NCCL_SMOKE_SIM_IB_HCAS", hcas),
            ]);
            env.extend_from_slice(vars);
            let args = control_plane_args(&lib, "20");
            let before = fake_sysfs(row);
            let runner = ["unshare", "-m"];
            let extra = Extra {
                before: Some((&runner[..], before.as_str())),
                ..Extra::default()
            };
            let o = real_run_with(2, &args, &env, &libs, 120, &extra);
            let t = text(&o);
            assert_eq!(code(&o), 27, "{name}:\n{t}");
            let (gdr, via) = nccl_said(&logs);
            assert!(
                gdr.len() >= 2 && gdr.iter().all(|g| *g == gdr[0]),
                "{name}: NCCL said {gdr:?}\n{t}"
            );
            // NCCL's line for the HCA, and its channels: all with /GDRDMA or none, and none
            // where the HCA line says Disabled.
            let enabled = gdr[0];
            let channels = via.iter().all(|v| v.contains("/GDRDMA"));
            assert!(
                !via.is_empty()
                    && via.iter().all(|v| v.contains("/GDRDMA") == channels)
                    && (enabled || !channels),
                "{name}: enabled {enabled}, channels {via:?}"
            );
            let mut doctor_env = vec![("NCCL_SMOKE_SIM_IB_HCAS", hcas)];
            doctor_env.extend_from_slice(vars);
            let predicted = doctor_said(&lib, &libs, row, &doctor_env);
            let says = if enabled {
                "will report 'GPU Direct RDMA Enabled'"
            } else {
                "without GPUDirect RDMA"
            };
            let says_disabled = "will report 'GPU Direct RDMA Disabled'";
            assert!(
                predicted.contains(&format!("NCCL {version}"))
                    && (predicted.contains(says)
                        || (!enabled && predicted.contains(says_disabled))),
                "{name}: NCCL printed {}, doctor said: {predicted}",
                if enabled { "Enabled" } else { "Disabled" }
            );
            // Doctor says whether the channels use it, not only what the HCA line reads.
            assert_eq!(
                predicted.contains("no channel will use it"),
                enabled && !channels,
                "{name}: channels {via:?}, doctor said: {predicted}"
            );
            // Where DMA-BUF decides, doctor says so.
            if hcas.ends_with(":dmabuf") && row.is_none() {
                let why = if enabled {
                    "through DMA-BUF"
                } else if vars.iter().any(|(k, _)| *k == "NCCL_DMABUF_ENABLE") {
                    "NCCL_DMABUF_ENABLE=0"
                } else {
                    "CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED"
                };
                assert!(predicted.contains(why), "{name}: doctor said: {predicted}");
            }
        }
    }
}

/// Seed 002 in a run: nvidia_peermem loaded, NCCL 2.19.3. The run's warning says what `doctor`
/// predicts, from the files that release looks for.
#[test]
fn a_run_names_why_nccl_said_gpudirect_rdma_disabled() {
    let libs = ib_lib_dir();
    let lib = wheel("2.19.3");
    let args = ordinary_args(&lib);
    let before = fake_sysfs(Some("module/nvidia_peermem/version"));
    let runner = ["unshare", "-m"];
    let extra = Extra {
        before: Some((&runner[..], before.as_str())),
        ..Extra::default()
    };
    let o = real_run_with(2, &args, &NET_ONLY, &libs, 120, &extra);
    let t = text(&o);
    let warned: Vec<&str> = t
        .lines()
        .filter(|l| l.contains("WARN at run on rank ") && l.contains("GPU Direct RDMA Disabled"))
        .collect();
    assert!(
        warned.len() == 2
            && warned.iter().all(|l| l
                .contains("NCCL 2.19.3 will run InfiniBand without GPUDirect RDMA on this node")
                && l.contains("/sys/module/nvidia_peermem/version")
                && l.contains("use NCCL 2.23 or later")),
        "{t}"
    );
}
