//! End to end, each in a child process of its own environment: the injected faults (verify,
//! run error and hang, import, proxy, bad specs), the missing interface, mismatched rank
//! counts, and the debug log file.
// This test calls the simulation through its C ABI, as a dlopen caller does: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]

mod e2e_common;
use e2e_common::*;
use std::sync::Barrier;

/// Two ranks, each all-reducing `ops` int32 buffers of 9 elements (value rank + 1); returns
/// per rank the results and the final async state.
fn two_rank_all_reduces(ops: usize) -> Vec<(Vec<Vec<i32>>, u32)> {
    let done = watchdog("two_rank_all_reduces", 60);
    let id = unique_id();
    let out: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let Rank { comm, stream, .. } = join(rank, 2, id);
                let r = Rank {
                    rank,
                    n: 2,
                    comm,
                    stream,
                };
                let send: Vec<u8> = (0..9)
                    .flat_map(|_| (rank as i32 + 1).to_le_bytes())
                    .collect();
                let mut recvs: Vec<Vec<u8>> = (0..ops).map(|_| vec![0u8; 36]).collect();
                for recv in recvs.iter_mut() {
                    // SAFETY: 9 int32 each; an error state makes later calls return it.
                    let rc = unsafe {
                        (nccl.ncclAllReduce)(ptr(&send), ptr_mut(recv), 9, 2, 0, comm, stream)
                    };
                    assert!(rc == OK || rc == SYSTEM || rc == REMOTE, "rc {rc}");
                }
                sync(&r);
                let state = async_error(comm);
                // SAFETY: the communicator, consumed.
                unsafe { (nccl.ncclCommAbort)(comm) };
                let vals = recvs
                    .iter()
                    .map(|b| {
                        b.chunks(4)
                            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
                            .collect()
                    })
                    .collect();
                (vals, state)
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap())
        .collect();
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    out
}

fn child_verify() {
    let res = two_rank_all_reduces(3);
    // Rank 1 spoils the middle element of what it sends from its second operation on; rank
    // 0 receives it, rank 1's own result is right.
    for (op, vals) in res[0].0.iter().enumerate() {
        let want: Vec<i32> = (0..9)
            .map(|i| {
                if op >= 1 && i == 4 {
                    1 + (2 ^ 0x5a5a_5a5a)
                } else {
                    3
                }
            })
            .collect();
        assert_eq!(vals, &want, "rank 0 op {op}");
    }
    for vals in &res[1].0 {
        assert_eq!(vals, &vec![3; 9]);
    }
    assert_eq!((res[0].1, res[1].1), (OK, OK));
}

fn child_run_error() {
    let res = two_rank_all_reduces(4);
    // Operation 1 fails on rank 0 (its link drops): the first result is whole, rank 0 holds
    // a system error, rank 1 sees the connection close.
    assert_eq!(res[0].0[0], vec![3; 9]);
    assert_eq!(res[1].0[0], vec![3; 9]);
    assert_eq!(res[0].1, SYSTEM);
    assert_eq!(res[1].1, REMOTE);
}

fn child_run_hang() {
    let done = watchdog("run_hang", 60);
    let id = unique_id();
    let both = Arc::new(Barrier::new(2));
    let hs: Vec<_> = (0..2)
        .map(|rank| {
            let both = both.clone();
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let cu = &libs().cu;
                let Rank { comm, stream, .. } = join(rank, 2, id);
                let x = [1u8; 4];
                let mut y = [0u8; 4];
                // SAFETY: 4 uint8; operation 0 hangs on rank 1 until it is aborted.
                unsafe {
                    assert_eq!(
                        (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 4, 1, 0, comm, stream),
                        OK
                    );
                    std::thread::sleep(Duration::from_millis(300));
                    assert_eq!(
                        (cu.cuStreamQuery)(stream),
                        600,
                        "rank {rank}: the stream should still be busy"
                    );
                    // Neither aborts before both have looked.
                    both.wait();
                    assert_eq!((nccl.ncclCommAbort)(comm), OK);
                    assert_eq!((cu.cuStreamSynchronize)(stream), 0);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn child_import() {
    let done = watchdog("import", 60);
    let id = unique_id();
    let hs: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let nccl = &libs().nccl;
                let Rank { comm, stream, .. } = join(rank, 2, id);
                let x = [1u8; 4];
                let mut y = [0u8; 4];
                // SAFETY: 4 uint8.
                let rc = unsafe {
                    (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 4, 1, 0, comm, stream)
                };
                if rank == 1 {
                    assert_eq!(rc, UNHANDLED_CUDA);
                    assert_eq!(last_error(), "Cuda failure 101 'invalid device ordinal'");
                    // SAFETY: the communicator, consumed: rank 0's peer goes away.
                    unsafe { (nccl.ncclCommAbort)(comm) };
                    return;
                }
                assert_eq!(rc, OK);
                // SAFETY: the rank's stream.
                unsafe { (libs().cu.cuStreamSynchronize)(stream) };
                assert_eq!(async_error(comm), REMOTE);
                // SAFETY: consumed.
                unsafe { (nccl.ncclCommAbort)(comm) };
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

fn child_proxy() {
    let codes = with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let x = [0u8; 8];
        let mut y = [0u8; 8];
        let peer = (1 - r.rank) as c_int;
        // SAFETY: 8 bytes each; the first send/recv group fails at proxy connect on rank 0,
        // so rank 0 queues nothing and rank 1 must not wait for it: rank 1 groups nothing.
        unsafe {
            let x8 = [7u8; 8];
            let mut all = [0u8; 8];
            assert_eq!(
                (nccl.ncclAllReduce)(ptr(&x8), ptr_mut(&mut all), 8, 1, 0, r.comm, r.stream),
                OK
            );
            sync(&r);
            assert_eq!(all, [14u8; 8]);
            if r.rank == 0 {
                assert_eq!((nccl.ncclGroupStart)(), OK);
                assert_eq!((nccl.ncclSend)(ptr(&x), 8, 1, peer, r.comm, r.stream), OK);
                assert_eq!(
                    (nccl.ncclRecv)(ptr_mut(&mut y), 8, 1, peer, r.comm, r.stream),
                    OK
                );
                let rc = (nccl.ncclGroupEnd)();
                (rc, last_error())
            } else {
                (OK, String::new())
            }
        }
    });
    assert_eq!(codes[0].0, INTERNAL);
    assert_eq!(
        codes[0].1,
        "[Proxy Service 0] Failed to execute operation Close from rank 0, retcode 3"
    );
}

fn child_bad_spec() {
    let mut id = UniqueId([0; 128]);
    // SAFETY: a valid out-pointer.
    assert_eq!(
        unsafe { (libs().nccl.ncclGetUniqueId)(&mut id) },
        INVALID_USAGE
    );
    assert!(last_error().contains("'imprt'"), "{}", last_error());
}

fn child_no_interface() {
    let mut id = UniqueId([0; 128]);
    let want = if std::env::var("NCCL_SMOKE_SIM_NCCL_VERSION").as_deref() == Ok("21903") {
        INTERNAL
    } else {
        INVALID_USAGE
    };
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (libs().nccl.ncclGetUniqueId)(&mut id) }, want);
    assert_eq!(last_error(), "Bootstrap : no socket interface found");
}

fn child_logs() {
    with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let x = [1u8; 4];
        let mut y = [0u8; 4];
        // SAFETY: 4 uint8.
        unsafe { (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 4, 1, 0, r.comm, r.stream) };
    });
}

fn child_mismatch() {
    let done = watchdog("mismatch", 60);
    let id = unique_id();
    let handles: Vec<_> = [(0, 2), (1, 3)]
        .into_iter()
        .map(|(rank, n)| {
            std::thread::spawn(move || {
                let _s = bind_device(rank);
                let mut comm = std::ptr::null_mut();
                // SAFETY: valid out-pointer.
                let rc = unsafe { (libs().nccl.ncclCommInitRank)(&mut comm, n, id, rank as c_int) };
                (rc, comm.is_null())
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), (INVALID_USAGE, true));
    }
    assert!(
        last_error().contains("Bootstrap Root : mismatch in info from procs"),
        "{}",
        last_error()
    );
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn mismatched_rank_counts_are_refused() {
    in_child("mismatch", &[]);
}

#[test]
fn verify_corrupts_what_the_faulty_rank_sends() {
    in_child("verify", &[("NCCL_SMOKE_SIM_FAULT", "verify@1:corrupt")]);
}

#[test]
fn run_error_fails_the_rank_and_its_peer_sees_the_link_drop() {
    let out = in_child(
        "run_error",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "run@0:error"),
            ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "1"),
            ("NCCL_DEBUG", "WARN"),
        ],
    );
    assert!(
        out.contains(" NCCL WARN socketProgressOpt: Call to send to "),
        "{out}"
    );
    assert!(out.contains("failed : Connection timed out"), "{out}");
    assert!(
        out.contains(" NCCL WARN socketProgress: Connection closed by remote peer "),
        "{out}"
    );
}

#[test]
fn run_hang_holds_the_stream_until_abort() {
    in_child(
        "run_hang",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "run@1:hang"),
            ("NCCL_SMOKE_SIM_RUN_FAULT_OP", "0"),
        ],
    );
}

#[test]
fn import_fails_the_first_operation_with_a_local_peer() {
    let out = in_child(
        "import",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "import@1:error"),
            ("NCCL_DEBUG", "WARN"),
        ],
    );
    assert!(
        out.contains(" transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'"),
        "{out}"
    );
}

#[test]
fn proxy_fails_the_first_send_recv_group() {
    let out = in_child(
        "proxy",
        &[
            ("NCCL_SMOKE_SIM_FAULT", "proxy@0:error"),
            ("NCCL_DEBUG", "WARN"),
        ],
    );
    assert!(
        out.contains("NCCL WARN [Service thread] Accept failed Resource temporarily unavailable"),
        "{out}"
    );
    assert!(
        out.contains(
            "NCCL WARN [Service thread] Could not receive type from localRank 0, res=3, closed=0"
        ),
        "{out}"
    );
}

#[test]
fn a_bad_fault_spec_is_invalid_usage() {
    in_child("bad_spec", &[("NCCL_SMOKE_SIM_FAULT", "imprt@1")]);
}

#[test]
fn no_interface_depends_on_the_release() {
    in_child("no_interface", &[("NCCL_SOCKET_IFNAME", "=no-such-if0")]);
    in_child(
        "no_interface",
        &[
            ("NCCL_SOCKET_IFNAME", "=no-such-if0"),
            ("NCCL_SMOKE_SIM_NCCL_VERSION", "21903"),
        ],
    );
}

#[test]
fn logs_go_to_the_debug_file_in_nccls_shape() {
    let dir = std::env::temp_dir().join(format!("sim-nccl-e2e-logs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pattern = dir.join("nccl.%h.%p.log");
    in_child(
        "logs",
        &[
            ("NCCL_DEBUG", "INFO"),
            ("NCCL_DEBUG_SUBSYS", "INIT,COLL,BOOTSTRAP"),
            ("NCCL_DEBUG_FILE", pattern.to_str().unwrap()),
        ],
    );
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1);
    let name = files[0].file_name().to_string_lossy().into_owned();
    assert!(
        name.starts_with("nccl.") && name.ends_with(".log"),
        "{name}"
    );
    let text = std::fs::read_to_string(files[0].path()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for want in [
        "] NCCL INFO NCCL version 2.28.3+sim",
        "] NCCL INFO Bootstrap: Using ",
        "] NCCL INFO ncclCommInitRank comm 0x",
        " - Init START",
        " - Init COMPLETE",
        "] NCCL INFO Channel 00/02 : 0 1",
        "] NCCL INFO Connected all rings, use ring PXN 0 GDR 0",
        "] NCCL INFO AllReduce: opCount 0 sendbuff 0x",
        " - Destroy COMPLETE",
    ] {
        assert!(text.contains(want), "no '{want}' in:\n{text}");
    }
    let line = text.lines().find(|l| l.contains("Init COMPLETE")).unwrap();
    let (prefix, _) = line.split_once(" NCCL INFO ").unwrap();
    let mut words = prefix.split(' ');
    let who: Vec<&str> = words.next().unwrap().split(':').collect();
    assert_eq!(who.len(), 3, "{line}");
    assert_eq!(
        who[1],
        name.split('.').nth(2).unwrap(),
        "pid in the line and the file name"
    );
    assert!(words.next().unwrap().starts_with('['), "{line}");
}

/// The entry point of child processes; does nothing in a normal run.
#[test]
fn child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    match name.as_str() {
        "verify" => child_verify(),
        "run_error" => child_run_error(),
        "run_hang" => child_run_hang(),
        "import" => child_import(),
        "proxy" => child_proxy(),
        "bad_spec" => child_bad_spec(),
        "no_interface" => child_no_interface(),
        "logs" => child_logs(),
        "mismatch" => child_mismatch(),
        other => panic!("no scenario {other}"),
    }
}
