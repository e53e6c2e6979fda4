//! The verbs that only name things: event types, completion statuses, node types and port
//! states as text (rdma-core's wording), and `ibv_fork_init`, which has nothing to do here.

use std::ffi::{c_char, c_int};

#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_fork_init() -> c_int {
    0
}

macro_rules! c_names {
    ($($s:literal),* $(,)?) => { &[$(concat!($s, "\0")),*] };
}

const EVENTS: &[&str] = c_names!(
    "CQ error",
    "local work queue catastrophic error",
    "invalid request local work queue error",
    "local access violation work queue error",
    "communication established",
    "send queue drained",
    "path migrated",
    "path migration request error",
    "local catastrophic error",
    "port active",
    "port error",
    "LID change",
    "P_Key change",
    "SM change",
    "SRQ catastrophic error",
    "SRQ limit reached",
    "last WQE reached",
    "client reregistration",
    "GID table change",
    "WQ fatal",
);

fn name_of(table: &'static [&'static str], i: u32) -> *const c_char {
    table
        .get(i as usize)
        .copied()
        .unwrap_or("unknown\0")
        .as_ptr()
        .cast()
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_event_type_str(event: u32) -> *const c_char {
    name_of(EVENTS, event)
}

const STATUS: &[&str] = c_names!(
    "success",
    "local length error",
    "local QP operation error",
    "local EE context operation error",
    "local protection error",
    "Work Request Flushed Error",
    "memory management operation error",
    "bad response error",
    "local access error",
    "remote invalid request error",
    "remote access error",
    "remote operation error",
    "transport retry counter exceeded",
    "RNR retry counter exceeded",
    "local RDD violation error",
    "remote invalid RD request",
    "aborted error",
    "invalid EE context number",
    "invalid EE context state",
    "fatal error",
    "response timeout error",
    "general error",
);

#[unsafe(no_mangle)]
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    name_of(STATUS, status)
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_node_type_str(node: c_int) -> *const c_char {
    let names: &[&str] = c_names!(
        "unknown",
        "InfiniBand channel adapter",
        "InfiniBand switch",
        "InfiniBand router",
        "iWARP NIC"
    );
    name_of(names, node.max(0) as u32)
}

#[unsafe(no_mangle)]
pub extern "C" fn ibv_port_state_str(state: u32) -> *const c_char {
    let names: &[&str] = c_names!(
        "PORT_NOP",
        "PORT_DOWN",
        "PORT_INIT",
        "PORT_ARMED",
        "PORT_ACTIVE",
        "PORT_ACTIVE_DEFER"
    );
    name_of(names, state)
}
