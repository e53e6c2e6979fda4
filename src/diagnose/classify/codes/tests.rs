use super::*;

#[test]
fn codes_decode_with_their_names() {
    let new = "h:1:2 [1] transport/net_ib/p2p.cc:788 (ncclIbLogCompletionWithError) NCCL WARN NET/IB: Got completion from peer 192.0.2.2<47608> with status=IBV_WC_RETRY_EXC_ERR(12) opcode=IBV_WC_RDMA_WRITE(1) vendor_err=129 qp_num=786212  hca mlx5_0";
    assert!(
        decode(new)
            .unwrap()
            .starts_with("ibv_wc_status 12 IBV_WC_RETRY_EXC_ERR")
    );
    let p = path_fault(new).unwrap();
    assert_eq!(
        (p.status, p.peer.as_deref()),
        (12, Some("192.0.2.2<47608>"))
    );
    let flushed = "h:1:2 [1] transport/net_ib.cc:1335 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1> with error 5, opcode 1, len 32, vendor err 244 (Recv)";
    assert_eq!(path_fault(flushed).unwrap().name, "IBV_WC_WR_FLUSH_ERR");
    // A status the table lacks: still a path fault, named by its number, not by nothing.
    let odd = flushed.replace("with error 5,", "with error 77,");
    assert_eq!(decode(&odd), None);
    let p = path_fault(&odd).unwrap();
    assert_eq!((p.status, p.name), (77, "ibv_wc_status"));
    let ib = "h:1:2 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<59342> with error 12, opcode 0, len 0, vendor err 129 (Send)";
    assert!(decode(ib).unwrap().contains("IBV_WC_RETRY_EXC_ERR"));
    let sock = "socketStartConnect: Connect to 10.0.0.2<4567> failed : Connection refused";
    assert!(decode(sock).unwrap().starts_with("errno ECONNREFUSED"));
    assert!(
        decode("ncclRemoteError: remote process exited")
            .unwrap()
            .starts_with("ncclRemoteError")
    );
    assert_eq!(decode("nothing here"), None);
}
