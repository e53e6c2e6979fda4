//! The worker side of `nccl-smoke run`: walk the stages, measure, and say how it ended.

mod burn_in;
mod consistency;
mod control_plane;
mod evidence;
mod expect;
mod first_steps;
mod results;

use super::{Plan, libs};
use crate::bench::{self, Buffers};
use crate::bootstrap::{self, Bootstrap};
use crate::comm::Communicator;
use crate::console::rank::Console;
use crate::diagnose::{causes, node_setup, probe};
use crate::error::{AtStage, Failure, Who};
use crate::events;
use crate::ffi::cuda::{self, CudaError, Driver};
use crate::ffi::nccl::Nccl;
use crate::ffi::os;
use crate::patterns;
use crate::report::backing::Backing;
use crate::report::fingerprint::{DriverInfo, NcclInfo, RankInfo, RankSetup};
use crate::report::results::{ResultsDoc, StageRecord};
use crate::report::table;
use crate::stage::Stage;
use std::time::Instant;

/// One rank's run: where it is, and what rank 0 keeps.
pub(super) struct Run<'a> {
    pub(super) plan: &'a Plan,
    pub(super) who: Who,
    pub(super) stage: Stage,
    pub(super) stage_start: Instant,
    /// Rank 0 only, with `--json`: the results document, sent whole to the supervisor (which
    /// writes it) after every change.
    pub(super) results: Option<ResultsDoc>,
    /// Rank 0: every rank's host and device as gathered (with or without a results file).
    pub(super) ranks: Vec<RankInfo>,
    pub(super) stages: Vec<StageRecord>,
    /// What runs underneath: every label comes from it.
    pub(super) backing: Backing,
    /// (CUDA driver, NCCL) versions once known, for findings that depend on them.
    pub(super) versions: (Option<String>, Option<String>),
    /// Distinct hosts of the job (rank 0, once gathered).
    pub(super) hosts: usize,
    /// What the preflight found short (/dev/shm, open files), kept with the run's warnings.
    pub(super) preflight_warnings: Vec<Failure>,
    pub(super) local_rank: u32,
    /// Rank 0: the failures its check of the data lays on other ranks besides the one it
    /// reports (see `causes::verify_failures`), sent after it.
    pub(super) implicated: Vec<Failure>,
    /// When this rank's worker started (`--budget` counts from it).
    pub(super) started: Instant,
    /// `--budget`: the measurements the sweep dropped, (pattern, bytes), every pass's.
    pub(super) dropped: Vec<(String, usize)>,
    /// Rank 0, a sweep run more than once: its rows folded into medians, and the tally.
    pub(super) folded: Vec<crate::bench::SizeResult>,
    pub(super) burn_in: Option<crate::report::burn_in::BurnIn>,
    /// When the results document was last sent.
    pub(super) last_sent: Option<Instant>,
}

pub fn worker(plan: &Plan) -> u8 {
    let who = Who {
        rank: bootstrap::launcher::from_env().and_then(|v| v.rank),
        host: os::hostname(),
    };
    let mut run = Run {
        plan,
        who,
        stage: Stage::Launch,
        stage_start: Instant::now(),
        results: None,
        ranks: Vec::new(),
        stages: Vec::new(),
        backing: if plan.libs.sim {
            Backing::Simulated
        } else if plan.libs.control_plane {
            Backing::SimulatedGpus { nccl: None }
        } else {
            Backing::Real
        },
        versions: (None, None),
        hosts: 1,
        preflight_warnings: Vec::new(),
        local_rank: 0,
        started: Instant::now(),
        dropped: Vec::new(),
        folded: Vec::new(),
        burn_in: None,
        last_sent: None,
        implicated: Vec::new(),
    };
    match run.go() {
        Ok(code) => code,
        Err(f) => {
            let code = run.fail(f);
            // No destructors: MPI_Finalize would wait for ranks that are not finishing, the
            // launcher must see this exit code now, and the libraries' teardown must not get
            // a chance to crash after the verdict.
            os::exit_now(code)
        }
    }
}

/// How long a rank whose failure is [`causes::peer_first`] waits before reporting and exiting.
pub(super) const PEER_FIRST: std::time::Duration = std::time::Duration::from_millis(3000);

impl Run<'_> {
    /// What this rank prints (see [`Console`]).
    pub(super) fn console(&self) -> Console {
        Console::of(self.who.rank)
    }

    pub(super) fn enter(&mut self, stage: Stage) {
        self.leave(true);
        self.stage = stage;
        self.stage_start = Instant::now();
        events::enter(stage, self.who.rank);
    }

    pub(super) fn leave(&mut self, ok: bool) {
        if self.who.rank == Some(0) {
            self.stages.push(StageRecord {
                stage: self.stage,
                seconds: self.stage_start.elapsed().as_secs_f64(),
                ok,
            });
            if let Some(r) = self.results.as_mut() {
                r.stages = self.stages.clone();
            }
        }
    }

    pub(super) fn go(&mut self) -> Result<u8, Failure> {
        let sizes = self.plan.sizes.clone();
        let boot = self.launch()?;
        if boot.rank() == 0 {
            self.open_results(boot.as_ref());
        }
        let result = self.walk(boot.as_ref(), &sizes);
        if result.is_err() {
            // Leave MPI initialised: finalising would wait for the other ranks.
            std::mem::forget(boot);
        }
        result
    }

    /// The selected patterns that run on `nranks` ranks; each left out is said on rank 0. None
    /// left is a failure: nothing would be measured.
    fn runnable(&self, nranks: u32) -> Result<Vec<&'static dyn patterns::Pattern>, Failure> {
        let (mut out, mut skipped) = (Vec::new(), Vec::new());
        for p in patterns::select(&self.plan.patterns).at(Stage::Launch, &self.who)? {
            match p.runs_on(nranks) {
                Ok(()) => out.push(p),
                Err(why) => skipped.push(format!("{}: {why}", p.name())),
            }
        }
        self.console()
            .job_lines(skipped.iter().map(|s| format!("# skipped {s}")));
        if out.is_empty() {
            return Err(Failure::new(
                Stage::Launch,
                &self.who,
                format!(
                    "no selected pattern runs on {nranks} ranks ({})",
                    skipped.join("; ")
                ),
            )
            .hint(
                "choose --patterns that run on this many ranks, or launch a rank count they take",
            ));
        }
        Ok(out)
    }

    /// Every stage after launch.
    pub(super) fn walk(&mut self, boot: &dyn Bootstrap, sizes: &[usize]) -> Result<u8, Failure> {
        let (rank, nranks) = (boot.rank(), boot.size());

        self.enter(Stage::NcclLoad);
        let libs = libs::for_worker(&self.plan.libs).at(Stage::NcclLoad, &self.who)?;
        let nccl = Nccl::load(libs.nccl.as_deref())
            .map_err(|e| causes::nccl_load_failure(&self.who, &e))?;
        if self.plan.libs.control_plane {
            self.control_plane_nccl(&nccl)?;
        }
        self.learn_backing(nccl.simulated.is_some(), None, &nccl.version());
        self.versions.1 = Some(nccl.version());
        if let Some(since) = self.plan.datatype.since_nccl()
            && nccl.version_code < since
        {
            return Err(causes::type_too_new(
                &self.who,
                self.plan.datatype,
                &nccl.version(),
                since,
            ));
        }
        let blocking = crate::comm::makes_blocking(&nccl);
        let console = self.console();
        console.job(format!("# nccl-smoke {}", env!("CARGO_PKG_VERSION")));
        console.job_lines(table::nccl_lines(&NcclInfo::from(&nccl)));
        console.job(table::comm_mode_line(blocking));
        console.job_lines([
            self.plan.deadline_line(),
            self.plan.timing_line(),
            self.plan.data_line(),
        ]);
        if let Some(r) = self.results.as_mut() {
            r.config.comm_blocking = Some(blocking);
        }

        self.enter(Stage::Driver);
        let driver = Driver::load(libs.cuda.as_deref()).map_err(|e| {
            let missing = matches!(e, CudaError::NotFound { .. });
            let mut f = causes::driver_failure(&self.who, &e);
            if missing {
                self.corroborate_missing_driver(&nccl, &mut f);
            }
            f
        })?;
        self.learn_backing(
            nccl.simulated.is_some(),
            Some(driver.simulated.is_some()),
            &nccl.version(),
        );
        if self.plan.libs.control_plane && !matches!(self.backing, Backing::SimulatedGpus { .. }) {
            return Err(Failure::new(
                Stage::Driver,
                &self.who,
                "--backend control-plane: the CUDA driver loaded is not nccl-smoke's stand-in",
            )
            .cause("another libcuda was found before the stand-in nccl-smoke linked")
            .hint("build the stand-ins (cargo build --release --workspace) or pass --sim-dir"));
        }
        self.versions.0 = Some(cuda::version_string(driver.version));
        self.console()
            .job(table::driver_line(&DriverInfo::from(&driver)));

        self.enter(Stage::Device);
        let device = self.open_device(&driver, boot.local_rank())?;
        let selected = self.runnable(nranks)?;
        if self.plan.datatype.is_fp8()
            && let Some(reducing) = selected.iter().find(|p| p.reduces())
            && device.info.compute_capability.is_some_and(|cc| cc < (9, 0))
        {
            return Err(causes::fp8_reduction_unsupported(
                &self.who,
                self.plan.datatype,
                reducing.name(),
                &device.info,
            ));
        }
        let root = node_setup::root(nccl.simulated.is_some());
        let me = RankInfo {
            rank,
            host: self.who.host.clone(),
            local_rank: boot.local_rank(),
            pid: std::process::id(),
            device: device.info.clone(),
            setup: Some(RankSetup {
                nccl: nccl.version(),
                nccl_path: nccl.path.clone(),
                driver: cuda::version_string(driver.version),
                env: crate::report::fingerprint::env_snapshot(),
                nic_firmware: node_setup::nic_firmware(&root),
                kernel_driver: node_setup::kernel_driver(&root),
                rdma_ports: node_setup::rdma_ports(&root),
            }),
        };
        events::waiting(
            "gathering every rank's device (a rank that has not got this far is stuck)",
        );
        let infos = bootstrap::gather_json(boot, &me)
            .map_err(|e| self.gather_failure(Stage::Device, e.rank, e.to_string()))?;
        if let Some(infos) = infos {
            let agree = self.ranks_agree(&infos);
            let shared = crate::diagnose::preflight::shared_gpus(&infos);
            // Recorded first: every rank's setup is the evidence of a difference.
            self.record_fingerprint(boot, &nccl, &driver, infos);
            agree?;
            // nccl-smoke's simulated NCCL lets ranks share a simulated GPU; the real one not.
            let allowed = crate::diagnose::preflight::sharing_allowed(
                nccl.version_code,
                std::env::var("NCCL_MULTI_RANK_GPU_ENABLE").ok().as_deref(),
            );
            if !shared.is_empty() && nccl.simulated.is_none() && !allowed {
                return Err(causes::shared_gpu_failure(
                    &self.who,
                    &shared,
                    &nccl.version(),
                ));
            }
        }

        if let Some(s) = self.plan.isolate {
            return self.isolate(boot, &nccl, &selected, s);
        }
        let timing = self.plan.timing(self.waiting_deadline(Stage::Run));

        self.local_rank = boot.local_rank();

        self.enter(Stage::UniqueId);
        let id = self.unique_id(boot, &nccl)?;

        // The communicator first, then the buffers, as nccl-tests orders them (`run`,
        // `src/common.cu` v2.19.6: `initComms`, then `AllocateBuffs`), so that NCCL gets the
        // memory it needs, and an out-of-memory says whose memory it was.
        self.enter(Stage::Init);
        let free_before_init = device.memory().ok().map(|(free, _)| free as u64);
        let mut comm =
            Communicator::init(&nccl, &id, rank, nranks, self.waiting_deadline(Stage::Init))
                .map_err(|e| self.comm_failure(Stage::Init, e))?;
        let free_after_init = device.memory().ok().map(|(free, _)| free as u64);
        let nccl_took = free_before_init
            .zip(free_after_init)
            .map(|(before, after)| before.saturating_sub(after));

        self.enter(Stage::Alloc);
        let (send_max, recv_max) = bench::sweep::buffer_sizes(&selected, sizes, &timing, nranks);
        self.preflight(
            &device,
            &driver,
            (send_max, recv_max),
            nccl_took,
            boot.local_size(),
        )?;
        let mut bufs = Buffers::new(send_max, recv_max, timing.iters, timing.data_on, nranks)
            .map_err(|e| {
                if e.is_module_load() {
                    return Failure::new(Stage::Alloc, &self.who, &e)
                        .cause(
                            "this driver could not load nccl-smoke's fill and check kernels (PTX \
                             ISA 7.0 for sm_70 and later, compiled by the driver at run time)",
                        )
                        .hint(
                            "--data-on host fills and checks on the host instead (slower at \
                             large sizes); or update the driver",
                        );
                }
                Failure::new(Stage::Alloc, &self.who, &e)
                    .cause(crate::diagnose::preflight::alloc_cause(
                        send_max as u64,
                        recv_max as u64,
                        nccl_took,
                        free_after_init,
                    ))
                    .hint("lower -e/--maxbytes, or check what else holds GPU memory (nvidia-smi)")
            })?;
        // From here a wait that times out asks NCCL's RAS what the other ranks are doing.
        comm.before_timeout_abort(super::nccl_ras::ras_hook(nccl.version_code, &id));
        events::send(&events::Event::Ras {
            version: nccl.version_code,
            hash: crate::diagnose::ras::comm_hash(nccl.version_code, &id),
        });

        self.enter(Stage::Connect);
        let connect_timing = bench::Timing {
            deadline: self.waiting_deadline(Stage::Connect),
            ..timing
        };
        for p in &selected {
            bench::connect(&mut comm, *p, &bufs, &connect_timing, sizes).map_err(|e| {
                let mut f = self.comm_failure(Stage::Connect, e);
                if f.stage == Stage::ConnectImport {
                    f.evidence
                        .push(probe::shareable_import(&driver, &device, &own_exe()));
                }
                f
            })?;
        }

        if self.plan.libs.control_plane {
            return self.control_plane_end(comm, boot, &nccl, &selected);
        }

        self.enter(Stage::Run);
        let rows = self.sweep(&mut comm, boot, &selected, sizes, &mut bufs, &timing)?;

        self.advisories(boot, device.info.ordinal);

        self.enter(Stage::Verify);
        let mut found = self.judge_rows(&rows, &selected, sizes, &timing, nranks);
        if !found.is_empty() {
            if matches!(self.backing, Backing::SimulatedGpus { .. }) {
                for f in &mut found {
                    f.evidence.push(
                        "simulated GPUs: nccl-smoke's stand-in CUDA driver records NCCL's kernels \
                         and never runs them, so no collective can write anything here; \
                         `--backend control-plane` checks what this setup can (init and connect)"
                            .into(),
                    );
                }
            }
            for f in &mut found {
                self.burn_in_evidence(f);
            }
            // Tear down cleanly anyway: a data error is no reason to leave a hung peer.
            let _ = self.end_comm(comm);
            let f = found.remove(0);
            self.implicated = found;
            return Err(f);
        }

        self.enter(Stage::Finalize);
        self.end_comm(comm)
            .map_err(|e| self.comm_failure(Stage::Finalize, e))?;
        drop(bufs);
        drop(device);
        self.leave(true);
        if let Some(code) = self.below_expected(&rows, nranks) {
            return Ok(code);
        }
        let unmeasured = self.never_measured(&rows);
        Ok(self.pass(&selected, sizes, nranks, unmeasured))
    }

    /// The communicator's end: `ncclCommFinalize` and `ncclCommDestroy`, or on simulated GPUs
    /// `ncclCommAbort`, as `--backend control-plane` ends it: no kernel ran, so the work NCCL's
    /// network proxies hold (NET/IB, NET/Socket) never drains and `ncclCommFinalize` would wait
    /// for it for good (seen with 2.32.3 over NET/IB: both ranks in `ncclProxyProgressDestroy`).
    fn end_comm(&self, comm: Communicator) -> Result<(), crate::comm::CommError> {
        let deadline = self.waiting_deadline(Stage::Finalize);
        if matches!(self.backing, Backing::SimulatedGpus { .. }) {
            crate::events::step("in ncclCommAbort (the teardown of a run whose kernels never ran)");
            comm.abort_now(deadline)
        } else {
            comm.finalize(deadline)
        }
    }

    /// Rank 0's judgement of the sweep's rows (the other ranks have none), the failure it
    /// reports first and those it lays on other ranks after: wrong data first
    /// (never written, partly written, another rank's, wrong values), then a collective too
    /// fast to have run, then what a pass needs (every pattern and size measured on every
    /// rank, every element checked).
    fn judge_rows(
        &self,
        rows: &[bench::SizeResult],
        selected: &[&dyn patterns::Pattern],
        sizes: &[usize],
        timing: &bench::Timing,
        nranks: u32,
    ) -> Vec<Failure> {
        if self.who.rank != Some(0) {
            return Vec::new();
        }
        let host_of = |rank| self.host_of(rank);
        let wrong = causes::verify_failures(rows, &self.who, host_of);
        if !wrong.is_empty() {
            return wrong;
        }
        causes::timer_failure(rows, &self.who, host_of)
            .or_else(|| {
                // What --budget dropped was never planned to be checked (it is named instead).
                let planned = bench::sweep::planned(selected, sizes, timing.dtype, nranks)
                    - self.never_measured(rows);
                causes::coverage_failure(rows, planned, nranks, timing.check, &self.who)
            })
            .into_iter()
            .collect()
    }

    /// The in-process deadline of a wait on other ranks: a little past the stage's deadline, so
    /// that a rank stuck on its own (its supervisor names it at deadline + 1 s, a stopped one
    /// at the deadline) reports before the ranks that are only waiting for it; still inside the
    /// supervisor's backstop.
    pub(super) fn waiting_deadline(&self, stage: Stage) -> std::time::Duration {
        self.plan.deadline(stage) + crate::stage::PEER_MARGIN
    }
}

impl Run<'_> {
    /// What runs underneath, as far as known (`driver`: whether it is the stand-in, once
    /// loaded); the supervisor hears it when it is the real libnccl on simulated GPUs.
    fn learn_backing(&mut self, nccl_sim: bool, driver_sim: Option<bool>, version: &str) {
        let driver_sim = driver_sim.unwrap_or(self.plan.libs.control_plane);
        self.backing = Backing::of(nccl_sim || self.plan.libs.sim, driver_sim, Some(version));
        if matches!(self.backing, Backing::SimulatedGpus { .. }) {
            events::send(&events::Event::Backend {
                backend: self.backing.backend(),
            });
        }
    }
}

/// This program, for the probes that run a second process of it.
pub(super) fn own_exe() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "nccl-smoke".into())
}
