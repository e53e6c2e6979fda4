//! `nccl-smoke isolate`: which host to drain. Over all ranks of one job, each host runs alone,
//! then hosts run in pairs (see [`rounds`]), then each suspect is re-paired with a host that
//! passed; rank 0 judges every host (`report::isolate`).
//!
//! Where each group's communicator comes from ([`source`], `--groups`): before round 1 every
//! rank joins one job-wide communicator (non-blocking, the round's deadline, its unique id from
//! rank 0 passed on by the coordinator, [`coord`]). While it is up on every rank, each round's
//! groups are `ncclCommSplit`s of it: one color per group, `NCCL_SPLIT_NOCOLOR` for the ranks
//! sitting out (the split is collective over the parent), key = the rank's place in its group.
//! One init of the whole job, then each group is a split of it: no unique id per group to
//! make and pass around (in the simulation, on 4 namespace hosts, neither source is measurably
//! faster). But the job-wide init spans the bad host, so it is what fails or hangs when there
//! is one, and a parent with a hung or dead member cannot split again; hence the hybrid: when
//! the library lacks `ncclCommSplit` (< 2.18.1), when the job-wide init fails or hangs on any
//! rank (every rank then aborts it, and that failure counts against no host), and after any
//! round in which a group failed or hung, the groups get fresh unique ids instead, made by
//! each group's leader and passed on by the coordinator. A failed pair never blocks the other
//! groups of its round on the fresh path; on the split path a split that fails or hangs costs
//! that round's deadline, and the round runs again with fresh ids (its split groups set
//! aside, since one bad member can fail every group's split).
//! Each step of a group's work has the round's deadline; a group that fails or hangs is
//! aborted (`ncclCommAbort`) and counted against its hosts, and the other groups go on.

pub mod coord;
mod group;
pub mod rounds;
pub mod source;
pub mod wire;

use super::worker::Run;
use crate::bench::{self, Buffers, RankSample, Timing};
use crate::bootstrap::Bootstrap;
use crate::comm::Communicator;
use crate::error::{self, Failure, Who};
use crate::events;
use crate::ffi::nccl::{self, Nccl};
use crate::patterns::Pattern;
use crate::report::isolate::{self as verdict, IsolateReport};
use crate::report::verdict::{Status, Verdict};
use crate::stage::Stage;
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use wire::{Down, Sender, Up};

pub use rounds::Pairs;
pub use source::Groups;

/// `isolate`'s own settings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Settings {
    pub pairs: Pairs,
    /// The deadline of each step of a group's work in a round.
    pub round_limit: Duration,
    /// Where the groups' communicators come from.
    pub groups: Groups,
    /// A host this fraction below the others' median bus bandwidth (and beyond their spread)
    /// is slow.
    pub slow_fraction: f64,
}

/// Where a rank's group communicator comes from in a round.
enum GroupFrom<'a, 'n> {
    /// Split off this rank's part of the job-wide communicator, with this color.
    Split(&'a mut Option<Communicator<'n>>, i32),
    /// A fresh unique id from the group's leader.
    Fresh,
}

/// One rank's line to the coordinator.
struct Line {
    tx: Sender,
    rx: mpsc::Receiver<((), Option<Down>)>,
    last: std::cell::Cell<Instant>,
}

impl Line {
    /// The next message other than a heartbeat, within `limit`; `Err` says why not (the
    /// coordinator went silent or closed the line, or the limit passed).
    fn next(&self, limit: Duration, beat: bool) -> Result<Down, String> {
        let start = Instant::now();
        let mut beaten = Instant::now();
        loop {
            if beat && beaten.elapsed() > Duration::from_secs(1) {
                events::beat();
                beaten = Instant::now();
            }
            match self.rx.recv_timeout(Duration::from_millis(50)) {
                Ok((_, Some(Down::Alive))) => self.last.set(Instant::now()),
                Ok((_, Some(m))) => {
                    self.last.set(Instant::now());
                    return Ok(m);
                }
                Ok((_, None)) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err("rank 0's isolate coordinator closed the line".into());
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let quiet = self.last.get().elapsed();
            if quiet > crate::run::status::liveness(Duration::MAX) {
                return Err(format!(
                    "rank 0's isolate coordinator stopped answering ({:.1} s without a heartbeat)",
                    quiet.as_secs_f64()
                ));
            }
            if start.elapsed() > limit {
                return Err(format!(
                    "no word from rank 0's isolate coordinator within {:.0} s",
                    limit.as_secs_f64()
                ));
            }
        }
    }
}

impl Run<'_> {
    /// The isolate rounds, after the device stage: every rank takes part in the groups rank
    /// 0's coordinator gives it; rank 0 prints and records the per-host verdict. Every rank
    /// exits with the verdict's code.
    pub(super) fn isolate(
        &mut self,
        boot: &dyn Bootstrap,
        nccl: &Nccl,
        selected: &[&'static dyn Pattern],
        s: Settings,
    ) -> Result<u8, Failure> {
        let (rank, nranks) = (boot.rank(), boot.size());
        let bytes = *self.plan.sizes.last().unwrap_or(&(1 << 20));
        let timing = Timing {
            deadline: s.round_limit,
            ..self.plan.timing(s.round_limit)
        };

        if s.groups == Groups::Split && !nccl.caps.split {
            return Err(Failure::new(
                Stage::Init,
                &self.who,
                format!(
                    "--groups split: this library (NCCL {}) has no ncclCommSplit (2.18.1 or later)",
                    nccl::version_string(nccl.version_code)
                ),
            )
            .hint(
                "use --groups auto (fresh unique ids where split is missing) or --groups fresh",
            ));
        }

        self.enter(Stage::Alloc);
        let (send_max, recv_max) = bench::sweep::buffer_sizes(selected, &[bytes], &timing, nranks);
        let mut bufs = Buffers::new(send_max, recv_max, timing.iters, timing.data_on, nranks)
            .map_err(|e| Failure::new(Stage::Alloc, &self.who, &e).hint("lower -e/--maxbytes"))?;

        // Rank 0's coordinator, and its address for every rank.
        self.enter(Stage::UniqueId);
        events::step("starting rank 0's isolate coordinator");
        let mut coordinator = None;
        let mut port = 0u16;
        if rank == 0 {
            let listener = crate::bootstrap::tcp::listen_wide(([0, 0, 0, 0], 0).into())
                .and_then(|l| l.local_addr().map(|a| (l, a.port())))
                .map_err(|e| {
                    Failure::new(
                        Stage::UniqueId,
                        &self.who,
                        format!("cannot listen for the isolate coordinator: {e}"),
                    )
                })?;
            port = listener.1;
            let setup = coord::Setup {
                nranks,
                pairs: s.pairs,
                round_limit: s.round_limit,
                hello_limit: self.plan.deadline(Stage::Launch),
                patterns: selected.to_vec(),
                bytes,
                timing,
                groups: s.groups,
                slow_fraction: s.slow_fraction,
                floors: self.plan.expect.as_ref().map(|(_, e)| e.clone()),
            };
            coordinator = Some(std::thread::spawn(move || coord::run(listener.0, setup)));
        }
        events::waiting("waiting for rank 0's isolate coordinator's address");
        let addrs = super::worker_line::share_address(boot, (rank == 0).then_some(port));
        let mut line = self.connect_coordinator(&addrs)?;
        line.tx.send(&Up::Hello {
            rank,
            host: self.who.host.clone(),
            split: s.groups != Groups::Fresh && nccl.caps.split,
        });
        // The heartbeat: every rank says it is alive, whatever it is waiting on.
        let beat = line.tx.clone();
        std::thread::spawn(move || {
            while beat.send(&Up::Beat) {
                std::thread::sleep(crate::run::status::ALIVE_EVERY);
            }
        });

        let lost = |why: String, who: &Who, stage: Stage| {
            Failure::new(stage, who, why)
                .cause("rank 0's host is down or cut off from this one, or rank 0 failed")
                .kind(error::Kind::PeerGone)
        };
        // This rank's part of the job-wide communicator, while the rounds split it.
        let mut parent: Option<Communicator> = None;
        let code = loop {
            events::waiting("waiting for the next isolate round from rank 0");
            let limit = self.plan.deadline(Stage::Launch) + s.round_limit * coord::ROUND_STEPS * 2;
            let msg = line
                .next(limit, true)
                .map_err(|e| lost(e, &self.who, self.stage))?;
            match msg {
                Down::Parent => {
                    parent = self.join_parent(&line, nccl, rank, nranks, s.round_limit);
                }
                Down::Source { split: false, .. } => parent = None,
                Down::Round {
                    round,
                    group,
                    split,
                    color,
                } => {
                    if !split {
                        parent = None;
                    }
                    let from = if split {
                        GroupFrom::Split(&mut parent, color)
                    } else {
                        GroupFrom::Fresh
                    };
                    if group.contains(&rank) {
                        let outcome = self.round(
                            &mut line, nccl, selected, &mut bufs, &timing, bytes, round, &group,
                            from,
                        );
                        let (samples, failure) = match outcome {
                            Ok(samples) => (samples, None),
                            Err(f) => (Vec::new(), Some(f)),
                        };
                        line.tx.send(&Up::Outcome {
                            round,
                            samples,
                            failure,
                        });
                    } else if let GroupFrom::Split(Some(p), _) = from {
                        // Sitting out still takes part in the split, which is collective.
                        events::waiting("in ncclCommSplit (NCCL_SPLIT_NOCOLOR) for this round");
                        if let Err(e) = p.split(nccl::SPLIT_NOCOLOR, rank as i32, s.round_limit) {
                            // The coordinator hears of it: no more splits.
                            line.tx.send(&Up::ParentUp {
                                failure: Some(Failure::new(Stage::Init, &self.who, e)),
                            });
                            parent = None;
                        }
                    }
                }
                Down::End { code } => break code,
                _ => {}
            }
        };
        drop(parent);
        if let Some(c) = coordinator {
            events::waiting("rank 0: judging the hosts");
            let report = c.join().map_err(|_| {
                Failure::new(
                    Stage::Finalize,
                    &self.who,
                    "the isolate coordinator panicked",
                )
            })?;
            self.say_isolate(&report);
            return Ok(report.exit_code);
        }
        Ok(code)
    }

    /// This rank's part of the job-wide communicator: rank 0 makes the unique id, the
    /// coordinator passes it on; the init is non-blocking, within the round's limit, and given
    /// up as soon as the coordinator says the rounds will not split (another rank failed).
    /// Tells the coordinator how it went.
    fn join_parent<'n>(
        &mut self,
        line: &Line,
        nccl: &'n Nccl,
        rank: u32,
        nranks: u32,
        limit: Duration,
    ) -> Option<Communicator<'n>> {
        let who = self.who.clone();
        let failed = |e: String| {
            line.tx.send(&Up::ParentUp {
                failure: Some(Failure::new(Stage::Init, &who, e)),
            });
            None
        };
        self.enter_round(line, 0, Stage::UniqueId);
        if rank == 0 {
            self.offer_id(line, nccl, 0);
        }
        events::waiting("waiting for the job-wide communicator's unique id");
        let id = match line.next(limit * 2, true) {
            Ok(Down::Go {
                round: 0,
                id: Some(id),
                ..
            }) if let Some(id) = unique_id(&id) => id,
            // The coordinator gave up on it (another rank failed): nothing to report.
            Ok(Down::Source { .. }) => return None,
            Ok(other) => return failed(format!("expected the job-wide unique id, got {other:?}")),
            Err(e) => return failed(e),
        };
        self.enter_round(line, 0, Stage::Init);
        events::waiting("in ncclCommInitRank for the job-wide communicator");
        // Another rank's failure ends the wait: the coordinator's Source says so.
        let given_up = std::cell::Cell::new(false);
        // Reads no further than the Source: the round that follows it stays on the line.
        let stop = || {
            while !given_up.get()
                && let Ok((_, m)) = line.rx.try_recv()
            {
                line.last.set(Instant::now());
                if matches!(m, Some(Down::Source { .. }) | None) {
                    given_up.set(true);
                }
            }
            given_up.get()
        };
        match Communicator::init_nonblocking_unless(nccl, &id, rank, nranks, limit, &stop) {
            Ok(c) => {
                line.tx.send(&Up::ParentUp { failure: None });
                Some(c)
            }
            Err(_) if given_up.get() => None,
            Err(e) => failed(e.to_string()),
        }
    }

    fn connect_coordinator(&self, addrs: &[crate::events::Address]) -> Result<Line, Failure> {
        let start = Instant::now();
        let limit = Duration::from_secs(10);
        while start.elapsed() < limit {
            for a in addrs {
                if let Some(sa) = a.resolve()
                    && let Ok(stream) = TcpStream::connect_timeout(&sa, Duration::from_millis(500))
                    && let Ok(tx) = Sender::new(&stream)
                {
                    let (ctx, rx) = mpsc::channel();
                    wire::read_into(stream, (), ctx);
                    return Ok(Line {
                        tx,
                        rx,
                        last: std::cell::Cell::new(Instant::now()),
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(Failure::new(
            Stage::UniqueId,
            &self.who,
            format!(
                "could not reach rank 0's isolate coordinator at {} within {:.0} s",
                addrs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" or "),
                limit.as_secs_f64()
            ),
        )
        .cause(
            "rank 0's host is not reachable from this one on that port (firewall, wrong interface)",
        )
        .kind(error::Kind::PeerGone))
    }

    /// Rank 0: the per-host table, the verdict line, and the results file.
    fn say_isolate(&mut self, report: &IsolateReport) {
        let console = self.console();
        let rounds = report.groups.iter().map(|g| g.round).max().unwrap_or(0);
        console.job(format!(
            "# isolate: {} host(s), {} round(s), {} group(s){}",
            report.hosts.len(),
            rounds,
            report.groups.len(),
            self.backing
                .label()
                .map(|l| format!(" — {l}"))
                .unwrap_or_default()
        ));
        console.job(format!("# groups from: {}", report.source.describe()));
        for g in &report.groups {
            let what = match &g.outcome {
                verdict::Outcome::Passed { rows } => rows
                    .iter()
                    .map(|r| format!("{} {:.2} GB/s", r.pattern, r.busbw_gbs))
                    .collect::<Vec<_>>()
                    .join(", "),
                verdict::Outcome::Failed { line, .. } => line.clone(),
            };
            console.job(format!(
                "#   round {} {} [{}]: {what}",
                g.round,
                g.phase.name(),
                g.hosts.join(" + ")
            ));
        }
        console.job_lines(verdict::table(report, self.backing.label().as_deref()));
        let (status, word) = match report.exit_code {
            crate::stage::exit::PASS => (Status::Pass, "PASS"),
            crate::stage::exit::NOT_JUDGED => (Status::NotJudged, "NOT JUDGED"),
            _ => (Status::Fail, "FAIL"),
        };
        let line = format!("{word} {}{}", self.backing.prefix(), report.line);
        console.job(format!("VERDICT: {line}"));
        if let Some(r) = self.results.as_mut() {
            r.isolate = Some(report.clone());
            r.verdict = Verdict {
                status,
                line,
                exit_code: report.exit_code,
                stage: None,
                consequences: Vec::new(),
                ranks: Vec::new(),
            };
        }
        self.leave(report.exit_code == crate::stage::exit::PASS);
        self.send_doc();
    }
}

/// A unique id as the coordinator passed it on, if it has NCCL's size.
fn unique_id(bytes: &[u8]) -> Option<nccl::UniqueId> {
    bytes.try_into().ok()
}
