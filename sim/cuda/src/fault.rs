//! Driver-level fault injection (`NCCL_SMOKE_SIM_FAULT`), parsed once per process.

use crate::codes::{CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_UNKNOWN, CUresult, CuResult};
use nccl_smoke_fault::{FaultSet, Kind, SpecError, Where};
use std::cell::Cell;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

fn faults() -> &'static Result<FaultSet, SpecError> {
    static FAULTS: OnceLock<Result<FaultSet, SpecError>> = OnceLock::new();
    FAULTS.get_or_init(|| {
        let set = FaultSet::from_env();
        if let Err(e) = &set {
            eprintln!("nccl-smoke simulated CUDA driver: {e}");
        }
        set
    })
}

fn rank() -> Option<u32> {
    static RANK: OnceLock<Option<u32>> = OnceLock::new();
    *RANK.get_or_init(nccl_smoke_fault::rank_from_env)
}

/// `Err(CUDA_ERROR_INVALID_VALUE)` when a fault spec does not parse (reported once).
pub fn spec_ok() -> CuResult {
    match (faults(), entry_faults()) {
        (Ok(_), Ok(_)) => Ok(()),
        _ => Err(CUDA_ERROR_INVALID_VALUE),
    }
}

/// What a fault of `kind` does at a place whose error is `error`.
pub fn apply(kind: Kind, error: CUresult) -> CuResult {
    match kind {
        Kind::Error => Err(error),
        Kind::Hang => loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        },
        Kind::Crash => std::process::abort(),
        // Meaningless in the driver: ignored.
        Kind::Slow(_) | Kind::Corrupt | Kind::Data { .. } => Ok(()),
    }
}

/// Strikes the fault injected at `at` for this rank, if any.
pub fn strike(at: Where, error: CUresult) -> CuResult {
    match faults() {
        Err(_) => Err(CUDA_ERROR_INVALID_VALUE),
        Ok(set) => match set.find(at, rank()) {
            Some(f) => apply(f.kind, error),
            None => Ok(()),
        },
    }
}

/// Faults at named entry points: `NCCL_SMOKE_SIM_CUDA_FAULT=<entry point>[@<rank>][#<n>][:<what>][,…]`.
///
/// * `entry point` — a driver function as NCCL's runtime asks for it, without its `_vN`
///   suffix (`cuMemCreate`, `cuIpcOpenMemHandle`, `cuLaunchKernel`); it must be one this driver
///   exports.
/// * `rank` — the rank (`NCCL_SMOKE_SIM_RANK`) it applies to; every process when omitted.
/// * `n` — the call of that entry point in this process from which it strikes (1-based,
///   default 1): every call from the `n`-th on.
/// * `what` — a `CUresult` to return, by name (`CUDA_ERROR_OUT_OF_MEMORY`) or number (`2`),
///   default `CUDA_ERROR_UNKNOWN`; `hang` (the call never returns; a kernel launch returns but
///   its kernel never finishes, so its stream never drains); `crash` (the process aborts).
pub const ENTRY_FAULT_ENV: &str = "NCCL_SMOKE_SIM_CUDA_FAULT";

/// What an entry-point fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    Code(CUresult),
    Hang,
    Crash,
}

#[derive(Debug)]
pub struct EntryFault {
    /// The entry point's family ([`family`]).
    pub entry: String,
    pub rank: Option<u32>,
    /// Strikes from this call on (1-based).
    pub from_call: u64,
    pub kind: EntryKind,
    /// Calls of the entry point seen so far in this process.
    calls: AtomicU64,
}

/// `name` without a trailing `_v<digits>`: the family an entry point belongs to.
pub fn family(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, v)) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => name,
    }
}

/// The kernel-launch entry points: `hang` there makes the kernel, not the call, never end.
pub fn is_launch(name: &str) -> bool {
    matches!(
        family(name),
        "cuLaunchKernel" | "cuLaunchKernelEx" | "cuLaunchCooperativeKernel"
    )
}

fn parse_code(s: &str) -> Option<CUresult> {
    let code = match s.parse::<u32>() {
        Ok(n) => n,
        Err(_) => crate::codes::code_named(s)?,
    };
    (code != 0 && crate::codes::lookup(code).is_some()).then_some(CUresult(code))
}

/// Parses one `NCCL_SMOKE_SIM_CUDA_FAULT` list; `exported` says whether the driver exports an
/// entry point of a family.
pub fn parse_entry_faults(
    spec: &str,
    exported: impl Fn(&str) -> bool,
) -> Result<Vec<EntryFault>, String> {
    let mut out = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = |why: &str| format!("{ENTRY_FAULT_ENV}: '{}': {why}", part.escape_debug());
        let (head, what) = part.split_once(':').unwrap_or((part, ""));
        let kind = match what {
            "" => EntryKind::Code(CUDA_ERROR_UNKNOWN),
            "hang" => EntryKind::Hang,
            "crash" => EntryKind::Crash,
            code => EntryKind::Code(parse_code(code).ok_or_else(|| {
                bad(
                    "the part after ':' must be hang, crash, or a CUDA error code this driver \
                     knows, by name (CUDA_ERROR_OUT_OF_MEMORY) or number (2), not 0",
                )
            })?),
        };
        let (head, from_call) = match head.split_once('#') {
            Some((h, n)) => match n.parse::<u64>() {
                Ok(n) if n >= 1 => (h, n),
                _ => {
                    return Err(bad(
                        "the call number after '#' must be a whole number from 1",
                    ));
                }
            },
            None => (head, 1),
        };
        let (name, rank) = match head.split_once('@') {
            Some((n, r)) => match r.parse::<u32>() {
                Ok(r) => (n, Some(r)),
                Err(_) => return Err(bad("the rank after '@' must be a whole number")),
            },
            None => (head, None),
        };
        if !exported(name) {
            return Err(bad(
                "not an entry point of this driver (name it without its _vN suffix, as cuMemCreate)",
            ));
        }
        out.push(EntryFault {
            entry: family(name).to_owned(),
            rank,
            from_call,
            kind,
            calls: AtomicU64::new(0),
        });
    }
    Ok(out)
}

/// Whether this driver exports an entry point of a family: the export table's answer, given
/// when the library is loaded (see `lib.rs`). Every entry point runs through this module (by
/// `error::ffi`), and the export table names every entry point, so the table is handed down
/// rather than looked up.
static EXPORTED: OnceLock<fn(&str) -> bool> = OnceLock::new();

/// Gives this module the export table's check of entry-point families (once; later calls
/// change nothing).
pub fn know_exports(exported: fn(&str) -> bool) {
    let _ = EXPORTED.set(exported);
}

fn entry_faults() -> &'static Result<Vec<EntryFault>, String> {
    static FAULTS: OnceLock<Result<Vec<EntryFault>, String>> = OnceLock::new();
    FAULTS.get_or_init(|| {
        let spec = crate::config::var(ENTRY_FAULT_ENV).unwrap_or_default();
        let exported = EXPORTED.get().copied();
        if exported.is_none() && !spec.is_empty() {
            eprintln!(
                "nccl-smoke simulated CUDA driver: {ENTRY_FAULT_ENV}: the export table was not \
                 given at load; entry-point names are not checked"
            );
        }
        let set = parse_entry_faults(&spec, |name| exported.is_none_or(|f| f(name)));
        if let Err(e) = &set {
            eprintln!("nccl-smoke simulated CUDA driver: {e}");
        }
        set
    })
}

thread_local! {
    /// Set for the kernel launch this thread is making when a `hang` fault struck it.
    static STUCK_LAUNCH: Cell<bool> = const { Cell::new(false) };
}

/// Takes the "this launch's kernel never ends" mark of the calling thread.
pub fn take_stuck_launch() -> bool {
    STUCK_LAUNCH.with(|c| c.replace(false))
}

/// Strikes the fault injected at entry point `name` for this rank, if any: `Err(code)` to
/// return, a call that never returns, or an abort. A bad spec fails every entry point but the
/// error-name ones with `CUDA_ERROR_INVALID_VALUE`.
pub fn entry(name: &str) -> CuResult {
    let faults = match entry_faults() {
        Ok(f) if f.is_empty() => return Ok(()),
        Ok(f) => f,
        Err(_) if name.starts_with("cuGetError") => return Ok(()),
        Err(_) => return Err(CUDA_ERROR_INVALID_VALUE),
    };
    let fam = family(name);
    let me = rank();
    for f in faults
        .iter()
        .filter(|f| f.entry == fam && (f.rank.is_none() || f.rank == me))
    {
        let n = f.calls.fetch_add(1, Ordering::Relaxed) + 1;
        if n < f.from_call {
            continue;
        }
        crate::trace::log(|| format!("fault: {name} call #{n} struck ({:?})", f.kind));
        match f.kind {
            EntryKind::Code(c) => return Err(c),
            EntryKind::Crash => std::process::abort(),
            EntryKind::Hang if is_launch(name) => STUCK_LAUNCH.with(|c| c.set(true)),
            EntryKind::Hang => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::*;

    #[test]
    fn kinds_map_to_results() {
        assert_eq!(
            apply(Kind::Error, CUDA_ERROR_NO_DEVICE),
            Err(CUDA_ERROR_NO_DEVICE)
        );
        assert_eq!(apply(Kind::Slow(2.0), CUDA_ERROR_NO_DEVICE), Ok(()));
        assert_eq!(apply(Kind::Corrupt, CUDA_ERROR_OUT_OF_MEMORY), Ok(()));
    }

    /// The library's load-time hook gave this module the export table: names are checked
    /// against what the driver exports, by family.
    #[test]
    fn the_export_table_is_known_from_load() {
        let exported = EXPORTED.get().expect("set when the library was loaded");
        assert!(exported("cuMemCreate") && exported("cuIpcOpenMemHandle"));
        assert!(!exported("cuNoSuchEntry"));
    }

    fn known(name: &str) -> bool {
        ["cuMemCreate", "cuIpcOpenMemHandle", "cuLaunchKernel"].contains(&family(name))
    }

    #[test]
    fn entry_faults_parse() {
        let f = parse_entry_faults(
            "cuMemCreate@1:CUDA_ERROR_OUT_OF_MEMORY, cuIpcOpenMemHandle_v2:400,cuLaunchKernel@0#7:hang,cuMemCreate:crash",
            known,
        )
        .unwrap();
        assert_eq!(f.len(), 4);
        assert_eq!(
            (f[0].entry.as_str(), f[0].rank, f[0].from_call, f[0].kind),
            (
                "cuMemCreate",
                Some(1),
                1,
                EntryKind::Code(CUDA_ERROR_OUT_OF_MEMORY)
            )
        );
        assert_eq!(f[1].entry, "cuIpcOpenMemHandle");
        assert_eq!(f[1].kind, EntryKind::Code(CUDA_ERROR_INVALID_HANDLE));
        assert_eq!(
            (f[2].rank, f[2].from_call, f[2].kind),
            (Some(0), 7, EntryKind::Hang)
        );
        assert_eq!(f[3].kind, EntryKind::Crash);
        assert_eq!(
            parse_entry_faults("cuMemCreate", known).unwrap()[0].kind,
            EntryKind::Code(CUDA_ERROR_UNKNOWN)
        );
        assert!(parse_entry_faults("", known).unwrap().is_empty());
    }

    #[test]
    fn bad_entry_faults_name_the_part() {
        for (spec, why) in [
            ("cuNoSuchThing:2", "not an entry point"),
            ("cuMemCreate:0", "CUDA error code"),
            ("cuMemCreate:12345", "CUDA error code"),
            ("cuMemCreate:CUDA_ERROR_NOPE", "CUDA error code"),
            ("cuMemCreate#0:2", "call number"),
            ("cuMemCreate@x:2", "rank"),
        ] {
            let e = parse_entry_faults(spec, known).unwrap_err();
            assert!(
                e.contains(why) && e.contains(ENTRY_FAULT_ENV),
                "{spec}: {e}"
            );
        }
    }

    #[test]
    fn families_drop_the_version_suffix_only() {
        assert_eq!(family("cuIpcOpenMemHandle_v2"), "cuIpcOpenMemHandle");
        assert_eq!(family("cuMemAlloc_v2"), "cuMemAlloc");
        assert_eq!(family("cuLaunchKernelEx"), "cuLaunchKernelEx");
        assert_eq!(
            family("cuStreamGetCaptureInfo_v3"),
            "cuStreamGetCaptureInfo"
        );
        assert_eq!(family("cu_v"), "cu_v");
        assert!(is_launch("cuLaunchKernelEx") && !is_launch("cuMemCreate"));
    }
}
