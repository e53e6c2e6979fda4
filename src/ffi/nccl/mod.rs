//! libnccl, loaded at run time: whichever build the node has, or the one `--nccl-lib` names.
//!
//! Three layers, as in cudarc: `sys` (bindgen's symbol table, every symbol a `Result`), this
//! module (each call → `Result<_, NcclError>` with the library's error decoded by name), and
//! the communicator types of `crate::comm` on top. A symbol missing from an old library turns a
//! capability off ([`Capabilities`]); a missing required one is a load error naming it.

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

use super::cuda::{DevPtr, Stream};
use super::os;
use std::ffi::{CStr, c_char};
use sys::{NcclSys, ncclComm_t, ncclConfig_t, ncclResult_t, ncclUniqueId};

pub use sys::NCCL_UNIQUE_ID_BYTES;

/// The soname the dynamic linker resolves for NCCL.
pub const NCCL_SONAME: &str = "libnccl.so.2";

/// `ncclResult_t`, by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ResultCode {
    Success,
    UnhandledCudaError,
    SystemError,
    InternalError,
    InvalidArgument,
    InvalidUsage,
    RemoteError,
    InProgress,
    /// A value this build of nccl-smoke does not know.
    Unexpected(u32),
}

impl ResultCode {
    pub fn from_raw(raw: u32) -> ResultCode {
        match raw {
            0 => ResultCode::Success,
            1 => ResultCode::UnhandledCudaError,
            2 => ResultCode::SystemError,
            3 => ResultCode::InternalError,
            4 => ResultCode::InvalidArgument,
            5 => ResultCode::InvalidUsage,
            6 => ResultCode::RemoteError,
            7 => ResultCode::InProgress,
            other => ResultCode::Unexpected(other),
        }
    }

    pub fn raw(self) -> u32 {
        match self {
            ResultCode::Success => 0,
            ResultCode::UnhandledCudaError => 1,
            ResultCode::SystemError => 2,
            ResultCode::InternalError => 3,
            ResultCode::InvalidArgument => 4,
            ResultCode::InvalidUsage => 5,
            ResultCode::RemoteError => 6,
            ResultCode::InProgress => 7,
            ResultCode::Unexpected(raw) => raw,
        }
    }

    /// The name in nccl.h.
    pub fn name(self) -> String {
        match self {
            ResultCode::Success => "ncclSuccess".into(),
            ResultCode::UnhandledCudaError => "ncclUnhandledCudaError".into(),
            ResultCode::SystemError => "ncclSystemError".into(),
            ResultCode::InternalError => "ncclInternalError".into(),
            ResultCode::InvalidArgument => "ncclInvalidArgument".into(),
            ResultCode::InvalidUsage => "ncclInvalidUsage".into(),
            ResultCode::RemoteError => "ncclRemoteError".into(),
            ResultCode::InProgress => "ncclInProgress".into(),
            ResultCode::Unexpected(raw) => format!("ncclResult_t({raw})"),
        }
    }
}

/// A failure of libnccl or of loading it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NcclError {
    #[error("cannot load NCCL from {path}: {detail}")]
    NotFound { path: String, detail: String },
    #[error(
        "{path} (NCCL {version}) has no symbol {symbol}; nccl-smoke needs it (NCCL >= {since})"
    )]
    MissingSymbol {
        path: String,
        version: String,
        symbol: &'static str,
        since: &'static str,
    },
    #[error("{call} returned {} ({}): {text}{}", .code.name(), .code.raw(),
        .last_error.as_deref().map(|l| format!(" — last error: {l}")).unwrap_or_default())]
    Call {
        call: &'static str,
        code: ResultCode,
        /// `ncclGetErrorString`.
        text: String,
        /// `ncclGetLastError`, when the library has it and said something.
        last_error: Option<String>,
    },
}

impl NcclError {
    pub fn code(&self) -> Option<ResultCode> {
        match self {
            NcclError::Call { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn last_error(&self) -> Option<&str> {
        match self {
            NcclError::Call { last_error, .. } => last_error.as_deref(),
            _ => None,
        }
    }
}

type Result<T> = std::result::Result<T, NcclError>;

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
}

/// `NCCL_VERSION_CODE` as a dotted version (21903 → "2.19.3").
pub fn version_string(code: i32) -> String {
    if code >= 10000 {
        format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
    } else {
        format!("{}.{}.{}", code / 1000, (code % 1000) / 100, code % 100)
    }
}

/// An opaque communicator handle. Only `crate::comm` holds one.
#[derive(Debug, Clone, Copy)]
pub struct CommHandle(ncclComm_t);

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

/// A loaded libnccl.
pub struct Nccl {
    sys: NcclSys,
    alltoall: Option<newer::AlltoAllFn>,
    /// Absolute path of the library file loaded.
    pub path: String,
    /// `ncclGetVersion`.
    pub version_code: i32,
    pub caps: Capabilities,
    /// The library's marker when it is nccl-smoke's simulation, else `None`.
    pub simulated: Option<String>,
}

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
            // nccl.h; arguments are checked by the callers in crate::comm.
            Ok(f) => $self.$check(stringify!($name), unsafe { f($($arg),*) }),
            Err(_) => Err($self.missing(stringify!($name))),
        }
    }};
}

impl Nccl {
    /// Loads `path` (or [`NCCL_SONAME`] through the dynamic linker) and reads its version and
    /// capabilities.
    pub fn load(path: Option<&str>) -> Result<Nccl> {
        let asked = path.unwrap_or(NCCL_SONAME).to_string();
        let lib = os::Library::open_global(&asked).map_err(|detail| NcclError::NotFound {
            path: asked.clone(),
            detail,
        })?;
        let resolved = lib.path_of("ncclGetVersion").unwrap_or(asked.clone());
        let simulated = lib.marker("ncclSmokeSimulation");
        let alltoall = newer::alltoall(&lib);
        // SAFETY: bindgen's table only resolves symbols; nothing is called yet.
        let sys =
            unsafe { NcclSys::from_library(lib.into_raw()) }.map_err(|e| NcclError::NotFound {
                path: resolved.clone(),
                detail: e.to_string(),
            })?;
        let mut nccl = Nccl {
            sys,
            alltoall,
            path: resolved,
            version_code: 0,
            caps: Capabilities::default(),
            simulated,
        };
        let mut v = 0;
        call!(nccl, ncclGetVersion(&mut v))?;
        nccl.version_code = v;
        nccl.require_symbols()?;
        nccl.caps = Capabilities {
            init_rank_config: nccl.sys.ncclCommInitRankConfig.is_ok() && v >= 21403,
            last_error: nccl.sys.ncclGetLastError.is_ok(),
            finalize: nccl.sys.ncclCommFinalize.is_ok(),
            alltoall: nccl.alltoall.is_some() && v >= 22803,
        };
        Ok(nccl)
    }

    pub fn version(&self) -> String {
        version_string(self.version_code)
    }

    fn require_symbols(&self) -> Result<()> {
        let s = &self.sys;
        let required: [(&'static str, bool, &'static str); 14] = [
            ("ncclGetUniqueId", s.ncclGetUniqueId.is_ok(), "2.0"),
            ("ncclCommInitRank", s.ncclCommInitRank.is_ok(), "2.0"),
            ("ncclCommDestroy", s.ncclCommDestroy.is_ok(), "2.0"),
            ("ncclCommAbort", s.ncclCommAbort.is_ok(), "2.4.2"),
            (
                "ncclCommGetAsyncError",
                s.ncclCommGetAsyncError.is_ok(),
                "2.4.2",
            ),
            ("ncclCommCount", s.ncclCommCount.is_ok(), "2.0"),
            ("ncclCommCuDevice", s.ncclCommCuDevice.is_ok(), "2.0"),
            ("ncclCommUserRank", s.ncclCommUserRank.is_ok(), "2.0"),
            ("ncclGetErrorString", s.ncclGetErrorString.is_ok(), "2.0"),
            ("ncclAllReduce", s.ncclAllReduce.is_ok(), "2.0"),
            ("ncclSend", s.ncclSend.is_ok(), "2.7.3"),
            ("ncclRecv", s.ncclRecv.is_ok(), "2.7.3"),
            ("ncclGroupStart", s.ncclGroupStart.is_ok(), "2.0"),
            ("ncclGroupEnd", s.ncclGroupEnd.is_ok(), "2.0"),
        ];
        match required.iter().find(|(_, present, _)| !present) {
            None => Ok(()),
            Some((symbol, _, since)) => Err(NcclError::MissingSymbol {
                path: self.path.clone(),
                version: self.version(),
                symbol,
                since,
            }),
        }
    }

    fn missing(&self, symbol: &'static str) -> NcclError {
        NcclError::MissingSymbol {
            path: self.path.clone(),
            version: self.version(),
            symbol,
            since: "a newer release",
        }
    }

    fn check(&self, call: &'static str, r: ncclResult_t) -> Result<()> {
        match ResultCode::from_raw(r.0) {
            ResultCode::Success => Ok(()),
            code => Err(self.call_error(call, code)),
        }
    }

    fn check_issued(&self, call: &'static str, r: ncclResult_t) -> Result<Issued> {
        match ResultCode::from_raw(r.0) {
            ResultCode::Success => Ok(Issued::Done),
            ResultCode::InProgress => Ok(Issued::InProgress),
            code => Err(self.call_error(call, code)),
        }
    }

    fn call_error(&self, call: &'static str, code: ResultCode) -> NcclError {
        NcclError::Call {
            call,
            code,
            text: self.error_string(code),
            last_error: self.last_error(None),
        }
    }

    /// `ncclGetErrorString` for `code`.
    pub fn error_string(&self, code: ResultCode) -> String {
        match &self.sys.ncclGetErrorString {
            // SAFETY: returns a static string for any value.
            Ok(f) => cstr(unsafe { f(ncclResult_t(code.raw())) })
                .unwrap_or_else(|| "(no text from the library)".into()),
            Err(_) => "(the library has no ncclGetErrorString)".into(),
        }
    }

    /// `ncclGetLastError(comm)` when the library has it and it says something.
    pub fn last_error(&self, comm: Option<CommHandle>) -> Option<String> {
        let f = self.sys.ncclGetLastError.as_ref().ok()?;
        let c = comm.map(|c| c.0).unwrap_or(std::ptr::null_mut());
        // SAFETY: NULL or a live communicator; returns a string owned by the library.
        cstr(unsafe { f(c) }).filter(|s| !s.trim().is_empty())
    }

    pub fn get_unique_id(&self) -> Result<UniqueId> {
        let mut id = ncclUniqueId {
            internal: [0; NCCL_UNIQUE_ID_BYTES as usize],
        };
        call!(self, ncclGetUniqueId(&mut id))?;
        Ok(id.internal.map(|b| b as u8))
    }

    /// Starts communicator init, asking for a blocking or a non-blocking communicator where
    /// the library has `ncclCommInitRankConfig` (`NCCL_COMM_BLOCKING` in the environment
    /// overrides the request: `parseCommConfig`, `src/init.cc` v2.28.3-1). A non-blocking
    /// init returns [`Issued::InProgress`]: poll [`Nccl::async_error`].
    pub fn comm_init_rank(
        &self,
        nranks: i32,
        id: &UniqueId,
        rank: i32,
        blocking: bool,
    ) -> Result<(CommHandle, Issued)> {
        let id = ncclUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: ncclComm_t = std::ptr::null_mut();
        let r = if self.caps.init_rank_config {
            let mut config = config_initializer();
            config.blocking = i32::from(blocking);
            call!(
                issue self,
                ncclCommInitRankConfig(&mut comm, nranks, id, rank, &mut config)
            )
        } else {
            call!(issue self, ncclCommInitRank(&mut comm, nranks, id, rank))
        };
        match r {
            Ok(issued) if !comm.is_null() => Ok((CommHandle(comm), issued)),
            Ok(_) => Err(self.call_error("ncclCommInitRank", ResultCode::InternalError)),
            Err(e) => {
                if !comm.is_null() {
                    let _ = self.comm_abort(CommHandle(comm));
                }
                Err(e)
            }
        }
    }

    /// `ncclCommGetAsyncError`: `Ok(code)` is the communicator's state (success, in progress, or
    /// the error that struck it).
    pub fn async_error(&self, comm: CommHandle) -> Result<ResultCode> {
        let mut state = ncclResult_t(0);
        call!(self, ncclCommGetAsyncError(comm.0, &mut state))?;
        Ok(ResultCode::from_raw(state.0))
    }

    /// Builds the error value for a communicator whose async state is `code`.
    pub fn async_failure(&self, comm: CommHandle, code: ResultCode) -> NcclError {
        NcclError::Call {
            call: "ncclCommGetAsyncError",
            code,
            text: self.error_string(code),
            last_error: self.last_error(Some(comm)),
        }
    }

    pub fn comm_abort(&self, comm: CommHandle) -> Result<()> {
        call!(self, ncclCommAbort(comm.0))
    }

    pub fn comm_finalize(&self, comm: CommHandle) -> Result<Issued> {
        call!(issue self, ncclCommFinalize(comm.0))
    }

    pub fn comm_destroy(&self, comm: CommHandle) -> Result<()> {
        call!(self, ncclCommDestroy(comm.0))
    }

    pub fn comm_count(&self, comm: CommHandle) -> Result<i32> {
        let mut n = 0;
        call!(self, ncclCommCount(comm.0, &mut n))?;
        Ok(n)
    }

    pub fn comm_cu_device(&self, comm: CommHandle) -> Result<i32> {
        let mut d = 0;
        call!(self, ncclCommCuDevice(comm.0, &mut d))?;
        Ok(d)
    }

    pub fn comm_user_rank(&self, comm: CommHandle) -> Result<i32> {
        let mut r = 0;
        call!(self, ncclCommUserRank(comm.0, &mut r))?;
        Ok(r)
    }

    pub fn group_start(&self) -> Result<()> {
        call!(self, ncclGroupStart())
    }

    pub fn group_end(&self) -> Result<Issued> {
        call!(issue self, ncclGroupEnd())
    }

    /// `ncclAllReduce`. Pointers are device addresses sized by the caller for `count` elements.
    #[allow(clippy::too_many_arguments)]
    pub fn all_reduce(
        &self,
        send: DevPtr,
        recv: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        op: RedOpCode,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        call!(
            issue self,
            ncclAllReduce(
                send.as_ptr(),
                recv.as_ptr(),
                count,
                sys::ncclDataType_t(dtype),
                sys::ncclRedOp_t(op),
                comm.0,
                stream.raw().cast()
            )
        )
    }

    /// Native `ncclAlltoAll` (`count` elements to and from each peer).
    pub fn all_to_all(
        &self,
        send: DevPtr,
        recv: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        let Some(f) = self.alltoall else {
            return Err(self.missing("ncclAlltoAll"));
        };
        // SAFETY: prototype of NCCL >= 2.28 (see newer.rs); arguments checked by crate::comm.
        let r = unsafe {
            f(
                send.as_ptr(),
                recv.as_ptr(),
                count,
                dtype,
                comm.0.cast(),
                stream.raw(),
            )
        };
        self.check_issued("ncclAlltoAll", ncclResult_t(r))
    }

    pub fn send(
        &self,
        buf: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        peer: i32,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        call!(
            issue self,
            ncclSend(
                buf.as_ptr(),
                count,
                sys::ncclDataType_t(dtype),
                peer,
                comm.0,
                stream.raw().cast()
            )
        )
    }

    pub fn recv(
        &self,
        buf: DevPtr,
        count: usize,
        dtype: DataTypeCode,
        peer: i32,
        comm: CommHandle,
        stream: &Stream,
    ) -> Result<Issued> {
        call!(
            issue self,
            ncclRecv(
                buf.as_ptr(),
                count,
                sys::ncclDataType_t(dtype),
                peer,
                comm.0,
                stream.raw().cast()
            )
        )
    }
}

/// `NCCL_CONFIG_INITIALIZER` of nccl.h: every tunable "undefined" so the library picks.
fn config_initializer() -> ncclConfig_t {
    const UNDEF_INT: i32 = i32::MIN;
    ncclConfig_t {
        size: std::mem::size_of::<ncclConfig_t>(),
        magic: 0xcafe_beef,
        version: (sys::NCCL_MAJOR * 10000 + sys::NCCL_MINOR * 100 + sys::NCCL_PATCH),
        blocking: UNDEF_INT,
        cgaClusterSize: UNDEF_INT,
        minCTAs: UNDEF_INT,
        maxCTAs: UNDEF_INT,
        netName: std::ptr::null(),
        splitShare: UNDEF_INT,
    }
}

fn cstr(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: NCCL returns NUL-terminated strings it owns.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_result_code_decodes_by_name() {
        let names = [
            "ncclSuccess",
            "ncclUnhandledCudaError",
            "ncclSystemError",
            "ncclInternalError",
            "ncclInvalidArgument",
            "ncclInvalidUsage",
            "ncclRemoteError",
            "ncclInProgress",
        ];
        for (raw, name) in names.iter().enumerate() {
            let code = ResultCode::from_raw(raw as u32);
            assert_eq!(code.name(), *name);
            assert_eq!(code.raw(), raw as u32);
        }
        assert_eq!(ResultCode::from_raw(8), ResultCode::Unexpected(8));
        assert_eq!(ResultCode::from_raw(8).name(), "ncclResult_t(8)");
    }

    #[test]
    fn call_errors_carry_code_text_and_last_error() {
        let e = NcclError::Call {
            call: "ncclCommInitRank",
            code: ResultCode::UnhandledCudaError,
            text: "unhandled cuda error".into(),
            last_error: Some("Cuda failure 'CUDA driver version is insufficient'".into()),
        };
        assert_eq!(
            e.to_string(),
            "ncclCommInitRank returned ncclUnhandledCudaError (1): unhandled cuda error — last error: Cuda failure 'CUDA driver version is insufficient'"
        );
    }

    #[test]
    fn version_codes_read_like_nccl() {
        assert_eq!(version_string(21903), "2.19.3");
        assert_eq!(version_string(22803), "2.28.3");
        assert_eq!(version_string(2708), "2.7.8");
    }

    #[test]
    fn config_initializer_matches_nccl_h() {
        let c = config_initializer();
        assert_eq!(c.magic, 0xcafebeef);
        assert_eq!(c.size, std::mem::size_of::<ncclConfig_t>());
        assert_eq!(c.version, 21903);
        assert_eq!(c.blocking, i32::MIN);
    }

    #[test]
    fn missing_library_is_an_error_naming_the_path() {
        let e = Nccl::load(Some("/nonexistent/libnccl.so.2")).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/libnccl.so.2"), "{e}");
    }
}
