//! Rank 0's isolate coordinator: takes every rank's connection, runs the rounds (each group's
//! unique id from its leader, barriers, outcomes, a deadline per round), re-pairs suspects
//! with hosts that passed, and judges each host.
//!
//! It runs in a thread of rank 0's worker, beside rank 0's own part in the rounds, and touches
//! no library: a group's failure is what its ranks say (or, for a rank that went silent, what
//! the silence says), never a wait of the coordinator's own.

use super::rounds::{self, Pairs, Round};
use super::source::{self, Choice, Groups};
use super::wire::{Down, Sender, Up, read_into};
use crate::bench::{self, RankSample, Timing};
use crate::error::{Failure, Who};
use crate::patterns::Pattern;
use crate::report::isolate::{self, GroupResult, IsolateReport, Outcome, Phase};
use crate::report::verdict::job_verdict;
use crate::run::status::{ALIVE_EVERY, liveness};
use crate::stage::Stage;
use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod messages;
use messages::{gone_failure, handle, mark_gone, outcome_of};

/// What the coordinator needs to know.
pub struct Setup {
    pub nranks: u32,
    pub pairs: Pairs,
    /// Each round's deadline for one step of a group's work (init, connect, a measurement,
    /// finalize); a round ends at the latest after [`ROUND_STEPS`] of them.
    pub round_limit: Duration,
    /// How long the ranks have to connect.
    pub hello_limit: Duration,
    pub patterns: Vec<&'static dyn Pattern>,
    pub bytes: usize,
    pub timing: Timing,
    pub groups: Groups,
    /// The fraction below the other hosts' median that is slow.
    pub slow_fraction: f64,
    /// `--expect`: floors a group's figures are also judged against.
    pub floors: Option<crate::report::expect::Expectations>,
}

/// Steps of a round, each bounded by the round's limit: id, init, connect, one measurement
/// per pattern (counted as 4), finalize, and one more for the outcomes to arrive.
pub const ROUND_STEPS: u32 = 9;

/// At most this many confirmation rounds (each re-pairs every open suspect once).
pub const MAX_CONFIRM_ROUNDS: usize = 4;

type Event = (u32, Option<Up>);

struct Conn {
    host: String,
    tx: Sender,
    last: Instant,
    /// Why the rank is gone (line closed, or silent), once it is.
    gone: Option<String>,
    /// The stage it last said it entered.
    stage: Stage,
    /// Its library has ncclCommSplit (and `--groups` allows it).
    split: bool,
}

struct State {
    conns: BTreeMap<u32, Conn>,
    rx: mpsc::Receiver<Event>,
    setup: Setup,
    groups: Vec<GroupResult>,
    round: u32,
    source: Choice,
}

/// Runs the whole isolate over `listener`; returns the hosts (in order of their lowest rank,
/// with their ranks) and the report.
pub fn run(listener: TcpListener, setup: Setup) -> IsolateReport {
    let (tx, rx) = mpsc::channel::<Event>();
    let mut st = State {
        conns: BTreeMap::new(),
        rx,
        setup,
        groups: Vec::new(),
        round: 0,
        source: Choice::default(),
    };
    accept(&listener, &mut st, tx);
    // Every rank hears the coordinator's heartbeat, whatever the coordinator is waiting on.
    let beats: Vec<Sender> = st.conns.values().map(|c| c.tx.clone()).collect();
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(ALIVE_EVERY);
            for b in &beats {
                b.send(&Down::Alive);
            }
        }
    });
    let hosts = hosts_of(&st);
    let names: Vec<String> = hosts.iter().map(|(h, _)| h.clone()).collect();
    let absent: Vec<u32> = (0..st.setup.nranks)
        .filter(|r| !st.conns.contains_key(r))
        .collect();

    let lacking: Vec<u32> = st
        .conns
        .iter()
        .filter(|(_, c)| !c.split)
        .map(|(r, _)| *r)
        .collect();
    let tried = Choice::start(st.setup.groups, &lacking).and_then(|()| {
        if absent.is_empty() {
            parent(&mut st)
        } else {
            Err(format!(
                "rank(s) {} never reached the coordinator",
                source::list(&absent)
            ))
        }
    });
    match tried {
        Ok(()) => st.source.split = true,
        Err(why) => st.source.fresh(why),
    }
    for c in st.conns.values() {
        c.tx.send(&Down::Source {
            split: st.source.split,
            why: st.source.record.fresh_because.clone(),
        });
    }

    play(&mut st, &hosts, Phase::Alone, rounds::alone(hosts.len()));
    for r in rounds::pairs(hosts.len(), st.setup.pairs) {
        play(&mut st, &hosts, Phase::Pairs, r);
    }
    for _ in 0..MAX_CONFIRM_ROUNDS {
        let so_far = isolate::judge(
            &hosts,
            &st.groups,
            st.setup.slow_fraction,
            st.setup.floors.as_ref(),
        );
        let r = rounds::confirm(&so_far, &names, &st.groups);
        if r.is_empty() {
            break;
        }
        play(&mut st, &hosts, Phase::Confirm, r);
    }
    let mut report = isolate::judge(
        &hosts,
        &st.groups,
        st.setup.slow_fraction,
        st.setup.floors.as_ref(),
    );
    report.source = st.source.record.clone();
    if !absent.is_empty() {
        let list: Vec<String> = absent.iter().map(u32::to_string).collect();
        report.line = format!(
            "{}; ranks {} never reached the coordinator (not judged)",
            report.line,
            list.join(", ")
        );
        if report.exit_code == crate::stage::exit::PASS {
            report.exit_code = Stage::Launch.exit_code();
        }
    }
    for c in st.conns.values() {
        c.tx.send(&Down::End {
            code: report.exit_code,
        });
    }
    report
}

/// Takes connections until every rank said hello or the limit passed.
fn accept(listener: &TcpListener, st: &mut State, tx: mpsc::Sender<Event>) {
    let _ = listener.set_nonblocking(true);
    let start = Instant::now();
    let (htx, hrx) = mpsc::channel::<(std::net::TcpStream, Up)>();
    while (st.conns.len() as u32) < st.setup.nranks && start.elapsed() < st.setup.hello_limit {
        match listener.accept() {
            Ok((s, _)) => {
                let _ = s.set_nonblocking(false);
                let htx = htx.clone();
                // The hello, read off the accepting thread: a silent client must not stall it.
                std::thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let mut line = String::new();
                    let mut r = std::io::BufReader::new(&s);
                    if std::io::BufRead::read_line(&mut r, &mut line).is_ok()
                        && let Ok(up) = serde_json::from_str::<Up>(&line)
                    {
                        let _ = s.set_read_timeout(None);
                        let _ = htx.send((s, up));
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => {}
        }
        while let Ok((s, up)) = hrx.try_recv() {
            let Up::Hello { rank, host, split } = up else {
                continue;
            };
            let Ok(sender) = Sender::new(&s) else {
                continue;
            };
            if rank >= st.setup.nranks || st.conns.contains_key(&rank) {
                continue;
            }
            read_into(s, rank, tx.clone());
            st.conns.insert(
                rank,
                Conn {
                    split,
                    host,
                    tx: sender,
                    last: Instant::now(),
                    gone: None,
                    stage: Stage::Launch,
                },
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Hosts in the order of their lowest rank, each with its ranks.
fn hosts_of(st: &State) -> Vec<(String, Vec<u32>)> {
    let mut out: Vec<(String, Vec<u32>)> = Vec::new();
    for (rank, c) in &st.conns {
        match out.iter_mut().find(|(h, _)| *h == c.host) {
            Some((_, ranks)) => ranks.push(*rank),
            None => out.push((c.host.clone(), vec![*rank])),
        }
    }
    out
}

/// One group while its round runs.
struct Live {
    ranks: Vec<u32>,
    hosts: Vec<String>,
    id_sent: bool,
    barrier: BTreeSet<u32>,
    samples: BTreeMap<u32, Vec<RankSample>>,
    failures: Vec<Failure>,
    /// Ranks that reported (or were given up on).
    done: BTreeSet<u32>,
}

impl Live {
    fn finished(&self) -> bool {
        self.ranks.iter().all(|r| self.done.contains(r))
    }
}

/// Runs a round. A split round in which a group failed at init is run again with fresh ids
/// and its groups are set aside (kept in the record, judged by no one): the split is collective
/// over every rank, so one bad member can fail or hang every group's split, not only its own.
fn play(st: &mut State, hosts: &[(String, Vec<u32>)], phase: Phase, round: Round) {
    let before = st.groups.len();
    run_round(st, hosts, phase, round.clone());
    let n = st.round;
    if st.source.run_again(n, &st.groups[before..]) {
        let aside: Vec<GroupResult> = st.groups.drain(before..).collect();
        st.source.record.set_aside.extend(aside);
        st.source.fresh(format!(
            "round {n}'s split failed or hung in a group; the round ran again as round {} with \
             fresh unique ids",
            n + 1
        ));
        run_round(st, hosts, phase, round);
    } else {
        st.source.after_round(n, &st.groups);
    }
}

fn run_round(st: &mut State, hosts: &[(String, Vec<u32>)], phase: Phase, round: Round) {
    st.round += 1;
    let n = st.round;
    let limit = st.setup.round_limit;
    let mut live: Vec<Live> = round
        .iter()
        .map(|g| Live {
            ranks: g.iter().flat_map(|h| hosts[*h].1.clone()).collect(),
            hosts: g.iter().map(|h| hosts[*h].0.clone()).collect(),
            id_sent: false,
            barrier: BTreeSet::new(),
            samples: BTreeMap::new(),
            failures: Vec::new(),
            done: BTreeSet::new(),
        })
        .collect();
    // A group with a rank already gone fails without running: its host is the evidence.
    for g in &mut live {
        for r in g.ranks.clone() {
            if let Some(why) = st.conns.get(&r).and_then(|c| c.gone.clone()) {
                g.failures.push(gone_failure(st, r, &why));
            }
        }
        if !g.failures.is_empty() {
            g.done.extend(g.ranks.iter().copied());
        }
    }
    let gone: Vec<u32> = st
        .conns
        .iter()
        .filter(|(_, c)| c.gone.is_some())
        .map(|(r, _)| *r)
        .collect();
    let split = st.source.for_round(n, &gone);
    for (rank, c) in &st.conns {
        let (color, group) = live
            .iter()
            .enumerate()
            .find(|(_, g)| g.ranks.contains(rank) && !g.finished())
            .map(|(i, g)| (i as i32, g.ranks.clone()))
            .unwrap_or_default();
        c.tx.send(&Down::Round {
            round: n,
            group,
            split,
            color,
        });
    }
    let start = Instant::now();
    let end = limit * ROUND_STEPS;
    while live.iter().any(|g| !g.finished()) {
        if let Ok((rank, msg)) = st.rx.recv_timeout(Duration::from_millis(20)) {
            handle(st, &mut live, n, rank, msg);
        }
        // Silence: a rank that stopped beating is gone (its host cut off, or it was stopped).
        let silent: Vec<u32> = st
            .conns
            .iter()
            .filter(|(_, c)| c.gone.is_none() && c.last.elapsed() > liveness(limit))
            .map(|(r, _)| *r)
            .collect();
        for r in silent {
            let quiet = st.conns[&r].last.elapsed().as_secs_f64();
            mark_gone(
                st,
                &mut live,
                r,
                format!(
                    "stopped answering the isolate coordinator: nothing for {quiet:.1} s \
                     (heartbeats every {} ms)",
                    ALIVE_EVERY.as_millis()
                ),
            );
        }
        if start.elapsed() > end {
            for g in &mut live {
                for r in g.ranks.clone() {
                    if !g.done.contains(&r) {
                        let c = &st.conns[&r];
                        g.failures.push(Failure::new(
                            c.stage,
                            &Who {
                                rank: Some(r),
                                host: c.host.clone(),
                            },
                            format!(
                                "no outcome of round {n} within {:.0} s ({ROUND_STEPS} × the \
                                 round's limit), though still answering",
                                end.as_secs_f64()
                            ),
                        ));
                        g.done.insert(r);
                    }
                }
            }
        }
    }
    for g in live {
        let outcome = outcome_of(st, &g);
        st.groups.push(GroupResult {
            round: n,
            phase,
            hosts: g.hosts,
            ranks: g.ranks,
            outcome,
        });
    }
}

/// The job-wide communicator, before round 1: rank 0's unique id to every rank, then each
/// rank's word on its init. `Err` says why the rounds use fresh ids instead (its failure is
/// no host's evidence: the rounds judge the hosts).
fn parent(st: &mut State) -> Result<(), String> {
    for c in st.conns.values() {
        c.tx.send(&Down::Parent);
    }
    // Rank 0's unique id, then init, each within the round's limit, and a margin for the words.
    let limit = st.setup.round_limit * 3;
    let start = Instant::now();
    let host = |st: &State, r: u32| st.conns.get(&r).map(|c| c.host.clone()).unwrap_or_default();
    let mut up = BTreeSet::new();
    while (up.len() as u32) < st.setup.nranks {
        if start.elapsed() > limit {
            let missing: Vec<u32> = st
                .conns
                .keys()
                .filter(|r| !up.contains(*r))
                .copied()
                .collect();
            return Err(format!(
                "no word of the job-wide communicator from rank(s) {} within {:.0} s",
                source::list(&missing),
                limit.as_secs_f64()
            ));
        }
        if let Some((r, c)) = st
            .conns
            .iter()
            .find(|(_, c)| c.last.elapsed() > liveness(st.setup.round_limit))
        {
            return Err(format!(
                "rank {r} (host {}) went silent during the job-wide communicator's init",
                c.host
            ));
        }
        let Ok((rank, msg)) = st.rx.recv_timeout(Duration::from_millis(20)) else {
            continue;
        };
        if let Some(c) = st.conns.get_mut(&rank) {
            c.last = Instant::now();
        }
        match msg {
            None => {
                return Err(format!(
                    "rank {rank} (host {}) closed its line during the job-wide communicator's init",
                    host(st, rank)
                ));
            }
            Some(Up::Id {
                round: 0,
                id,
                failure,
            }) => {
                if failure.is_some() || id.is_none() {
                    return Err(format!(
                        "rank {rank} (host {}) could not make the job-wide communicator's unique id",
                        host(st, rank)
                    ));
                }
                for c in st.conns.values() {
                    c.tx.send(&Down::Go {
                        round: 0,
                        id: id.clone(),
                        why: None,
                    });
                }
            }
            Some(Up::ParentUp { failure: Some(f) }) => {
                return Err(format!(
                    "the job-wide communicator's init failed at rank {rank} (host {}): {}",
                    host(st, rank),
                    f.error
                ));
            }
            Some(Up::ParentUp { failure: None }) => {
                up.insert(rank);
            }
            Some(Up::Stage { stage, .. }) => {
                if let Some(c) = st.conns.get_mut(&rank) {
                    c.stage = stage;
                }
            }
            Some(_) => {}
        }
    }
    Ok(())
}
