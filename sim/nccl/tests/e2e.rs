//! End to end, in one process: collectives of every type and operation, all-to-all, grouped
//! point-to-point, properties and bad arguments. Every element of every result is checked.
// This test calls the simulation through its C ABI, as a dlopen caller does: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]

mod e2e_common;
use e2e_common::*;

// ---------------------------------------------------------------------------------------------
// In-process scenarios

#[test]
fn library_identifies_itself() {
    let l = libs();
    // SAFETY: no arguments.
    let marker = cstr(unsafe { (l.nccl.ncclSmokeSimulation)() });
    assert!(marker.starts_with("nccl-smoke simulated NCCL "), "{marker}");
    let mut v = 0;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { (l.nccl.ncclGetVersion)(&mut v) }, OK);
    assert_eq!(v, 22803);
    // SAFETY: any code.
    assert_eq!(
        cstr(unsafe { (l.nccl.ncclGetErrorString)(6) }),
        "remote process exited or there was a network error"
    );
}

#[test]
fn all_reduce_every_type_and_operation_on_four_ranks() {
    const COUNT: usize = 37;
    let results = with_ranks(4, |r| {
        let nccl = &libs().nccl;
        let mut bufs = Vec::new();
        for (dtype, _, size) in TYPES {
            for op in 0..5 {
                let send: Vec<u8> = (0..COUNT)
                    .flat_map(|i| encode(dtype, value(dtype, r.rank, i) as f64))
                    .collect();
                let mut recv = vec![0xAAu8; COUNT * size];
                // SAFETY: buffers of COUNT elements, live until the stream is synchronized.
                let rc = unsafe {
                    (nccl.ncclAllReduce)(
                        ptr(&send),
                        ptr_mut(&mut recv),
                        COUNT,
                        dtype,
                        op,
                        r.comm,
                        r.stream,
                    )
                };
                assert_eq!(rc, OK, "{}", last_error());
                bufs.push((dtype, op, send, recv));
            }
        }
        sync(&r);
        assert_eq!(async_error(r.comm), OK);
        bufs.into_iter()
            .map(|(d, o, _, recv)| (d, o, recv))
            .collect::<Vec<_>>()
    });
    for (rank, bufs) in results.iter().enumerate() {
        for (dtype, op, recv) in bufs {
            let name = TYPES.iter().find(|t| t.0 == *dtype).unwrap().1;
            let want: Vec<u8> = (0..COUNT)
                .flat_map(|i| expected(*dtype, *op, 4, i))
                .collect();
            assert_eq!(recv, &want, "rank {rank} {name} op {op}");
        }
    }
}

#[test]
fn all_reduce_in_place_and_empty() {
    with_ranks(3, |r| {
        let nccl = &libs().nccl;
        let mut buf: Vec<u8> = (0..1000u32)
            .flat_map(|i| ((i + r.rank as u32) as f32).to_le_bytes())
            .collect();
        let p = ptr_mut(&mut buf);
        // SAFETY: one buffer, in place; then a count-0 call with NULL buffers (a no-op).
        unsafe {
            assert_eq!((nccl.ncclAllReduce)(p, p, 1000, 7, 0, r.comm, r.stream), OK);
            assert_eq!(
                (nccl.ncclAllReduce)(
                    std::ptr::null(),
                    std::ptr::null_mut(),
                    0,
                    7,
                    0,
                    r.comm,
                    r.stream
                ),
                OK
            );
        }
        sync(&r);
        for (i, c) in buf.chunks(4).enumerate() {
            let got = f32::from_le_bytes(c.try_into().unwrap());
            assert_eq!(got, (3 * i + 3) as f32, "rank {} element {i}", r.rank);
        }
    });
}

#[test]
fn all_to_all_chunks_go_to_their_ranks() {
    const COUNT: usize = 5;
    with_ranks(4, |r| {
        let nccl = &libs().nccl;
        let send: Vec<u8> = (0..r.n)
            .flat_map(|j| (0..COUNT).map(move |k| (r.rank * 1000 + j * 100 + k) as i32))
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut recv = vec![0u8; send.len()];
        // SAFETY: n * COUNT int32 in each buffer.
        let rc = unsafe {
            (nccl.ncclAlltoAll)(ptr(&send), ptr_mut(&mut recv), COUNT, 2, r.comm, r.stream)
        };
        assert_eq!(rc, OK, "{}", last_error());
        sync(&r);
        for i in 0..r.n {
            for k in 0..COUNT {
                let at = (i * COUNT + k) * 4;
                let got = i32::from_le_bytes(recv[at..at + 4].try_into().unwrap());
                assert_eq!(
                    got as usize,
                    i * 1000 + r.rank * 100 + k,
                    "rank {} chunk {i} [{k}]",
                    r.rank
                );
            }
        }
    });
}

#[test]
fn grouped_send_recv_with_every_peer_and_self() {
    const COUNT: usize = 6;
    with_ranks(3, |r| {
        let nccl = &libs().nccl;
        let sends: Vec<Vec<u8>> = (0..r.n)
            .map(|p| {
                (0..COUNT)
                    .flat_map(|k| ((r.rank * 100 + p * 10 + k) as f64).to_le_bytes())
                    .collect()
            })
            .collect();
        let mut recvs: Vec<Vec<u8>> = (0..r.n).map(|_| vec![0u8; COUNT * 8]).collect();
        // SAFETY: buffers of COUNT doubles, live until the stream is synchronized.
        unsafe {
            assert_eq!((nccl.ncclGroupStart)(), OK);
            for p in 0..r.n {
                assert_eq!(
                    (nccl.ncclSend)(ptr(&sends[p]), COUNT, 8, p as c_int, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclRecv)(
                        ptr_mut(&mut recvs[p]),
                        COUNT,
                        8,
                        p as c_int,
                        r.comm,
                        r.stream
                    ),
                    OK
                );
            }
            assert_eq!((nccl.ncclGroupEnd)(), OK, "{}", last_error());
        }
        sync(&r);
        for (p, buf) in recvs.iter().enumerate() {
            for (k, c) in buf.chunks(8).enumerate() {
                let got = f64::from_le_bytes(c.try_into().unwrap());
                assert_eq!(
                    got,
                    (p * 100 + r.rank * 10 + k) as f64,
                    "rank {} from {p} [{k}]",
                    r.rank
                );
            }
        }
    });
}

#[test]
fn a_group_can_mix_a_collective_with_point_to_point() {
    with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let peer = (1 - r.rank) as c_int;
        let send = ((r.rank + 1) as i64 * 10).to_le_bytes().to_vec();
        let mut sum = vec![0u8; 8];
        let mut got = vec![0u8; 8];
        // SAFETY: one int64 per buffer. Rank 0 issues the send first, rank 1 the receive
        // first: point-to-point and collective traffic are matched separately.
        unsafe {
            assert_eq!((nccl.ncclGroupStart)(), OK);
            if r.rank == 0 {
                assert_eq!(
                    (nccl.ncclSend)(ptr(&send), 1, 4, peer, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclAllReduce)(ptr(&send), ptr_mut(&mut sum), 1, 4, 0, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclRecv)(ptr_mut(&mut got), 1, 4, peer, r.comm, r.stream),
                    OK
                );
            } else {
                assert_eq!(
                    (nccl.ncclRecv)(ptr_mut(&mut got), 1, 4, peer, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclAllReduce)(ptr(&send), ptr_mut(&mut sum), 1, 4, 0, r.comm, r.stream),
                    OK
                );
                assert_eq!(
                    (nccl.ncclSend)(ptr(&send), 1, 4, peer, r.comm, r.stream),
                    OK
                );
            }
            assert_eq!((nccl.ncclGroupEnd)(), OK);
        }
        sync(&r);
        assert_eq!(i64::from_le_bytes(sum.try_into().unwrap()), 30);
        assert_eq!(
            i64::from_le_bytes(got.try_into().unwrap()),
            (2 - r.rank) as i64 * 10
        );
    });
}

#[test]
fn one_rank_reduces_exchanges_and_sends_to_itself() {
    with_ranks(1, |r| {
        let nccl = &libs().nccl;
        let x: Vec<u8> = [1.5f32, -2.0, 3.25]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let mut sum = vec![0u8; 12];
        let mut avg = vec![0u8; 12];
        let mut a2a = vec![0u8; 12];
        let mut got = vec![0u8; 12];
        // SAFETY: three floats per buffer.
        unsafe {
            assert_eq!(
                (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut sum), 3, 7, 0, r.comm, r.stream),
                OK
            );
            assert_eq!(
                (nccl.ncclAllReduce)(ptr(&x), ptr_mut(&mut avg), 3, 7, 4, r.comm, r.stream),
                OK
            );
            assert_eq!(
                (nccl.ncclAlltoAll)(ptr(&x), ptr_mut(&mut a2a), 3, 7, r.comm, r.stream),
                OK
            );
            assert_eq!((nccl.ncclGroupStart)(), OK);
            assert_eq!(
                (nccl.ncclRecv)(ptr_mut(&mut got), 3, 7, 0, r.comm, r.stream),
                OK
            );
            assert_eq!((nccl.ncclSend)(ptr(&x), 3, 7, 0, r.comm, r.stream), OK);
            assert_eq!((nccl.ncclGroupEnd)(), OK);
        }
        sync(&r);
        assert_eq!((&sum, &avg, &a2a, &got), (&x, &x, &x, &x));
    });
}

#[test]
fn properties_and_bad_arguments() {
    with_ranks(2, |r| {
        let nccl = &libs().nccl;
        let (mut n, mut rank, mut dev) = (0, 0, -1);
        let buf = [0u8; 8];
        let mut out = [0u8; 8];
        // SAFETY: a live communicator, valid out-pointers, and calls the library must refuse
        // without touching memory.
        unsafe {
            assert_eq!((nccl.ncclCommCount)(r.comm, &mut n), OK);
            assert_eq!((nccl.ncclCommUserRank)(r.comm, &mut rank), OK);
            assert_eq!((nccl.ncclCommCuDevice)(r.comm, &mut dev), OK);
            assert_eq!((n, rank as usize, dev as usize), (2, r.rank, r.rank % 8));
            let (s, d) = (ptr(&buf), ptr_mut(&mut out));
            assert_eq!(
                // 12 is ncclNumTypes from 2.24, which added the 8-bit floats (10, 11).
                (nccl.ncclAllReduce)(s, d, 1, 12, 0, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclAllReduce)(s, d, 1, -1, 0, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclAllReduce)(s, d, 1, 7, 5, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclSend)(s, 1, 7, 2, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclRecv)(d, 1, 7, -1, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!(
                (nccl.ncclAllReduce)(std::ptr::null(), d, 1, 7, 0, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            // An error inside a group is returned by its end too, and nothing is queued.
            assert_eq!((nccl.ncclGroupStart)(), OK);
            assert_eq!(
                (nccl.ncclSend)(s, 1, 7, 9, r.comm, r.stream),
                INVALID_ARGUMENT
            );
            assert_eq!((nccl.ncclGroupEnd)(), INVALID_ARGUMENT);
            // A send to self without the matching receive.
            assert_eq!((nccl.ncclGroupStart)(), OK);
            assert_eq!(
                (nccl.ncclSend)(s, 1, 7, r.rank as c_int, r.comm, r.stream),
                OK
            );
            assert_eq!((nccl.ncclGroupEnd)(), INVALID_USAGE);
            assert_eq!((nccl.ncclGroupEnd)(), INVALID_USAGE);
        }
        assert_eq!(async_error(r.comm), OK);
    });
}
