//! Loading libnccl: resolving the symbol table, reading the version and capabilities, and
//! turning a returned `ncclResult_t` into a `Result` with the library's own words.

use super::error::{NcclError, Result, ResultCode};
use super::sys::{NcclSys, ncclResult_t};
use super::{Capabilities, CommHandle, Issued, NCCL_SONAME, Nccl, newer, version_string};
use crate::ffi::{os, wheel};
use std::ffi::{CStr, c_char};
use std::path::Path;

impl Nccl {
    /// Loads `path` (or [`NCCL_SONAME`] through the dynamic linker, else the copy a pip wheel
    /// unpacked, see [`crate::ffi::wheel`]) and reads its version and capabilities.
    pub fn load(path: Option<&str>) -> Result<Nccl> {
        let asked = path.unwrap_or(NCCL_SONAME).to_string();
        let mut from_pip_wheel = false;
        let lib = match os::Library::open_global(&asked) {
            Ok(lib) => lib,
            Err(detail) if path.is_none() => {
                let env = |k: &str| std::env::var(k).ok();
                let wheels = wheel::nccl_candidates(Path::new("/"), &env);
                let found = wheels
                    .iter()
                    .find_map(|w| os::Library::open_global(&w.display().to_string()).ok());
                match found {
                    Some(lib) => {
                        from_pip_wheel = true;
                        lib
                    }
                    None => {
                        let also = if wheels.is_empty() {
                            "; no pip wheel copy (site-packages/nvidia/nccl/lib) in the active \
                             virtual or conda environment or the user and system site folders"
                                .to_string()
                        } else {
                            format!(
                                "; the pip wheel copies found do not load either: {}",
                                wheels
                                    .iter()
                                    .map(|w| w.display().to_string())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        };
                        return Err(NcclError::NotFound {
                            path: asked,
                            detail: detail + &also,
                        });
                    }
                }
            }
            Err(detail) => {
                return Err(NcclError::NotFound {
                    path: asked,
                    detail,
                });
            }
        };
        let resolved = lib.path_of("ncclGetVersion").unwrap_or(asked.clone());
        let simulated = lib.marker("ncclSmokeSimulation");
        let alltoall = newer::alltoall(&lib);
        let gather_scatter = newer::gather_scatter(&lib);
        // SAFETY: bindgen's table only resolves symbols; nothing is called yet.
        let sys =
            unsafe { NcclSys::from_library(lib.into_raw()) }.map_err(|e| NcclError::NotFound {
                path: resolved.clone(),
                detail: e.to_string(),
            })?;
        let mut nccl = Nccl {
            sys,
            alltoall,
            gather_scatter,
            path: resolved,
            version_code: 0,
            caps: Capabilities::default(),
            simulated,
            from_pip_wheel,
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
            gather_scatter: nccl.gather_scatter.is_some() && v >= 22803,
            split: nccl.sys.ncclCommSplit.is_ok() && v >= 21801,
        };
        Ok(nccl)
    }

    pub fn version(&self) -> String {
        version_string(self.version_code)
    }

    pub(super) fn require_symbols(&self) -> Result<()> {
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

    pub(super) fn missing(&self, symbol: &'static str) -> NcclError {
        NcclError::MissingSymbol {
            path: self.path.clone(),
            version: self.version(),
            symbol,
            since: "a newer release",
        }
    }

    pub(super) fn check(&self, call: &'static str, r: ncclResult_t) -> Result<()> {
        match ResultCode::from_raw(r.0) {
            ResultCode::Success => Ok(()),
            code => Err(self.call_error(call, code)),
        }
    }

    pub(super) fn check_issued(&self, call: &'static str, r: ncclResult_t) -> Result<Issued> {
        match ResultCode::from_raw(r.0) {
            ResultCode::Success => Ok(Issued::Done),
            ResultCode::InProgress => Ok(Issued::InProgress),
            code => Err(self.call_error(call, code)),
        }
    }

    pub(super) fn call_error(&self, call: &'static str, code: ResultCode) -> NcclError {
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
    fn missing_library_is_an_error_naming_the_path() {
        let e = Nccl::load(Some("/nonexistent/libnccl.so.2")).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/libnccl.so.2"), "{e}");
    }
}
