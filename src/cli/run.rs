//! The worker side of `nccl-smoke run`: walk the stages, measure, and say how it ended.

use super::backend;
use super::supervise::RUN_DIR_ENV;
use super::{Backend, RunArgs};
use crate::bench::{self, Buffers, SizeResult, Timing};
use crate::bootstrap::{self, Bootstrap};
use crate::comm::{CommError, Communicator};
use crate::diagnose::{classify, probe};
use crate::error::{AtStage, Failure, Who};
use crate::ffi::cuda::{self, CudaError, Device, Driver};
use crate::ffi::nccl::{self, Nccl, NcclError};
use crate::ffi::os;
use crate::patterns::{self, Layout, Pattern};
use crate::progress::{self, Event};
use crate::report::fingerprint::{self, DriverInfo, Fingerprint, NcclInfo, RankInfo};
use crate::report::results::{
    self, ResultsDoc, ResultsFile, RunConfig, StageRecord, Status, Verdict,
};
use crate::report::{expect, repeats, table};
use crate::stage::{Stage, exit};
use nccl_smoke_fault::{FaultSet, Kind, Where};
use std::io::IsTerminal;
use std::time::{Instant, SystemTime};

/// One rank's run: where it is, and what rank 0 keeps.
struct Run<'a> {
    args: &'a RunArgs,
    who: Who,
    stage: Stage,
    stage_start: Instant,
    /// Rank 0 only.
    results: Option<ResultsFile>,
    stages: Vec<StageRecord>,
    simulated: bool,
    /// (CUDA driver, NCCL) versions once known, for findings that depend on them.
    versions: (Option<String>, Option<String>),
    /// Distinct hosts of the job (rank 0, once gathered).
    hosts: usize,
    /// Whether a write of the results file failed (said once), and whether the last one did.
    write_said: std::cell::Cell<bool>,
    write_failed: std::cell::Cell<bool>,
    /// What the preflight found short (/dev/shm, open files), kept with the run's warnings.
    preflight_warnings: Vec<Failure>,
    local_rank: u32,
    /// Each rank's host, in rank order (rank 0, once the fingerprint is known).
    rank_hosts: Vec<String>,
}

pub fn worker(args: &RunArgs) -> u8 {
    os::die_with_parent();
    let who = Who {
        rank: bootstrap::launcher::from_env().and_then(|v| v.rank),
        host: os::hostname(),
    };
    let mut run = Run {
        args,
        who,
        stage: Stage::Launch,
        stage_start: Instant::now(),
        results: None,
        stages: Vec::new(),
        simulated: args.libs.backend == Backend::Sim,
        versions: (None, None),
        hosts: 1,
        write_said: Default::default(),
        write_failed: Default::default(),
        preflight_warnings: Vec::new(),
        local_rank: 0,
        rank_hosts: Vec::new(),
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

/// A failure caused by a peer going away first (its sockets closed; a wait that ran out while
/// a peer closed its connections): that peer's own verdict names the cause, so this rank lets
/// it land first.
fn consequential(f: &Failure) -> bool {
    results::blame(f) == results::Blame::Peer
}

/// How long a rank whose failure is [`consequential`] waits before reporting and exiting.
const PEER_FIRST: std::time::Duration = std::time::Duration::from_millis(1500);

impl Run<'_> {
    fn enter(&mut self, stage: Stage) {
        self.leave(true);
        self.stage = stage;
        self.stage_start = Instant::now();
        progress::enter(stage, self.who.rank);
    }

    fn leave(&mut self, ok: bool) {
        if self.who.rank == Some(0) {
            self.stages.push(StageRecord {
                stage: self.stage,
                seconds: self.stage_start.elapsed().as_secs_f64(),
                ok,
            });
            if let Some(r) = self.results.as_mut() {
                r.doc.stages = self.stages.clone();
            }
        }
    }

    /// Rewrites the results file (rank 0). A failure is said once, not once per size; the run
    /// goes on (its measurements are worth more than the file), and its exit code says so.
    fn save(&self) {
        let Some(r) = &self.results else { return };
        match r.save() {
            Ok(()) => self.write_failed.set(false),
            Err(e) => {
                self.write_failed.set(true);
                if !self.write_said.replace(true) {
                    eprintln!(
                        "nccl-smoke: cannot write the results file {}: {e}; the run goes on, and \
                         exits with code {} unless a later write succeeds",
                        r.path().display(),
                        exit::WRITE_FAILED
                    );
                }
            }
        }
    }

    /// Reports a failure of this rank: verdict line, results file, supervisor.
    fn fail(&mut self, f: Failure) -> u8 {
        if consequential(&f) {
            std::thread::sleep(PEER_FIRST);
        }
        self.stage = f.stage;
        self.leave(false);
        println!("{}{f}", if self.simulated { "[SIMULATED] " } else { "" });
        for line in &f.evidence {
            println!("#   evidence: {line}");
        }
        if let Some(r) = self.results.as_mut() {
            r.doc.failures.push(f.clone());
            r.doc.verdict = Verdict {
                status: Status::Fail,
                line: f.to_string(),
                exit_code: f.exit_code(),
                stage: Some(f.stage),
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
        self.save();
        progress::send(&Event::Failed { failure: f.clone() });
        f.exit_code()
    }

    fn go(&mut self) -> Result<u8, Failure> {
        let sizes = self
            .args
            .validate()
            .map_err(|e| Failure::new(Stage::Launch, &self.who, e))?;
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

    /// Every stage after launch.
    fn walk(&mut self, boot: &dyn Bootstrap, sizes: &[usize]) -> Result<u8, Failure> {
        let (rank, nranks) = (boot.rank(), boot.size());

        self.enter(Stage::NcclLoad);
        let libs = backend::libraries(self.args).at(Stage::NcclLoad, &self.who)?;
        let nccl = Nccl::load(libs.nccl.as_deref()).map_err(|e| self.nccl_load_failure(e))?;
        self.simulated |= nccl.simulated.is_some();
        self.versions.1 = Some(nccl.version());
        if rank == 0 {
            println!("# nccl-smoke {}", env!("CARGO_PKG_VERSION"));
            table::nccl_lines(&NcclInfo::from(&nccl))
                .iter()
                .for_each(|l| println!("{l}"));
            let blocking = crate::comm::makes_blocking(&nccl);
            println!("{}", table::comm_mode_line(blocking));
        }

        self.enter(Stage::Driver);
        let driver = Driver::load(libs.cuda.as_deref()).map_err(|e| {
            let missing = matches!(e, CudaError::NotFound { .. });
            let mut f = self.driver_failure(e);
            if missing {
                self.corroborate_missing_driver(&nccl, &mut f);
            }
            f
        })?;
        self.simulated |= driver.simulated.is_some();
        self.versions.0 = Some(cuda::version_string(driver.version));
        if rank == 0 {
            println!("{}", table::driver_line(&DriverInfo::from(&driver)));
        }

        self.enter(Stage::Device);
        let device = self.open_device(&driver, boot.local_rank())?;
        let me = RankInfo {
            rank,
            host: self.who.host.clone(),
            local_rank: boot.local_rank(),
            pid: std::process::id(),
            device: device.info.clone(),
        };
        progress::waiting(
            "gathering every rank's device (a rank that has not got this far is stuck)",
        );
        let infos = gather_json(boot, &me);
        if let Some(infos) = infos {
            self.record_fingerprint(boot, &nccl, &driver, infos);
        }

        let selected = patterns::select(&self.args.patterns).at(Stage::Launch, &self.who)?;
        let timing = Timing {
            warmup: self.args.warmup_iters,
            iters: self.args.iters,
            check: self.args.check == 1,
            dtype: self.args.datatype,
            op: self.args.op,
            deadline: self.waiting_deadline(Stage::Run),
        };

        self.enter(Stage::Alloc);
        let (send_max, recv_max) = buffer_sizes(&selected, sizes, &timing, nranks);
        self.local_rank = boot.local_rank();
        self.preflight(&device, &driver, send_max, recv_max, boot.local_size())?;
        let mut bufs = Buffers::new(send_max, recv_max, timing.iters).map_err(|e| {
            Failure::new(Stage::Alloc, &self.who, &e)
                .cause(format!(
                    "{} + {} bytes of device memory (and {} timing events) could not be had",
                    send_max,
                    recv_max,
                    timing.iters + 1
                ))
                .hint("lower -e/--maxbytes, or check what else holds GPU memory (nvidia-smi)")
        })?;

        self.enter(Stage::UniqueId);
        let id = self.unique_id(boot, &nccl)?;

        self.enter(Stage::Init);
        let mut comm =
            Communicator::init(&nccl, &id, rank, nranks, self.waiting_deadline(Stage::Init))
                .map_err(|e| self.comm_failure(Stage::Init, e))?;

        self.enter(Stage::Connect);
        let connect_timing = Timing {
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

        self.enter(Stage::Run);
        let rows = self.sweep(&mut comm, boot, &selected, sizes, &mut bufs, &timing)?;

        self.advisories(boot);

        self.enter(Stage::Verify);
        if let Some(f) = self.verify_failure(&rows) {
            // Tear down cleanly anyway: a data error is no reason to leave a hung peer.
            let _ = comm.finalize(self.waiting_deadline(Stage::Finalize));
            return Err(f);
        }

        self.enter(Stage::Finalize);
        comm.finalize(self.waiting_deadline(Stage::Finalize))
            .map_err(|e| self.comm_failure(Stage::Finalize, e))?;
        drop(bufs);
        drop(device);
        self.leave(true);
        if let Some(code) = self.below_expected(&rows, nranks) {
            return Ok(code); // `--expect`: a floor was not met
        }
        Ok(self.pass(&selected, sizes, nranks))
    }

    /// MPI (or a world of one), the launcher cross-check, and the first MPI collective.
    fn launch(&mut self) -> Result<Box<dyn Bootstrap>, Failure> {
        progress::enter(Stage::Launch, self.who.rank);
        progress::waiting("in MPI_Init (or the launcher's bootstrap)");
        let boot =
            init_bootstrap(self.args.deadline(Stage::Launch)).at(Stage::Launch, &self.who)?;
        if let Some(msg) =
            bootstrap::launcher::mismatch(boot.size(), bootstrap::launcher::from_env().as_ref())
        {
            return Err(Failure::new(Stage::Launch, &self.who, msg)
                .cause("nccl-smoke was built against one MPI and started by another's launcher")
                .hint("use the mpirun of the MPI nccl-smoke was built with (see `ldd nccl-smoke | grep mpi`), or rebuild against this one"));
        }
        self.who.rank = Some(boot.rank());
        progress::enter(Stage::Launch, self.who.rank);
        progress::step("before the first MPI collective: this rank never reached it");
        if self.args.libs.backend == Backend::Sim {
            self.simulated_launch_fault()?;
        }
        progress::waiting(
            "waiting in the first MPI collective (barrier) for ranks that never arrived",
        );
        boot.barrier();
        share_status_address(boot.as_ref());
        Ok(boot)
    }

    /// The simulation's `launch` fault: a rank that never reaches the first MPI collective.
    fn simulated_launch_fault(&self) -> Result<(), Failure> {
        let faults = FaultSet::from_env().at(Stage::Launch, &self.who)?;
        match faults.find(Where::Launch, self.who.rank).map(|f| f.kind) {
            Some(Kind::Hang) => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Some(Kind::Crash) => std::process::abort(),
            Some(Kind::Error) => Err(Failure::new(
                Stage::Launch,
                &self.who,
                "simulated launch failure (NCCL_SMOKE_SIM_FAULT)",
            )),
            _ => Ok(()),
        }
    }

    fn nccl_load_failure(&self, e: NcclError) -> Failure {
        let f = Failure::new(Stage::NcclLoad, &self.who, &e);
        match e {
            NcclError::NotFound { .. } => f
                .cause("libnccl could not be loaded from that path or the library search path")
                .hint("install NCCL (e.g. the nvidia-nccl-cu12 wheel), or point --nccl-lib / NCCL_SMOKE_NCCL_LIB at libnccl.so.2"),
            NcclError::MissingSymbol { .. } => f
                .cause("this libnccl is older than nccl-smoke supports")
                .hint("use NCCL 2.7.3 or newer (--nccl-lib)"),
            NcclError::Call { .. } => f,
        }
    }

    fn driver_failure(&self, e: CudaError) -> Failure {
        let f = Failure::new(Stage::Driver, &self.who, &e);
        if matches!(e, CudaError::TwoDrivers { .. }) {
            return f
                .cause("cudarc bound a different CUDA driver library from the one nccl-smoke and NCCL use")
                .hint("remove the CUDA toolkit's stubs/ folder (or the second driver) from LD_LIBRARY_PATH: the driver libcuda.so.1 of the node's NVIDIA install must be the only one found");
        }
        match e.code_name() {
            None => f
                .cause(format!(
                    "no usable NVIDIA driver library ({}) on this node or in this container",
                    cuda::DRIVER_SONAME
                ))
                .hint("install the NVIDIA driver; in a container, run with the NVIDIA container toolkit \
                       (--gpus all / runtimeClassName: nvidia) so the driver library is mounted"),
            Some("CUDA_ERROR_NO_DEVICE") => f
                .cause("the driver sees no GPU")
                .hint("check CUDA_VISIBLE_DEVICES and that the container/pod was given GPUs (nvidia-smi -L)"),
            Some("CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE" | "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH") => f
                .cause("the user-space driver library does not match the kernel module")
                .hint("make the container's libcuda match the host driver (NVIDIA container toolkit), or reboot after a driver upgrade"),
            Some(_) => f.hint("nvidia-smi and dmesg show the driver's state"),
        }
    }

    /// A second opinion from libnccl itself: a one-rank communicator needs the driver, so its
    /// failure, in NCCL's words, confirms (or contradicts) that the driver is missing.
    fn corroborate_missing_driver(&self, nccl: &Nccl, f: &mut Failure) {
        match probe::nccl_solo_init(&own_exe(), &nccl.path) {
            probe::SoloInit::Failed { said, error } => {
                f.error = format!("{}; NCCL's own init agrees: {said}", f.error);
                f.evidence.push(format!("ncclCommInitRank(nranks=1): {error}"));
            }
            probe::SoloInit::Succeeded => f.evidence.push("ncclCommInitRank(nranks=1) succeeded without the driver library nccl-smoke looked for: NCCL found another driver".into()),
            probe::SoloInit::NoAnswer(why) => f
                .evidence
                .push(format!("ncclCommInitRank(nranks=1) in a second process: {why}")),
        }
    }

    fn open_device(&self, driver: &Driver, local_rank: u32) -> Result<Device, Failure> {
        let count = driver.device_count().at(Stage::Device, &self.who)?;
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "(unset)".into());
        if count <= 0 {
            return Err(
                Failure::new(Stage::Device, &self.who, "the driver reports 0 devices")
                    .cause(format!(
                        "no GPU visible to this process (CUDA_VISIBLE_DEVICES={visible})"
                    ))
                    .hint("check CUDA_VISIBLE_DEVICES and the GPUs given to the container"),
            );
        }
        let ordinal = self
            .args
            .device
            .unwrap_or((local_rank % count as u32) as i32);
        if ordinal < 0 || ordinal >= count {
            return Err(Failure::new(
                Stage::Device,
                &self.who,
                format!("device {ordinal} does not exist: {count} visible (CUDA_VISIBLE_DEVICES={visible})"),
            )
            .hint("--device must be below the number of visible devices"));
        }
        Device::open(ordinal).map_err(|e| {
            Failure::new(Stage::Device, &self.who, &e)
                .cause(format!("device {ordinal} of {count} could not be opened (CUDA_VISIBLE_DEVICES={visible})"))
                .hint("check nvidia-smi for a GPU in a bad state (Xid errors in dmesg) or in exclusive-process mode")
        })
    }

    /// The in-process deadline of a wait on other ranks: a little past the stage's deadline, so
    /// that a rank stuck on its own (its supervisor names it at deadline + 1 s, a stopped one
    /// at the deadline) reports before the ranks that are only waiting for it; still inside the
    /// supervisor's backstop.
    fn waiting_deadline(&self, stage: Stage) -> std::time::Duration {
        self.args.deadline(stage) + super::supervise::PEER_MARGIN
    }

    /// Rank 0 opens the results file as soon as the launch stage is done, so that a failure
    /// anywhere after it (reported here or by another rank's supervisor) lands in it.
    fn open_results(&mut self, boot: &dyn Bootstrap) {
        let Some(path) = &self.args.json else { return };
        let a = self.args;
        let doc = ResultsDoc {
            schema: crate::report::results::SCHEMA.into(),
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            run_id: format!(
                "{}-{}-{}",
                self.who.host,
                std::process::id(),
                SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos())
                    .unwrap_or_default()
            ),
            backend: if self.simulated {
                "SIMULATED".into()
            } else {
                "nccl".into()
            },
            simulated: self.simulated,
            command: std::env::args().collect(),
            config: RunConfig {
                patterns: a.patterns.clone(),
                minbytes: a.minbytes,
                maxbytes: a.maxbytes(),
                stepfactor: a.stepbytes.is_none().then_some(a.stepfactor),
                stepbytes: a.stepbytes,
                iters: a.iters,
                warmup_iters: a.warmup_iters,
                check: a.check == 1,
                datatype: a.datatype.name().into(),
                op: a.op.name().into(),
            },
            fingerprint: Fingerprint {
                launcher: boot.describe(),
                env: fingerprint::env_snapshot(),
                ..Fingerprint::default()
            },
            stages: self.stages.clone(),
            ranks: Vec::new(),
            results: Vec::new(),
            failures: Vec::new(),
            warnings: Vec::new(),
            verdict: Verdict {
                status: Status::Incomplete,
                line: "INCOMPLETE: the run has not finished".into(),
                exit_code: exit::INTERNAL,
                stage: None,
                consequences: Vec::new(),
                ranks: Vec::new(),
            },
        };
        self.results = Some(ResultsFile::new(path, doc));
        self.save();
        progress::send(&Event::Results {
            path: path.display().to_string(),
        });
    }

    /// Rank 0, once every rank's device is known: the fingerprint, printed and kept.
    fn record_fingerprint(
        &mut self,
        boot: &dyn Bootstrap,
        nccl: &Nccl,
        driver: &Driver,
        ranks: Vec<RankInfo>,
    ) {
        let fp = Fingerprint {
            hosts: fingerprint::hosts_of(&ranks),
            ranks,
            driver: Some(DriverInfo::from(driver)),
            nccl: Some(NcclInfo::from(nccl)),
            launcher: boot.describe(),
            env: fingerprint::env_snapshot(),
        };
        for line in table::fingerprint_lines(&fp, self.simulated) {
            println!("{line}");
        }
        warn_shared_gpus(&fp);
        self.hosts = fp.hosts.len();
        self.rank_hosts = fp.ranks.iter().map(|k| k.host.clone()).collect();
        if let Some(r) = self.results.as_mut() {
            r.doc.simulated = self.simulated;
            r.doc.backend = if self.simulated {
                "SIMULATED".into()
            } else {
                "nccl".into()
            };
            r.doc.fingerprint = fp;
        }
        self.save();
    }

    /// Rank 0 makes the id and broadcasts it with a status byte, so that when it cannot, the
    /// other ranks say so instead of waiting for an id that never comes.
    fn unique_id(&self, boot: &dyn Bootstrap, nccl: &Nccl) -> Result<nccl::UniqueId, Failure> {
        let mut msg = vec![0u8; 1 + nccl::NCCL_UNIQUE_ID_BYTES as usize];
        let mine = if boot.rank() == 0 {
            let r = nccl.get_unique_id();
            if let Ok(id) = &r {
                msg[0] = 1;
                msg[1..].copy_from_slice(id);
            }
            Some(r)
        } else {
            None
        };
        boot.broadcast(&mut msg);
        match mine {
            Some(Err(e)) => Err(self.nccl_failure(Stage::UniqueId, &e).hint(
                "ncclGetUniqueId needs a usable network interface: check NCCL_SOCKET_IFNAME",
            )),
            _ if msg[0] != 1 => Err(Failure::new(
                Stage::UniqueId,
                &self.who,
                "rank 0 could not create the NCCL unique id (see rank 0's verdict)",
            )),
            _ => {
                let mut id = [0u8; nccl::NCCL_UNIQUE_ID_BYTES as usize];
                id.copy_from_slice(&msg[1..]);
                Ok(id)
            }
        }
    }

    fn nccl_failure(&self, stage: Stage, e: &NcclError) -> Failure {
        let mut f = Failure::new(stage, &self.who, e);
        f.evidence = self.log_warnings();
        f
    }

    /// A communicator failure, with "connect" split by NCCL's own words.
    fn comm_failure(&self, stage: Stage, e: CommError) -> Failure {
        let mut f = Failure::new(stage, &self.who, &e);
        if let CommError::Timeout { what, after_s } = &e {
            // The user set the deadline; say how the wait's limit was made of it.
            let deadline = self.args.deadline(stage).as_secs_f64();
            f.error = format!(
                "{what} did not complete within {after_s:.1} s (the {stage} deadline of {deadline} s, \
                 + {:.1} s for a stuck peer to report first{}); the communicator was aborted",
                super::supervise::PEER_MARGIN.as_secs_f64(),
                if *after_s > deadline + super::supervise::PEER_MARGIN.as_secs_f64() + 0.05 {
                    ", + the time this size's iterations are expected to take"
                } else {
                    ""
                }
            );
        }
        f.evidence = self.log_warnings();
        // This rank's own log may show it failed first (out of file descriptors, say) while the
        // call it made returned only what its peers did next.
        f.own_evidence = classify::classify(f.evidence.iter().map(String::as_str))
            .is_some_and(|x| x.severity == classify::Severity::Fail && x.category.is_local());
        let mut lines: Vec<&str> = vec![f.error.as_str()];
        lines.extend(f.evidence.iter().map(String::as_str));
        if consequential(&f) {
            return f
                .cause("a peer rank closed its connections: it failed or exited first, and its own verdict names why")
                .hint("look for the first FAIL line of another rank");
        }
        if let Some(found) = classify::classify(lines.iter().copied()) {
            // "connect" is split by the transport that failed; other stages keep their name.
            if stage == Stage::Connect
                && matches!(
                    found.stage,
                    Stage::ConnectImport
                        | Stage::ConnectProxy
                        | Stage::ConnectShm
                        | Stage::ConnectNet
                )
            {
                f.stage = found.stage;
            }
            if !f.evidence.contains(&found.evidence) && found.evidence != f.error {
                f.evidence.insert(0, found.evidence.clone());
            }
            let cause = format!("{}{}", found.cause, self.context_for(f.stage));
            f = f.cause(cause).hint(found.hint);
            if f.stage == Stage::ConnectShm {
                f.evidence.push(probe::shm_segment(
                    std::path::Path::new("/dev/shm"),
                    probe::NCCL_SHM_SEGMENT,
                ));
            }
        } else if let CommError::Timeout { .. } = e {
            f = f
                .cause("an operation did not complete: a peer stopped, or a link hangs")
                .hint("rerun with NCCL_DEBUG=INFO; the ranks that did not report are the suspects");
        } else if e
            .nccl()
            .and_then(NcclError::last_error)
            .is_some_and(|l| l.contains("driver version is insufficient"))
        {
            f = f
                .cause("the CUDA driver is older than the CUDA runtime this libnccl was built for")
                .hint("upgrade the driver, or use an NCCL build for the driver's CUDA version");
        }
        if matches!(f.stage, Stage::Init | Stage::ConnectNet) {
            f.evidence.extend(self.reach_probe(&f));
        }
        f
    }

    /// Can this rank reach, over TCP, the peers NCCL named and rank 0's host, from the
    /// interface NCCL_SOCKET_IFNAME selects?
    fn reach_probe(&self, f: &Failure) -> Vec<String> {
        let lines = std::iter::once(f.error.as_str()).chain(f.evidence.iter().map(String::as_str));
        let mut targets: Vec<(String, std::net::SocketAddr)> = probe::logged_peers(lines)
            .into_iter()
            .map(|a| ("a peer NCCL named".to_string(), a))
            .collect();
        if self.who.rank != Some(0) {
            targets.extend(
                STATUS_ADDRS
                    .get()
                    .into_iter()
                    .flatten()
                    .filter_map(|a| a.parse::<std::net::SocketAddr>().ok())
                    .filter(|a| !a.ip().is_loopback())
                    .map(|a| ("rank 0's host (its supervisor)".to_string(), a)),
            );
        }
        if targets.is_empty() {
            return Vec::new();
        }
        probe::tcp_reach(
            &targets,
            std::env::var("NCCL_SOCKET_IFNAME").ok().as_deref(),
        )
    }

    /// Every rank reads its NCCL log for findings that explain a slow run; rank 0 prints and
    /// keeps them.
    fn advisories(&mut self, boot: &dyn Bootstrap) {
        let lines = self.nccl_log_lines(|l| classify::advise([l]).is_some());
        let mut mine: Vec<Failure> = classify::advise(lines.iter().map(String::as_str))
            .map(|found| {
                let mut f = Failure::new(Stage::Run, &self.who, &found.evidence)
                    .cause(found.cause)
                    .hint(found.hint);
                f.evidence = vec![found.evidence, probe::peermem(std::path::Path::new("/"))];
                f
            })
            .into_iter()
            .collect();
        mine.append(&mut self.preflight_warnings);
        let Some(all) = gather_json(boot, &mine) else {
            return;
        };
        for w in all.iter().flatten() {
            println!("{}", w.warning_line());
            for line in &w.evidence {
                println!("#   evidence: {line}");
            }
        }
        if let Some(r) = self.results.as_mut() {
            r.doc.warnings = all.into_iter().flatten().collect();
        }
        self.save();
    }

    /// Before any buffer is allocated: a sweep that cannot fit this GPU or this node's host
    /// memory is refused with the numbers; /dev/shm and the open-files limit are checked for the
    /// local rank count as `doctor` checks them, and what doctor would fail becomes a warning.
    fn preflight(
        &mut self,
        device: &Device,
        driver: &Driver,
        send: usize,
        recv: usize,
        local_ranks: u32,
    ) -> Result<(), Failure> {
        use crate::diagnose::{doctor, preflight};
        let need = preflight::Need {
            send: send as u64,
            recv: recv as u64,
            staging: (send.min(bench::STAGING_BYTES) + recv.min(bench::STAGING_BYTES)) as u64,
            device_in_host: driver.simulated.is_some(),
            local_ranks,
        };
        let free = device.memory().ok().map(|(free, _)| free as u64);
        need.check(free, preflight::host_available()).map_err(|why| {
            Failure::new(Stage::Alloc, &self.who, why)
                .cause("the sweep does not fit: it was refused before any memory was taken")
                .hint("lower -e/--maxbytes, or run fewer ranks per node; nvidia-smi shows what else holds GPU memory")
        })?;
        let node = doctor::Node {
            root: "/".into(),
            env: Box::new(|k| std::env::var(k).ok()),
            libs: (None, None),
            local_ranks,
        };
        // What doctor fails (not what it only warns of, which is about larger jobs than most)
        // is kept with the run's warnings, and said at once on the node's first rank.
        for c in node.resource_checks() {
            if c.status == doctor::Status::Fail {
                let f = Failure::new(
                    Stage::Alloc,
                    &self.who,
                    format!("preflight {}: {}", c.id, c.evidence),
                )
                .hint(c.hint);
                if self.local_rank == 0 {
                    eprintln!("{}", f.warning_line());
                }
                self.preflight_warnings.push(f);
            }
        }
        Ok(())
    }

    /// Facts of this node that bear on a finding: the versions for a buffer-import failure
    /// (a driver bug), the size of /dev/shm for a shared-memory one.
    fn context_for(&self, stage: Stage) -> String {
        match stage {
            Stage::ConnectImport => format!(
                " [this node: CUDA driver {}, NCCL {}]",
                self.versions.0.as_deref().unwrap_or("unknown"),
                self.versions.1.as_deref().unwrap_or("unknown")
            ),
            Stage::ConnectShm => match os::fs_space("/dev/shm") {
                Some((total, free)) => format!(
                    " [this node: /dev/shm {} MiB, {} MiB free]",
                    total >> 20,
                    free >> 20
                ),
                None => " [this node: /dev/shm is missing]".into(),
            },
            _ => String::new(),
        }
    }

    /// WARN lines this process's NCCL wrote to its debug file, when the supervisor set one up.
    fn log_warnings(&self) -> Vec<String> {
        self.nccl_log_lines(|l| l.contains(" NCCL WARN "))
    }

    /// Lines of this process's NCCL debug file that `keep` selects (at most 20).
    fn nccl_log_lines(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let Some(dir) = std::env::var_os(RUN_DIR_ENV) else {
            return Vec::new();
        };
        let pid = format!(".{}.log", std::process::id());
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(&pid))
            .filter_map(|e| std::fs::read(e.path()).ok())
            .flat_map(|bytes| {
                String::from_utf8_lossy(&bytes)
                    .lines()
                    .filter(|l| keep(l))
                    .map(|l| l.trim().to_string())
                    .collect::<Vec<_>>()
            })
            .take(20)
            .collect()
    }

    fn sweep(
        &mut self,
        comm: &mut Communicator,
        boot: &dyn Bootstrap,
        selected: &[&dyn Pattern],
        sizes: &[usize],
        bufs: &mut Buffers,
        timing: &Timing,
    ) -> Result<Vec<SizeResult>, Failure> {
        if self.args.repeat > 1 {
            return self.sweep_repeated(comm, boot, selected, sizes, bufs, timing);
        }
        let nranks = comm.nranks;
        let mut rows = Vec::new();
        // The last size measured (bytes, µs per iteration on this rank).
        let mut last: Option<(usize, f64)> = None;
        for p in selected {
            if self.who.rank == Some(0) {
                for line in table::table_header(p.name(), nranks, self.simulated) {
                    println!("{line}");
                }
            }
            let mut last_count = None;
            let mut pattern_rows = Vec::new();
            for (epoch, &size) in sizes.iter().enumerate() {
                let layout = p.layout(size, timing.dtype.size(), nranks);
                if last_count == Some(layout.count) {
                    continue; // rounding made it the same message as the previous size
                }
                last_count = Some(layout.count);
                if self.who.rank == Some(0) && std::io::stderr().is_terminal() {
                    eprint!(
                        "\r{} {} B ({}/{})   ",
                        p.name(),
                        layout.bytes(timing.dtype),
                        epoch + 1,
                        sizes.len()
                    );
                }
                let measured =
                    self.measure_size(comm, boot, *p, &layout, bufs, timing, epoch, &mut last)?;
                if let Some(row) = measured {
                    println!("{}", table::table_row(&row));
                    if let Some(r) = self.results.as_mut() {
                        r.doc.results.push(row.clone());
                    }
                    self.save();
                    pattern_rows.push(row);
                }
            }
            if self.who.rank == Some(0) {
                for line in table::footer_lines(&pattern_rows, self.simulated) {
                    println!("{line}");
                }
            }
            rows.extend(pattern_rows);
        }
        Ok(rows)
    }

    /// One size of one pattern, measured on every rank; rank 0 gets the combined row.
    #[allow(clippy::too_many_arguments)]
    fn measure_size(
        &self,
        comm: &mut Communicator,
        boot: &dyn Bootstrap,
        p: &dyn Pattern,
        layout: &Layout,
        bufs: &mut Buffers,
        timing: &Timing,
        epoch: usize,
        last: &mut Option<(usize, f64)>,
    ) -> Result<Option<SizeResult>, Failure> {
        // The run deadline bounds the time without progress, so each size's waits get
        // the deadline plus the time its iterations are expected to take (see
        // `size_budget`), and the supervisor is told so.
        let bytes = layout.bytes(timing.dtype);
        let (per_wait, whole) = size_budget(*last, bytes, timing);
        progress::budget(whole.as_secs_f64());
        let sized = Timing {
            deadline: timing.deadline + per_wait,
            ..*timing
        };
        let sample = bench::measure(comm, boot, p, layout, bufs, &sized, epoch as u32)
            .map_err(|e| self.comm_failure(Stage::Run, e))?;
        *last = Some((bytes, sample.avg_us));
        progress::beat();
        Ok(gather_json(boot, &sample)
            .map(|all| bench::combine(p, layout, timing, comm.nranks, &all)))
    }

    /// `run --repeat N`: every pattern and size once, then all of them again, N times, so
    /// that drift or a neighbour's burst spreads over every row's repeats instead of landing
    /// on one pattern's (see `report::repeats`). The tables, of medians with their spread,
    /// come at the end; the results file is updated after every measurement.
    fn sweep_repeated(
        &mut self,
        comm: &mut Communicator,
        boot: &dyn Bootstrap,
        selected: &[&dyn Pattern],
        sizes: &[usize],
        bufs: &mut Buffers,
        timing: &Timing,
    ) -> Result<Vec<SizeResult>, Failure> {
        let (nranks, repeat) = (comm.nranks, self.args.repeat);
        let total = sizes.len() * selected.len() * repeat as usize;
        let mut rows = Vec::new();
        let mut last: Option<(usize, f64)> = None;
        let mut epoch = 0;
        for _ in 0..repeat {
            for p in selected {
                let mut last_count = None;
                for &size in sizes {
                    let layout = p.layout(size, timing.dtype.size(), nranks);
                    epoch += 1;
                    if last_count == Some(layout.count) {
                        continue; // rounding made it the same message as the previous size
                    }
                    last_count = Some(layout.count);
                    if self.who.rank == Some(0) && std::io::stderr().is_terminal() {
                        let bytes = layout.bytes(timing.dtype);
                        eprint!("\r{} {bytes} B ({epoch}/{total})   ", p.name());
                    }
                    let measured =
                        self.measure_size(comm, boot, *p, &layout, bufs, timing, epoch, &mut last)?;
                    if let Some(row) = measured {
                        if let Some(r) = self.results.as_mut() {
                            repeats::record(&mut r.doc.results, row.clone(), repeat);
                        }
                        self.save();
                        repeats::record(&mut rows, row, repeat);
                    }
                }
            }
        }
        if self.who.rank == Some(0) {
            for p in selected {
                let mine: Vec<SizeResult> = rows
                    .iter()
                    .filter(|r| r.pattern == p.name())
                    .cloned()
                    .collect();
                for line in repeats::header(p.name(), nranks, self.simulated, repeat) {
                    println!("{line}");
                }
                for row in &mine {
                    println!("{}", repeats::row(row));
                }
                for line in table::footer_lines(&mine, self.simulated) {
                    println!("{line}");
                }
            }
        }
        Ok(rows)
    }

    /// Wrong data, pinned on the rank that sent it where the pattern tells (point-to-point and
    /// all-to-all), else on the rank that received it.
    fn verify_failure(&self, rows: &[SizeResult]) -> Option<Failure> {
        let bad: Vec<&SizeResult> = rows.iter().filter(|r| r.wrong > 0).collect();
        if bad.is_empty() {
            return None;
        }
        let total: u64 = bad.iter().map(|r| r.wrong).sum();
        let wrongs = bad
            .iter()
            .filter_map(|r| r.first_wrong.as_ref().map(|w| (*r, w)));
        let blamed = wrongs
            .clone()
            .find(|(_, (_, w))| w.sender.is_some())
            .or(wrongs.clone().next());
        let (detail, culprit) = match blamed {
            Some((row, (receiver, w))) => {
                let from = w
                    .sender
                    .map(|s| format!(", sent by rank {s}"))
                    .unwrap_or_default();
                let detail = format!(
                    "; e.g. {} {} B: element {} received by rank {receiver} is {} instead of {}{from}",
                    row.pattern, row.size_bytes, w.index, w.got, w.expected
                );
                (detail, w.sender.unwrap_or(*receiver))
            }
            None => (String::new(), self.who.rank.unwrap_or(0)),
        };
        let sizes: Vec<String> = bad
            .iter()
            .map(|r| format!("{} {} B", r.pattern, r.size_bytes))
            .collect();
        let host = self
            .results
            .as_ref()
            .and_then(|r| {
                r.doc
                    .fingerprint
                    .ranks
                    .iter()
                    .find(|i| i.rank == culprit)
                    .map(|i| i.host.clone())
            })
            .unwrap_or_else(|| self.who.host.clone());
        let who = Who {
            rank: Some(culprit),
            host,
        };
        Some(
            Failure::new(
                Stage::Verify,
                &who,
                format!("{total} wrong elements in {}{detail}", sizes.join(", ")),
            )
            .cause("data was corrupted between ranks: a faulty link (NVLink/PCIe/network), GPU memory, or a library bug")
            .hint("rerun the failing pattern alone; check ECC and link errors (nvidia-smi -q -d ECC, nvidia-smi nvlink -e, dmesg)"),
        )
    }

    /// `run --expect FILE`, on rank 0 (the only rank with rows): every row against the
    /// file's floors (see `report::expect`). A shortfall fails the run with its own exit code,
    /// naming the hosts; `None` when there is no file or every floor is met.
    fn below_expected(&mut self, rows: &[SizeResult], nranks: u32) -> Option<u8> {
        let path = self.args.expect.as_ref()?;
        if self.who.rank != Some(0) {
            return None;
        }
        // Checked by `validate` before the run; a file changed since is a usage error.
        let exp = match expect::load(path) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("nccl-smoke: --expect: {e}");
                return Some(exit::USAGE);
            }
        };
        for f in expect::unchecked(&exp, rows, nranks) {
            println!("# expect: not checked (no such size or rank count in this run): {f}");
        }
        let short = expect::check(&exp, rows, nranks);
        if short.is_empty() {
            println!("# expect: every floor of {} met", path.display());
            return None;
        }
        let lines = expect::describe(&short, &self.rank_hosts);
        for l in &lines {
            println!("# below expected: {l}");
        }
        let line = format!("BELOW EXPECTED — {}", lines.join("; "));
        println!("{line}");
        if let Some(r) = self.results.as_mut() {
            r.doc.stages = self.stages.clone();
            r.doc.verdict = Verdict {
                status: Status::Fail,
                line,
                exit_code: exit::BELOW_EXPECTED,
                stage: None,
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
        self.save();
        Some(exit::BELOW_EXPECTED)
    }

    fn pass(&mut self, selected: &[&dyn Pattern], sizes: &[usize], nranks: u32) -> u8 {
        let hosts = self.hosts;
        let label = if self.simulated { " [SIMULATED]" } else { "" };
        let checked = if self.args.check == 1 {
            "verified"
        } else {
            "NOT verified (-c 0)"
        };
        let line = format!(
            "PASS{label} — {} patterns × {} sizes, {checked}, on {nranks} ranks, {hosts} host(s)",
            selected.len(),
            sizes.len(),
        );
        if self.who.rank == Some(0) {
            println!("{line}");
        }
        if let Some(r) = self.results.as_mut() {
            r.doc.stages = self.stages.clone();
            r.doc.verdict = Verdict {
                status: Status::Pass,
                line,
                exit_code: exit::PASS,
                stage: None,
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
        self.save();
        if self.write_failed.get() {
            eprintln!(
                "nccl-smoke: the run passed, but the results file could not be written (above)"
            );
            return exit::WRITE_FAILED;
        }
        exit::PASS
    }
}

/// This program, for the probes that run a second process of it.
fn own_exe() -> std::path::PathBuf {
    std::env::current_exe().unwrap_or_else(|_| "nccl-smoke".into())
}

/// Rank 0's supervisor's addresses, once broadcast: a host every rank should reach.
static STATUS_ADDRS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

/// Rank 0 broadcasts where its supervisor takes status reports; every worker hands that to its
/// own supervisor, which then reports to rank 0's.
fn share_status_address(boot: &dyn Bootstrap) {
    let mut buf = [0u8; 1024];
    if boot.rank() == 0
        && let Some(port) = std::env::var(super::status::PORT_ENV).ok()
    {
        let mut addrs: Vec<String> = os::ipv4_addresses()
            .iter()
            .map(|a| format!("{a}:{port}"))
            .collect();
        addrs.push(format!("{}:{port}", os::hostname()));
        let text = addrs.join(",");
        let n = text.len().min(buf.len());
        buf[..n].copy_from_slice(&text.as_bytes()[..n]);
    }
    boot.broadcast(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let addrs: Vec<String> = text
        .trim_end_matches('\0')
        .split(',')
        .filter(|a| !a.is_empty())
        .map(String::from)
        .collect();
    if !addrs.is_empty() {
        let _ = STATUS_ADDRS.set(addrs.clone());
        progress::send(&Event::StatusAddr { addrs });
    }
}

/// How much longer than the run deadline the waits of one size may take, from the time per
/// iteration of the size measured before it (`last`: bytes, µs), scaled up linearly in bytes
/// (an over-estimate for latency-bound sizes), times a margin of [`BUDGET_MARGIN`]: for one
/// wait (the larger of the warm-up and timed batches) and for the whole size (both batches),
/// which is what the supervisor allows between two beats. Zero before the first size: the
/// deadline alone covers it. Bounded to a day.
fn size_budget(
    last: Option<(usize, f64)>,
    bytes: usize,
    t: &Timing,
) -> (std::time::Duration, std::time::Duration) {
    let Some((prev_bytes, prev_us)) = last else {
        return Default::default();
    };
    let scale = (bytes as f64 / prev_bytes.max(1) as f64).max(1.0);
    let per_iter_s = (prev_us.max(0.0) * scale / 1e6).min(86_400.0);
    let secs = |iters: u32| {
        let s = (per_iter_s * iters as f64 * BUDGET_MARGIN).clamp(0.0, 86_400.0);
        std::time::Duration::try_from_secs_f64(s).unwrap_or_default()
    };
    (
        secs(t.warmup.max(t.iters)),
        secs(t.warmup.saturating_add(t.iters)),
    )
}

/// How much slower than the size before it (scaled) a size may be before its deadline counts.
const BUDGET_MARGIN: f64 = 3.0;

/// Largest send and receive buffers any selected pattern needs over the sweep (and connect).
fn buffer_sizes(
    selected: &[&dyn Pattern],
    sizes: &[usize],
    t: &Timing,
    nranks: u32,
) -> (usize, usize) {
    let elem = t.dtype.size();
    let mut send = bench::CONNECT_MIN_PER_PEER * nranks as usize;
    let mut recv = send;
    for p in selected {
        for &s in sizes {
            let l = p.layout(s, elem, nranks);
            send = send.max(l.count * elem);
            recv = recv.max(l.recv_count * elem);
        }
    }
    (send, recv)
}

/// Gathers one serialisable value per rank to rank 0.
fn gather_json<T: serde::Serialize + serde::de::DeserializeOwned>(
    boot: &dyn Bootstrap,
    mine: &T,
) -> Option<Vec<T>> {
    let bytes = serde_json::to_vec(mine).unwrap_or_default();
    let all = boot.gather(&bytes)?;
    Some(
        all.iter()
            .filter_map(|b| serde_json::from_slice(b).ok())
            .collect(),
    )
}

/// Two ranks of one host on one GPU is a classic misconfiguration; NCCL before 2.30 refuses it.
fn warn_shared_gpus(fp: &Fingerprint) {
    for (i, a) in fp.ranks.iter().enumerate() {
        if let Some(b) = fp.ranks[..i]
            .iter()
            .find(|b| b.host == a.host && b.device.uuid == a.device.uuid)
        {
            println!(
                "# WARNING: ranks {} and {} on {} share GPU {} ({}): bind one GPU per local rank \
                 (CUDA_VISIBLE_DEVICES or --device)",
                b.rank, a.rank, a.host, a.device.ordinal, a.device.uuid
            );
        }
    }
}

/// `nccl-smoke launch`'s TCP star when its variables are set, else MPI (or, built without
/// MPI, a world of one).
fn init_bootstrap(deadline: std::time::Duration) -> Result<Box<dyn Bootstrap>, String> {
    if bootstrap::tcp::Tcp::requested() {
        return Ok(Box::new(bootstrap::tcp::Tcp::init(deadline)?));
    }
    mpi_or_single()
}

#[cfg(feature = "mpi")]
fn mpi_or_single() -> Result<Box<dyn Bootstrap>, String> {
    match bootstrap::mpi::Mpi::init() {
        Some(m) => Ok(Box::new(m)),
        None => Err("MPI_Init failed or MPI was already initialised".into()),
    }
}

#[cfg(not(feature = "mpi"))]
fn mpi_or_single() -> Result<Box<dyn Bootstrap>, String> {
    Ok(Box::new(bootstrap::single::Single))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_while_a_peer_closed_its_connections_is_a_consequence() {
        let who = Who {
            rank: Some(3),
            host: "h".into(),
        };
        let timeout = Failure::new(
            Stage::Connect,
            &who,
            "first all_reduce (connect) did not complete within 5 s (deadline); the communicator was aborted",
        );
        assert!(!consequential(&timeout));
        let mut after_peer = timeout.clone();
        after_peer.evidence.push(
            "h:1:2 [3] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer h<4>".into(),
        );
        assert!(consequential(&after_peer));
        let remote = Failure::new(
            Stage::Run,
            &who,
            "ncclGroupEnd returned ncclRemoteError (6)",
        );
        assert!(consequential(&remote));
    }
}
