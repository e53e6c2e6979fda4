//! A CPU stand-in for rdma-core's `libibverbs.so.1`, for the real libnccl's NET/IB transport on a
//! machine without an HCA (see `sim/README.md`, "The InfiniBand stand-in").
//!
//! HCAs come from `NCCL_SMOKE_SIM_IB_HCAS`, faults from `NCCL_SMOKE_SIM_IB_FAULT` (grammar in
//! `nccl_smoke_fault::ib`). Every entry point is exported under rdma-core's symbol versions,
//! which NCCL asks for with `dlvsym`; `post_send`, `post_recv` and `poll_cq` are reached through
//! the context's `ops`, as `<infiniband/verbs.h>` inlines them.
#![allow(unsafe_code)]
// The entry points are C functions with rdma-core's contracts (`<infiniband/verbs.h>`).
#![allow(clippy::missing_safety_doc)]

pub mod sys {
    #![allow(
        non_camel_case_types,
        non_upper_case_globals,
        non_snake_case,
        dead_code
    )]
    #![allow(clippy::all, unsafe_op_in_unsafe_fn)]
    include!(concat!(env!("OUT_DIR"), "/verbs.rs"));
}

mod cq;
mod device;
mod fabric;
mod mailbox;
mod memory;
mod names;
mod post;
mod qp;

pub use cq::*;
pub use device::*;
pub use memory::*;
pub use names::*;
pub use post::*;
pub use qp::*;

// rdma-core's symbol versions (libibverbs.map names the nodes).
#[cfg(not(test))]
std::arch::global_asm!(
    ".symver ibv_get_device_list, ibv_get_device_list@@IBVERBS_1.1",
    ".symver ibv_free_device_list, ibv_free_device_list@@IBVERBS_1.1",
    ".symver ibv_get_device_name, ibv_get_device_name@@IBVERBS_1.1",
    ".symver ibv_get_device_guid, ibv_get_device_guid@@IBVERBS_1.1",
    ".symver ibv_open_device, ibv_open_device@@IBVERBS_1.1",
    ".symver ibv_close_device, ibv_close_device@@IBVERBS_1.1",
    ".symver ibv_get_async_event, ibv_get_async_event@@IBVERBS_1.1",
    ".symver ibv_ack_async_event, ibv_ack_async_event@@IBVERBS_1.1",
    ".symver ibv_query_device, ibv_query_device@@IBVERBS_1.1",
    ".symver ibv_query_port, ibv_query_port@@IBVERBS_1.1",
    ".symver ibv_query_gid, ibv_query_gid@@IBVERBS_1.1",
    ".symver ibv_query_pkey, ibv_query_pkey@@IBVERBS_1.1",
    ".symver ibv_query_qp, ibv_query_qp@@IBVERBS_1.1",
    ".symver ibv_alloc_pd, ibv_alloc_pd@@IBVERBS_1.1",
    ".symver ibv_dealloc_pd, ibv_dealloc_pd@@IBVERBS_1.1",
    ".symver ibv_reg_mr, ibv_reg_mr@@IBVERBS_1.1",
    ".symver ibv_dereg_mr, ibv_dereg_mr@@IBVERBS_1.1",
    ".symver ibv_create_cq, ibv_create_cq@@IBVERBS_1.1",
    ".symver ibv_destroy_cq, ibv_destroy_cq@@IBVERBS_1.1",
    ".symver ibv_create_qp, ibv_create_qp@@IBVERBS_1.1",
    ".symver ibv_modify_qp, ibv_modify_qp@@IBVERBS_1.1",
    ".symver ibv_destroy_qp, ibv_destroy_qp@@IBVERBS_1.1",
    ".symver ibv_fork_init, ibv_fork_init@@IBVERBS_1.1",
    ".symver ibv_event_type_str, ibv_event_type_str@@IBVERBS_1.1",
    ".symver ibv_wc_status_str, ibv_wc_status_str@@IBVERBS_1.1",
    ".symver ibv_node_type_str, ibv_node_type_str@@IBVERBS_1.1",
    ".symver ibv_port_state_str, ibv_port_state_str@@IBVERBS_1.1",
    ".symver ibv_reg_mr_iova2, ibv_reg_mr_iova2@@IBVERBS_1.8",
    ".symver ibv_query_ece, ibv_query_ece@@IBVERBS_1.10",
    ".symver ibv_set_ece, ibv_set_ece@@IBVERBS_1.10",
    ".symver ibv_reg_dmabuf_mr, ibv_reg_dmabuf_mr@@IBVERBS_1.12",
);

/// Marks the library as the stand-in, as the other simulation libraries do.
#[unsafe(no_mangle)]
pub extern "C" fn ncclSmokeSimIbverbs() -> *const std::ffi::c_char {
    c"nccl-smoke simulated libibverbs".as_ptr()
}

/// A number for this host (its hostname's hash), in the HCAs' GUIDs.
fn host_id() -> u32 {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    buf.iter()
        .take_while(|b| **b != 0)
        .fold(2166136261u32, |h, b| (h ^ *b as u32).wrapping_mul(16777619))
}

/// Lets peer processes of the same user write into this one (`process_vm_writev`), as the HCA
/// would, where Yama restricts it to descendants; without Yama the call fails and changes nothing.
fn allow_peer_access() {
    // SAFETY: PR_SET_PTRACER with PR_SET_PTRACER_ANY only widens who may attach.
    unsafe { libc::prctl(libc::PR_SET_PTRACER, libc::PR_SET_PTRACER_ANY, 0, 0, 0) };
}

#[cfg(test)]
mod tests;
