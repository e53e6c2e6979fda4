//! Command-line interface: flags, their validation, and the hand-over to each subcommand.

mod backend;
mod compare;
mod doctor;
mod explain;
mod launch;
mod run;
mod status;
mod supervise;

use crate::bench::sweep::{self, Step};
use crate::data::{DataType, RedOp};
use crate::stage::{Stage, exit};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Parser, Debug)]
#[command(
    name = "nccl-smoke",
    version,
    about = "Does NCCL work across this job's ranks, how fast, and if not, which step broke where?",
    long_about = "nccl-smoke runs real NCCL traffic (all_reduce, all_to_all, point-to-point send/recv) \
across the ranks of a job, verifies every byte, reports bandwidth like nccl-tests, and when \
something breaks names the stage, the rank and the host, with the library's own error.\n\n\
Launch it like nccl-tests: `mpirun -np 16 -H a:8,b:8 nccl-smoke run`, `srun nccl-smoke run`, \
or from an MPIJob. Without GPUs, `--backend sim` runs the same code against nccl-smoke's CPU \
simulation of libnccl and libcuda (results labelled SIMULATED).",
    after_help = "Exit codes: 0 pass · 2 bad input · 3 output file not written · 10 launch · 11 nccl-load · 12 driver · 13 device · \
14 alloc · 15 unique-id · 16 init · 17 connect · 18 connect:buffer-import · 19 connect:proxy · \
20 connect:shm · 21 connect:net · 22 run · 23 verify · 24 finalize · 25 run --expect: below a floor · 30 compare: regressed · 31 doctor: warnings · 32 doctor: failures · 33 compare: inconclusive · 34 compare: malformed input · 130 cancelled"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the patterns across all ranks of the job: verify, measure, and name what fails.
    ///
    /// Numbers are computed as nccl-tests computes them (time: mean over ranks; its size and
    /// count columns; its `# Out of bounds values` and `# Avg bus bandwidth` footer). The
    /// communicator is blocking, as nccl-tests makes it; NCCL_COMM_BLOCKING=0 makes it
    /// non-blocking (every call is then waited out of ncclInProgress, and a hung init is ended
    /// with ncclCommAbort at its deadline). A sweep that cannot fit the GPU's free memory or the node's
    /// host memory is refused before any memory is taken.
    Run(RunArgs),
    /// Diagnose NCCL logs from any job (PyTorch, nccl-tests, …) offline: which step failed,
    /// on which host and process, the likely cause, and what to try. Exit code: 0 when nothing
    /// known was found, else the stage code of the first finding; 2 when a file is unreadable.
    Explain(explain::ExplainArgs),
    /// Check this node before any GPU work: driver, GPUs, libnccl and its capabilities,
    /// GPUDirect RDMA, InfiniBand, NCCL_SOCKET_IFNAME, /dev/shm, limits, MPI (HCOLL), container
    /// settings, known-bad version combinations. Exit code: 0 ok, 31 warnings, 32 failures.
    Doctor(doctor::DoctorArgs),
    /// Start N ranks on this node without MPI, e.g. `nccl-smoke launch -n 8 run`: each gets
    /// its rank, local rank and the address of rank 0 through the environment.
    Launch(launch::LaunchArgs),
    /// Compare two runs' results files (e.g. before and after a driver upgrade): what changed
    /// in the environment, bus bandwidth per pattern and size, and a verdict. Exit code: 0 no
    /// regression, 30 regressed, 2 when a file is unreadable or the runs are not comparable.
    Compare(compare::CompareArgs),
    /// The second process of the NCCL one-rank init probe (started by a failing rank).
    #[command(name = "probe-nccl-init", hide = true)]
    ProbeNcclInit {
        #[arg(long)]
        nccl_lib: String,
    },
    /// The second process of the cuMem export/import probe (started by a failing rank).
    #[command(name = "probe-import", hide = true)]
    ProbeImport(ProbeImportArgs),
}

#[derive(Args, Debug)]
pub struct ProbeImportArgs {
    /// Where the exporting process waits.
    #[arg(long)]
    socket: PathBuf,
    /// The driver library the exporting process uses.
    #[arg(long)]
    cuda_lib: String,
    /// The device ordinal, as the exporting process sees it.
    #[arg(long)]
    device: i32,
}

/// Which libraries run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The node's libnccl.so.2 (or --nccl-lib) and CUDA driver.
    Nccl,
    /// nccl-smoke's CPU simulation of libnccl and libcuda: real processes and bytes, no GPU;
    /// every result is labelled SIMULATED.
    Sim,
}

/// Which libraries to load: shared by `run` and `doctor`.
#[derive(Args, Debug, Clone)]
pub struct LibArgs {
    /// Libraries to run against.
    #[arg(long, value_enum, default_value = "nccl")]
    pub backend: Backend,
    /// The libnccl to load (default: libnccl.so.2 through the dynamic linker).
    #[arg(long, env = "NCCL_SMOKE_NCCL_LIB", value_name = "PATH")]
    pub nccl_lib: Option<String>,
    /// Where the simulation libraries are (default: next to the nccl-smoke binary).
    #[arg(long, env = "NCCL_SMOKE_SIM_DIR", value_name = "DIR")]
    pub sim_dir: Option<PathBuf>,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub libs: LibArgs,
    /// Patterns to run, comma-separated; a prefix selects a family (`send_recv`).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "all_reduce,all_to_all,send_recv"
    )]
    pub patterns: Vec<String>,
    /// Smallest message size in bytes (K, M, G suffixes allowed).
    #[arg(short = 'b', long = "minbytes", default_value = "8", value_parser = sweep::parse_size)]
    pub minbytes: usize,
    /// Largest message size [default: 128M; 1M with --backend sim].
    #[arg(short = 'e', long = "maxbytes", value_parser = sweep::parse_size)]
    pub maxbytes: Option<usize>,
    /// Multiply the size by this factor between steps (1 to 1024).
    #[arg(
        short = 'f',
        long = "stepfactor",
        default_value = "2",
        conflicts_with = "stepbytes"
    )]
    pub stepfactor: f64,
    /// Add this many bytes between steps (instead of -f).
    #[arg(short = 'i', long = "stepbytes", value_parser = sweep::parse_size)]
    pub stepbytes: Option<usize>,
    /// Timed iterations per size.
    #[arg(short = 'n', long = "iters", default_value = "20", value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub iters: u32,
    /// Untimed warm-up iterations per size.
    #[arg(short = 'w', long = "warmup_iters", default_value = "5", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub warmup_iters: u32,
    /// Verify received data (1) or not (0).
    #[arg(short = 'c', long = "check", default_value = "1", value_parser = clap::value_parser!(u8).range(0..=1))]
    pub check: u8,
    /// Element type.
    #[arg(short = 'd', long = "datatype", value_enum, default_value = "float")]
    pub datatype: DataType,
    /// Reduction for all_reduce.
    #[arg(short = 'o', long = "op", value_enum, default_value = "sum")]
    pub op: RedOp,
    /// GPU ordinal for this rank (default: local rank modulo the visible devices).
    #[arg(long, value_parser = clap::value_parser!(i32).range(0..=1023))]
    pub device: Option<i32>,
    /// Write the results document here (rank 0), updated after every size.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Deadline in seconds for every stage (a hang is named when it passes); 0.1 to 86400.
    #[arg(long, value_name = "SECS", value_parser = parse_secs)]
    pub timeout: Option<f64>,
    /// Deadline for one stage, e.g. `init=60` (repeatable; overrides --timeout).
    #[arg(long, value_name = "STAGE=SECS", value_parser = parse_stage_timeout)]
    pub stage_timeout: Vec<(Stage, f64)>,
    /// Measure each size this many times, interleaved (every size, then every size again),
    /// so `compare` can tell a change from noise; the table shows medians and their spread.
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Bus bandwidth floors per pattern and size (a TOML file, see deploy/expect/): a run
    /// below one fails with exit code 25, naming the hosts.
    #[arg(long, value_name = "FILE")]
    pub expect: Option<PathBuf>,
}

fn parse_stage_timeout(s: &str) -> Result<(Stage, f64), String> {
    let (name, secs) = s
        .split_once('=')
        .ok_or_else(|| format!("'{}': expected STAGE=SECS, e.g. init=60", sanitize(s)))?;
    let stage = Stage::parse(name).ok_or_else(|| {
        let names: Vec<_> = Stage::ALL.iter().map(|s| s.name()).collect();
        format!(
            "unknown stage '{}': expected one of {}",
            sanitize(name),
            names.join(", ")
        )
    })?;
    Ok((stage, parse_secs(secs)?))
}

/// The shortest and longest deadline a flag may set, in seconds.
pub const MIN_DEADLINE_S: f64 = 0.1;
pub const MAX_DEADLINE_S: f64 = 86_400.0;
/// The largest message size a sweep may have (-b, -e, -i).
pub const MAX_BYTES: usize = 1 << 40;

/// A deadline in seconds, within [`MIN_DEADLINE_S`]..=[`MAX_DEADLINE_S`] (so that it always
/// converts to a `Duration`).
fn parse_secs(s: &str) -> Result<f64, String> {
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

/// `s` as a message may show it: control characters escaped, at most 80 characters.
pub fn sanitize(s: &str) -> String {
    let mut out: String = s.chars().take(80).flat_map(char::escape_debug).collect();
    if s.chars().count() > 80 {
        out.push('…');
    }
    out
}

/// A message for the terminal: every control character but newline and tab escaped.
pub fn terminal_safe(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

impl RunArgs {
    pub fn maxbytes(&self) -> usize {
        self.maxbytes.unwrap_or(match self.libs.backend {
            Backend::Nccl => 128 << 20,
            Backend::Sim => 1 << 20,
        })
    }

    pub fn step(&self) -> Step {
        match self.stepbytes {
            Some(b) => Step::Bytes(b),
            None => Step::Factor(self.stepfactor),
        }
    }

    /// The deadline of `stage`.
    pub fn deadline(&self, stage: Stage) -> Duration {
        let secs = self
            .stage_timeout
            .iter()
            .rev()
            .find(|(s, _)| *s == stage)
            .map(|(_, v)| *v)
            .or(self.timeout)
            .unwrap_or(stage.default_deadline_s() as f64)
            .clamp(MIN_DEADLINE_S, MAX_DEADLINE_S);
        // In range by the clamp (and the flags' parsers); a NaN would fall back to the default.
        Duration::try_from_secs_f64(secs).unwrap_or(Duration::from_secs(stage.default_deadline_s()))
    }

    /// Everything that can be checked before any rank touches a library.
    pub fn validate(&self) -> Result<Vec<usize>, String> {
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
        if let Some(path) = &self.expect {
            crate::report::expect::load(path).map_err(|e| format!("--expect: {e}"))?;
        }
        let sizes = sweep::sizes(self.minbytes, self.maxbytes(), self.step())?;
        if self.libs.backend == Backend::Sim {
            nccl_smoke_fault::FaultSet::from_env().map_err(|e| e.to_string())?;
        }
        Ok(sizes)
    }
}

/// Runs the parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> u8 {
    if matches!(
        cli.command,
        Command::Explain(_) | Command::Doctor(_) | Command::Compare(_)
    ) {
        crate::ffi::os::default_sigpipe();
    }
    match cli.command {
        Command::Explain(args) => explain::explain(&args),
        Command::Doctor(args) => doctor::doctor(&args),
        Command::Launch(args) => launch::launch(&args),
        Command::Compare(args) => compare::compare(&args),
        Command::ProbeNcclInit { nccl_lib } => {
            crate::diagnose::probe::nccl_solo_init_side(&nccl_lib)
        }
        Command::ProbeImport(a) => {
            crate::diagnose::probe::import_side(&a.socket, &a.cuda_lib, a.device)
        }
        Command::Run(args) => {
            if let Err(msg) = args.validate() {
                eprintln!("nccl-smoke: {msg}");
                return exit::USAGE;
            }
            if supervise::is_worker() {
                run::worker(&args)
            } else {
                supervise::supervise(&args)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
        let mut v = vec!["nccl-smoke", "run"];
        v.extend_from_slice(args);
        Cli::try_parse_from(v).map(|c| match c.command {
            Command::Run(a) => a,
            _ => unreachable!("parsed `run`"),
        })
    }

    #[test]
    fn nccl_tests_flags_parse() {
        let a = parse(&[
            "-b", "1K", "-e", "1M", "-f", "4", "-n", "7", "-w", "2", "-c", "0", "-d", "half", "-o",
            "max",
        ])
        .unwrap();
        assert_eq!(
            (a.minbytes, a.maxbytes(), a.iters, a.warmup_iters, a.check),
            (1024, 1 << 20, 7, 2, 0)
        );
        assert_eq!((a.datatype, a.op), (DataType::Half, RedOp::Max));
        assert_eq!(
            a.validate().unwrap(),
            [1024, 4096, 16384, 65536, 262144, 1048576]
        );
    }

    #[test]
    fn bad_input_is_refused_with_the_reason() {
        assert!(parse(&["-d", "float17"]).is_err());
        assert!(parse(&["-b", "lots"]).is_err());
        assert!(parse(&["-c", "2"]).is_err());
        assert!(parse(&["-n", "0"]).is_err());
        assert!(
            parse(&["--stage-timeout", "nope=3"])
                .unwrap_err()
                .to_string()
                .contains("unknown stage 'nope'")
        );
        let a = parse(&["-b", "1M", "-e", "1K"]).unwrap();
        assert!(a.validate().unwrap_err().contains("-b/--minbytes"));
        let a = parse(&["--patterns", "all_reduce,bogus"]).unwrap();
        assert!(
            a.validate()
                .unwrap_err()
                .contains("unknown pattern 'bogus'")
        );
    }

    #[test]
    fn deadlines_default_then_global_then_per_stage() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.deadline(Stage::Init), Duration::from_secs(300));
        let a = parse(&["--timeout", "5", "--stage-timeout", "init=9"]).unwrap();
        assert_eq!(a.deadline(Stage::Init), Duration::from_secs(9));
        assert_eq!(a.deadline(Stage::Run), Duration::from_secs(5));
    }

    #[test]
    fn deadlines_and_sizes_have_ranges() {
        for bad in [
            vec!["--timeout", "1e30"],
            vec!["--timeout", "0"],
            vec!["--timeout", "NaN"],
            vec!["--timeout", "-3"],
            vec!["--stage-timeout", "init=1e30"],
            vec!["--stage-timeout", "init=inf"],
            vec!["--device", "-1"],
            vec!["--device", "99999"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
        let e = parse(&["--timeout", "1e30"]).unwrap_err().to_string();
        assert!(e.contains("from 0.1 to 86400"), "{e}");
        for bad in [vec!["-e", "2048G"], vec!["-f", "1e300"], vec!["-f", "inf"]] {
            let a = parse(&bad).unwrap();
            assert!(a.validate().is_err(), "{bad:?}");
        }
        let a = parse(&["--timeout", "86400"]).unwrap();
        assert_eq!(a.deadline(Stage::Run), Duration::from_secs(86_400));
    }

    #[test]
    fn messages_escape_control_characters() {
        let e = parse(&["--stage-timeout", "\x1b[2Jinit=3"])
            .unwrap_err()
            .to_string();
        assert!(!terminal_safe(&e).contains('\x1b'), "{e:?}");
        assert!(sanitize("a\x07b").contains("\\u{7}"));
        assert_eq!(terminal_safe("two\nlines\x1b"), "two\nlines\\u{1b}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
        /// Any argument list is parsed and validated, or refused, without a panic; a deadline
        /// that got through always converts.
        #[test]
        fn any_run_arguments_give_an_answer_not_a_panic(
            args in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(vec![
                        "-b", "-e", "-f", "-i", "-n", "-w", "-c", "-d", "-o", "--timeout",
                        "--stage-timeout", "--device", "--patterns", "--json",
                    ]).prop_map(String::from),
                    "[-+]?[0-9]{0,25}(\\.[0-9]{0,5})?(e[-+]?[0-9]{1,4})?[KMGkmg]?",
                    "(init|run|bogus)=[0-9e.+-]{0,12}",
                    "\\PC{0,12}",
                ],
                0..10,
            )
        ) {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            if let Ok(a) = parse(&refs) {
                let _ = a.validate();
                for s in Stage::ALL {
                    let d = a.deadline(s);
                    proptest::prop_assert!(d >= Duration::from_millis(100));
                }
            }
        }
    }

    #[test]
    fn sim_backend_defaults_to_a_smaller_sweep() {
        assert_eq!(parse(&["--backend", "sim"]).unwrap().maxbytes(), 1 << 20);
        assert_eq!(parse(&[]).unwrap().maxbytes(), 128 << 20);
    }
}
