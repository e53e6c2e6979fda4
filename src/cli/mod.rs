//! Command-line interface: flags, their validation, and the hand-over to each subcommand.

mod compare;
mod doctor;
mod explain;
mod launch;
mod verdict;

use crate::bench::sweep;
use crate::elements::{DataType, RedOp};
use crate::run::libs::LibChoice;
use crate::run::{Plan, Settings, plan};
use crate::stage::Stage;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

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
    after_help = crate::stage::exit::help()
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
    /// Find the host to drain: launched like `run`, over all ranks of the job, each host runs
    /// alone, then hosts run in pairs, then each suspect is re-paired with a host that passed.
    /// Prints one line per host (ok, slow, failed at a stage, or a bad link to one partner) and
    /// the hosts to drain. Exit code: 0 every host ok, the failing stage's code for a failed
    /// host or link, 25 when hosts are only slow.
    Isolate(IsolateArgs),
    /// Diagnose NCCL logs from any job (PyTorch, nccl-tests, …) offline: which step failed,
    /// on which host and process, the likely cause, and what to try. Exit code: the verdict's:
    /// 0 PASS (the log shows a finished run, no failure), the root cause's stage code (FAIL,
    /// HANG), 36 UNKNOWN (error lines no signature names, quoted), 37 no failure seen but
    /// nothing shows the run finished; 2 when a file is unreadable.
    Explain(explain::ExplainArgs),
    /// Check this node before any GPU work: driver, GPUs, libnccl and its capabilities,
    /// GPUDirect RDMA, InfiniBand, NCCL_SOCKET_IFNAME, /dev/shm, limits, MPI (HCOLL), container
    /// settings, known-bad version combinations. Exit code: 0 ok (or skipped), 31 warnings,
    /// 32 failures, 2 bad flags.
    Doctor(doctor::DoctorArgs),
    /// Start N ranks on this node without MPI, e.g. `nccl-smoke launch -n 8 run`: each gets
    /// its rank, local rank and the address of rank 0 through the environment.
    Launch(launch::LaunchArgs),
    /// Compare two runs' results files (e.g. before and after a driver upgrade): what changed
    /// in the environment, bus bandwidth per pattern and size, and a verdict.
    #[command(long_about = crate::console::compare::exit_help())]
    Compare(compare::CompareArgs),
    /// Print a results file's verdict line and exit with its code (0 PASS, else the stage's):
    /// for batch scripts whose launcher's status is not the verdict. Exit 2 when the file is
    /// unreadable or not a results file.
    Verdict(verdict::VerdictArgs),
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

#[derive(Args, Debug)]
pub struct IsolateArgs {
    /// Which pairs of hosts meet: `quick`, every host at least three partners (every pair up
    /// to 5 hosts; 3 rounds for an even host count, 5 for an odd one), enough to find up to two
    /// slow hosts by comparison; `all`, every pair (n − 1 rounds for n hosts).
    #[arg(long, value_enum, default_value = "quick")]
    pub pairs: crate::run::isolate::Pairs,
    /// Deadline, in seconds, of each step of a group's work in a round (unique id, init,
    /// connect, each measurement, finalize): a group that takes longer is aborted and counted
    /// against its hosts, and the others go on.
    #[arg(long, default_value = "30", value_parser = plan::parse_secs, value_name = "SECS")]
    pub round_timeout: f64,
    /// Where each group's communicator comes from. `auto`: before round 1 every rank joins one
    /// job-wide communicator, and while it is up on every rank each round's groups are
    /// ncclCommSplit of it (one color per group; ranks sitting out pass NCCL_SPLIT_NOCOLOR), no
    /// unique id to pass around per group. Where a library lacks ncclCommSplit (NCCL < 2.18.1),
    /// the job-wide init fails or hangs on any rank, or a round has a group that failed or hung
    /// (a communicator with a failed member cannot split again), the groups come from a fresh
    /// unique id each, made by the group's leader; a round whose split failed runs again that
    /// way. `split`: as auto, but a library without
    /// ncclCommSplit is an error. `fresh`: fresh unique ids in every round. The job-wide
    /// communicator's own failure counts against no host: the rounds judge the hosts. The
    /// header and the results file say which source built which rounds, and why.
    #[arg(long, value_enum, default_value = "auto")]
    pub groups: crate::run::isolate::Groups,
    /// A host whose bus bandwidth is more than PCT % below the median of the other hosts (and
    /// more than 3 scaled median absolute deviations of theirs) is slow, alone or with its
    /// best partner. Raise it where the fabric is shared and figures move between runs.
    #[arg(long, default_value = "25", value_parser = plan::parse_slow_pct, value_name = "PCT")]
    pub slow_below: f64,
    /// Everything `run` takes; each group measures the largest size (-e) once per pattern.
    #[command(flatten)]
    pub run: RunArgs,
}

impl IsolateArgs {
    /// The checked plan, or why not.
    pub fn plan(&self) -> Result<Plan, String> {
        if self.run.repeat > 1 || self.run.duration.is_some() {
            return Err(
                "--repeat and --duration do not apply to isolate (each group measures once)".into(),
            );
        }
        let mut s = self.run.settings();
        s.isolate = Some(crate::run::isolate::Settings {
            pairs: self.pairs,
            round_limit: std::time::Duration::from_secs_f64(self.round_timeout),
            groups: self.groups,
            slow_fraction: self.slow_below / 100.0,
        });
        s.plan()
    }
}

/// Which libraries run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The node's libnccl.so.2 (or --nccl-lib) and CUDA driver.
    Nccl,
    /// nccl-smoke's CPU simulation of libnccl and libcuda: real processes and bytes, no GPU;
    /// every result is labelled SIMULATED.
    Sim,
    /// The real libnccl (--nccl-lib, or the usual resolution) on nccl-smoke's stand-in CUDA
    /// driver and NVML: NCCL's own bootstrap, init and transport setup for every pattern, then
    /// ncclCommAbort; no kernel runs, so nothing is measured or checked. Labelled
    /// `REAL NCCL <version> · SIMULATED GPUS`; never a PASS.
    #[value(name = "control-plane")]
    ControlPlane,
}

/// Named sweeps (`run --preset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Preset {
    /// nccl-tests' defaults: -b 32M -e 32M, 20 iterations, 1 warm-up.
    NcclTests,
}

/// Which libraries to load: shared by `run` and `doctor`.
#[derive(Args, Debug, Clone)]
pub struct LibArgs {
    /// Libraries to run against.
    #[arg(long, value_enum, default_value = "nccl", long_help = crate::run::libs::backends_help())]
    pub backend: Backend,
    /// The libnccl to load (default: libnccl.so.2 through the dynamic linker, else a pip wheel's
    /// copy in site-packages/nvidia/nccl/lib of the active venv/conda or the site folders).
    #[arg(long, env = "NCCL_SMOKE_NCCL_LIB", value_name = "PATH", value_parser = crate::run::libs::parse_lib_path)]
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
        long_help = crate::patterns::help(),
        value_delimiter = ',',
        default_value = "all_reduce,all_to_all,send_recv"
    )]
    pub patterns: Vec<String>,
    /// A named sweep instead of -b/-e/-f/-i/-n/-w. `nccl-tests`: nccl-tests' own defaults
    /// (one 32 MiB message, 20 iterations, 1 warm-up; `src/common.cu`, v2.19.6). Without a
    /// preset the sweep is the one nccl-tests' README shows first (-b 8 -e 128M -f 2), up to
    /// 1M with --backend sim.
    #[arg(long, value_enum, conflicts_with_all = ["minbytes", "maxbytes", "stepfactor", "stepbytes", "iters", "warmup_iters"])]
    pub preset: Option<Preset>,
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
    /// Where the send buffers are filled and the receive buffers checked: `device` runs
    /// nccl-smoke's kernels on the GPU, as nccl-tests does (the host reads back counts only,
    /// and a whole buffer only when it holds wrong elements); `host` writes and reads every
    /// byte through a staging buffer, for a second opinion (minutes at gigabyte sizes).
    #[arg(long = "data-on", value_enum, default_value = "device")]
    pub data_on: crate::bench::DataOn,
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
    /// Write nccl-tests' columns (size, count, type, redop, root, time, algbw, busbw, #wrong)
    /// with pattern, rank and host here as CSV (rank 0), one row per rank per size: each
    /// rank's own time, so a spreadsheet sorts out the slow GPU. Updated with --json's file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write the results in Prometheus' text format here (rank 0), for node-exporter's
    /// textfile collector: busbw, algbw, time and p50/p99 per pattern and size, wrong
    /// elements, the verdict, the failing stage, the exit code and the run time, as
    /// nccl_smoke_* gauges. Written atomically after every size and at the end (INCOMPLETE
    /// while the run goes on).
    #[arg(long, value_name = "FILE")]
    pub prometheus: Option<PathBuf>,
    /// Where a rank that fails keeps NCCL's log (the INFO log NCCL writes for nccl-smoke when
    /// NCCL_DEBUG is not set), as `nccl-smoke.JOB.rankR.HOST.log`; default: the folder of
    /// --json, else the working directory. A rank that passes writes nothing there.
    #[arg(long, value_name = "DIR", env = "NCCL_SMOKE_LOGS")]
    pub logs: Option<PathBuf>,
    /// Fail (exit 10, before NCCL's init) when ranks were started differently: another NCCL
    /// version or library, CUDA driver, GPU model, NIC firmware, or NCCL_*, UCX_* or Open MPI
    /// transport setting. Without it each difference is a warning, named with its ranks and
    /// hosts.
    #[arg(long)]
    pub strict: bool,
    /// Deadline in seconds for every stage (a hang is named when it passes); 0.1 to 86400.
    #[arg(long, value_name = "SECS", value_parser = plan::parse_secs, long_help = crate::run::plan::deadline_help())]
    pub timeout: Option<f64>,
    /// Deadline for one stage, e.g. `init=60` (repeatable; overrides --timeout).
    #[arg(long, value_name = "STAGE=SECS", value_parser = plan::parse_stage_timeout)]
    pub stage_timeout: Vec<(Stage, f64)>,
    /// Measure each size this many times, interleaved (every size, then every size again),
    /// so `compare` can tell a change from noise; the table shows medians and their spread.
    /// Fresh data each pass, and a tally of wrong elements and slow samples per GPU (see
    /// --duration).
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Fit the whole run in this time (e.g. 60s, for a Slurm HealthCheckProgram): each
    /// pattern gets an equal share of what is left once the ranks are connected, less as much
    /// again for teardown; a size whose expected time (the size before it, end to end, scaled
    /// by bytes) would overrun its share is dropped with every larger size of its pattern, and
    /// named. No stage's default deadline exceeds half the budget, so a hang is named inside it.
    #[arg(long, value_name = "DURATION", value_parser = plan::parse_budget, conflicts_with = "duration")]
    pub budget: Option<f64>,
    /// Burn-in: run pass after pass over the sweep, with fresh data each pass, until this
    /// time is up (e.g. 8h; a pass that has begun ends); as --repeat, with the number of passes
    /// open. Each rank's wrong elements and slow samples (its time over twice the size's
    /// median and 50 µs above it) are tallied per GPU (UUID, bus id) and host, kept in the
    /// results as they come,
    /// and the GPU that produced wrong data is named at the end, and on Ctrl-C.
    #[arg(long, value_name = "DURATION", value_parser = plan::parse_budget, conflicts_with = "repeat")]
    pub duration: Option<f64>,
    /// Bus bandwidth floors per pattern and size: a JSON file (schema nccl-smoke/expect/v1;
    /// examples in deploy/expect/), or `auto` for the built-in floors of the system the ranks
    /// report (GPU name, GPUs per host, hosts, active RDMA ports and their rate; every figure
    /// with its public source). Each floor says PASS or BELOW FLOOR by how much over its sizes;
    /// a run below one fails with exit code 25, naming the hosts.
    /// Under `isolate`, each group is judged against the floors too (a floor's `ranks` is then
    /// the group's rank count): the reference two hosts alone do not have.
    #[arg(long, value_name = "FILE|auto")]
    pub expect: Option<PathBuf>,
    /// How the ranks find each other: `mpi`, `env` (nccl-smoke's TCP rendezvous from launcher
    /// variables) or `auto`.
    #[arg(long, value_enum, default_value = "auto", long_help = crate::bootstrap::Mode::help())]
    pub bootstrap: crate::bootstrap::Mode,
}

impl LibArgs {
    /// The libraries asked for, as the engine takes them.
    pub fn choice(&self) -> LibChoice {
        LibChoice {
            sim: self.backend == Backend::Sim,
            nccl_lib: self.nccl_lib.clone(),
            sim_dir: self.sim_dir.clone(),
            control_plane: self.backend == Backend::ControlPlane,
        }
    }
}

impl RunArgs {
    /// The settings as given, for the engine's [`Plan`].
    pub fn settings(&self) -> Settings {
        // nccl-tests' defaults (`minBytes`, `maxBytes`, `iters`, `warmup_iters` in
        // src/common.cu, v2.19.6): one 32 MiB message.
        let (minbytes, maxbytes, stepfactor, stepbytes, iters, warmup_iters) = match self.preset {
            Some(Preset::NcclTests) => (32 << 20, Some(32 << 20), 1.0, None, 20, 1),
            None => (
                self.minbytes,
                self.maxbytes,
                self.stepfactor,
                self.stepbytes,
                self.iters,
                self.warmup_iters,
            ),
        };
        Settings {
            libs: self.libs.choice(),
            patterns: self.patterns.clone(),
            minbytes,
            maxbytes,
            stepfactor,
            stepbytes,
            iters,
            warmup_iters,
            check: self.check == 1,
            data_on: self.data_on,
            datatype: self.datatype,
            op: self.op,
            device: self.device,
            json: self.json.clone(),
            exports: crate::report::exports::Exports {
                csv: self.csv.clone(),
                prometheus: self.prometheus.clone(),
            },
            logs: self.logs.clone(),
            strict: self.strict,
            timeout: self.timeout,
            stage_timeout: self.stage_timeout.clone(),
            repeat: self.repeat,
            budget: self.budget,
            duration: self.duration,
            expect: self.expect.clone(),
            bootstrap: self.bootstrap,
            isolate: None,
        }
    }

    /// The checked plan, or why not.
    pub fn plan(&self) -> Result<Plan, String> {
        self.settings().plan()
    }
}

/// Runs the parsed command; returns the process exit code.
pub fn dispatch(cli: Cli) -> u8 {
    if matches!(
        cli.command,
        Command::Explain(_) | Command::Doctor(_) | Command::Compare(_) | Command::Verdict(_)
    ) {
        crate::ffi::os::default_sigpipe();
    }
    match cli.command {
        Command::Explain(args) => explain::explain(&args),
        Command::Doctor(args) => doctor::doctor(&args),
        Command::Launch(args) => launch::launch(&args),
        Command::Compare(args) => compare::compare(&args),
        Command::Verdict(args) => verdict::verdict(&args),
        Command::ProbeNcclInit { nccl_lib } => {
            crate::diagnose::probe::nccl_solo_init_side(&nccl_lib)
        }
        Command::ProbeImport(a) => {
            crate::diagnose::probe::import_side(&a.socket, &a.cuda_lib, a.device)
        }
        Command::Run(args) => crate::run::start(|| args.plan()),
        Command::Isolate(args) => crate::run::start(|| args.plan()),
    }
}
