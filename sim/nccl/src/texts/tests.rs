use super::*;
use std::net::Ipv4Addr;

fn a() -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::new(10, 1, 2, 3), 43211)
}

#[test]
fn bootstrap_texts_follow_the_release() {
    assert_eq!(no_interface(21903).code, INTERNAL_ERROR);
    assert_eq!(no_interface(22803).code, INVALID_USAGE);
    assert_eq!(
        no_interface(22803).warnings(),
        ["bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found"]
    );
    let ip = Ipv4Addr::new(10, 0, 0, 2);
    assert_eq!(
        bootstrap_using(22803, "eth0", ip),
        Line::Info {
            flags: sys::BOOTSTRAP,
            msg: "Bootstrap: Using eth0:10.0.0.2<0>".into()
        }
    );
    assert_eq!(
        bootstrap_using(21903, "eth0", ip),
        Line::Info {
            flags: sys::INIT,
            msg: "Bootstrap : Using eth0:10.0.0.2<0>".into()
        }
    );
    assert!(root_mismatch(21903, 2, 3).ends_with("procs 2 : 3"));
    assert!(root_mismatch(22803, 2, 3).contains("nranks 2 vs 3"));
}

#[test]
fn socket_texts_follow_the_release() {
    let r = connect_failed(22803, a(), "Network is unreachable");
    assert_eq!(r.code, SYSTEM_ERROR);
    assert_eq!(
        r.warnings(),
        [
            "misc/socket.cc:596 NCCL WARN socketStartConnect: connect to 10.1.2.3<43211> failed : Network is unreachable"
        ]
    );
    assert!(
        connect_failed(21903, a(), "x").warnings()[0]
            .contains("Connect to 10.1.2.3<43211> failed : x")
    );
    assert_eq!(
        connect_exhausted(22803, a(), "Connection refused", 35).code,
        REMOTE_ERROR
    );
    assert!(
        connect_exhausted(21903, a(), "Connection refused", 20000).warnings()[0]
            .ends_with("exceeded retries (20000)")
    );
    assert_eq!(
        closed_by_peer(22803, "node2", 5000).warnings(),
        [
            "misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer node2<5000>"
        ]
    );
    let t = transfer_failed(22803, true, a(), "Connection reset by peer").warnings();
    assert!(t[0].ends_with("Call to send to 10.1.2.3<43211> failed : Connection reset by peer"));
    assert!(t[1].ends_with("NET/Socket : socket progress error"));
    let t = transfer_failed(21903, true, a(), "Connection reset by peer").warnings();
    assert!(t[0].ends_with("Call to recv from 10.1.2.3<43211> failed : Connection reset by peer"));
    assert_eq!(truncated(22803, a(), 8, 4).code, INVALID_USAGE);
}

#[test]
fn seed_texts() {
    let r = import(22602, 1, 0, 0, 0);
    assert_eq!(r.code, UNHANDLED_CUDA_ERROR);
    assert_eq!(
        r.warnings(),
        ["transport/p2p.cc:274 NCCL WARN Cuda failure 101 'invalid device ordinal'"]
    );
    assert!(import(22803, 1, 0, 0, 0).warnings()[0].starts_with("transport/p2p.cc:275 "));
    assert!(
        r.lines
            .iter()
            .any(|l| matches!(l, Line::Ret { code: 1, .. }))
    );

    let p = proxy(22205, 2);
    assert_eq!(p.code, INTERNAL_ERROR);
    assert_eq!(
        p.warnings(),
        [
            "proxy.cc:1458 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable",
            "proxy.cc:1497 NCCL WARN [Service thread] Could not receive type from localRank 2, res=3, closed=0",
            "proxy.cc:1521 NCCL WARN [Proxy Service 2] Failed to execute operation Close from rank 2, retcode 3",
        ]
    );

    let s = shm(22803, "Zr3l1a", 9637888);
    assert_eq!(s.code, SYSTEM_ERROR);
    assert_eq!(
        s.warnings()[1],
        "misc/shmutils.cc:131 NCCL WARN Error while creating shared memory segment /dev/shm/nccl-Zr3l1a (size 9637888), error: No space left on device (28)"
    );
    assert!(s.warnings()[0].contains("to 9637892 bytes"));
    assert!(shm(21903, "x", 1).warnings()[1].ends_with("(size 1)"));

    let n = net(22803, a());
    assert_eq!(n.code, SYSTEM_ERROR);
    assert!(
        n.warnings()[0].contains("NET/IB: Got completion from peer 10.1.2.3<43211> with status=12")
    );
    assert!(
        net(21903, a()).warnings()[0]
            .contains("NET/IB : Got completion from peer 10.1.2.3<43211> with error 12")
    );
    assert!(
        matches!(gdr_disabled(), Line::Info { flags: sys::NET, ref msg } if msg.starts_with("NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'"))
    );
    assert_eq!(finalize(22803, 0x10, 1).code, SYSTEM_ERROR);
    assert!(
        finalize(21903, 0x10, 1).warnings()[0]
            .starts_with("init.cc:1948 NCCL WARN commReclaim: comm 0x10 (rank = 1)")
    );
}

#[test]
fn argument_texts() {
    assert_eq!(
        bad_type(22803, "AllReduce", 12).warnings(),
        ["misc/argcheck.cc:52 NCCL WARN AllReduce : invalid type 12"]
    );
    assert!(
        bad_peer(22803, "Send", 4, 4).warnings()[0]
            .ends_with("Send : invalid root 4 (root should be in the 0..4 range)")
    );
    assert_eq!(null_arg("AllReduce", "comm").code, INVALID_ARGUMENT);
    assert_eq!(not_in_group(22803).code, INVALID_USAGE);
}
