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
    /// `ncclGetUniqueId` on rank 0 and its broadcast.
    UniqueId,
    /// `ncclCommInitRank[Config]`.
    Init,
    /// Device buffers for the largest message, after the communicator (as nccl-tests orders
    /// them), so that NCCL's own memory comes first.
    Alloc,
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
        Stage::UniqueId,
        Stage::Init,
        Stage::Alloc,
        Stage::Connect,
        Stage::ConnectImport,
        Stage::ConnectProxy,
        Stage::ConnectShm,
        Stage::ConnectNet,
        Stage::Run,
        Stage::Verify,
        Stage::Finalize,
    ];

    /// This stage's row of [`TABLE`].
    pub fn row(self) -> &'static Row {
        &TABLE[self as usize]
    }

    /// The name used in verdicts, JSON and `--stage-timeout`.
    pub fn name(self) -> &'static str {
        self.row().name
    }

    /// The process exit code of a run that failed in this stage.
    pub fn exit_code(self) -> u8 {
        self.row().exit_code
    }

    pub fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.name() == s)
    }

    /// Every stage's name, in order, comma-separated (for a message that lists them).
    pub fn names() -> String {
        let names: Vec<_> = Stage::ALL.iter().map(|s| s.name()).collect();
        names.join(", ")
    }

    /// The deadline a stage gets unless the user says otherwise: long enough for a large job
    /// on a slow file system, short enough that a hang is named before the operator gives up.
    /// Run and verify deadlines bound the time without progress (one message size), not the
    /// whole sweep.
    pub fn default_deadline_s(self) -> u64 {
        self.row().deadline_s
    }
}

/// One stage: its name, exit code, default deadline and meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    pub stage: Stage,
    pub name: &'static str,
    pub exit_code: u8,
    /// Seconds.
    pub deadline_s: u64,
    /// What failed when a run fails here (the README's exit-code table).
    pub meaning: &'static str,
}

const fn row(
    stage: Stage,
    name: &'static str,
    exit_code: u8,
    deadline_s: u64,
    meaning: &'static str,
) -> Row {
    Row {
        stage,
        name,
        exit_code,
        deadline_s,
        meaning,
    }
}

/// The stage table, in walking order: the one place a stage's name, exit code, default
/// deadline and meaning are written. `--help`'s exit-code list and the README's table come
/// from it (see [`exit::all`]).
pub const TABLE: [Row; 15] = [
    row(
        Stage::Launch,
        "launch",
        10,
        120,
        "MPI init or the TCP rendezvous (a rank absent, a wrong address, two processes claiming a rank), launcher mismatch, first collective; ranks started differently (`--strict`)",
    ),
    row(
        Stage::NcclLoad,
        "nccl-load",
        11,
        60,
        "libnccl missing or too old",
    ),
    row(
        Stage::Driver,
        "driver",
        12,
        60,
        "no CUDA driver library, `cuInit` failed",
    ),
    row(
        Stage::Device,
        "device",
        13,
        60,
        "no / wrong GPU for this rank",
    ),
    row(
        Stage::UniqueId,
        "unique-id",
        15,
        60,
        "`ncclGetUniqueId` / its broadcast",
    ),
    row(Stage::Init, "init", 16, 300, "communicator init"),
    row(
        Stage::Alloc,
        "alloc",
        14,
        60,
        "device memory for the buffers (after init, as nccl-tests allocates)",
    ),
    row(
        Stage::Connect,
        "connect",
        17,
        120,
        "first operation of a pattern (transport setup), cause not pinned down",
    ),
    row(
        Stage::ConnectImport,
        "connect:buffer-import",
        18,
        120,
        "P2P/cuMem/IPC buffer import",
    ),
    row(
        Stage::ConnectProxy,
        "connect:proxy",
        19,
        120,
        "NCCL proxy service",
    ),
    row(
        Stage::ConnectShm,
        "connect:shm",
        20,
        120,
        "shared-memory transport (`/dev/shm`)",
    ),
    row(
        Stage::ConnectNet,
        "connect:net",
        21,
        120,
        "network transport (socket / IB)",
    ),
    row(
        Stage::Run,
        "run",
        22,
        120,
        "an operation failed or hung during the sweep",
    ),
    row(
        Stage::Verify,
        "verify",
        23,
        120,
        "received data differs from what was sent",
    ),
    row(Stage::Finalize, "finalize", 24, 60, "communicator teardown"),
];

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

/// A wait on other ranks runs this much past the stage's deadline, so that a rank stuck on its
/// own (a stopped worker, named at the deadline; one stuck in a library outside a wait on
/// others, at deadline + the supervisor's grace) reports before the ranks that are only
/// waiting for it.
pub const PEER_MARGIN: std::time::Duration = std::time::Duration::from_millis(1500);

/// Exit codes that do not come from a stage.
pub mod exit {
    /// Everything passed.
    pub const PASS: u8 = 0;
    /// A bug in nccl-smoke itself (it should have been a stage failure) — or, under mpirun or
    /// srun, the launcher's own refusal to start the job (as root, not enough slots).
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
    /// `compare`: an input file holds nothing to compare (a nccl-tests log without a readable
    /// results table, a malformed or cut `-J` JSON file); the message names the file and line.
    pub const MALFORMED_INPUT: u8 = 34;
    /// `run --expect`: every stage passed, but bus bandwidth fell below a floor of the
    /// expectations file or of the built-in table.
    pub const BELOW_EXPECTED: u8 = 25;
    /// `run -c 0`: every stage passed and the sizes were measured, but no data was checked,
    /// so the run is not a pass.
    pub const UNVERIFIED: u8 = 26;
    /// `run --backend control-plane`: the real libnccl on simulated GPUs got through init and
    /// connect for every pattern, and aborted its communicators cleanly; no kernel ran, so nothing was measured or
    /// checked. Never a pass.
    pub const CONTROL_PLANE_OK: u8 = 27;
    /// `compare`: nothing could be compared (no pattern, size and data type in common, or
    /// no size at or above `--min-bytes`); the report says why.
    pub const NOTHING_COMPARED: u8 = 35;
    /// `explain`: error lines that no signature names (quoted in the report): not a pass,
    /// and no cause to name.
    pub const UNKNOWN: u8 = 36;
    /// `explain`: no failure in the logs, but nothing in them shows the run finished (no
    /// nccl-tests footer, no communicator destroyed): a rank killed or a cut log looks the same.
    pub const NO_FAILURE_SEEN: u8 = 37;
    /// `isolate`: no host failed, but with two hosts and no floor (`--expect`) the speed of
    /// their pair has no reference; the verdict gives both hosts' figures.
    pub const NOT_JUDGED: u8 = 38;
    /// `doctor`: at least one warning, no failure.
    pub const DOCTOR_WARN: u8 = 31;
    /// `doctor`: at least one failed check.
    pub const DOCTOR_FAIL: u8 = 32;

    /// One exit code: the name `--help` lists, the stage's default deadline (stages only) and
    /// its meaning.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Code {
        pub code: u8,
        pub name: &'static str,
        pub deadline_s: Option<u64>,
        pub meaning: &'static str,
    }

    const fn fixed(code: u8, name: &'static str, meaning: &'static str) -> Code {
        Code {
            code,
            name,
            deadline_s: None,
            meaning,
        }
    }

    /// The exit codes below the stages' and above them.
    const BELOW: [Code; 4] = [
        fixed(PASS, "pass", "everything passed"),
        fixed(
            INTERNAL,
            "internal error",
            "a bug in nccl-smoke; or, under mpirun/srun, the launcher's own refusal to start the \
             job (as root without `--allow-run-as-root`, more ranks than slots without \
             `--oversubscribe`), before any rank ran",
        ),
        fixed(
            USAGE,
            "bad input",
            "flags, sizes, environment, files; nothing was run",
        ),
        fixed(
            WRITE_FAILED,
            "output file not written",
            "everything ran, but an output file (`--json`, `--plot`) could not be written",
        ),
    ];
    const ABOVE: [Code; 13] = [
        fixed(
            BELOW_EXPECTED,
            "below a floor, or a slow host",
            "every stage passed, but bus bandwidth fell below a floor of `--expect FILE` or of the \
             built-in table (`--expect auto`; the verdict names the sizes, by how much, and the \
             hosts), or `isolate` found a slow host",
        ),
        fixed(
            UNVERIFIED,
            "run -c 0: not verified",
            "every stage passed and every size was measured, but no data was checked (`-c 0`): \
             not a pass; the results file's status is `UNVERIFIED`",
        ),
        fixed(
            CONTROL_PLANE_OK,
            "run --backend control-plane: control plane ok",
            "the real libnccl on simulated GPUs got through init and connect for every pattern \
             and aborted its communicators cleanly; no kernel ran, so no data was checked and no bandwidth measured: not \
             a pass; the results file's status is `CONTROL_PLANE_OK`",
        ),
        fixed(
            REGRESSED,
            "compare: regressed",
            "the second run lost more than the threshold, beyond the noise (or has wrong data, or \
             failed)",
        ),
        fixed(DOCTOR_WARN, "doctor: warnings", "warnings, no failure"),
        fixed(DOCTOR_FAIL, "doctor: failures", "at least one failure"),
        fixed(
            INCONCLUSIVE,
            "compare: inconclusive",
            "too noisy to tell at the threshold; the report gives the noise and the repeats that \
             would settle it",
        ),
        fixed(
            MALFORMED_INPUT,
            "compare: malformed input",
            "a nccl-tests log holds no readable results table, or a `-J` file is malformed or cut \
             short; the message names the file and line",
        ),
        fixed(
            NOTHING_COMPARED,
            "compare: nothing compared",
            "no pattern, size and data type in common between the two runs (or none at or above \
             `--min-bytes`): no verdict; the report says what each run holds",
        ),
        fixed(
            UNKNOWN,
            "explain: unknown",
            "the logs hold error lines that no known signature names; they are quoted: not a \
             pass, and no cause named",
        ),
        fixed(
            NO_FAILURE_SEEN,
            "explain: no failure seen",
            "no failure in the logs, but nothing in them shows the run finished (a nccl-tests \
             footer, a communicator destroyed): not a pass",
        ),
        fixed(
            NOT_JUDGED,
            "isolate: not judged",
            "no host failed, but with 2 hosts and no floor (`--expect`) the speed of their pair \
             has no reference: `VERDICT: NOT JUDGED` gives both hosts' figures; not a pass; the \
             results file's status is `NOT_JUDGED`",
        ),
        fixed(
            CANCELLED,
            "cancelled",
            "SIGINT or SIGTERM to the launcher before any rank failed (rank 0's exit code and the \
             results file's `verdict.exit_code`; the results file says `CANCELLED` and keeps every \
             size measured)",
        ),
    ];

    /// Every exit code, in numeric order: the fixed ones and one per stage (from
    /// [`super::TABLE`], whose walking order puts alloc, 14, after init, 16).
    pub fn all() -> Vec<Code> {
        let mut stages: Vec<Code> = super::TABLE
            .iter()
            .map(|r| Code {
                code: r.exit_code,
                name: r.name,
                deadline_s: Some(r.deadline_s),
                meaning: r.meaning,
            })
            .collect();
        stages.sort_by_key(|c| c.code);
        BELOW.into_iter().chain(stages).chain(ABOVE).collect()
    }

    /// `--help`'s list: `0 pass · 1 internal error · … · 130 cancelled`.
    pub fn help() -> String {
        let codes: Vec<String> = all()
            .iter()
            .map(|c| format!("{} {}", c.code, c.name))
            .collect();
        format!("Exit codes: {}", codes.join(" · "))
    }

    /// The exit codes one subcommand (`compare`, `doctor`) can return: its own (named
    /// `compare: …`), then the shared ones it uses, from the same table as [`all`].
    pub fn of_command(command: &str, shared: &[(u8, &'static str)]) -> Vec<(u8, String)> {
        let prefix = format!("{command}: ");
        let own = all().into_iter().filter_map(|c| {
            c.name
                .strip_prefix(&prefix)
                .map(|n| (c.code, n.to_string()))
        });
        shared
            .iter()
            .map(|(c, n)| (*c, n.to_string()))
            .chain(own)
            .collect()
    }

    /// The README's table, one Markdown row per code.
    pub fn markdown() -> Vec<String> {
        let mut out = vec![
            "| code | name | default deadline | meaning |".to_string(),
            "|---|---|---|---|".to_string(),
        ];
        for c in all() {
            let deadline = c.deadline_s.map(|s| format!("{s} s")).unwrap_or_default();
            out.push(format!(
                "| {} | {} | {deadline} | {} |",
                c.code, c.name, c.meaning
            ));
        }
        out
    }
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
mod tests;
