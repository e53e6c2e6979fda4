//! CPU stand-in for NCCL (`libnccl.so.2`), loaded by nccl-smoke through `dlopen` exactly like
//! the real library. See `sim/README.md` for the contract.
//!
//! Same C ABI, same return codes, same log-line shapes as NCCL; data moves between processes
//! over TCP, on the caller's stream (via the driver's `cuLaunchHostFunc`), so events time the
//! operations as they would on a GPU.
//!
//! * [`api`]: the exports. [`init`]: communicator creation; [`split`]: from a parent. [`enqueue`]: an operation call's
//!   checks. [`group`]: group calls and queueing on the stream. [`ops`]: the operations
//!   ([`colls`]: the data flow of the collectives beyond all-reduce and all-to-all), [`moves`]:
//!   how a batch of them moves its bytes,
//!   [`reduce`]: the arithmetic. [`comm`]: a communicator's state, abort.
//! * [`ids`]: interfaces and the unique id. [`bootstrap`]: root and mesh. [`transport`]:
//!   framed messages to a peer.
//! * [`faults`]: when injected faults strike; [`texts`]: what the real library says then.
//!   [`log`]: NCCL_DEBUG and friends. [`cuda`]: the driver calls. [`version`]: the release
//!   this library speaks as.
// This crate implements the NCCL C ABI: unsafe is its job (the workspace denies it elsewhere).
#![allow(unsafe_code)]
#![allow(clippy::missing_safety_doc)]
// The map above is of this crate's own (private) modules: `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod api;
mod bootstrap;
mod call;
mod colls;
mod comm;
mod cuda;
mod datafault;
mod enqueue;
mod faults;
mod group;
mod ids;
mod init;
mod log;
mod moves;
mod ops;
mod ras;
mod reduce;
mod split;
mod texts;
mod transport;
mod version;

/// `ncclResult_t` values.
pub(crate) const SUCCESS: u32 = 0;
pub(crate) const UNHANDLED_CUDA_ERROR: u32 = 1;
pub(crate) const SYSTEM_ERROR: u32 = 2;
pub(crate) const INTERNAL_ERROR: u32 = 3;
pub(crate) const INVALID_ARGUMENT: u32 = 4;
pub(crate) const INVALID_USAGE: u32 = 5;
pub(crate) const REMOTE_ERROR: u32 = 6;
pub(crate) const INPROGRESS: u32 = 7;
