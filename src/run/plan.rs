//! The run's plan: every setting the engine needs, checked once, before any rank touches a
//! library. Built from the command line by `cli` (as hyperfine builds its `Options` from clap);
//! the engine never sees the command line's types.

use super::libs::LibChoice;
use crate::bench::sweep::{self, Step};
use crate::bench::{DataOn, Timing};
use crate::bootstrap::Mode;
use crate::console::sanitize;
use crate::elements::{DataType, RedOp};
use crate::report::expect::{self, Expectations};
use crate::report::exports::Exports;
use crate::report::results::RunConfig;
use crate::stage::Stage;
use std::path::PathBuf;
use std::time::Duration;

/// The shortest and longest deadline a flag may set, in seconds.
pub const MIN_DEADLINE_S: f64 = 0.1;
pub const MAX_DEADLINE_S: f64 = 86_400.0;
/// The largest message size a sweep may have (-b, -e, -i).
pub const MAX_BYTES: usize = 1 << 40;

/// The settings as given, before they are checked.
#[derive(Debug, Clone)]
pub struct Settings {
    pub libs: LibChoice,
    pub patterns: Vec<String>,
    pub minbytes: usize,
    /// `None`: 128M, or 1M with the simulation.
    pub maxbytes: Option<usize>,
    pub stepfactor: f64,
    pub stepbytes: Option<usize>,
    pub iters: u32,
    pub warmup_iters: u32,
    pub check: bool,
    pub data_on: DataOn,
    pub datatype: DataType,
    pub op: RedOp,
    pub device: Option<i32>,
    pub json: Option<PathBuf>,
    /// `--csv FILE`, `--prometheus FILE`: copies of the results for machines.
    pub exports: Exports,
    /// `--logs DIR`: where a failed rank keeps NCCL's logs.
    pub logs: Option<PathBuf>,
    /// `--strict`: ranks started differently fail the run before NCCL's init.
    pub strict: bool,
    /// `--timeout`, and `--stage-timeout STAGE=SECS` in the order given.
    pub timeout: Option<f64>,
    pub stage_timeout: Vec<(Stage, f64)>,
    /// `--repeat N`: each size measured N times, interleaved.
    pub repeat: u32,
    /// `--budget`: seconds the whole run should fit in.
    pub budget: Option<f64>,
    /// `--duration`: seconds of passes over the sweep (a burn-in).
    pub duration: Option<f64>,
    /// `--expect FILE|auto`: bus bandwidth floors.
    pub expect: Option<PathBuf>,
    /// `--bootstrap`: how the ranks find each other.
    pub bootstrap: Mode,
    /// `nccl-smoke isolate`: the rounds' settings (none for `run`).
    pub isolate: Option<crate::run::isolate::Settings>,
}

/// A checked plan: built once, by the supervisor, and handed to its worker as it is
/// (serialised; see [`crate::run::env::hand_over`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Plan {
    pub libs: LibChoice,
    /// The pattern names as given (each known; see [`crate::patterns::select`]).
    pub patterns: Vec<String>,
    /// The message sizes, in bytes, in sweep order.
    pub sizes: Vec<usize>,
    /// Iterations, checking, type and reduction; the deadline is the stage's (see
    /// [`Plan::timing`]).
    pub warmup_iters: u32,
    pub iters: u32,
    pub check: bool,
    pub data_on: DataOn,
    pub datatype: DataType,
    pub op: RedOp,
    /// The GPU ordinal (default: local rank modulo the visible devices).
    pub device: Option<i32>,
    /// Rank 0's results file.
    pub json: Option<PathBuf>,
    /// Rank 0's copies of it for machines (`--csv`, `--prometheus`).
    pub exports: Exports,
    /// Where a rank that fails on its own keeps NCCL's logs.
    pub kept_logs: crate::run::kept_logs::KeptLogs,
    /// Ranks started differently fail the run (else: a warning).
    pub strict: bool,
    /// The sweep settings as the results file records them.
    pub config: RunConfig,
    /// How many times each size is measured (interleaved; see [`crate::bench::sweep::run`]).
    pub repeat: u32,
    /// Seconds the whole run should fit in: the sweep drops the sizes that would not fit
    /// (see [`crate::bench::sweep::Schedule`]), and no stage's default deadline exceeds half.
    pub budget: Option<f64>,
    /// Seconds of passes over the sweep: a pass begins while they last (`--duration`).
    pub duration: Option<f64>,
    /// The `--expect` file (or `auto`) and its floors, read once here.
    pub expect: Option<(PathBuf, Expectations)>,
    /// How the ranks find each other (see [`crate::bootstrap::init`]).
    pub bootstrap: Mode,
    /// `nccl-smoke isolate` instead of a sweep (see [`crate::run::isolate`]).
    pub isolate: Option<crate::run::isolate::Settings>,
    deadlines: [Duration; Stage::ALL.len()],
}

impl Settings {
    pub fn maxbytes(&self) -> usize {
        self.maxbytes
            .unwrap_or(if self.libs.sim || self.libs.control_plane {
                1 << 20
            } else {
                128 << 20
            })
    }

    fn step(&self) -> Step {
        match self.stepbytes {
            Some(b) => Step::Bytes(b),
            None => Step::Factor(self.stepfactor),
        }
    }

    /// The deadline of `stage`: its own flag, else `--timeout`, else its default.
    pub fn deadline(&self, stage: Stage) -> Duration {
        let secs = self
            .stage_timeout
            .iter()
            .rev()
            .find(|(s, _)| *s == stage)
            .map(|(_, v)| *v)
            .or(self.timeout)
            .unwrap_or_else(|| {
                // A stage hung under --budget is named inside the budget, not after it.
                let default = stage.default_deadline_s() as f64;
                self.budget.map_or(default, |b| default.min(b / 2.0))
            })
            .clamp(MIN_DEADLINE_S, MAX_DEADLINE_S);
        // In range by the clamp (and the flags' parsers); a NaN would fall back to the default.
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(stage.default_deadline_s()))
    }

    /// Checks everything that can be checked before any rank touches a library.
    pub fn plan(self) -> Result<Plan, String> {
        crate::patterns::select(&self.patterns)?;
        for (flag, v) in [
            ("-b/--minbytes", Some(self.minbytes)),
            ("-e/--maxbytes", self.maxbytes),
            ("-i/--stepbytes", self.stepbytes),
        ] {
            if let Some(v) = v
                && v > MAX_BYTES
            {
                return Err(format!(
                    "{flag} {v} is more than the {} GiB a message may be",
                    MAX_BYTES >> 30
                ));
            }
        }
        if !(self.stepfactor.is_finite() && self.stepfactor <= 1024.0) {
            return Err(format!(
                "-f/--stepfactor must be a number from 1 to 1024, got {}",
                self.stepfactor
            ));
        }
        let sizes = sweep::sizes(self.minbytes, self.maxbytes(), self.step())?;
        if self.bootstrap == Mode::Mpi && !cfg!(feature = "mpi") {
            return Err(
                "--bootstrap mpi: this nccl-smoke was built without MPI (feature `mpi`); use \
                 --bootstrap env or auto"
                    .into(),
            );
        }
        if self.repeat == 0 {
            return Err("--repeat must be at least 1".into());
        }
        if self.libs.control_plane {
            // Nothing is measured on simulated GPUs: what needs measurements cannot be had.
            let refused = [
                (self.isolate.is_some(), "isolate"),
                (self.expect.is_some(), "--expect"),
                (self.repeat > 1, "--repeat"),
                (self.duration.is_some(), "--duration"),
            ];
            if let Some((_, what)) = refused.iter().find(|(on, _)| *on) {
                return Err(format!(
                    "--backend control-plane runs init and connect only (no kernel runs, nothing \
                     is measured): {what} needs measurements; use --backend nccl on GPUs"
                ));
            }
        }
        let expect = match &self.expect {
            Some(path) if self.isolate.is_some() && path.as_os_str() == expect::AUTO => {
                return Err(
                    "--expect auto picks floors for a whole run of a known system; \
                            isolate judges groups of hosts: give --expect FILE with your \
                            fleet's figures"
                        .into(),
                );
            }
            Some(path) => Some((
                path.clone(),
                expect::load_arg(path).map_err(|e| format!("--expect: {e}"))?,
            )),
            None => None,
        };
        if self.libs.sim {
            nccl_smoke_fault::FaultSet::from_env().map_err(|e| e.to_string())?;
        }
        nccl_smoke_fault::ib::check_env().map_err(|e| e.to_string())?;
        let kept_logs =
            crate::run::kept_logs::KeptLogs::new(self.logs.as_deref(), self.json.as_deref());
        let config = RunConfig {
            patterns: self.patterns.clone(),
            minbytes: self.minbytes,
            maxbytes: self.maxbytes(),
            stepfactor: self.stepbytes.is_none().then_some(self.stepfactor),
            stepbytes: self.stepbytes,
            iters: self.iters,
            warmup_iters: self.warmup_iters,
            check: self.check,
            data_on: Some(self.data_on),
            comm_blocking: None,
            datatype: self.datatype.name().into(),
            op: self.op.name().into(),
        };
        Ok(Plan {
            deadlines: Stage::ALL.map(|s| self.deadline(s)),
            libs: self.libs,
            patterns: self.patterns,
            sizes,
            warmup_iters: self.warmup_iters,
            iters: self.iters,
            check: self.check,
            data_on: self.data_on,
            datatype: self.datatype,
            op: self.op,
            device: self.device,
            json: self.json,
            exports: self.exports,
            kept_logs,
            strict: self.strict,
            config,
            repeat: self.repeat,
            budget: self.budget,
            duration: self.duration,
            expect,
            bootstrap: self.bootstrap,
            isolate: self.isolate,
        })
    }
}

impl Plan {
    /// Whether the sweep runs more than once (`--repeat N`, `--duration`): a burn-in, with
    /// rows of medians and a tally per GPU.
    pub fn repeats(&self) -> bool {
        self.repeat > 1 || self.duration.is_some()
    }

    /// The passes the sweep may run: `--repeat`'s, unbounded under `--duration`.
    pub fn passes(&self) -> u32 {
        if self.duration.is_some() {
            u32::MAX
        } else {
            self.repeat
        }
    }

    /// The deadline of `stage`.
    pub fn deadline(&self, stage: Stage) -> Duration {
        let i = Stage::ALL.iter().position(|s| *s == stage).unwrap_or(0);
        self.deadlines[i]
    }

    /// The deadlines this run uses, as it uses them (one line for the run's header): every
    /// stage's, the run stage's growth with each size's expected time, and the margin a rank
    /// waiting on others gets so that the stuck rank reports first.
    pub fn deadline_line(&self) -> String {
        format!(
            "# deadlines (s without progress): {}; run and verify: per size, + {}× the size's \
             expected time; a rank waiting on others: + {} (set with --timeout, \
             --stage-timeout STAGE=SECS)",
            deadline_list(|s| self.deadline(s), " · "),
            crate::bench::sweep::BUDGET_MARGIN,
            secs(crate::stage::PEER_MARGIN)
        )
    }

    /// Where data is written and checked (one line for the run's header).
    pub fn data_line(&self) -> String {
        let how = match (self.check, self.data_on) {
            (false, _) => {
                "not written and not checked (-c 0, as nccl-tests skips its data \
                           with -c 0): no pass can be claimed"
            }
            (true, DataOn::Device) => {
                "written and checked on the GPU by nccl-smoke's kernels \
                                       (every element of every size; the host reads back \
                                       counts, and a buffer only when it holds wrong elements)"
            }
            (true, DataOn::Host) => {
                "written and checked by the host through a staging buffer \
                                     (--data-on host: every byte crosses PCIe twice)"
            }
        };
        // Reduce-scatter's blocks on ranks > 0 are not what the check kernel computes
        // (`bench::on_device::on_host`).
        let host_checked = self.check
            && self.data_on == DataOn::Device
            && self.patterns.iter().any(|p| {
                crate::patterns::select(std::slice::from_ref(p))
                    .is_ok_and(|ps| ps.iter().any(|p| p.name() == "reduce_scatter"))
            });
        let rs = if host_checked {
            "; reduce_scatter's received blocks are checked by the host, through the staging \
             buffer"
        } else {
            ""
        };
        format!("# data: {how}{rs}")
    }

    /// How the columns are timed (one line for the run's header).
    pub fn timing_line(&self) -> String {
        format!(
            "# timing: {} warm-up and {} timed iterations per size, queued back to back: time, \
             algbw and busbw are the host's wall time over them, as nccl-tests times them; \
             p50 and p99 come from a separate pass with an event between each two iterations \
             ({})",
            self.warmup_iters,
            self.iters,
            match crate::bench::latency_iters(self.iters, self.latency_floor(), 0) {
                n if n == self.iters => format!("{n} iterations per size"),
                n => format!(
                    "{n} iterations up to {} KiB, {} above",
                    crate::bench::LATENCY_SMALL_BYTES >> 10,
                    self.iters
                ),
            }
        )
    }

    /// The measurement settings, with `deadline` for each wait.
    pub fn timing(&self, deadline: Duration) -> Timing {
        Timing {
            warmup: self.warmup_iters,
            iters: self.iters,
            check: self.check,
            dtype: self.datatype,
            op: self.op,
            deadline,
            latency_floor: self.latency_floor(),
            data_on: self.data_on,
            kernel_floor: if self.libs.sim {
                crate::bench::SIM_KERNEL_FLOOR
            } else {
                crate::bench::GPU_KERNEL_FLOOR
            },
            size_budget: Duration::ZERO,
        }
    }

    /// The latency pass's floor: [`crate::bench::LATENCY_MIN_SAMPLES`] where a GPU times the
    /// iterations, none on the simulation (its iterations cost CPU time, its latency is no GPU
    /// figure).
    fn latency_floor(&self) -> u32 {
        if self.libs.sim {
            0
        } else {
            crate::bench::LATENCY_MIN_SAMPLES
        }
    }
}

/// `run --timeout`'s long help: what a deadline bounds, and every stage's default, from the
/// stage table.
pub fn deadline_help() -> String {
    let default = |s: Stage| Duration::from_secs(s.default_deadline_s());
    format!(
        "Deadline in seconds for every stage (0.1 to 86400): a stage that makes no progress for \
         this long is named as hung, on the rank and host where it hung. Defaults, in seconds: \
         {}. The run and verify deadlines bound each size, plus {}× the time the size is \
         expected to take from the size before it; a rank that waits on others gets {} s more, \
         so that the stuck rank reports first. Every run prints the deadlines it uses in its \
         header (`# deadlines`).",
        deadline_list(default, ", "),
        sweep::BUDGET_MARGIN,
        crate::stage::PEER_MARGIN.as_secs_f64()
    )
}

/// `launch 120 · nccl-load 60 · …`: each stage's deadline in seconds, the connect sub-stages
/// (`connect:shm`, …) left out, as they share connect's.
fn deadline_list(deadline: impl Fn(Stage) -> Duration, sep: &str) -> String {
    let each: Vec<String> = Stage::ALL
        .iter()
        .filter(|s| !s.name().contains(':'))
        .map(|s| format!("{} {}", s.name(), secs(deadline(*s))))
        .collect();
    each.join(sep)
}

/// `120`, `0.5`, `1.5`: seconds as a person writes them.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}")
    } else {
        format!("{s}")
    }
}

// What `--timeout`, `--stage-timeout`, `--round-timeout` and `--slow-below` accept, checked
// here, beside the deadlines they become.

/// A `--stage-timeout` value, STAGE=SECS.
pub fn parse_stage_timeout(s: &str) -> Result<(Stage, f64), String> {
    let (name, secs) = s
        .split_once('=')
        .ok_or_else(|| format!("'{}': expected STAGE=SECS, e.g. init=60", sanitize(s)))?;
    let stage = Stage::parse(name).ok_or_else(|| {
        format!(
            "unknown stage '{}': expected one of {}",
            sanitize(name),
            Stage::names()
        )
    })?;
    Ok((stage, parse_secs(secs)?))
}

/// A deadline in seconds, within [`MIN_DEADLINE_S`]..=[`MAX_DEADLINE_S`] (so that it always
/// converts to a `Duration`).
pub fn parse_secs(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (MIN_DEADLINE_S..=MAX_DEADLINE_S).contains(v))
        .ok_or_else(|| {
            format!(
                "'{}' is not a number of seconds from {MIN_DEADLINE_S} to {MAX_DEADLINE_S}",
                sanitize(s)
            )
        })
}

/// `--budget`: a duration as humantime reads it (`60s`, `2m`, `1h30m`) or bare seconds, from 1 s
/// to a week; in seconds.
pub fn parse_budget(s: &str) -> Result<f64, String> {
    let t = s.trim();
    t.parse::<f64>()
        .ok()
        .or_else(|| humantime::parse_duration(t).ok().map(|d| d.as_secs_f64()))
        .filter(|v| v.is_finite() && (1.0..=MAX_BUDGET_S).contains(v))
        .ok_or_else(|| {
            format!(
                "'{}' is not a duration from 1 s to a week (e.g. 60s, 2m, 90)",
                sanitize(s)
            )
        })
}

/// The longest `--budget`: a week.
pub const MAX_BUDGET_S: f64 = 7.0 * 86_400.0;

/// A percentage from 1 to 99, for `--slow-below`.
pub fn parse_slow_pct(s: &str) -> Result<f64, String> {
    s.trim()
        .trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && (1.0..=99.0).contains(v))
        .ok_or_else(|| format!("'{}' is not a percentage from 1 to 99", sanitize(s)))
}

#[cfg(test)]
mod tests;
