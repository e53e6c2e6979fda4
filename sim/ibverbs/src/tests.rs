//! Two queue pairs of this process, connected to each other, through the exported verbs and
//! the context's ops, as NCCL calls them (the fabric is the default: one InfiniBand HCA).

use crate::sys::*;
use crate::*;
use std::ffi::{CStr, c_int};

unsafe fn open() -> *mut ibv_context {
    let mut n: c_int = 0;
    // SAFETY: the list is freed below.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        assert_eq!(n, 1);
        let dev = *list;
        assert_eq!(
            CStr::from_ptr(ibv_get_device_name(dev)).to_str().unwrap(),
            "mlx5_0"
        );
        let ctx = ibv_open_device(dev);
        ibv_free_device_list(list);
        assert!(!ctx.is_null());
        ctx
    }
}

unsafe fn qp(pd: *mut ibv_pd, cq: *mut ibv_cq) -> *mut ibv_qp {
    let mut init = ibv_qp_init_attr {
        send_cq: cq,
        recv_cq: cq,
        qp_type: ibv_qp_type::IBV_QPT_RC,
        cap: ibv_qp_cap {
            max_send_wr: 64,
            max_recv_wr: 64,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        ..Default::default()
    };
    // SAFETY: pd and cq are open.
    let q = unsafe { ibv_create_qp(pd, &mut init) };
    assert!(!q.is_null());
    q
}

unsafe fn connect(q: *mut ibv_qp, dest: u32, dlid: u16) -> c_int {
    use ibv_qp_attr_mask::*;
    let mut a = ibv_qp_attr {
        qp_state: ibv_qp_state::IBV_QPS_INIT,
        port_num: 1,
        ..Default::default()
    };
    // SAFETY: q is open.
    unsafe {
        let r = ibv_modify_qp(
            q,
            &mut a,
            (IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) as c_int,
        );
        assert_eq!(r, 0);
        a.qp_state = ibv_qp_state::IBV_QPS_RTR;
        a.dest_qp_num = dest;
        a.ah_attr.dlid = dlid;
        a.ah_attr.port_num = 1;
        let r = ibv_modify_qp(
            q,
            &mut a,
            (IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN) as c_int,
        );
        if r != 0 {
            return r;
        }
        a.qp_state = ibv_qp_state::IBV_QPS_RTS;
        ibv_modify_qp(
            q,
            &mut a,
            (IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT) as c_int,
        )
    }
}

unsafe fn post(q: *mut ibv_qp, op: u32, local: &mut [u8], remote: u64, imm: u32) -> c_int {
    let mut sge = ibv_sge {
        addr: local.as_mut_ptr() as u64,
        length: local.len() as u32,
        lkey: 1,
    };
    let mut wr = ibv_send_wr {
        wr_id: 7,
        sg_list: &mut sge,
        num_sge: 1,
        opcode: op,
        send_flags: ibv_send_flags::IBV_SEND_SIGNALED,
        ..Default::default()
    };
    wr.wr.rdma.remote_addr = remote;
    wr.__bindgen_anon_1.imm_data = imm;
    let mut bad = std::ptr::null_mut();
    // SAFETY: q is open; the context's ops are ours.
    unsafe { ((*(*q).context).ops.post_send.unwrap())(q, &mut wr, &mut bad) }
}

unsafe fn recv(q: *mut ibv_qp, buf: &mut [u8], wr_id: u64) {
    let mut sge = ibv_sge {
        addr: buf.as_mut_ptr() as u64,
        length: buf.len() as u32,
        lkey: 1,
    };
    let mut wr = ibv_recv_wr {
        wr_id,
        sg_list: &mut sge,
        num_sge: 1,
        ..Default::default()
    };
    let mut bad = std::ptr::null_mut();
    // SAFETY: as in post.
    assert_eq!(
        unsafe { ((*(*q).context).ops.post_recv.unwrap())(q, &mut wr, &mut bad) },
        0
    );
}

unsafe fn poll(cq: *mut ibv_cq) -> Vec<ibv_wc> {
    let mut wc = [ibv_wc::default(); 8];
    // SAFETY: cq is open.
    let n = unsafe { ((*(*cq).context).ops.poll_cq.unwrap())(cq, 8, wc.as_mut_ptr()) };
    wc[..n as usize].to_vec()
}

#[test]
fn queue_pairs_move_bytes_and_complete_as_rc_queue_pairs_do() {
    use ibv_wr_opcode::*;
    // SAFETY: the calls follow the verbs' contracts.
    unsafe {
        let ctx = open();
        let mut port = ibv_port_attr::default();
        assert_eq!(ibv_query_port(ctx, 1, &mut port), 0);
        assert_eq!(
            (port.state, port.lid, port.link_layer),
            (ibv_port_state::IBV_PORT_ACTIVE, 1, 1)
        );
        let mut g = ibv_gid::default();
        assert_eq!(ibv_query_gid(ctx, 1, 0, &mut g), 0);
        assert_eq!(&g.raw[..2], &[0xfe, 0x80]);
        assert_eq!(ibv_query_gid(ctx, 1, 99, &mut g), -1);
        let pd = ibv_alloc_pd(ctx);
        let cq = ibv_create_cq(ctx, 64, std::ptr::null_mut(), std::ptr::null_mut(), 0);
        let (a, b) = (qp(pd, cq), qp(pd, cq));
        // A route to LID 0 goes nowhere: the address is refused at RTR.
        let c = qp(pd, cq);
        assert_eq!(connect(c, (*a).qp_num, 0), libc::EINVAL);
        assert_eq!(ibv_destroy_qp(c), 0);
        assert_eq!(connect(a, (*b).qp_num, 1), 0);
        assert_eq!(connect(b, (*a).qp_num, 1), 0);

        let mut src = *b"hello, fabric!!!";
        let mut dst = [0u8; 16];
        assert_eq!(
            post(a, IBV_WR_RDMA_WRITE, &mut src, dst.as_mut_ptr() as u64, 0),
            0
        );
        assert_eq!(&dst, &src);
        let w = poll(cq);
        assert_eq!(
            (w.len(), w[0].status, w[0].opcode, w[0].byte_len),
            (1, 0, ibv_wc_opcode::IBV_WC_RDMA_WRITE, 16)
        );

        // WRITE_WITH_IMM consumes a receive posted on b and completes it with the immediate.
        let mut unused = [0u8; 4];
        recv(b, &mut unused, 41);
        let mut more = *b"second write....";
        assert_eq!(
            post(
                a,
                IBV_WR_RDMA_WRITE_WITH_IMM,
                &mut more,
                dst.as_mut_ptr() as u64,
                0x1234
            ),
            0
        );
        assert_eq!(&dst, b"second write....");
        let w = poll(cq);
        let r = w
            .iter()
            .find(|w| w.wr_id == 41)
            .expect("b's receive completion");
        assert_eq!(
            (r.opcode, r.byte_len, r.__bindgen_anon_1.imm_data, r.qp_num),
            (
                ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM,
                16,
                0x1234,
                (*b).qp_num
            )
        );

        // SEND lands in the posted receive's buffer; READ brings b's bytes back.
        let mut inbox = [0u8; 32];
        recv(b, &mut inbox, 42);
        let mut msg = *b"a message";
        assert_eq!(post(a, IBV_WR_SEND, &mut msg, 0, 0), 0);
        let w = poll(cq);
        let r = w
            .iter()
            .find(|w| w.wr_id == 42)
            .expect("b's receive completion");
        assert_eq!((r.opcode, r.byte_len), (ibv_wc_opcode::IBV_WC_RECV, 9));
        assert_eq!(&inbox[..9], b"a message");
        let mut back = [0u8; 9];
        assert_eq!(
            post(a, IBV_WR_RDMA_READ, &mut back, inbox.as_ptr() as u64, 0),
            0
        );
        assert_eq!(&back, b"a message");
        poll(cq);

        // A peer that is gone: transport retries exhausted, then the queue pair is in error.
        assert_eq!(ibv_destroy_qp(b), 0);
        assert_eq!(
            post(a, IBV_WR_RDMA_WRITE, &mut src, dst.as_mut_ptr() as u64, 0),
            0
        );
        assert_eq!(
            post(a, IBV_WR_RDMA_WRITE, &mut src, dst.as_mut_ptr() as u64, 0),
            0
        );
        let w = poll(cq);
        assert_eq!((w[0].status, w[0].vendor_err), (12, 0x81));
        assert_eq!(w[1].status, 5);
        let mut attr = ibv_qp_attr::default();
        assert_eq!(ibv_query_qp(a, &mut attr, 0, std::ptr::null_mut()), 0);
        assert_eq!(attr.qp_state, ibv_qp_state::IBV_QPS_ERR);
        assert_eq!(ibv_destroy_qp(a), 0);
        assert_eq!(ibv_destroy_cq(cq), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}

#[test]
fn dma_buf_registration_is_refused_without_the_dmabuf_option() {
    // SAFETY: the device and pd are opened and closed here.
    unsafe {
        let ctx = open();
        let pd = ibv_alloc_pd(ctx);
        // NCCL's probe (fd -1) and a real descriptor alike: EOPNOTSUPP, "no DMA-BUF".
        for fd in [-1, 0] {
            let mr = ibv_reg_dmabuf_mr(pd, 0, 4096, 0, fd, 0);
            assert!(mr.is_null());
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EOPNOTSUPP)
            );
        }
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}
