//! Devices and their contexts: the device list, opening a device (an rdma-core
//! `struct verbs_context`, whose `ibv_context` NCCL holds), the device, port and GID queries, and
//! asynchronous events (a pipe behind `async_fd`, as rdma-core's is a file NCCL can poll).

use crate::fabric::{dev_of, fabric, set_errno, verb_fault};
use crate::sys::*;
use nccl_smoke_fault::ib::{AsyncEvent, Hca, Link};
use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

/// One HCA as the list hands it out.
#[repr(C)]
pub struct Device {
    pub dev: ibv_device,
    pub index: usize,
    /// The port's state (it can go down by an async port-error fault).
    pub port_up: AtomicBool,
}

struct Devices(Vec<*mut Device>);
// SAFETY: the devices are created once and never freed; their mutable parts are atomics.
unsafe impl Send for Devices {}
unsafe impl Sync for Devices {}

fn copy_name(dst: &mut [c_char], s: &str) {
    let room = dst.len() - 1;
    for (d, b) in dst.iter_mut().zip(s.bytes().take(room)) {
        *d = b as c_char;
    }
}

fn devices() -> &'static [*mut Device] {
    static DEVICES: OnceLock<Devices> = OnceLock::new();
    &DEVICES
        .get_or_init(|| {
            let hcas = fabric().map(|f| f.hcas.as_slice()).unwrap_or(&[]);
            Devices(
                hcas.iter()
                    .enumerate()
                    .map(|(i, h)| {
                        let mut dev = ibv_device {
                            node_type: ibv_node_type::IBV_NODE_CA,
                            transport_type: ibv_transport_type::IBV_TRANSPORT_IB,
                            ..Default::default()
                        };
                        copy_name(&mut dev.name, &h.name);
                        copy_name(&mut dev.dev_name, &format!("uverbs{i}"));
                        copy_name(
                            &mut dev.dev_path,
                            &format!("/sys/class/infiniband_verbs/uverbs{i}"),
                        );
                        copy_name(
                            &mut dev.ibdev_path,
                            &format!("/sys/class/infiniband/{}", h.name),
                        );
                        Box::into_raw(Box::new(Device {
                            dev,
                            index: i,
                            port_up: AtomicBool::new(h.up),
                        }))
                    })
                    .collect(),
            )
        })
        .0
}

pub fn hca(index: usize) -> &'static Hca {
    &fabric().expect("a device exists only with a fabric").hcas[index]
}

/// The node GUID of HCA `index` (host order): Mellanox's OUI, then the host and the index.
fn guid(index: usize) -> u64 {
    let host = crate::host_id() as u64;
    0x0c42_a103_0000_0000 | (host & 0xff_ffff) << 8 | index as u64
}

/// An open device: rdma-core's extended context, then what the stand-in keeps.
#[repr(C)]
pub struct Context {
    pub vctx: verbs_context,
    pub device: usize,
    events: Mutex<VecDeque<ibv_async_event>>,
    pipe: [c_int; 2],
}

/// The `Context` an `ibv_context` belongs to.
///
/// # Safety
/// `ctx` must come from [`ibv_open_device`].
pub unsafe fn context_of<'a>(ctx: *mut ibv_context) -> &'a Context {
    let off = std::mem::offset_of!(verbs_context, context);
    // SAFETY: the ibv_context is the last field of the verbs_context, the first of Context.
    unsafe { &*(ctx.cast::<u8>().sub(off).cast::<Context>()) }
}

impl Context {
    /// Queues an asynchronous event and wakes `ibv_get_async_event`.
    pub fn raise(&self, event: AsyncEvent, qp: *mut ibv_qp) {
        let mut e = ibv_async_event {
            event_type: event.code(),
            ..Default::default()
        };
        match event {
            AsyncEvent::QpFatal => e.element.qp = qp,
            AsyncEvent::PortError => {
                e.element.port_num = 1;
                // SAFETY: devices are never freed.
                unsafe {
                    (*devices()[self.device])
                        .port_up
                        .store(false, Ordering::Release)
                };
            }
            AsyncEvent::DeviceFatal => {}
        }
        self.events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(e);
        // SAFETY: writing one byte to our pipe.
        unsafe { libc::write(self.pipe[1], [1u8].as_ptr().cast(), 1) };
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    if let Err(e) = verb_fault("ibv_get_device_list", None) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    if fabric().is_none() {
        set_errno(libc::EINVAL);
        return std::ptr::null_mut();
    }
    let devs = devices();
    // SAFETY: a NULL-terminated array the caller frees with ibv_free_device_list.
    unsafe {
        let list: *mut *mut ibv_device =
            libc::calloc(devs.len() + 1, std::mem::size_of::<*mut ibv_device>()).cast();
        if list.is_null() {
            set_errno(libc::ENOMEM);
            return list;
        }
        for (i, d) in devs.iter().enumerate() {
            *list.add(i) = &raw mut (**d).dev;
        }
        if !num.is_null() {
            *num = devs.len() as c_int;
        }
        list
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: allocated by calloc in ibv_get_device_list.
    unsafe { libc::free(list.cast()) }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    // SAFETY: dev is one of ours.
    unsafe { (*dev).name.as_ptr() }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    // SAFETY: dev is the first field of a Device.
    guid(unsafe { (*dev.cast::<Device>()).index }).to_be()
}

unsafe extern "C" fn context_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    // SAFETY: NCCL hands its own attribute struct of `len` bytes.
    unsafe {
        std::ptr::write_bytes(attr.cast::<u8>(), 0, len);
        let mut ours = ibv_port_attr::default();
        let r = query_port(ctx, port, &mut ours);
        if r == 0 {
            let n = len.min(std::mem::size_of::<ibv_port_attr>());
            std::ptr::copy_nonoverlapping((&raw const ours).cast::<u8>(), attr.cast::<u8>(), n);
        }
        r
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    if let Err(e) = verb_fault(
        "ibv_open_device",
        unsafe { dev.cast::<Device>().as_ref() }.map(|d| d.index),
    ) {
        set_errno(e);
        return std::ptr::null_mut();
    }
    crate::allow_peer_access();
    let mut pipe = [-1; 2];
    // SAFETY: a fresh pipe.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return std::ptr::null_mut();
    }
    let mut vctx = verbs_context {
        query_port: Some(context_query_port),
        sz: std::mem::size_of::<verbs_context>(),
        ..Default::default()
    };
    vctx.context.device = dev;
    vctx.context.cmd_fd = -1;
    vctx.context.async_fd = pipe[0];
    vctx.context.num_comp_vectors = 1;
    vctx.context.abi_compat = usize::MAX as *mut c_void; // rdma-core's __VERBS_ABI_IS_EXTENDED
    vctx.context.ops.poll_cq = Some(crate::cq::poll_cq);
    vctx.context.ops.post_send = Some(crate::post::post_send);
    vctx.context.ops.post_recv = Some(crate::post::post_recv);
    vctx.context.ops.req_notify_cq = Some(crate::cq::req_notify_cq);
    // SAFETY: dev is the first field of a Device.
    let device = unsafe { (*dev.cast::<Device>()).index };
    let ctx = Box::into_raw(Box::new(Context {
        vctx,
        device,
        events: Mutex::new(VecDeque::new()),
        pipe,
    }));
    // Never freed: NCCL's asynchronous-event thread may still wait on it after closing.
    // SAFETY: just allocated.
    unsafe { &raw mut (*ctx).vctx.context }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    match verb_fault("ibv_close_device", unsafe { dev_of(ctx) }) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    // SAFETY: ctx is ours.
    let c = unsafe { context_of(ctx) };
    let mut b = [0u8; 1];
    loop {
        // SAFETY: reading our pipe (blocking unless the caller made it non-blocking).
        let r = unsafe { libc::read(c.pipe[0], b.as_mut_ptr().cast(), 1) };
        if r == 1 {
            break;
        }
        if r < 0 && crate::mailbox::errno() == libc::EINTR {
            continue;
        }
        return -1;
    }
    match c
        .events
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop_front()
    {
        // SAFETY: event is the caller's.
        Some(e) => unsafe {
            *event = e;
            0
        },
        None => -1,
    }
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_query_device", unsafe { dev_of(ctx) }) {
        return e;
    }
    // SAFETY: ctx is ours, attr the caller's.
    unsafe {
        let c = context_of(ctx);
        let mut a = ibv_device_attr {
            node_guid: guid(c.device).to_be(),
            sys_image_guid: guid(c.device).to_be(),
            max_mr_size: u64::MAX,
            page_size_cap: 0xffff_f000,
            vendor_id: 0x02c9,    // Mellanox
            vendor_part_id: 4129, // ConnectX-7 (a guess at a typical HCA)
            max_qp: 131_072,
            max_qp_wr: 32_768,
            device_cap_flags: 0,
            max_sge: 30,
            max_sge_rd: 30,
            max_cq: 16_777_216,
            max_cqe: 4_194_303,
            max_mr: 16_777_216,
            max_pd: 16_777_216,
            max_qp_rd_atom: 16,
            max_res_rd_atom: 2_097_152,
            max_qp_init_rd_atom: 16,
            max_srq: 8_388_608,
            max_srq_wr: 32_767,
            max_srq_sge: 31,
            max_pkeys: 128,
            local_ca_ack_delay: 16,
            phys_port_cnt: 1,
            ..Default::default()
        };
        copy_name(&mut a.fw_ver, "28.39.1002");
        *attr = a;
    }
    0
}

/// Fills `attr` for port `port` of `ctx`'s device.
///
/// # Safety
/// `ctx` from [`ibv_open_device`], `attr` writable.
unsafe fn query_port(ctx: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_query_port", unsafe { dev_of(ctx) }) {
        return e;
    }
    // SAFETY: as the caller promises.
    let c = unsafe { context_of(ctx) };
    if port != 1 {
        return libc::EINVAL;
    }
    let h = hca(c.device);
    // SAFETY: devices are never freed.
    let up = unsafe { (*devices()[c.device]).port_up.load(Ordering::Acquire) };
    let ib = h.link == Link::Infiniband;
    let a = ibv_port_attr {
        state: if up {
            ibv_port_state::IBV_PORT_ACTIVE
        } else {
            ibv_port_state::IBV_PORT_DOWN
        },
        max_mtu: ibv_mtu::IBV_MTU_4096,
        active_mtu: ibv_mtu::IBV_MTU_4096,
        gid_tbl_len: GID_TABLE as c_int,
        port_cap_flags: 0x2651_e848,
        max_msg_sz: 0x4000_0000,
        pkey_tbl_len: 128,
        lid: if ib { 1 + c.device as u16 } else { 0 },
        sm_lid: if ib { 1 } else { 0 },
        max_vl_num: 4,
        active_width: 2, // 4x
        active_speed: h.speed.code() as u8,
        phys_state: if up { 5 } else { 3 }, // LinkUp / Disabled
        link_layer: if ib {
            IBV_LINK_LAYER_INFINIBAND as u8
        } else {
            IBV_LINK_LAYER_ETHERNET as u8
        },
        ..Default::default()
    };
    // SAFETY: attr is writable.
    unsafe { *attr = a };
    0
}

/// rdma-core's `ibv_query_port@IBVERBS_1.1` fills the old, shorter attribute struct (no
/// `port_cap_flags2`): NCCL 2.19's copy of it is 48 bytes, and more would overrun its stack.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    let mut ours = ibv_port_attr::default();
    // SAFETY: as NCCL calls it; only the compat prefix is written.
    unsafe {
        let r = query_port(ctx, port, &mut ours);
        if r == 0 {
            let n = std::mem::offset_of!(ibv_port_attr, port_cap_flags2);
            std::ptr::copy_nonoverlapping((&raw const ours).cast::<u8>(), attr.cast::<u8>(), n);
        }
        r
    }
}

/// GID table entries per port.
pub const GID_TABLE: usize = 8;

/// GID `index` of `device`'s port: InfiniBand has its link-local GID at 0; RoCE has RoCE v1 and
/// v2 GIDs of the link-local address (0, 1) and of the IPv4 address 127.0.0.1 (2, 3), as a
/// RoCE port with one IPv4 address lists them. Other entries are empty (zero).
pub fn gid(device: usize, index: usize) -> [u8; 16] {
    let mut g = [0u8; 16];
    let link_local = |g: &mut [u8; 16]| {
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..].copy_from_slice(&guid(device).to_be_bytes());
    };
    match (hca(device).link, index) {
        (Link::Infiniband, 0) | (Link::Ethernet, 0 | 1) => link_local(&mut g),
        (Link::Ethernet, 2 | 3) => {
            g[10] = 0xff;
            g[11] = 0xff;
            g[12..].copy_from_slice(&[127, 0, 0, 1]);
        }
        _ => {}
    }
    g
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    out: *mut ibv_gid,
) -> c_int {
    // SAFETY: the handle is the caller's, made by this library (the verb's contract).
    if let Err(e) = verb_fault("ibv_query_gid", unsafe { dev_of(ctx) }) {
        set_errno(e);
        return -1;
    }
    if port != 1 || !(0..GID_TABLE as c_int).contains(&index) {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: ctx is ours, out the caller's.
    unsafe { (*out).raw = gid(context_of(ctx).device, index as usize) };
    0
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    _ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if port != 1 || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: pkey is the caller's.
    unsafe { *pkey = 0xffff };
    0
}
