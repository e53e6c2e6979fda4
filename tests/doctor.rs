//! `doctor` as a user runs it: on this GPU-less machine (fast, no panic, the driver reported
//! missing with a hint, the real NCCL wheel's version and capabilities reported), and on
//! fixture nodes (`--sysroot`) with the simulation libraries: the library checks' outcomes,
//! one fixture per field report, malformed node files, and the `--json` report read back as a
//! fingerprint that `diff` compares with another report or with a run's results file.

mod common;
use common::*;
use nccl_smoke::diagnose::doctor;
use nccl_smoke::report::fingerprint::diff;
use nccl_smoke::report::results::load_fingerprint;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

#[test]
fn doctor_on_this_machine() {
    let lib = wheel_nccl();
    let start = Instant::now();
    let o = run1(&["doctor", "--nccl-lib", lib.to_str().unwrap()], &[]);
    let took = start.elapsed();
    let t = text(&o);
    assert_eq!(code(&o), 32, "{t}");
    assert!(
        t.contains("FAIL  cuda-driver")
            && t.contains("libcuda.so.1")
            && t.contains("try: install the NVIDIA driver"),
        "{t}"
    );
    assert!(
        t.contains("nccl             NCCL 2.19.3") && t.contains("non-blocking init true"),
        "{t}"
    );
    assert!(!t.contains("panicked"), "{t}");
    // Recorded, not asserted as a tight bound: it should be well under a second.
    eprintln!("doctor took {took:?}");
    assert!(took.as_secs() < 5, "doctor took {took:?}");
}

#[test]
fn doctor_json_round_trips() {
    let lib = wheel_nccl();
    let o = run1(
        &["doctor", "--json", "--nccl-lib", lib.to_str().unwrap()],
        &[],
    );
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema"], "nccl-smoke/doctor/v1");
    assert_eq!(v["status"], "fail");
    assert_eq!(v["fingerprint"]["nccl"]["version"], "2.19.3", "{v}");
    assert!(v["fingerprint"]["driver"].is_null(), "{v}");
    let ids: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        doctor::CHECK_IDS,
        "the report lists every check, in order"
    );
}

/// A libibverbs that is there but cannot list its devices (no ib_uverbs, no /dev/infiniband in
/// a container) is said, not taken for a node without RDMA: the stand-in libibverbs refusing
/// `ibv_get_device_list` with EACCES.
#[test]
fn doctor_says_when_libibverbs_cannot_list_its_devices() {
    require_sim();
    let verbs = bin().parent().unwrap().join("libsim_ibverbs.so");
    let dir = tempfile::tempdir().unwrap();
    for name in ["libibverbs.so", "libibverbs.so.1"] {
        std::os::unix::fs::symlink(&verbs, dir.path().join(name)).unwrap();
    }
    let lib = wheel_nccl();
    let libs = dir.path().to_str().unwrap();
    let infiniband = |fault: &str| {
        let o = run1(
            &["doctor", "--nccl-lib", lib.to_str().unwrap()],
            &[
                ("LD_LIBRARY_PATH", libs),
                ("NCCL_SMOKE_SIM_IB_HCAS", "mlx5_0"),
                ("NCCL_SMOKE_SIM_IB_FAULT", fault),
            ],
        );
        let t = text(&o);
        t.lines()
            .skip_while(|l| !l.contains(" infiniband "))
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
    };
    let listed = infiniband("");
    assert!(
        listed.starts_with("ok    infiniband") && listed.contains("mlx5_0 (listed by libibverbs"),
        "{listed}"
    );
    let refused = infiniband("ibv_get_device_list:EACCES");
    assert!(
        refused.starts_with("WARN  infiniband")
            && refused.contains("ibv_get_device_list failed: Permission denied")
            && refused.contains("/dev/infiniband"),
        "{refused}"
    );
}

#[test]
fn doctor_bad_sysroot_is_usage_error() {
    let o = run1(&["doctor", "--sysroot", "/nonexistent-root"], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(text(&o).contains("is not a directory"), "{}", text(&o));
    let file = tempfile::NamedTempFile::new().unwrap();
    let o = run1(&["doctor", "--sysroot", file.path().to_str().unwrap()], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
}

/// A fixture node: `files` under a temporary root (removed on drop), with an empty /dev/shm.
fn node(files: &[(&str, &str)]) -> tempfile::TempDir {
    let root = tempfile::Builder::new()
        .prefix("doctor-node.")
        .tempdir()
        .unwrap();
    for (p, content) in files {
        let f = root.path().join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, content).unwrap();
    }
    std::fs::create_dir_all(root.path().join("dev/shm")).unwrap();
    root
}

/// `nccl-smoke doctor --backend sim --json --sysroot ROOT ARGS…` with exactly `env` set.
fn doctor_sim(root: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    require_sim();
    let mut cmd = Command::new(bin());
    cmd.env_clear()
        .args(["doctor", "--backend", "sim", "--json", "--sysroot"])
        .arg(root)
        .args(args)
        .envs(env.iter().copied());
    bounded(cmd, 60)
}

/// The report, its exit code, and a check's (status, evidence, hint) by id.
struct Report {
    code: i32,
    json: Value,
}

impl Report {
    fn of(o: &Output) -> Report {
        let t = text(o);
        assert!(!t.contains("panicked"), "{t}");
        let json = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {t}"));
        Report {
            code: code(o),
            json,
        }
    }

    fn check(&self, id: &str) -> (String, String, String) {
        let c = self.json["checks"]
            .as_array()
            .and_then(|a| a.iter().find(|c| c["id"] == id))
            .unwrap_or_else(|| panic!("no check {id}: {}", self.json));
        let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
        (s("status"), s("evidence"), s("hint"))
    }

    fn status(&self, id: &str) -> String {
        self.check(id).0
    }
}

fn sim(files: &[(&str, &str)], env: &[(&str, &str)]) -> Report {
    let root = node(files);
    Report::of(&doctor_sim(root.path(), &[], env))
}

const IB_ACTIVE: (&str, &str) = ("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
const LIMITS_HEADER: &str =
    "Limit                     Soft Limit           Hard Limit           Units     \n";

fn limits(memlock: &str, nofile: &str) -> String {
    format!(
        "{LIMITS_HEADER}Max open files            {nofile}                files     \n\
         Max locked memory         {memlock}                bytes     \n"
    )
}

/// An InfiniBand node set up as the checks want it: every check is ok and the exit code 0.
#[test]
fn healthy_ib_node_passes_every_check() {
    let limits = limits(
        "unlimited            unlimited",
        "1048576              1048576",
    );
    let root = node(&[
        IB_ACTIVE,
        ("sys/module/nvidia_peermem/version", "1.0\n"),
        ("sys/class/net/eth0/operstate", "up\n"),
        ("proc/self/limits", &limits),
        ("proc/self/status", "CapEff:\t000001ffffffffff\n"),
        (
            "proc/self/mounts",
            "shm /dev/shm tmpfs rw,nosuid,nodev,size=16777216k 0 0\n",
        ),
        (
            "proc/driver/nvidia/version",
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06\n",
        ),
    ]);
    let ns = root.path().join("proc/self/ns");
    std::fs::create_dir_all(&ns).unwrap();
    std::os::unix::fs::symlink("ipc:[4026531839]", ns.join("ipc")).unwrap();
    let env = [
        ("NCCL_IB_HCA", "=mlx5_0:1"),
        ("NCCL_SOCKET_IFNAME", "eth0"),
        ("UCX_NET_DEVICES", "mlx5_0:1"),
        ("OMPI_MCA_coll_hcoll_enable", "0"),
    ];
    let r = Report::of(&doctor_sim(root.path(), &[], &env));
    let not_ok: Vec<String> = r.json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] != "ok")
        .map(|c| c.to_string())
        .collect();
    assert!(not_ok.is_empty(), "{not_ok:#?}");
    assert_eq!(r.code, 0);
    assert_eq!(r.json["status"], "ok");
    assert!(r.check("container").1.contains("IPC namespace: host"));
}

/// The library checks on the simulation: ok, warn (NCCL too old for non-blocking init,
/// CUDA_VISIBLE_DEVICES naming a device that is not there), fail (no device visible, no
/// libnccl at the path given).
#[test]
fn library_checks_on_the_simulation() {
    let r = sim(&[], &[]);
    for id in ["nccl", "cuda-driver", "gpus"] {
        assert_eq!(r.status(id), "ok", "{:?}", r.check(id));
    }
    assert!(
        r.check("gpus").1.starts_with("8 visible"),
        "{:?}",
        r.check("gpus")
    );

    let (s, e, h) = sim(&[], &[("NCCL_SMOKE_SIM_NCCL_VERSION", "21203")]).check("nccl");
    assert_eq!(s, "warn", "{e}");
    assert!(
        e.contains("NCCL 2.12.3") && h.contains("2.14.3"),
        "{e} / {h}"
    );

    let env = [
        ("NCCL_SMOKE_SIM_GPUS", "2"),
        ("CUDA_VISIBLE_DEVICES", "0,1,5"),
    ];
    let (s, e, _) = sim(&[], &env).check("gpus");
    assert_eq!(s, "warn", "{e}");
    assert!(
        e.starts_with("2 visible (CUDA_VISIBLE_DEVICES=0,1,5)"),
        "{e}"
    );

    let r = sim(&[], &[("CUDA_VISIBLE_DEVICES", "")]);
    let (s, e, _) = r.check("cuda-driver");
    assert_eq!(s, "fail", "{e}");
    assert!(e.contains("CUDA_ERROR_NO_DEVICE"), "{e}");
    let (s, e, h) = r.check("gpus");
    assert_eq!(s, "fail", "{e}");
    assert!(h.contains("CUDA_VISIBLE_DEVICES"), "{h}");
    assert_eq!(r.code, 32);

    let root = node(&[]);
    let args = ["--nccl-lib", "/nonexistent/libnccl.so.2"];
    let r = Report::of(&doctor_sim(root.path(), &args, &[]));
    let (s, e, _) = r.check("nccl");
    assert_eq!(s, "fail", "{e}");
    assert!(e.contains("/nonexistent/libnccl.so.2"), "{e}");
    assert_eq!(r.status("cuda-driver"), "ok");
}

/// 000: two containers on one node with driver 570 and NCCL 2.26.2.
#[test]
fn seed_000_driver_570_between_containers() {
    let version = (
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.86.15  Release Build\n",
    );
    let nccl = ("NCCL_SMOKE_SIM_NCCL_VERSION", "22602");
    let r = sim(&[(".dockerenv", ""), version], &[nccl]);
    let (s, e, h) = r.check("known-issues");
    assert_eq!(s, "warn", "{e}");
    assert!(e.contains("driver branch: 570; NCCL: 2.26.2"), "{e}");
    assert!(
        h.contains("NCCL_CUMEM_ENABLE=0") && h.contains("NCCL_P2P_DISABLE=1"),
        "{h}"
    );
    assert_eq!(sim(&[version], &[nccl]).status("known-issues"), "ok");
}

/// 001: an MPIJob over container RDMA with HCOLL enabled in the MCA parameters file.
#[test]
fn seed_001_hcoll_in_a_kubernetes_pod_with_rdma() {
    let files = [
        IB_ACTIVE,
        (
            "etc/openmpi/openmpi-mca-params.conf",
            "# site\ncoll_hcoll_enable = 1\n",
        ),
    ];
    let kube = ("KUBERNETES_SERVICE_HOST", "10.96.0.1");
    let (s, e, h) = sim(&files, &[kube]).check("mpi-hcoll");
    assert_eq!(s, "warn", "{e}");
    assert!(e.contains("coll_hcoll_enable=1"), "{e}");
    assert!(h.contains("-mca coll_hcoll_enable 0"), "{h}");
    let off = ("OMPI_MCA_coll_hcoll_enable", "0");
    assert_eq!(sim(&files, &[kube, off]).status("mpi-hcoll"), "ok");
}

/// 002: nvidia_peermem loaded, but NCCL 2.19 only looks for the legacy nv_mem paths.
#[test]
fn seed_002_peermem_with_nccl_2_19() {
    let files = [IB_ACTIVE, ("sys/module/nvidia_peermem/version", "1.0\n")];
    let old = ("NCCL_SMOKE_SIM_NCCL_VERSION", "21903");
    let (s, e, h) = sim(&files, &[old]).check("gpudirect-rdma");
    assert_eq!(s, "warn", "{e}");
    assert!(
        e.contains("NCCL 2.19.3 will run InfiniBand without GPUDirect RDMA"),
        "{e}"
    );
    assert!(h.contains("NCCL 2.23 or later"), "{h}");
    let new = ("NCCL_SMOKE_SIM_NCCL_VERSION", "22304");
    assert_eq!(sim(&files, &[new]).status("gpudirect-rdma"), "ok");
}

/// 003: "[Service thread] Accept failed Resource temporarily unavailable" in an all-to-all
/// across 32 ranks: the node fact to check is the descriptor limit NCCL can raise itself to.
#[test]
fn seed_003_descriptor_limit_for_an_all_to_all() {
    let tight = limits("unlimited unlimited", "1024                 1024");
    let (s, e, h) = sim(&[("proc/self/limits", &tight)], &[]).check("open-files");
    assert_eq!(s, "warn", "{e}");
    assert!(e.contains("soft 1024, hard 1024"), "{e}");
    assert!(h.contains("Resource temporarily unavailable"), "{h}");
    let raisable = limits("unlimited unlimited", "1024                 1048576");
    let r = sim(&[("proc/self/limits", &raisable)], &[]);
    assert_eq!(r.status("open-files"), "ok", "{:?}", r.check("open-files"));
}

/// 004: a pod's 64 MB /dev/shm.
#[test]
fn seed_004_pod_dev_shm() {
    let mounts = (
        "proc/self/mounts",
        "overlay / overlay rw 0 0\nshm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0\n",
    );
    let r = sim(&[mounts], &[]);
    let (s, e, h) = r.check("dev-shm");
    assert_eq!(s, "fail", "{e}");
    assert!(e.contains("/dev/shm: 64 MiB total"), "{e}");
    assert!(h.contains("emptyDir") && h.contains("--shm-size"), "{h}");
    assert_eq!(r.code, 32);
}

/// Garbage where numbers belong: the check says what it read and is skipped; no panic.
#[test]
fn malformed_node_files_are_skipped_with_evidence() {
    let r = sim(
        &[
            (
                "proc/self/limits",
                "Max open files  many  more\n\u{1}\u{7f}garbage",
            ),
            ("proc/self/status", "CapEff:\tnot-hex\n"),
            ("proc/self/mounts", "shm /dev/shm tmpfs rw,size=huge 0 0\n"),
            ("proc/driver/nvidia/version", "NVRM version: x.y.z\n"),
            (
                "etc/ld.so.conf",
                "include\ninclude /nowhere/*.conf\n\u{0}\n",
            ),
        ],
        &[],
    );
    let (s, e, _) = r.check("open-files");
    assert_eq!(s, "skipped", "{e}");
    assert!(
        e.contains("no readable 'Max open files' row ('Max open files  many  more')"),
        "{e}"
    );
    let (s, e, _) = r.check("memlock");
    assert_eq!(s, "skipped", "{e}");
    let (s, e, _) = r.check("dev-shm");
    assert_eq!(s, "skipped", "{e}");
    assert!(e.contains("unreadable size 'huge'"), "{e}");
    assert!(
        r.check("container")
            .1
            .contains("IPC_LOCK capability: unknown")
    );
    assert!(r.check("known-issues").1.contains("driver branch: unknown"));
    assert_eq!(
        r.code, 0,
        "skipped checks neither warn nor fail: {}",
        r.json
    );
}

/// Writes a doctor report (simulation, this machine) and returns its path.
fn doctor_file(dir: &Path, name: &str, env: &[(&str, &str)]) -> std::path::PathBuf {
    let o = doctor_sim(Path::new("/"), &[], env);
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    let p = dir.join(name);
    std::fs::write(&p, &o.stdout).unwrap();
    p
}

#[test]
fn doctor_fingerprint_round_trips_and_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let before = doctor_file(dir.path(), "before.json", &[]);
    let fp = load_fingerprint(&before).unwrap();
    assert_eq!(fp.ranks.len(), 8, "{fp:?}");
    assert_eq!(diff(&fp, &fp), []);
    assert_eq!(diff(&fp, &load_fingerprint(&before).unwrap()), []);

    let mut v: Value = serde_json::from_slice(&std::fs::read(&before).unwrap()).unwrap();
    v["fingerprint"]["driver"]["version_code"] = 12090.into();
    v["fingerprint"]["driver"]["cuda_version"] = "12.9".into();
    let edited = dir.path().join("edited.json");
    std::fs::write(&edited, v.to_string()).unwrap();
    let changes = diff(&fp, &load_fingerprint(&edited).unwrap());
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].field, "driver.version");
    assert_eq!(
        (changes[0].before.as_str(), changes[0].after.as_str()),
        ("12.8 (12080)", "12.9 (12090)")
    );

    // The same node after a (simulated) driver upgrade, measured again.
    let upgraded = [("NCCL_SMOKE_SIM_DRIVER_VERSION", "13000")];
    let after = doctor_file(dir.path(), "after.json", &upgraded);
    let changes = diff(&fp, &load_fingerprint(&after).unwrap());
    let names: Vec<String> = changes.iter().map(|c| c.to_string()).collect();
    assert_eq!(names, ["driver.version: 12.8 (12080) -> 13.0 (13000)"]);
}

/// A run's results file and a doctor report on the same node name the same libraries.
#[test]
fn run_results_and_doctor_report_compare() {
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("run.json");
    let mut cmd = Command::new(bin());
    cmd.env_clear()
        .args(["launch", "-n", "1", "run", "--backend", "sim", "-e", "8"])
        .args(["-n", "1", "-w", "0", "--patterns", "all_reduce", "--json"])
        .arg(&results);
    let o = bounded(cmd, 60);
    assert_eq!(code(&o), 0, "{}", text(&o));
    let run = load_fingerprint(&results).unwrap();
    let node = load_fingerprint(&doctor_file(dir.path(), "doctor.json", &[])).unwrap();
    let changes = diff(&run, &node);
    let fields: Vec<&str> = changes.iter().map(|c| c.field.as_str()).collect();
    assert!(
        !fields
            .iter()
            .any(|f| f.starts_with("driver.") || f.starts_with("nccl.")),
        "{changes:?}"
    );
    assert!(
        fields.contains(&"launcher"),
        "a run has one, doctor not: {changes:?}"
    );
}
