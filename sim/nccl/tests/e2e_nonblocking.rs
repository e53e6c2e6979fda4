//! End to end: non-blocking communicators by release, abort of an init or a split that waits
//! for a rank that never comes, and ncclCommSplit.
// This test calls the simulation through its C ABI, as a dlopen caller does: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]

mod e2e_common;
use e2e_common::*;

/// Polls a non-blocking communicator's state out of `ncclInProgress`; returns it.
fn settle(comm: CommH) -> u32 {
    let mut state = async_error(comm);
    while state == IN_PROGRESS {
        std::thread::yield_now();
        state = async_error(comm);
    }
    state
}

/// The non-blocking contract of the release `NCCL_SMOKE_SIM_NCCL_VERSION` names (run in a
/// child, where the variable is read): which calls return `ncclInProgress`, refusal of a call
/// made too early, finalize's progress, and `NCCL_COMM_BLOCKING` over the config.
fn child_nonblocking() {
    let done = watchdog("nonblocking", 60);
    let v: i32 = std::env::var("NCCL_SMOKE_SIM_NCCL_VERSION")
        .unwrap()
        .parse()
        .unwrap();
    let forced_blocking = std::env::var("NCCL_COMM_BLOCKING").as_deref() == Ok("1");
    let id = unique_id();
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let stream = bind_device(rank);
                let nccl = &libs().nccl;
                let mut cfg = config(false);
                let mut comm = std::ptr::null_mut();
                if rank == 1 {
                    std::thread::sleep(Duration::from_millis(200));
                }
                // SAFETY: a config shaped like ncclConfig_t; the calls below use valid buffers.
                unsafe {
                    let rc = (nccl.ncclCommInitRankConfig)(
                        &mut comm,
                        2,
                        id,
                        rank as c_int,
                        cfg.as_mut_ptr().cast(),
                    );
                    if forced_blocking {
                        assert_eq!(rc, OK);
                    } else {
                        assert_eq!(rc, IN_PROGRESS);
                        if rank == 0 {
                            // Rank 1 is not there yet: init is still in progress.
                            let mut n = 0;
                            assert_eq!((nccl.ncclCommCount)(comm, &mut n), INVALID_ARGUMENT);
                            assert!(
                                last_error().contains("Attempt to use communicator before the previous operation returned ncclSuccess"),
                                "{}",
                                last_error()
                            );
                        }
                        assert_eq!(settle(comm), OK, "{}", last_error());
                    }
                    let x = [rank as u8 + 1; 8];
                    let mut y = [0u8; 8];
                    let rc = (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut y), 8, 1, 0, comm, stream);
                    let threaded = !forced_blocking && v >= 22300;
                    assert_eq!(rc, if threaded { IN_PROGRESS } else { OK }, "all_reduce at {v}");
                    assert_eq!(settle(comm), OK);
                    let r = Rank {
                        rank,
                        n: 2,
                        comm,
                        stream,
                    };
                    sync(&r);
                    assert_eq!(y, [3u8; 8], "1 + 2 on every element");
                    // Send/recv with the peer: a connection to make the first time.
                    let peer = 1 - rank;
                    for round in 0..2 {
                        assert_eq!((nccl.ncclGroupStart)(), OK);
                        assert_eq!((nccl.ncclSend)(ptr(&x), 8, 1, peer as c_int, comm, stream), OK);
                        assert_eq!(
                            (nccl.ncclRecv)(ptr_mut(&mut y), 8, 1, peer as c_int, comm, stream),
                            OK
                        );
                        let pending = !forced_blocking && (v >= 22300 || round == 0);
                        assert_eq!(
                            (nccl.ncclGroupEnd)(),
                            if pending { IN_PROGRESS } else { OK },
                            "send/recv round {round} at {v}"
                        );
                        assert_eq!(settle(comm), OK);
                    }
                    sync(&r);
                    assert_eq!(y, [peer as u8 + 1; 8]);
                    let rc = (nccl.ncclCommFinalize)(comm);
                    assert_eq!(rc, if forced_blocking { OK } else { IN_PROGRESS });
                    assert_eq!(settle(comm), OK);
                    assert_eq!((nccl.ncclCommFinalize)(comm), INVALID_ARGUMENT);
                    assert_eq!((nccl.ncclCommDestroy)(comm), OK);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

#[test]
fn non_blocking_contract_by_release() {
    for v in ["21903", "22203", "22304", "22803", "23200"] {
        in_child("nonblocking", &[("NCCL_SMOKE_SIM_NCCL_VERSION", v)]);
    }
    in_child(
        "nonblocking",
        &[
            ("NCCL_SMOKE_SIM_NCCL_VERSION", "22803"),
            ("NCCL_COMM_BLOCKING", "1"),
        ],
    );
}

/// An ncclConfig_t as NCCL_CONFIG_INITIALIZER makes it, with `blocking` set.
fn config(blocking: bool) -> Vec<u8> {
    let mut c = vec![0u8; 128];
    c[0..8].copy_from_slice(&128usize.to_le_bytes());
    c[8..12].copy_from_slice(&0xcafe_beefu32.to_le_bytes());
    c[12..16].copy_from_slice(&22803u32.to_le_bytes());
    for f in (16..128).step_by(4) {
        c[f..f + 4].copy_from_slice(&i32::MIN.to_le_bytes());
    }
    c[16..20].copy_from_slice(&i32::from(blocking).to_le_bytes());
    c
}

#[test]
fn abort_ends_an_init_that_waits_for_a_missing_rank() {
    let done = watchdog("abort_during_init", 60);
    let id = unique_id();
    let _stream = bind_device(0);
    let nccl = &libs().nccl;
    let mut cfg = config(false);
    let mut comm = std::ptr::null_mut();
    // SAFETY: rank 0 of 2; rank 1 never comes.
    let rc = unsafe { (nccl.ncclCommInitRankConfig)(&mut comm, 2, id, 0, cfg.as_mut_ptr().cast()) };
    assert_eq!(rc, IN_PROGRESS);
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(async_error(comm), IN_PROGRESS);
    let t = Instant::now();
    // SAFETY: the communicator, consumed here.
    assert_eq!(unsafe { (nccl.ncclCommAbort)(comm) }, OK);
    assert!(t.elapsed() < Duration::from_secs(5));
    let mut e = 0;
    // SAFETY: a handle that is gone: refused, not followed.
    assert_eq!(
        unsafe { (nccl.ncclCommGetAsyncError)(comm, &mut e) },
        INVALID_ARGUMENT
    );

    // A blocking init aborted from another thread returns too.
    let id = unique_id();
    let slot = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let s2 = slot.clone();
    let t = std::thread::spawn(move || {
        let _stream = bind_device(1);
        let mut comm: CommH = std::ptr::null_mut();
        let p: *mut CommH = &mut comm;
        s2.store(p as usize, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: rank 1 of 2, blocking; rank 0 never comes.
        unsafe { (libs().nccl.ncclCommInitRank)(p, 2, id, 1) }
    });
    // NCCL writes the handle before init completes; wait for it, then abort.
    let handle = loop {
        let p = slot.load(std::sync::atomic::Ordering::SeqCst);
        if p != 0 {
            // SAFETY: the other thread's variable, written by the library.
            let h = unsafe { std::ptr::read_volatile(p as *const CommH) };
            if !h.is_null() {
                break h;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    // SAFETY: the communicator the library handed out.
    assert_eq!(unsafe { (nccl.ncclCommAbort)(handle) }, OK);
    assert_ne!(t.join().unwrap(), OK);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

// ---------------------------------------------------------------------------------------------
// ncclCommSplit

const NOCOLOR: c_int = -1;

/// Per parent rank: (color, key). Color 7 gets parent ranks 0, 2, 4 ordered by key then parent
/// rank (2, 4, 0); color 3 gets parent rank 1 alone; parent rank 3 sits out.
const SPLIT: [(c_int, c_int); 5] = [(7, 5), (3, 0), (7, 2), (NOCOLOR, 0), (7, 2)];

/// What a rank found in its child: (child rank, child size, all-reduce of parent rank + 1).
type ChildView = Option<(c_int, c_int, Vec<i32>)>;

/// Checks a child: its rank and size, and an all-reduce of (parent rank + 1) over it.
fn use_child(child: CommH, parent_rank: usize, stream: Stream) -> ChildView {
    if child.is_null() {
        return None;
    }
    let nccl = &libs().nccl;
    let (mut rank, mut n) = (-1, -1);
    let x = [parent_rank as i32 + 1; 6];
    let mut y = [0i32; 6];
    // SAFETY: a live communicator, out-pointers and buffers of 6 int32.
    unsafe {
        assert_eq!((nccl.ncclCommUserRank)(child, &mut rank), OK);
        assert_eq!((nccl.ncclCommCount)(child, &mut n), OK);
        let rc = (nccl.ncclAllReduce)(
            x.as_ptr().cast(),
            y.as_mut_ptr().cast(),
            6,
            2,
            0,
            child,
            stream,
        );
        assert!(rc == OK || rc == IN_PROGRESS, "{rc}: {}", last_error());
        assert_eq!(settle(child), OK);
        assert_eq!((libs().cu.cuStreamSynchronize)(stream), 0);
        assert_eq!((nccl.ncclCommDestroy)(child), OK);
    }
    Some((rank, n, y.to_vec()))
}

fn check_split(views: &[ChildView]) {
    // Color 7: parent ranks 2, 4, 0 are child ranks 0, 1, 2; sum of (parent rank + 1) = 9.
    assert_eq!(views[2], Some((0, 3, vec![9; 6])));
    assert_eq!(views[4], Some((1, 3, vec![9; 6])));
    assert_eq!(views[0], Some((2, 3, vec![9; 6])));
    assert_eq!(views[1], Some((0, 1, vec![2; 6])));
    assert_eq!(views[3], None);
}

#[test]
fn split_groups_by_color_and_orders_by_key() {
    let views = with_ranks(5, |r| {
        let nccl = &libs().nccl;
        let (color, key) = SPLIT[r.rank];
        let mut child: CommH = 8 as CommH; // NCCL clears it first
        // SAFETY: a live parent, an out-pointer; NULL config inherits the parent's.
        let rc =
            unsafe { (nccl.ncclCommSplit)(r.comm, color, key, &mut child, std::ptr::null_mut()) };
        assert_eq!(rc, OK, "{}", last_error());
        use_child(child, r.rank, r.stream)
    });
    check_split(&views);
}

#[test]
fn split_of_a_non_blocking_parent_is_in_progress_until_the_parent_says() {
    let done = watchdog("split non-blocking", 60);
    let id = unique_id();
    let handles: Vec<_> = (0..5)
        .map(|rank| {
            std::thread::spawn(move || {
                let stream = bind_device(rank);
                let nccl = &libs().nccl;
                let mut cfg = config(false);
                let mut parent = std::ptr::null_mut();
                // SAFETY: a config shaped like ncclConfig_t and out-pointers; `child` outlives
                // the split job (the parent settles before it goes).
                unsafe {
                    let rc = (nccl.ncclCommInitRankConfig)(
                        &mut parent,
                        5,
                        id,
                        rank as c_int,
                        cfg.as_mut_ptr().cast(),
                    );
                    assert_eq!(rc, IN_PROGRESS);
                    assert_eq!(settle(parent), OK, "{}", last_error());
                    let (color, key) = SPLIT[rank];
                    let mut child: CommH = std::ptr::null_mut();
                    let rc =
                        (nccl.ncclCommSplit)(parent, color, key, &mut child, std::ptr::null_mut());
                    assert_eq!(rc, IN_PROGRESS, "{}", last_error());
                    // The parent is busy with the job: a second split is refused.
                    let mut other: CommH = std::ptr::null_mut();
                    if settle_now(parent) == IN_PROGRESS {
                        assert_eq!(
                            (nccl.ncclCommSplit)(
                                parent,
                                color,
                                key,
                                &mut other,
                                std::ptr::null_mut()
                            ),
                            INVALID_ARGUMENT
                        );
                    }
                    assert_eq!(settle(parent), OK, "{}", last_error());
                    let child = std::ptr::read_volatile(&child);
                    // The child inherits non-blocking: its all-reduce may be in progress.
                    let view = use_child(child, rank, stream);
                    assert_eq!((nccl.ncclCommAbort)(parent), OK);
                    view
                }
            })
        })
        .collect();
    let views: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    check_split(&views);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The state now, without waiting.
fn settle_now(comm: CommH) -> u32 {
    async_error(comm)
}

#[test]
fn abort_ends_a_split_that_waits_for_a_rank_that_never_splits() {
    let done = watchdog("split abort", 60);
    let id = unique_id();
    let handles: Vec<_> = (0..2)
        .map(|rank| {
            std::thread::spawn(move || {
                let _stream = bind_device(rank);
                let nccl = &libs().nccl;
                let mut cfg = config(false);
                let mut parent = std::ptr::null_mut();
                // SAFETY: as above; the abort waits for the split job before `child` goes.
                unsafe {
                    let rc = (nccl.ncclCommInitRankConfig)(
                        &mut parent,
                        2,
                        id,
                        rank as c_int,
                        cfg.as_mut_ptr().cast(),
                    );
                    assert_eq!(rc, IN_PROGRESS);
                    assert_eq!(settle(parent), OK, "{}", last_error());
                    if rank == 0 {
                        let mut child: CommH = std::ptr::null_mut();
                        let rc =
                            (nccl.ncclCommSplit)(parent, 0, 0, &mut child, std::ptr::null_mut());
                        assert_eq!(rc, IN_PROGRESS);
                        std::thread::sleep(Duration::from_millis(300));
                        assert_eq!(async_error(parent), IN_PROGRESS, "rank 1 never joins");
                        let t = Instant::now();
                        assert_eq!((nccl.ncclCommAbort)(parent), OK);
                        assert!(t.elapsed() < Duration::from_secs(5));
                        assert!(std::ptr::read_volatile(&child).is_null());
                    } else {
                        std::thread::sleep(Duration::from_millis(600));
                        assert_eq!((nccl.ncclCommAbort)(parent), OK);
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// The entry point of child processes; does nothing in a normal run.
#[test]
fn child() {
    let Ok(name) = std::env::var(CHILD_ENV) else {
        return;
    };
    match name.as_str() {
        "nonblocking" => child_nonblocking(),
        other => panic!("no scenario {other}"),
    }
}
