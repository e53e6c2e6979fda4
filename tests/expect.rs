//! `run --expect`: real simulated runs against bus bandwidth floors: a file's floors (PASS,
//! BELOW FLOOR with the numbers and hosts, exit 25), `auto` on a system with no built-in row, a
//! floor per NIC made from the RDMA ports a fixture node reports, and bad floor files refused.

mod common;
use common::*;

#[test]
fn a_run_below_an_expected_floor_fails_with_its_own_code_and_names_the_hosts() {
    require_sim();
    let dir = scratch("expect");
    let floors = dir.join("floors.json");
    std::fs::write(
        &floors,
        r#"{"schema":"nccl-smoke/expect/v1","floors":[
            {"name":"a CPU at 100 GB/s","pattern":"all_reduce","min_size":"512K","busbw_gbs":100.0,"source":"this test"},
            {"pattern":"all_to_all","ranks":8,"size":"1M","busbw_gbs":1.0,"source":"this test"},
            {"pattern":"send_recv_ring","size":"1M","busbw_gbs":0.000001,"source":"this test"}]}"#,
    )
    .unwrap();
    let f = floors.display().to_string();
    let args = [
        "run",
        "--backend",
        "sim",
        "-b",
        "512K",
        "-e",
        "1M",
        "-n",
        "3",
        "-w",
        "1",
        "--repeat",
        "2",
        "--expect",
        &f,
    ];
    let o = mpirun(2, &args, &[], 120);
    let t = text(&o);
    assert_eq!(code(&o), 25, "{t}");
    assert!(
        t.contains(
            "# expect: not checked (no such size or system in this run): all_to_all 1M on 8 ranks"
        ),
        "{t}"
    );
    // One line per floor over the sizes it covers: by how much, or PASS.
    assert!(
        t.contains("# expect: all_reduce 512K and up for a CPU at 100 GB/s: lowest "),
        "{t}"
    );
    assert!(
        t.contains("2 of 2 size(s) BELOW FLOOR 100 GB/s by up to "),
        "{t}"
    );
    assert!(t.contains("# expect: send_recv_ring 1M: lowest "), "{t}");
    assert!(
        t.contains(": PASS (floor 0.000001 GB/s; source: this test)"),
        "{t}"
    );
    assert!(
        t.contains("BELOW FLOOR — all_reduce 524288 B: bus bandwidth"),
        "{t}"
    );
    assert!(
        t.contains(
            "% below the floor 100 GB/s for a CPU at 100 GB/s (source: this test); slowest rank"
        ),
        "{t}"
    );
    assert!(t.contains("; host(s) "), "{t}");
    // Without --json too, the hosts are named (each rank's host from the gathered devices).
    assert!(!t.contains("on host ?"), "{t}");
    assert!(
        !t.contains("send_recv_ring 1048576 B: bus bandwidth"),
        "{t}"
    );
    // A file whose only floor covers no size this run measured judges nothing, and says so.
    let unswept = dir.join("unswept.json");
    std::fs::write(
        &unswept,
        r#"{"schema":"nccl-smoke/expect/v1","floors":[
            {"pattern":"all_reduce","size":"16G","busbw_gbs":100.0,"source":"this test"}]}"#,
    )
    .unwrap();
    let u = unswept.display().to_string();
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "sim",
            "-b",
            "1M",
            "-e",
            "1M",
            "--expect",
            &u,
        ],
        &[],
        120,
    );
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(
        t.contains("covers a size this run measured: bus bandwidth not judged"),
        "{t}"
    );
    assert!(!t.contains("every floor of"), "{t}");
    // auto: the built-in floors are for real GPUs; a simulated one has none, and says so.
    let o = mpirun(
        2,
        &[
            "run",
            "--backend",
            "sim",
            "-b",
            "1M",
            "-e",
            "1M",
            "--expect",
            "auto",
        ],
        &[],
        120,
    );
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(
        t.contains("# expect: no built-in floor for 2 ranks of NVIDIA Simulated GPU (nccl-smoke SIMULATED), 2 per host on 1 host(s): bus bandwidth not judged"),
        "{t}"
    );
    // isolate judges groups, not a known system: auto is refused there.
    let o = run1(&["isolate", "--backend", "sim", "--expect", "auto"], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    assert!(
        text(&o).contains("--expect auto picks floors"),
        "{}",
        text(&o)
    );
    // A floors file that cannot be read is refused before anything runs.
    let missing = dir.join("none.json").display().to_string();
    let o = run1(&["run", "--backend", "sim", "--expect", &missing], &[]);
    assert_eq!(code(&o), 2, "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A floor per NIC, on a simulated node whose RDMA ports a fixture tree gives
/// (`NCCL_SMOKE_SIM_SYSROOT`): the ports are read before NCCL's init, recorded in the results
/// file, and make the floor (ports × figure, less the margin); without them the floor is not
/// checked, and said so.
#[test]
fn a_per_nic_floor_counts_the_ports_each_host_reports() {
    require_sim();
    let dir = scratch("expect-nic");
    let root = dir.join("node");
    for (dev, state) in [
        ("mlx5_0", "4: ACTIVE"),
        ("mlx5_1", "4: ACTIVE"),
        ("mlx5_2", "1: DOWN"),
    ] {
        let p = root.join(format!("sys/class/infiniband/{dev}/ports/1"));
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("rate"), "400 Gb/sec (4X NDR)\n").unwrap();
        std::fs::write(p.join("link_layer"), "InfiniBand\n").unwrap();
        std::fs::write(p.join("state"), format!("{state}\n")).unwrap();
    }
    let nv = root.join("proc/driver/nvidia");
    std::fs::create_dir_all(&nv).unwrap();
    std::fs::write(
        nv.join("version"),
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.65.06  Release Build\n",
    )
    .unwrap();
    let floors = dir.join("floors.json");
    std::fs::write(
        &floors,
        r#"{"schema":"nccl-smoke/expect/v1","floors":[
            {"name":"NDR","pattern":"all_reduce","min_size":"512K","nic_gbps":400,"per_nic":true,
             "below_peak_pct":10,"busbw_gbs":48.0,"source":"this test"}]}"#,
    )
    .unwrap();
    let f = floors.display().to_string();
    let json = dir.join("run.json");
    let args = [
        "run",
        "--backend",
        "sim",
        "-b",
        "512K",
        "-e",
        "512K",
        "-n",
        "2",
        "-w",
        "1",
        "--expect",
        &f,
        "--json",
        json.to_str().unwrap(),
    ];
    let sysroot = root.display().to_string();
    let o = mpirun(2, &args, &[("NCCL_SMOKE_SIM_SYSROOT", &sysroot)], 120);
    let t = text(&o);
    assert_eq!(code(&o), 25, "{t}");
    // Two active ports of 400 Gb/s (the third is down): 2 × 48 GB/s, less 10 %.
    assert!(
        t.contains(
            "all_reduce 512K and up for NDR (2 NICs × 48 GB/s, less 10 % of 96 GB/s): lowest "
        ),
        "{t}"
    );
    assert!(t.contains("BELOW FLOOR 86.4 GB/s by up to "), "{t}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let setup = &doc["fingerprint"]["ranks"][1]["setup"];
    assert_eq!(setup["kernel_driver"], "580.65.06", "{setup}");
    assert_eq!(
        setup["rdma_ports"]["mlx5_0/1"]["rate"], "400 Gb/sec (4X NDR)",
        "{setup}"
    );
    assert_eq!(setup["rdma_ports"]["mlx5_2/1"]["state"], "DOWN", "{setup}");
    // No ports: the floor is not for this run, and the run says so.
    let bare = dir.join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    let bare = bare.display().to_string();
    let o = mpirun(2, &args, &[("NCCL_SMOKE_SIM_SYSROOT", &bare)], 120);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(
        t.contains("not checked (no such size or system in this run): all_reduce 512K and up with active RDMA ports of 400 Gb/s"),
        "{t}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
