//! libnccl, loaded at run time: whichever build the node has, or the one `--nccl-lib` names.
//!
//! Three layers, as in cudarc: `sys` (bindgen's symbol table, every symbol a `Result`), this
//! module (each call → `Result<_, NcclError>` with the library's error decoded by name), and
//! the safe communicator types its callers build on top. A symbol missing from an old library
//! turns a capability off ([`Capabilities`]); a missing required one is a load error naming it.
//!
//! Parts: `load` (opening the library, its version and capabilities, decoding results),
//! `calls` (the communicator and operation calls), `error` (result codes and the error value).

#[allow(
    non_camel_case_types,
    non_snake_case,
    non_upper_case_globals,
    dead_code,
    unsafe_op_in_unsafe_fn,
    clippy::all
)]
mod sys;

mod newer;

/// Calls a symbol of the table and decodes its `ncclResult_t` (defined before the modules that
/// use it).
macro_rules! call {
    ($self:ident, $name:ident ( $($arg:expr),* $(,)? )) => {
        call!(@with check, $self, $name($($arg),*))
    };
    // A call that starts work: `ncclInProgress` is a state (see [`Issued`]), not a failure.
    (issue $self:ident, $name:ident ( $($arg:expr),* $(,)? )) => {
        call!(@with check_issued, $self, $name($($arg),*))
    };
    (@with $check:ident, $self:ident, $name:ident ( $($arg:expr),* $(,)? )) => {{
        match &$self.sys.$name {
            // SAFETY: the symbol was resolved from the loaded library with the prototype of
            // nccl.h; the caller checks the arguments.
            Ok(f) => $self.$check(stringify!($name), unsafe { f($($arg),*) }),
            Err(_) => Err($self.missing(stringify!($name))),
        }
    }};
}

mod calls;
mod error;
mod load;

use crate::ffi::cuda::DevPtr;
use sys::{NcclSys, ncclComm_t};

pub use error::{NcclError, ResultCode};
pub use sys::NCCL_UNIQUE_ID_BYTES;

/// The soname the dynamic linker resolves for NCCL.
pub const NCCL_SONAME: &str = "libnccl.so.2";

/// What the loaded library can do, from the symbols it exports and its version.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Capabilities {
    /// `ncclCommInitRankConfig` with non-blocking init (>= 2.14.3).
    pub init_rank_config: bool,
    /// `ncclGetLastError` (>= 2.13.4).
    pub last_error: bool,
    /// `ncclCommFinalize` (>= 2.14.3).
    pub finalize: bool,
    /// Native `ncclAlltoAll` (>= 2.28.3).
    pub alltoall: bool,
    /// `ncclCommSplit` (>= 2.18.1).
    #[serde(default)]
    pub split: bool,
    /// Native `ncclGather` and `ncclScatter` (>= 2.28.3).
    #[serde(default)]
    pub gather_scatter: bool,
}

/// `NCCL_VERSION_CODE` as a dotted version (21903 → "2.19.3").
pub fn version_string(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// An opaque communicator handle, live from init until destroy or abort; the caller owns it
/// and never uses it after either.
#[derive(Debug, Clone, Copy)]
pub struct CommHandle(ncclComm_t);

/// Where `ncclCommSplit` writes the child's handle. On a non-blocking parent NCCL writes it at
/// the end of the split job, on a thread of its own (`ncclCommInitRankFunc`, `src/init.cc`
/// v2.28.3-1), so the slot lives on the heap and is freed only by [`SplitSlot::take`], once the
/// parent's state has left `ncclInProgress`; a slot dropped before that (the parent aborted
/// with the job in flight) is leaked rather than freed under a writer.
pub struct SplitSlot(Option<Box<std::sync::atomic::AtomicPtr<sys::ncclComm>>>);

impl SplitSlot {
    fn new() -> SplitSlot {
        SplitSlot(Some(Box::new(std::sync::atomic::AtomicPtr::new(
            std::ptr::null_mut(),
        ))))
    }

    fn as_out(&self) -> *mut ncclComm_t {
        self.0.as_ref().map_or(std::ptr::null_mut(), |b| b.as_ptr())
    }

    /// The child's handle (`None` for `NCCL_SPLIT_NOCOLOR`). Only once the split is done: the
    /// call returned [`Issued::Done`], or the parent's state left `ncclInProgress`.
    pub fn take(mut self) -> Option<CommHandle> {
        let b = self.0.take()?;
        let h = b.load(std::sync::atomic::Ordering::Acquire);
        (!h.is_null()).then_some(CommHandle(h))
    }
}

impl Drop for SplitSlot {
    fn drop(&mut self) {
        if let Some(b) = self.0.take() {
            // NCCL may still write here: keep the 8 bytes alive for good.
            std::mem::forget(b);
        }
    }
}

/// `NCCL_SPLIT_NOCOLOR` of nccl.h: the rank takes part in the split and gets no communicator.
pub const SPLIT_NOCOLOR: i32 = -1;

/// The 128-byte unique id rank 0 makes and every rank needs.
pub type UniqueId = [u8; NCCL_UNIQUE_ID_BYTES as usize];

/// How a call that starts work returned. A non-blocking communicator (`config.blocking = 0`
/// or `NCCL_COMM_BLOCKING=0`) returns `ncclInProgress` from `ncclGroupEnd` and from every
/// stand-alone operation (NCCL >= 2.23, `src/group.cc` v2.28.3-1, `ncclGroupEndInternal`'s
/// "nonblocking group" branch), from the first send/recv to a peer not yet connected
/// (2.19-2.22, same function, `ncclGroupCommPreconnectHead`), and from `ncclCommFinalize`
/// (every version): the work continues on a thread of NCCL's, and the communicator may not be
/// used again until [`Nccl::async_error`] leaves `ncclInProgress`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issued {
    Done,
    InProgress,
}

/// Element type codes of `ncclDataType_t`.
pub type DataTypeCode = u32;
/// Reduction codes of `ncclRedOp_t`.
pub type RedOpCode = u32;

/// The NCCL collectives nccl-smoke issues through [`Nccl::collective`], with the data flow
/// `nccl.h` gives each (`src/nccl.h.in`, NVIDIA/nccl v2.28.3-1). All-to-all and the
/// point-to-point calls have entries of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    /// `ncclAllReduce`: every rank gets the reduction of every rank's `count` elements.
    AllReduce,
    /// `ncclAllGather`: `count` (sendcount) elements from each rank; every rank gets all,
    /// rank i's at `i × count`.
    AllGather,
    /// `ncclReduceScatter`: each rank sends `nranks × count` elements; rank i gets block i
    /// (`count` elements, recvcount) of the reduction.
    ReduceScatter,
    /// `ncclBroadcast`: `count` elements from the root to every rank.
    Broadcast,
    /// `ncclReduce`: the reduction of every rank's `count` elements, on the root only.
    Reduce,
    /// `ncclGather` (NCCL >= 2.28.3): `count` elements from each rank to the root, rank i's at
    /// `i × count`.
    Gather,
    /// `ncclScatter` (NCCL >= 2.28.3): block i (`count` elements) of the root's
    /// `nranks × count` to rank i.
    Scatter,
}

impl Collective {
    /// The library's symbol.
    pub fn symbol(self) -> &'static str {
        match self {
            Collective::AllReduce => "ncclAllReduce",
            Collective::AllGather => "ncclAllGather",
            Collective::ReduceScatter => "ncclReduceScatter",
            Collective::Broadcast => "ncclBroadcast",
            Collective::Reduce => "ncclReduce",
            Collective::Gather => "ncclGather",
            Collective::Scatter => "ncclScatter",
        }
    }
}

/// One collective's arguments (see [`Nccl::collective`]).
#[derive(Debug, Clone, Copy)]
pub struct CollArgs {
    pub send: DevPtr,
    pub recv: DevPtr,
    /// NCCL's count argument (sendcount for all-gather, recvcount for reduce-scatter).
    pub count: usize,
    pub dtype: DataTypeCode,
    pub op: RedOpCode,
    pub root: i32,
}

/// A loaded libnccl.
pub struct Nccl {
    sys: NcclSys,
    alltoall: Option<newer::AlltoAllFn>,
    gather_scatter: Option<(newer::RootedFn, newer::RootedFn)>,
    /// Absolute path of the library file loaded.
    pub path: String,
    /// `ncclGetVersion`.
    pub version_code: i32,
    pub caps: Capabilities,
    /// The library's marker when it is nccl-smoke's simulation, else `None`.
    pub simulated: Option<String>,
    /// Found in a pip wheel's folder (`site-packages/nvidia/nccl/lib`) after the dynamic
    /// linker found no `libnccl.so.2`, rather than asked for or found by the linker.
    pub from_pip_wheel: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_slot_gives_what_was_written_once_and_none_for_nocolor() {
        let empty = SplitSlot::new();
        assert!(!empty.as_out().is_null());
        assert!(empty.take().is_none(), "NULL: NCCL_SPLIT_NOCOLOR");
        let slot = SplitSlot::new();
        let fake = std::ptr::NonNull::<sys::ncclComm>::dangling().as_ptr();
        slot.0
            .as_ref()
            .unwrap()
            .store(fake, std::sync::atomic::Ordering::Release);
        assert_eq!(slot.take().map(|h| h.0), Some(fake));
        // Dropped untaken (a parent aborted mid-split): leaked, never freed under a writer.
        drop(SplitSlot::new());
    }

    #[test]
    fn version_codes_read_like_nccl() {
        assert_eq!(version_string(21903), "2.19.3");
        assert_eq!(version_string(22803), "2.28.3");
        assert_eq!(version_string(2708), "2.7.8");
    }
}
