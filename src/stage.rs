//! The ordered steps every rank walks, and the exit code each one owns.
//!
//! The stage is the backbone of pinpointing: every error carries one, the verdict names it, and
//! the process exit code is chosen from it so that scripts and Kubernetes can branch on it.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// One step of a run, in the order ranks walk them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stage {
    /// Rank discovery (MPI init or launcher environment) and the first MPI collective.
    Launch,
    /// dlopen of libnccl, its version and optional symbols.
    NcclLoad,
    /// The CUDA driver library, `cuInit`, the driver version.
    Driver,
    /// Local rank → device, its context.
    Device,
    /// Device buffers for the largest message.
    Alloc,
    /// `ncclGetUniqueId` on rank 0 and its broadcast.
    UniqueId,
    /// `ncclCommInitRank[Config]`.
    Init,
    /// The first operation of each pattern, where NCCL builds its transports; not yet split.
    Connect,
    /// Connect failed importing a peer's buffer (P2P / cuMem / IPC).
    ConnectImport,
    /// Connect failed in NCCL's proxy service.
    ConnectProxy,
    /// Connect failed in the shared-memory transport.
    ConnectShm,
    /// Connect failed in the network transport (socket / IB).
    ConnectNet,
    /// The measured sweep.
    Run,
    /// Received data differed from what the senders sent.
    Verify,
    /// `ncclCommFinalize` / `ncclCommDestroy`.
    Finalize,
}

impl Stage {
    /// Every stage, in walking order.
    pub const ALL: [Stage; 15] = [
        Stage::Launch,
        Stage::NcclLoad,
        Stage::Driver,
        Stage::Device,
        Stage::Alloc,
        Stage::UniqueId,
        Stage::Init,
        Stage::Connect,
        Stage::ConnectImport,
        Stage::ConnectProxy,
        Stage::ConnectShm,
        Stage::ConnectNet,
        Stage::Run,
        Stage::Verify,
        Stage::Finalize,
    ];

    /// The name used in verdicts, JSON and `--stage-timeout`.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Launch => "launch",
            Stage::NcclLoad => "nccl-load",
            Stage::Driver => "driver",
            Stage::Device => "device",
            Stage::Alloc => "alloc",
            Stage::UniqueId => "unique-id",
            Stage::Init => "init",
            Stage::Connect => "connect",
            Stage::ConnectImport => "connect:buffer-import",
            Stage::ConnectProxy => "connect:proxy",
            Stage::ConnectShm => "connect:shm",
            Stage::ConnectNet => "connect:net",
            Stage::Run => "run",
            Stage::Verify => "verify",
            Stage::Finalize => "finalize",
        }
    }

    /// The process exit code of a run that failed in this stage.
    pub fn exit_code(self) -> u8 {
        match self {
            Stage::Launch => 10,
            Stage::NcclLoad => 11,
            Stage::Driver => 12,
            Stage::Device => 13,
            Stage::Alloc => 14,
            Stage::UniqueId => 15,
            Stage::Init => 16,
            Stage::Connect => 17,
            Stage::ConnectImport => 18,
            Stage::ConnectProxy => 19,
            Stage::ConnectShm => 20,
            Stage::ConnectNet => 21,
            Stage::Run => 22,
            Stage::Verify => 23,
            Stage::Finalize => 24,
        }
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.name() == s)
    }

    /// The deadline a stage gets unless the user says otherwise: long enough for a large job
    /// on a slow file system, short enough that a hang is named before the operator gives up.
    pub fn default_deadline_s(self) -> u64 {
        match self {
            Stage::Launch => 120,
            Stage::NcclLoad | Stage::Driver | Stage::Device | Stage::Alloc => 60,
            Stage::UniqueId => 60,
            Stage::Init => 300,
            Stage::Connect
            | Stage::ConnectImport
            | Stage::ConnectProxy
            | Stage::ConnectShm
            | Stage::ConnectNet => 120,
            // Run and verify deadlines bound the time without progress (one message size),
            // not the whole sweep.
            Stage::Run | Stage::Verify => 120,
            Stage::Finalize => 60,
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for Stage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Stage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Stage, D::Error> {
        let name = String::deserialize(d)?;
        Stage::parse(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown stage '{name}'")))
    }
}

/// Exit codes that do not come from a stage.
pub mod exit {
    /// Everything passed.
    pub const PASS: u8 = 0;
    /// A bug in nccl-smoke itself (it should have been a stage failure).
    pub const INTERNAL: u8 = 1;
    /// Bad flags, sizes, environment or input files; nothing was run.
    pub const USAGE: u8 = 2;
    /// Everything ran, but an output file (`--json`, `--plot`) could not be written.
    pub const WRITE_FAILED: u8 = 3;
    /// The job was stopped by a signal to the launcher (Ctrl-C, SIGTERM) before any rank
    /// failed; the results file is marked CANCELLED and keeps every size measured.
    pub const CANCELLED: u8 = 130;
    /// `compare`: the second run regressed against the first.
    pub const REGRESSED: u8 = 30;
    /// `compare`: too noisy to tell at the threshold (the report gives the noise and the
    /// repeats that would settle it).
    pub const INCONCLUSIVE: u8 = 33;
    /// `compare`: an input file (a nccl-tests log, a `-J` JSON file) is malformed or cut
    /// short; the message names the file and line.
    pub const MALFORMED_INPUT: u8 = 34;
    /// `run --expect`: every stage passed, but bus bandwidth fell below a floor of the
    /// expectations file.
    pub const BELOW_EXPECTED: u8 = 25;
    /// `doctor`: at least one warning, no failure.
    pub const DOCTOR_WARN: u8 = 31;
    /// `doctor`: at least one failed check.
    pub const DOCTOR_FAIL: u8 = 32;
}

/// Seconds one stage took on one rank.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StageRecord {
    pub stage: Stage,
    /// Wall seconds from entering the stage to leaving it.
    pub seconds: f64,
    pub ok: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn exit_codes_are_distinct_and_clear_of_the_fixed_ones() {
        let codes: HashSet<u8> = Stage::ALL.iter().map(|s| s.exit_code()).collect();
        assert_eq!(codes.len(), Stage::ALL.len());
        for fixed in [
            exit::PASS,
            exit::INTERNAL,
            exit::USAGE,
            exit::WRITE_FAILED,
            exit::CANCELLED,
            exit::REGRESSED,
            exit::DOCTOR_WARN,
            exit::DOCTOR_FAIL,
        ] {
            assert!(!codes.contains(&fixed), "{fixed}");
        }
    }

    #[test]
    fn names_round_trip() {
        for s in Stage::ALL {
            assert_eq!(Stage::parse(s.name()), Some(s));
            let json = serde_json::to_string(&s).unwrap();
            let back: Stage = serde_json::from_str(&json).unwrap();
            assert_eq!(back, s);
        }
    }
}
