//! The texts of the faults the simulation injects, stage by stage, as each NCCL release prints
//! them.

use super::*;

/// `init`: the root cannot be reached (the network is down or the interface is wrong).
pub fn init_error(v: i32, root: SocketAddrV4) -> Report {
    connect_failed(v, root, "Network is unreachable").trail(&[&at(
        v,
        "init.cc:1386",
        "init.cc:1547",
    )])
}

/// Line of the CUCHECK around cuMemImportFromShareableHandle in ncclP2pImportShareableBuffer.
fn p2p_import_line(v: i32) -> u32 {
    match v {
        ..22000 => 243,
        22000..22100 => 248,
        22100..22200 => 251,
        22200..22300 => 252,
        22300..22400 => 278,
        22400..22700 => 274,
        _ => 275,
    }
}

/// `import`: the peer's cuMem buffer cannot be imported (seed 000: containers that each see
/// their GPU as device 0, driver 570): ncclUnhandledCudaError.
pub fn import(v: i32, rank: usize, peer: usize, dev: i32, peer_dev: i32) -> Report {
    Report::new(UNHANDLED_CUDA_ERROR)
        .info(
            sys::INIT | sys::P2P,
            format!("Channel 00/0 : {peer}[{peer_dev}] -> {rank}[{dev}] via P2P/CUMEM/read"),
        )
        .warn(
            format!("transport/p2p.cc:{}", p2p_import_line(v)),
            "Cuda failure 101 'invalid device ordinal'",
        )
        .trail(&[
            &at(v, "transport/p2p.cc:325", "transport/p2p.cc:353"),
            &at(v, "transport/p2p.cc:451", "transport/p2p.cc:479"),
            &at(v, "transport.cc:183", "transport.cc:217"),
            &at(v, "group.cc:130", "group.cc:583"),
        ])
}

/// Lines of "[Service thread] Accept failed", "Could not receive type" and "Failed to
/// execute operation" in proxy.cc.
fn proxy_lines(v: i32) -> [u32; 3] {
    match v {
        ..22000 => [1494, 1533, 1557],
        22000..22100 => [1504, 1543, 1567],
        22100..22200 => [1517, 1556, 1580],
        22200..22300 => [1458, 1497, 1521],
        22300..22400 => [1587, 1631, 1656],
        22400..22500 => [1599, 1643, 1668],
        22500..22600 => [1604, 1648, 1673],
        22600..22700 => [1625, 1669, 1694],
        22700..22800 => [1632, 1676, 1701],
        _ => [1672, 1716, 1741],
    }
}

/// `proxy`: the proxy service cannot accept a local rank's connection (seed 003):
/// ncclInternalError (`res=3`).
pub fn proxy(v: i32, rank: usize) -> Report {
    let [accept, recv, exec] = proxy_lines(v);
    Report::new(INTERNAL_ERROR)
        .warn(
            format!("proxy.cc:{accept}"),
            "[Service thread] Accept failed Resource temporarily unavailable",
        )
        .warn(
            format!("proxy.cc:{recv}"),
            format!("[Service thread] Could not receive type from localRank {rank}, res=3, closed=0"),
        )
        .warn(
            format!("proxy.cc:{exec}"),
            format!("[Proxy Service {rank}] Failed to execute operation Close from rank {rank}, retcode 3"),
        )
        .trail(&[&at(v, "proxy.cc:1137", "proxy.cc:1188"), &at(v, "transport/p2p.cc:420", "transport/p2p.cc:446")])
}

/// `shm`: /dev/shm cannot hold the segment (seed 004): ncclSystemError.
pub fn shm(v: i32, name: &str, size: usize) -> Report {
    let path = format!("/dev/shm/nccl-{name}");
    let real = size + 4;
    let (extend, segment) = if v >= 22200 {
        (
            format!(
                "Error: failed to extend {path} to {real} bytes, error: No space left on device (28)"
            ),
            format!(
                "Error while creating shared memory segment {path} (size {size}), error: No space left on device (28)"
            ),
        )
    } else {
        (
            format!("Error: failed to extend {path} to {real} bytes"),
            format!("Error while creating shared memory segment {path} (size {size})"),
        )
    };
    Report::new(SYSTEM_ERROR)
        .warn(at(v, "misc/shmutils.cc:72", "misc/shmutils.cc:87"), extend)
        .warn(
            at(v, "misc/shmutils.cc:113", "misc/shmutils.cc:131"),
            segment,
        )
        .trail(&[
            &at(v, "transport/shm.cc:114", "transport/shm.cc:217"),
            &at(v, "transport.cc:33", "transport.cc:44"),
            &at(v, "transport.cc:97", "transport.cc:163"),
        ])
}

/// `net`: a work request completes in error on the InfiniBand transport (status 12,
/// transport retry counter exceeded): ncclSystemError, as the README promises.
pub fn net(v: i32, peer: SocketAddrV4) -> Report {
    let p = sock(peer);
    let msg = if v >= 22200 {
        format!(
            "NET/IB: Got completion from peer {p} with status=12 opcode=0 len=0 vendor err 129 (Send) hca mlx5_0"
        )
    } else if v >= 22000 {
        format!(
            "NET/IB : Got completion from peer {p} with status=12 opcode=0 len=0 vendor err 129 (Send)"
        )
    } else {
        format!(
            "NET/IB : Got completion from peer {p} with error 12, opcode 0, len 0, vendor err 129 (Send)"
        )
    };
    Report::new(SYSTEM_ERROR)
        .warn(
            at(v, "transport/net_ib.cc:1333", "transport/net_ib.cc:2470"),
            msg,
        )
        .trail(&[&at(v, "transport/net.cc:1193", "transport/net.cc:1379")])
}

/// `net:slow`: GPUDirect RDMA is off (seed 002; NCCL before 2.23.4 misses nvidia_peermem).
pub fn gdr_disabled() -> Line {
    Line::Info {
        flags: sys::NET,
        msg: "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)".into(),
    }
}

/// `run`: this rank's link drops mid-run: its send times out (`ETIMEDOUT`, TCP's retransmission
/// timeout on a dead link; which errno a dead link gives is a guess, NCCL prints whatever
/// `send` set, `socketProgressOpt`, src/misc/socket.cc v2.28.3-1): ncclSystemError here; its
/// peers see the connection close. Not "Connection reset by peer": that is what a rank sees
/// when its peer went away, the victim's words, not the culprit's.
pub fn run_error(v: i32, peer: SocketAddrV4) -> Report {
    transfer_failed(v, true, peer, "Connection timed out").trail(&[&at(
        v,
        "transport/net.cc:1193",
        "transport/net.cc:1379",
    )])
}

/// `finalize`: tearing down the proxy fails: ncclSystemError.
pub fn finalize(v: i32, comm: usize, rank: usize) -> Report {
    let who = if v >= 22200 {
        "ncclProxyStop"
    } else {
        "commReclaim"
    };
    Report::new(SYSTEM_ERROR).warn(
        at(v, "init.cc:1948", "init.cc:2170"),
        format!("{who}: comm {comm:#x} (rank = {rank}) destroys proxy resource error 2"),
    )
}
