//! The five field reports behind nccl-smoke, reproduced on the simulation: each must be named
//! with the stage, cause and hint the seeds table gives.

mod common;
use common::*;
use nccl_smoke::stage::Stage;

fn seed_run(np: u32, extra: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let o = sim_run(np, extra, env);
    (code(&o), text(&o))
}

fn verdict(t: &str, stage: Stage, rank: u32) -> &str {
    let want = format!("FAIL at {stage} on rank {rank} ");
    t.lines()
        .find(|l| l.contains(&want))
        .unwrap_or_else(|| panic!("no '{want}' verdict:\n{t}"))
}

/// 000: two containers, one GPU each, both see it as device 0; cuMem import fails with
/// "invalid device ordinal" in the P2P transport.
#[test]
fn seed_000_cross_container_buffer_import() {
    let (code, t) = seed_run(
        2,
        &[],
        &[
            ("NCCL_SMOKE_SIM_FAULT", "import@1:error"),
            ("CUDA_VISIBLE_DEVICES", "0"),
        ],
    );
    assert_eq!(code, Stage::ConnectImport.exit_code() as i32, "{t}");
    let v = verdict(&t, Stage::ConnectImport, 1);
    assert!(v.contains("invalid device ordinal"), "{v}");
    assert!(
        v.contains("CUDA driver 12.8"),
        "driver version belongs in the verdict: {v}"
    );
    assert!(
        v.contains("NCCL_P2P_DISABLE=1") && v.contains("NCCL_CUMEM_ENABLE=0"),
        "{v}"
    );
    assert!(
        t.contains("share GPU"),
        "two ranks on one device should be warned about:\n{t}"
    );
}

/// 001: MPIJob over RDMA hangs at start in Open MPI's HCOLL: a rank never reaches the first
/// MPI collective.
#[test]
fn seed_001_hang_before_the_first_mpi_collective() {
    let (code, t) = seed_run(2, &[], &[("NCCL_SMOKE_SIM_FAULT", "launch@1:hang")]);
    assert_eq!(code, Stage::Launch.exit_code() as i32, "{t}");
    let v = verdict(&t, Stage::Launch, 1);
    assert!(
        v.contains("hung") && v.contains("HCOLL") && v.contains("coll_hcoll_enable 0"),
        "{v}"
    );
}

/// 002: GPUDirect RDMA disabled (old NCCL, nvidia_peermem): the run passes but slowly, and
/// nccl-smoke says why.
#[test]
fn seed_002_gdr_disabled_slow_run() {
    let (code, t) = seed_run(2, &[], &[("NCCL_SMOKE_SIM_FAULT", "net:slow=4")]);
    assert_eq!(code, 0, "{t}");
    let w = t
        .lines()
        .find(|l| l.starts_with("WARN at run on rank"))
        .unwrap_or_else(|| panic!("no GDR warning:\n{t}"));
    // Why, from this node's peer-memory files and what this release looks for (none here:
    // load the module); the old-NCCL-with-nvidia_peermem case itself is acted out by the real
    // 2.19.3 in tests/real_nccl_gdr.rs.
    assert!(
        w.contains("GPU Direct RDMA Disabled")
            && w.contains("looks for /sys/kernel/mm/memory_peers/nv_mem/version")
            && w.contains("modprobe nvidia_peermem"),
        "{w}"
    );
}

/// 003: all-to-all from isend/irecv; the proxy service cannot accept a connection (Resource
/// temporarily unavailable), connection closed.
#[test]
fn seed_003_proxy_connect() {
    let (code, t) = seed_run(
        4,
        &["--patterns", "send_recv"],
        &[("NCCL_SMOKE_SIM_FAULT", "proxy@2:error")],
    );
    assert_eq!(code, Stage::ConnectProxy.exit_code() as i32, "{t}");
    let v = verdict(&t, Stage::ConnectProxy, 2);
    assert!(
        v.contains("device") && v.contains("match"),
        "hint should say bind devices / pair sends: {v}"
    );
}

/// 004: "unhandled system error" that is really a too-small /dev/shm in a pod.
#[test]
fn seed_004_dev_shm_too_small() {
    let (code, t) = seed_run(2, &[], &[("NCCL_SMOKE_SIM_FAULT", "shm@0:error")]);
    assert_eq!(code, Stage::ConnectShm.exit_code() as i32, "{t}");
    let v = verdict(&t, Stage::ConnectShm, 0);
    assert!(
        v.contains("/dev/shm") && v.contains("MiB"),
        "the /dev/shm size belongs in the verdict: {v}"
    );
    assert!(v.contains("emptyDir"), "{v}");
}

/// 003 (its other face): a process out of file descriptors. The shell first closes every
/// descriptor it inherited above stderr (a CI runner or an interactive shell may pass some on:
/// two such let a run under `ulimit -n 17` pass on a machine without them), so the count is the
/// harness's own. From 0, 1 and 2 upwards, 17 descriptors get the three ranks through; 13 to 16
/// fail at init, with rank 0 out of descriptors (measured, 4 runs each); 12 and below sometimes
/// fail earlier or leave no results file. 14 sits in the middle. NCCL's RAS service, whose
/// listening socket would take one, is off. The simulated bootstrap root's accept then fails
/// with EMFILE, as NCCL's does (`socketTryAccept`); the peers see their connections close. The
/// verdict names the rank that ran out and why, not the ranks that only saw it go.
#[test]
fn seed_003_open_files_exhausted() {
    require_sim();
    let dir = scratch("emfile");
    let json = dir.join("run.json");
    let script = format!(
        "for fd in /proc/$$/fd/*; do n=${{fd##*/}}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done; \
         ulimit -n 14; NCCL_RAS_ENABLE=0 exec {} launch -n 3 run --backend sim -e 1K --timeout 5 --json {}",
        bin().display(),
        json.display()
    );
    let mut cmd = std::process::Command::new("bash");
    cmd.args(["-c", &script]);
    let o = bounded(cmd, 90);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Init.exit_code() as i32, "{t}");
    let doc = nccl_smoke::report::results::load(&json).unwrap();
    let v = &doc.verdict.line;
    assert!(v.contains("EMFILE") && v.contains("ulimit -Hn"), "{v}\n{t}");
    assert!(!v.contains("a peer rank closed its connections"), "{v}");
    assert!(
        doc.failures
            .iter()
            .any(|f| f.evidence.iter().any(|l| l.contains("Too many open files"))),
        "{t}"
    );
}
