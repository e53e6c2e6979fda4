//! The exported operations: collectives and point-to-point calls, each one [`Call`] for
//! NCCL's enqueue checks (`crate::enqueue`).

use super::guard;
use crate::enqueue::{Call, submit};
use crate::reduce;
use std::ffi::{c_int, c_void};

/// One collective call; `root` is 0 for those without one, as NCCL passes it.
#[allow(clippy::too_many_arguments)]
fn collective(
    name: &'static str,
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dtype: c_int,
    redop: c_int,
    root: c_int,
    (comm, stream): (*mut c_void, *mut c_void),
) -> u32 {
    guard(|| {
        submit(
            comm,
            stream,
            Call {
                name,
                send: send as usize,
                recv: recv as usize,
                count,
                dtype,
                redop,
                root,
            },
        )
    })
}

/// `ncclAllGather`: `sendcount` elements from each rank, rank i's at `i × sendcount`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    sendcount: usize,
    datatype: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let sum = reduce::SUM as c_int;
    collective(
        "AllGather",
        sendbuff,
        recvbuff,
        sendcount,
        datatype,
        sum,
        0,
        (comm, stream),
    )
}

/// `ncclReduceScatter`: rank i receives block i of the reduction (`recvcount` elements).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduceScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    recvcount: usize,
    datatype: c_int,
    op: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    collective(
        "ReduceScatter",
        sendbuff,
        recvbuff,
        recvcount,
        datatype,
        op,
        0,
        (comm, stream),
    )
}

/// `ncclBroadcast`: `count` elements from `root` to every rank.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclBroadcast(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let sum = reduce::SUM as c_int;
    collective(
        "Broadcast",
        sendbuff,
        recvbuff,
        count,
        datatype,
        sum,
        root,
        (comm, stream),
    )
}

/// `ncclReduce`: the reduction of every rank's `count` elements, on `root`.
#[allow(clippy::too_many_arguments)]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    collective(
        "Reduce",
        sendbuff,
        recvbuff,
        count,
        datatype,
        op,
        root,
        (comm, stream),
    )
}

/// `ncclGather` (NCCL 2.28): `count` elements from each rank to `root`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclGather(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let sum = reduce::SUM as c_int;
    collective(
        "Gather",
        sendbuff,
        recvbuff,
        count,
        datatype,
        sum,
        root,
        (comm, stream),
    )
}

/// `ncclScatter` (NCCL 2.28): block j of `root`'s `nranks × count` elements to rank j.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclScatter(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    root: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let sum = reduce::SUM as c_int;
    collective(
        "Scatter",
        sendbuff,
        recvbuff,
        count,
        datatype,
        sum,
        root,
        (comm, stream),
    )
}

/// `ncclAllReduce`: the reduction of every rank's `count` elements, on every rank.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAllReduce(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    op: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    collective(
        "AllReduce",
        sendbuff,
        recvbuff,
        count,
        datatype,
        op,
        0,
        (comm, stream),
    )
}

/// `count` elements go to, and come from, each rank (NCCL 2.28's ncclAlltoAll).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclAlltoAll(
    sendbuff: *const c_void,
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let sum = reduce::SUM as c_int;
    collective(
        "AlltoAll",
        sendbuff,
        recvbuff,
        count,
        datatype,
        sum,
        0,
        (comm, stream),
    )
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclSend(
    sendbuff: *const c_void,
    count: usize,
    datatype: c_int,
    peer: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let call = point_to_point("Send", sendbuff as usize, 0, count, datatype, peer);
    guard(|| submit(comm, stream, call))
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ncclRecv(
    recvbuff: *mut c_void,
    count: usize,
    datatype: c_int,
    peer: c_int,
    comm: *mut c_void,
    stream: *mut c_void,
) -> u32 {
    let call = point_to_point("Recv", 0, recvbuff as usize, count, datatype, peer);
    guard(|| submit(comm, stream, call))
}

/// `ncclSend` / `ncclRecv`: one side of an exchange with `peer`.
fn point_to_point(
    name: &'static str,
    send: usize,
    recv: usize,
    count: usize,
    dtype: c_int,
    peer: c_int,
) -> Call {
    Call {
        name,
        send,
        recv,
        count,
        dtype,
        redop: reduce::SUM as c_int,
        root: peer,
    }
}
