//! The MPIJob rehearsal: the image built from the Dockerfile (scripts/image.sh, podman), one
//! launcher and two worker containers, each in its own network-namespace host on one bridge
//! (scripts/netns/cluster.sh), set up the way deploy/k8s/mpijob.yaml sets up its pods:
//! - the workers run the manifest's command (sshd) with the job's key pair from a folder
//!   standing in for the Secret at the operator's sshAuthMountPath (/root/.ssh), and are
//!   started on only when the readiness probe's port answers;
//! - the launcher gets the operator's hostfile (OMPI_MCA_orte_default_hostfile, one line per
//!   worker with slotsPerWorker slots), the manifest's environment, and runs the manifest's
//!   mpirun command with its `-x` list, on 2 workers x 2 slots and the simulation backend;
//! - the volumes are where the manifest mounts them (/dev/shm, /logs and /results on the
//!   workers).
//!
//! Then one thing at a time is broken, and the verdict must name the stage and the host.
//! What only a real cluster shows (the operator's controller, the GPU and RDMA device plugins)
//! is not rehearsed here.

mod common;
mod rehearsal;
use common::*;
use rehearsal::*;

/// The run's own flags: the simulation, small sizes.
const SIM: &[&str] = &["--backend", "sim", "-e", "64K", "-n", "2", "-w", "1"];

/// The first line of `t` that `is` picks; a failure shows `t` whole.
fn line<'a>(t: &'a str, what: &str, is: impl Fn(&str) -> bool) -> &'a str {
    t.lines()
        .find(|l| is(l))
        .unwrap_or_else(|| panic!("no {what}:\n{t}"))
}

#[test]
fn mpijob_rehearsal_passes_on_two_workers_and_writes_results_on_the_first() {
    let m = manifest();
    let mut r = Rehearsal::up("mpja");
    r.workers(&m, Break::Nothing);
    let o = r.launch(&m, SIM);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    let pass = line(&t, "PASS", |l| l.starts_with("PASS"));
    assert!(
        pass.contains("[SIMULATED]") && pass.contains("on 4 ranks, 2 host(s)"),
        "{pass}"
    );
    for i in 0..WORKERS {
        assert!(t.contains(&Rehearsal::worker_name(i)), "{t}");
    }
    // Rank 0 is on the first worker: the results file is on its /results volume.
    let json = r.path("results-w0/run.json");
    let v = run1(&["verdict", json.to_str().unwrap()], &[]);
    assert_eq!(code(&v), 0, "{}", text(&v));
    // NCCL's debug files, one per process, on the workers' /logs.
    let logs = std::fs::read_dir(r.path("logs-w0")).unwrap().count()
        + std::fs::read_dir(r.path("logs-w1")).unwrap().count();
    assert_eq!(logs, WORKERS * SLOTS, "one NCCL_DEBUG_FILE per rank");
}

#[test]
fn mpijob_rehearsal_names_the_worker_whose_sshd_is_down() {
    let m = manifest();
    let mut r = Rehearsal::up("mpjb");
    r.workers(&m, Break::WorkerSshd);
    let o = r.launch(&m, SIM);
    assert_ne!(code(&o), 0, "{}", text(&o));
    let (c, e) = r.explain(&o);
    let verdict = e
        .lines()
        .skip_while(|l| !l.starts_with("VERDICT"))
        .take(3)
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        verdict.starts_with("VERDICT FAIL at launch [mpi]")
            && verdict.contains(&format!("; host {}", Rehearsal::worker_name(1)))
            && e.contains("sshd running on the node"),
        "{e}"
    );
    assert_eq!(
        c,
        nccl_smoke::stage::Stage::Launch.exit_code() as i32,
        "{e}"
    );
}

#[test]
fn mpijob_rehearsal_says_the_results_volume_is_read_only_and_where() {
    let m = manifest();
    let mut r = Rehearsal::up("mpjc");
    r.workers(&m, Break::ResultsReadOnly);
    let o = r.launch(&m, SIM);
    let t = text(&o);
    assert_ne!(code(&o), 0, "{t}");
    let said = line(&t, "word about the results file", |l| {
        l.contains("--json /results/run.json")
    });
    assert!(
        said.contains("Read-only file system")
            && said.contains(&format!("rank 0, host {}", Rehearsal::worker_name(0))),
        "{said}"
    );
    // Refused before any measurement: nothing was measured, so nothing is lost; the launcher's
    // exit code is the usage error's.
    assert_eq!(code(&o), nccl_smoke::stage::exit::USAGE as i32, "{t}");
    assert!(
        !t.contains("PASS") && !t.lines().any(|l| l.contains("GB/s")),
        "{t}"
    );
}

/// The derived image with a real NCCL (a pip wheel's libnccl.so.2 where image.sh puts it): its
/// control plane runs over the simulated driver across the two worker hosts, NET/Socket between
/// them and a local transport inside each.
#[test]
fn mpijob_rehearsal_runs_the_real_nccl_control_plane_across_the_workers() {
    let m = manifest();
    let (mut r, version) = Rehearsal::up_real("mpjd");
    r.workers(&m, Break::Nothing);
    let o = r.launch(
        &m,
        &[
            "--backend",
            "control-plane",
            "--nccl-lib",
            "/opt/nccl/lib/libnccl.so.2",
        ],
    );
    let t = text(&o);
    let ok = line(&t, "CONTROL PLANE OK", |l| {
        l.starts_with("CONTROL PLANE OK")
    });
    assert!(
        ok.contains(&format!("REAL NCCL {version}")) && ok.contains("on 4 rank(s), 2 host(s)"),
        "{ok}"
    );
    assert!(ok.contains("NET/Socket"), "{ok}");
    assert!(
        ok.contains("SHM") || ok.contains("P2P"),
        "a local transport inside a worker: {ok}"
    );
    assert_eq!(code(&o), 27, "{t}");
}

/// The launcher's `-x NCCL_SOCKET_IFNAME` gone, on hosts that also have an interface whose
/// subnet does not route between them (`ib0`, as an RDMA network's IPoIB): NCCL on rank 0's host
/// advertises that one, the ranks on the other worker cannot reach it, and the verdict names the
/// stage, the host and the variable, for the real NCCL and the simulation alike.
#[test]
fn mpijob_rehearsal_names_a_missing_socket_ifname() {
    let mut m = manifest();
    let at = m
        .launcher
        .iter()
        .position(|a| a == "NCCL_SOCKET_IFNAME")
        .unwrap();
    assert_eq!(m.launcher[at - 1], "-x");
    m.launcher.drain(at - 1..=at);
    let (mut r, version) = Rehearsal::up_real("mpje");
    r.workers(&m, Break::NoSocketIfname);
    let real = [
        "--backend",
        "control-plane",
        "--nccl-lib",
        "/opt/nccl/lib/libnccl.so.2",
    ];
    for (extra, label) in [
        (&real[..], format!("[REAL NCCL {version}")),
        (SIM, "VERDICT: FAIL at init".into()),
    ] {
        let o = r.launch(&m, extra);
        let t = text(&o);
        let verdict = line(&t, "VERDICT", |l| l.starts_with("VERDICT"));
        assert!(
            verdict.contains(&label)
                && verdict.contains("FAIL at init on ranks 2, 3 (host nccl-smoke-worker-1)")
                && verdict.contains("Network is unreachable")
                && verdict.contains("try: set NCCL_SOCKET_IFNAME")
                && verdict.contains("-x NCCL_SOCKET_IFNAME"),
            "{verdict}"
        );
        assert!(
            t.contains("NCCL_SOCKET_IFNAME is not set in this rank's environment"),
            "{t}"
        );
        assert_eq!(
            code(&o),
            nccl_smoke::stage::Stage::Init.exit_code() as i32,
            "{t}"
        );
    }
}
