//! The real libnccl's NET/IB transport over the stand-in libibverbs (sim/ibverbs, one simulated
//! HCA `mlx5_0`), on the stand-in CUDA driver: P2P and SHM off, so that every channel goes
//! through the network. Init and connect over InfiniBand and RoCE on 2.19.3, 2.23.4 and 2.32.3,
//! the transport asserted from NCCL's own INFO lines; then IB faults acted out by NCCL's own code
//! (`NCCL_SMOKE_SIM_IB_FAULT`), each verdict naming the stage, the rank and the cause; RoCE's
//! GID chosen from the GID types in sysfs, and named when they cannot be read; a run whose
//! `NCCL_IB_HCA` selects no HCA, named with the devices that exist; GPUDirect RDMA through
//! DMA-BUF, with its two failures; and faults aimed at one HCA. The RoCE cases mount an overlay
//! on /sys/class in a private namespace: root.

mod common;
mod stand_in;
use common::*;
use stand_in::*;
use std::collections::BTreeSet;
use std::path::Path;

/// Variables a case adds.
type Env<'a> = &'a [(&'a str, &'a str)];

/// What NCCL printed in its log files.
#[derive(Default)]
struct Printed {
    /// The `NET/IB : Using …` lines.
    using: Vec<String>,
    /// The transports of its connection lines (`… [send] via NET/IB/0`).
    via: BTreeSet<String>,
    /// The GID indexes its queue pairs were given (`… GID 3 (…)`).
    gids: BTreeSet<u32>,
}

fn nccl_printed(dir: &Path) -> Printed {
    let mut p = Printed::default();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let t = std::fs::read_to_string(e.path()).unwrap();
        for l in t.lines() {
            if l.contains("NET/IB : Using [") {
                p.using.push(l.to_string());
            }
            if l.contains(" NCCL INFO Channel ")
                && let Some((_, v)) = l.split_once(" via ")
            {
                p.via.insert(v.trim().to_string());
            }
            if l.contains(" NCCL INFO NET/IB: ")
                && let Some((_, rest)) = l.split_once(" GID ")
                && let Some(n) = rest.split(' ').next().and_then(|n| n.parse().ok())
            {
                p.gids.insert(n);
            }
        }
    }
    p
}

/// The shell that gives the simulated RoCE port `mlx5_0:1` the GID types a ConnectX port
/// has in sysfs (0 and 2 RoCE v1, 1 and 3 RoCE v2; the stand-in's GIDs 2 and 3 are IPv4), in
/// the private mount namespace it runs in: an overlay on /sys/class over `dir`.
fn gid_types(dir: &Path) -> String {
    let d = dir.display();
    let types = "/sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types";
    format!(
        "mkdir -p {d}/up {d}/work && mount -t overlay overlay -o \
         lowerdir=/sys/class,upperdir={d}/up,workdir={d}/work /sys/class && mkdir -p {types} && \
         echo 'IB/RoCE v1' > {types}/0 && echo 'RoCE v2' > {types}/1 && \
         echo 'IB/RoCE v1' > {types}/2 && echo 'RoCE v2' > {types}/3"
    )
}

/// A control-plane run of 2 ranks over the HCAs `hcas`, NCCL's INFO log kept: the exit code,
/// the output, and what NCCL printed. `sysfs`: with [`gid_types`] (needs root).
fn control_plane(version: &str, hcas: &str, extra: Env, sysfs: bool) -> (i32, String, Printed) {
    let lib = wheel(version);
    let dir = scratch("real-nccl-ib");
    let logs = dir.join("logs");
    std::fs::create_dir_all(&logs).unwrap();
    let file = logs.join("nccl.%h.%p.log").display().to_string();
    let mut env: Vec<(&str, &str)> = NET_ONLY.to_vec();
    env.extend([
        ("NCCL_SMOKE_SIM_IB_HCAS", hcas),
        ("NCCL_DEBUG", "INFO"),
        ("NCCL_DEBUG_SUBSYS", "INIT,NET"),
        ("NCCL_DEBUG_FILE", &file),
    ]);
    env.extend_from_slice(extra);
    let before = gid_types(&dir.join("sysfs"));
    let runner = ["unshare", "-m"];
    let around = Extra {
        before: sysfs.then_some((&runner[..], before.as_str())),
        ..Extra::default()
    };
    let args = control_plane_args(&lib, "20");
    let o = real_run_with(2, &args, &env, &ib_lib_dir(), 120, &around);
    (code(&o), text(&o), nccl_printed(&logs))
}

#[test]
fn every_release_connects_over_infiniband_and_roce() {
    // RoCE as on a host: the port's GID types in sysfs, NCCL_IB_GID_INDEX unset. From 2.21 NCCL
    // picks the RoCE v2 GID of an IPv4 address itself (3); 2.19.3 takes GID 0 unless told.
    let links: [(&str, &str, bool); 2] =
        [("IB", "mlx5_0:ib", false), ("RoCE", "mlx5_0:roce", true)];
    for version in ["2.19.3", "2.23.4", "2.32.3"] {
        for (link, hcas, sysfs) in links {
            let name = format!("{version} over {link}");
            let (c, t, p) = control_plane(version, hcas, &[], sysfs);
            assert!(
                p.using.len() == 2
                    && p.using
                        .iter()
                        .all(|l| l.contains(&format!("[0]mlx5_0:1/{link}"))),
                "{name}: NCCL's NET/IB lines: {:?}\n{t}",
                p.using
            );
            if link == "RoCE" {
                let gid = if version == "2.19.3" { 0 } else { 3 };
                assert_eq!(p.gids, BTreeSet::from([gid]), "{name}:\n{t}");
            }
            let via = p.via;
            // Every channel over the HCA (2.19 adds `NET/IB/0/Shared` for send/receive), and no
            // GPUDirect RDMA: no peer-memory module, so no /GDRDMA on any channel.
            assert!(
                via.contains("NET/IB/0")
                    && via
                        .iter()
                        .all(|v| v.starts_with("NET/IB/0") && !v.contains("GDRDMA")),
                "{name}: {via:?}\n{t}"
            );
            let label = format!("REAL NCCL {version} · SIMULATED GPUS");
            if version == "2.23.4" {
                // As over NET/Socket (tests/control_plane.rs): 2.23.4's ncclCommAbort waits for
                // the network proxies' work that no kernel will do.
                assert_eq!(c, 24, "{name}:\n{t}");
                assert!(
                    t.contains(&format!("VERDICT: [{label}] FAIL at finalize on "))
                        && t.contains("in ncclCommAbort"),
                    "{name}:\n{t}"
                );
            } else {
                assert_eq!(c, 27, "{name}:\n{t}");
                assert!(
                    t.lines().any(|l| l.starts_with("CONTROL PLANE OK — ")
                        && l.contains(&format!(
                            "transports: {};",
                            via.iter().cloned().collect::<Vec<_>>().join(", ")
                        ))),
                    "{name}:\n{t}"
                );
            }
        }
    }
}

/// One ordinary run (`nccl-smoke run --nccl-lib`) of 2 ranks over the simulated HCA.
fn ib_run(version: &str, env: &[(&str, &str)]) -> (i32, String) {
    let libs = ib_lib_dir();
    let lib = wheel(version);
    let mut all: Vec<(&str, &str)> = NET_ONLY
        .into_iter()
        .filter(|(k, _)| env.iter().all(|(e, _)| e != k))
        .collect();
    all.extend_from_slice(env);
    let args = ordinary_args(&lib);
    let o = real_run(2, &args, &all, &libs, 180);
    let t = text(&o);
    assert!(!t.contains("panicked"), "{version}: {t}");
    (code(&o), t)
}

/// The verdict names rank 1 alone, never rank 0 (the victim).
fn only_rank_1(t: &str, what: &str) {
    let v = verdict(t);
    assert!(v.contains(" on rank 1 (host "), "{what}: {v}");
    assert!(
        !v.contains("rank 0") && !v.contains(" on all "),
        "{what}: {v}"
    );
}

#[test]
fn ib_faults_acted_out_by_nccl_are_named_on_the_rank_they_struck() {
    for version in ["2.19.3", "2.32.3"] {
        let label = format!("VERDICT: [REAL NCCL {version} · SIMULATED GPUS] FAIL at");

        // A queue pair refused on its way to RTR (what a wrong GID index gives): 2.19 connects
        // inside ncclCommInitRank, 2.32 at the first collective.
        let what = format!("{version} ibv_modify_qp EINVAL");
        let fault = ("NCCL_SMOKE_SIM_IB_FAULT", "ibv_modify_qp@1#2..2:EINVAL");
        let (c, t) = ib_run(version, &[fault]);
        let (stage, exit) = if version == "2.19.3" {
            ("init", 16)
        } else {
            ("connect:net", 21)
        };
        assert_eq!(c, exit, "{what}: {t}");
        assert!(
            verdict(&t).starts_with(&format!("{label} {stage} on rank 1 (host ")),
            "{what}: {t}"
        );
        only_rank_1(&t, &what);
        // NCCL's last error is whichever WARN came last (its proxy's, at times): the verdict
        // quotes NCCL's own line for the failed call among its evidence.
        assert!(
            verdict(&t).contains("NCCL_IB_GID_INDEX")
                && t.lines().any(|l| l.starts_with("#   evidence: ")
                    && l.contains("Call to ibv_modify_qp failed")),
            "{what}: {t}"
        );

        // A completion with IBV_WC_RETRY_EXC_ERR (or flushed) on rank 1: the path to the peer
        // NCCL names, not a peer that left.
        for (status, named) in [
            ("12", "IBV_WC_RETRY_EXC_ERR (12)"),
            ("5", "IBV_WC_WR_FLUSH_ERR (5)"),
        ] {
            let what = format!("{version} completion error {status}");
            let spec = format!("completion@1:{status}");
            let (c, t) = ib_run(version, &[("NCCL_SMOKE_SIM_IB_FAULT", &spec)]);
            assert_eq!(c, 21, "{what}: {t}");
            let v = verdict(&t);
            assert!(
                v.starts_with(&format!("{label} connect:net on rank 1 (host ")),
                "{what}: {v}"
            );
            only_rank_1(&t, &what);
            assert!(
                v.contains("the network path between this rank (host ")
                    && v.contains("and peer ")
                    && v.contains(named)
                    && !v.contains("a peer rank closed its connections"),
                "{what}: {v}"
            );
        }

        // A fatal asynchronous event on one of rank 1's queue pairs.
        let what = format!("{version} QP fatal");
        // It strikes at rank 1's first transfer, the first collective's: named when NCCL
        // reports it, at connect (21) or once the collective is under way (run, 22).
        let (c, t) = ib_run(
            version,
            &[("NCCL_SMOKE_SIM_IB_FAULT", "async@1#1..1:qp-fatal")],
        );
        assert!(c == 21 || c == 22, "{what}: {t}");
        only_rank_1(&t, &what);
        // 2.19 prints the event from a thread of its own: when that line is not yet in the log
        // as the rank reports, the flushed completions it caused name the queue pair's path.
        let v = verdict(&t);
        assert!(
            v.contains("this rank's HCA raised a fatal asynchronous event")
                || (version == "2.19.3" && v.contains("IBV_WC_WR_FLUSH_ERR (5)")),
            "{what}: {t}"
        );
    }
}

#[test]
fn a_modify_qp_timeout_is_retried_by_2_32_and_named_by_2_19() {
    // NCCL 2.32 retries ibv_modify_qp on ETIMEDOUT (misc/ibvwrap.cc); the run then fails
    // only where every run on simulated GPUs does, at verify (no kernel ran).
    let dir = scratch("real-nccl-ib-retry");
    let file = dir.join("nccl.%h.%p.log").display().to_string();
    let (c, t) = ib_run(
        "2.32.3",
        &[
            ("NCCL_SMOKE_SIM_IB_FAULT", "ibv_modify_qp@1#2..2:ETIMEDOUT"),
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_SUBSYS", "NET"),
            ("NCCL_DEBUG_FILE", &file),
        ],
    );
    let retried = std::fs::read_dir(&dir).unwrap().flatten().any(|e| {
        std::fs::read_to_string(e.path())
            .unwrap()
            .contains("Call to ibv_modify_qp failed with 110 Connection timed out")
    });
    assert!(retried, "no retry in NCCL's log:\n{t}");
    assert_eq!(c, 23, "{t}");
    assert!(verdict(&t).contains("FAIL at verify on rank 0"), "{t}");
    // 2.19.3 does not retry: init fails on rank 1, in NCCL's own words about a timeout.
    let (c, t) = ib_run(
        "2.19.3",
        &[("NCCL_SMOKE_SIM_IB_FAULT", "ibv_modify_qp@1#2..2:ETIMEDOUT")],
    );
    assert_eq!(c, 16, "{t}");
    let v = verdict(&t);
    assert!(
        v.contains("FAIL at init on rank 1 (host ")
            && v.contains("timed out (ETIMEDOUT)")
            && v.contains("NCCL_CROSS_NIC=0"),
        "{v}"
    );
    only_rank_1(&t, "2.19.3 ibv_modify_qp ETIMEDOUT");
}

#[test]
fn an_ib_hca_that_selects_nothing_is_named_with_the_devices_there_are() {
    let warns = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| {
                l.contains("asks for InfiniBand/RoCE, but NCCL runs its network over TCP sockets")
            })
            .map(str::to_string)
            .collect()
    };
    // A name that matches no device: the devices that exist are listed.
    let (_, t) = ib_run("2.32.3", &[("NCCL_IB_HCA", "mlx5_9")]);
    let w = warns(&t);
    assert!(
        !w.is_empty()
            && w.iter().all(|l| l.contains("NCCL_IB_HCA=mlx5_9")
                && l.contains("the RDMA devices on this host: mlx5_0")),
        "{t}"
    );
    // A host without HCAs (and one whose only port is down): NCCL falls back to sockets.
    for (hcas, says) in [
        ("", "libibverbs lists no RDMA device on this host"),
        ("mlx5_0:down", "the RDMA devices on this host: mlx5_0"),
    ] {
        let (_, t) = ib_run("2.19.3", &[("NCCL_SMOKE_SIM_IB_HCAS", hcas)]);
        let w = warns(&t);
        assert!(
            !w.is_empty() && w.iter().all(|l| l.contains(says)),
            "{hcas}: {t}"
        );
        assert!(t.contains("NCCL INFO Using network Socket"), "{hcas}: {t}");
    }
}

#[test]
fn dma_buf_gives_gpudirect_rdma_and_its_failures_are_named_with_the_fix_that_works() {
    // An HCA whose kernel registers DMA-BUF, and no peer-memory module: NCCL uses GPUDirect RDMA
    // through DMA-BUF (NCCL_NET_GDR_LEVEL=SYS: the stand-in HCA has no PCI path, so no distance
    // to the GPU).
    let hcas = ("NCCL_SMOKE_SIM_IB_HCAS", "mlx5_0:dmabuf");
    let gdr_level = ("NCCL_NET_GDR_LEVEL", "SYS");
    for version in ["2.19.3", "2.32.3"] {
        let (c, t, p) = control_plane(version, hcas.1, &[gdr_level], false);
        let via = p.via;
        assert_eq!(c, 27, "{version}: {t}");
        assert!(
            !via.is_empty() && via.iter().all(|v| v.starts_with("NET/IB/0/GDRDMA")),
            "{version}: {via:?}\n{t}"
        );

        // The NIC refuses the DMA-BUF registration (the probe passed: the call after it), or
        // the GPU driver will not export the buffer: each named on rank 1, where 2.19 connects
        // (inside init) and 2.32 does (at the first collective).
        let (stage, exit) = if version == "2.19.3" {
            ("init", 16)
        } else {
            ("connect:net", 21)
        };
        for (fault, cause) in [
            (
                (
                    "NCCL_SMOKE_SIM_IB_FAULT",
                    "ibv_reg_dmabuf_mr@1#2:EOPNOTSUPP",
                ),
                "registering GPU memory with the NIC through dmabuf failed",
            ),
            (
                (
                    "NCCL_SMOKE_SIM_CUDA_FAULT",
                    "cuMemGetHandleForAddressRange@1:CUDA_ERROR_NOT_SUPPORTED",
                ),
                "would not export this rank's network buffer as a DMA-BUF",
            ),
        ] {
            let what = format!("{version} {}", fault.1);
            let (c, t) = ib_run(version, &[hcas, gdr_level, fault]);
            assert_eq!(c, exit, "{what}: {t}");
            let v = verdict(&t);
            assert!(
                v.contains(&format!("FAIL at {stage} on rank 1 (host "))
                    && v.contains(cause)
                    && v.contains("NCCL_DMABUF_ENABLE=0"),
                "{what}: {v}"
            );
            only_rank_1(&t, &what);
        }

        // The hint, taken: NCCL_DMABUF_ENABLE=0 connects without DMA-BUF (and, with no
        // peer-memory module, without GPUDirect RDMA), the refusing NIC never asked.
        let fault = ("NCCL_SMOKE_SIM_IB_FAULT", "ibv_reg_dmabuf_mr#2:EOPNOTSUPP");
        let off = ("NCCL_DMABUF_ENABLE", "0");
        let (c, t, p) = control_plane(version, hcas.1, &[gdr_level, fault, off], false);
        let via = p.via;
        assert_eq!(c, 27, "{version} NCCL_DMABUF_ENABLE=0: {t}");
        assert!(
            via.contains("NET/IB/0") && via.iter().all(|v| !v.contains("GDRDMA")),
            "{version} NCCL_DMABUF_ENABLE=0: {via:?}\n{t}"
        );
    }
}

#[test]
fn a_fault_aimed_at_one_hca_strikes_that_hca_alone() {
    // Two HCAs, NCCL told to use mlx5_1: a fault aimed at mlx5_0 never strikes (the run gets to
    // verify, where every run on simulated GPUs stops: no kernel ran); aimed at mlx5_1, it is
    // the one NCCL reports, on that device.
    let hcas = ("NCCL_SMOKE_SIM_IB_HCAS", "mlx5_0,mlx5_1");
    let select = ("NCCL_IB_HCA", "mlx5_1");
    let elsewhere = ("NCCL_SMOKE_SIM_IB_FAULT", "ibv_modify_qp/mlx5_0@1:EINVAL");
    let (c, t) = ib_run("2.32.3", &[hcas, select, elsewhere]);
    assert_eq!(c, 23, "{t}");
    assert!(verdict(&t).contains("FAIL at verify on rank 0"), "{t}");
    let here = (
        "NCCL_SMOKE_SIM_IB_FAULT",
        "ibv_modify_qp/mlx5_1@1#2..2:EINVAL",
    );
    let (c, t) = ib_run("2.32.3", &[hcas, select, here]);
    assert_eq!(c, 21, "{t}");
    let v = verdict(&t);
    assert!(
        v.contains("FAIL at connect:net on rank 1 (host ") && v.contains("on dev mlx5_1:1"),
        "{v}"
    );
    only_rank_1(&t, "ibv_modify_qp on mlx5_1");
}

#[test]
fn roce_gid_types_nccl_cannot_read_are_named() {
    // No GID types in sysfs (a container without the host's /sys/class/infiniband), no
    // NCCL_IB_GID_INDEX: 2.23.4 fails every rank's connection; 2.32.3 leaves the HCA out and runs
    // over sockets, which the run says twice (the WARN's advice, and NCCL_IB_HCA not honoured).
    let roce = ("NCCL_SMOKE_SIM_IB_HCAS", "mlx5_0:roce");
    let (c, t) = ib_run("2.23.4", &[roce]);
    assert_eq!(c, 21, "{t}");
    let v = verdict(&t);
    // Every rank fails on its own; the verdict names every rank, or the first one to report.
    assert!(
        v.contains("FAIL at connect:net on ")
            && v.contains("could not read the GID types")
            && v.contains("NCCL_IB_GID_INDEX"),
        "{v}"
    );
    let (c, t) = ib_run("2.32.3", &[roce]);
    assert_eq!(c, 23, "{t}");
    for says in [
        "2.32 leaves the HCA out and its network goes over sockets",
        "could not read the RoCE GID types from sysfs to choose a GID index",
    ] {
        let warned = t
            .lines()
            .filter(|l| l.contains(" WARN at ") && l.contains(says))
            .count();
        assert_eq!(warned, 2, "{says}:\n{t}");
    }
}
