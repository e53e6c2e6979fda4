use super::peers::*;
use super::report::*;
use super::*;

#[test]
fn the_enable_switch_reads_like_ncclloadparam() {
    for (v, on) in [
        (None, true),
        (Some(""), true),
        (Some("1"), true),
        (Some("0x1"), true),
        (Some("0"), false),
        (Some("2"), false),
        (Some("off"), false),
    ] {
        assert_eq!(enabled(v), on, "{v:?}");
    }
}

#[test]
fn hashes_match_nccls_own() {
    // NCCL's getHash (v2.28.7-1 and v2.24.3-1 `src/include/bitops.h`) compiled with gcc.
    let id: Vec<u8> = (0..128u32).map(|i| (i * 37 + 11) as u8).collect();
    assert_eq!(comm_hash(22807, &id), 0x3002_dcd1_bbe6_653d);
    if std::ffi::c_char::MIN != 0 {
        assert_eq!(comm_hash(22403, &id), 0x65bb_3b0c_ba52_7185);
    }
}

#[test]
fn peers_are_read_from_their_snapshots() {
    use crate::comm::Identity;
    use nccl_smoke_fault::FaultSet;
    let hash = crate::ids::random_u64();
    let c = Comm::new(
        Identity {
            rank: 0,
            nranks: 2,
            dev: 0,
            bus_id: "0".into(),
            comm_id: 1,
            hash,
            ip: std::net::Ipv4Addr::LOCALHOST,
            version: 22807,
            faults: FaultSet::parse("").unwrap(),
            run_fault_op: 0,
        },
        true,
    );
    let path = snapshot_path(hash, 1);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let me = std::process::id();
    let host = log::host();
    // No snapshot: no data came back.
    let m = peer(&c, 1).unwrap_err();
    assert!(m.unresponsive && !m.dead && m.pid == -1);
    // A fresh one: the rank as its process last wrote it.
    std::fs::write(&path, format!("v1 1 {me} 10.0.0.2 1 0 0 0 0 42 {host}\n")).unwrap();
    let r = peer(&c, 1).unwrap();
    assert_eq!(
        (r.allreduce, r.ip.as_str(), r.pid),
        (42, "10.0.0.2", me as i64)
    );
    // Its process is gone: dead.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = child.id();
    child.wait().unwrap();
    std::fs::write(
        &path,
        format!("v1 1 {gone_pid} 10.0.0.2 1 0 0 0 0 42 {host}\n"),
    )
    .unwrap();
    let m = peer(&c, 1).unwrap_err();
    assert!(m.dead && m.unresponsive && m.pid == gone_pid as i64);
    // Stale (a stopped process): missing.
    std::fs::write(&path, format!("v1 1 {me} 10.0.0.2 1 0 0 0 0 42 {host}\n")).unwrap();
    let old = SystemTime::now() - Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let m = peer(&c, 1).unwrap_err();
    assert!(m.unresponsive && !m.dead);
    // Destroyed: the process answers without the communicator.
    std::fs::write(&path, format!("gone {me} 10.0.0.2 {host}\n")).unwrap();
    let m = peer(&c, 1).unwrap_err();
    assert!(!m.unresponsive && !m.dead);
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

#[test]
fn reports_carry_ranks_missing_and_mismatches() {
    let rank = |rank: usize, allreduce: u64, async_error: u32| Rank {
        rank,
        ip: "10.0.0.1".into(),
        pid: 100 + rank as i64,
        dev: rank as i32,
        init: 0,
        async_error,
        finalize: false,
        abort: false,
        allreduce,
    };
    let views = [View {
        hash: 0xabc,
        size: 4,
        ranks: vec![rank(0, 5, 0), rank(1, 5, 6), rank(2, 4, 0)],
        missing: vec![Missing {
            rank: 3,
            ip: Some("10.0.0.2".into()),
            pid: 7,
            dev: 3,
            unresponsive: true,
            dead: false,
        }],
    }];
    let j = json_report(22807, &views);
    assert!(j.contains("\"nvml_dev\": 3\n          \"status\""), "{j}");
    let fixed = json_report(22902, &views);
    assert!(
        fixed.contains("\"nvml_dev\": 3,\n          \"status\""),
        "{fixed}"
    );
    let t = text_report(22803, &views);
    for want in [
        "#0-0 (0000000000000abc) INCOMPLETE\n  Missing communicator data from 1 rank\n  Rank 3 -- GPU 3 managed by process 7 on node 10.0.0.2\n",
        "  Rank 1 reported Remote process error -- GPU 1 managed by process 101 on node 10.0.0.1\n",
        "  Communicator ranks have different AllReduce operation counts\n  2 ranks have launched up to operation 5\n  Rank 2 has launched up to operation 4 -- GPU 2 managed by process 102 on node 10.0.0.1\n",
        "INCOMPLETE\n  Missing communicator data from 1 job process\n  Process 7 on node 10.0.0.2 managing GPU 3\n",
    ] {
        assert!(t.contains(want), "{want}\n---\n{t}");
    }
}
