//! The job's status line, independent of NCCL and of MPI collectives: every rank's supervisor
//! reports its worker's stages, heartbeats and end to rank 0's supervisor over TCP. Rank 0 can
//! then say, at any moment, which ranks are in which stage, which never reported, which died,
//! and keeps every rank's failure in its results file.
//!
//! Rank 0's worker learns the address at launch (from its supervisor's environment) and
//! broadcasts it with the first MPI collective; before that, each supervisor names only its own
//! rank (and says whether it reached the first collective).

use crate::error::{Failure, Who};
use crate::progress::Event;
use crate::report::results::{RankRecord, RankState};
use crate::stage::{Stage, StageRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A gap this long between two turns of a supervisor's watch loop (which turns every 50 ms)
/// means the supervisor itself was stopped: the others' silence meanwhile is not theirs.
pub const SELF_STOPPED: Duration = Duration::from_millis(1000);

/// How often a supervisor says it is alive over the status line (both ways).
pub const ALIVE_EVERY: Duration = Duration::from_millis(100);
/// A write on the status line that takes longer than this is given up: a stopped peer
/// supervisor must not stop this one.
const WRITE_LIMIT: Duration = Duration::from_millis(200);

/// One line from a rank's supervisor to rank 0's.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    pub rank: u32,
    pub host: String,
    pub event: Event,
}

/// What rank 0 knows of one rank.
#[derive(Debug, Clone)]
pub struct RankView {
    pub host: String,
    pub stage: Option<Stage>,
    pub step: Option<String>,
    pub last_heard: Instant,
    /// Exit code and failure, once the rank ended.
    pub ended: Option<(u8, Option<Failure>)>,
    /// The connection dropped without an end report: the rank (or its host) vanished.
    pub lost: bool,
    /// Its stages, timed by its supervisor, once it ended.
    pub stages: Vec<StageRecord>,
    /// Rank 0 named it for not answering (its supervisor is stopped, or its host is cut off).
    pub unresponsive: bool,
}

/// Rank 0's view of the job.
#[derive(Debug, Default)]
pub struct JobView {
    pub nranks: u32,
    pub ranks: BTreeMap<u32, RankView>,
    /// Failures reported by other ranks, in arrival order.
    pub failures: Vec<Failure>,
    /// Rank 0's side of each rank's connection, to say goodbye on.
    pub conns: Vec<TcpStream>,
    /// Rank 0 has ended: the other ranks are told so, and no longer wait for it.
    pub bye: bool,
}

impl JobView {
    fn apply(&mut self, r: Report) {
        let v = self.ranks.entry(r.rank).or_insert_with(|| RankView {
            host: r.host.clone(),
            stage: None,
            step: None,
            last_heard: Instant::now(),
            ended: None,
            lost: false,
            stages: Vec::new(),
            unresponsive: false,
        });
        v.last_heard = Instant::now();
        match r.event {
            Event::Stage { stage, .. } => {
                v.stage = Some(stage);
                v.step = None;
            }
            Event::Step { what, .. } => v.step = Some(what),
            Event::Failed { failure } => self.failures.push(failure),
            Event::Ended {
                code,
                failure,
                stages,
            } => {
                if let Some(f) = &failure
                    && !self.failures.contains(f)
                {
                    self.failures.push(f.clone());
                }
                v.ended = Some((code, failure));
                v.stages = stages;
            }
            Event::Beat
            | Event::Alive
            | Event::Budget { .. }
            | Event::Results { .. }
            | Event::StatusAddr { .. } => {}
        }
    }

    /// A rank's connection dropped without an end report: its supervisor was killed, or its
    /// host went down. That is the rank's own failure, unless the job had already failed (then
    /// the launcher is tearing it down).
    pub fn lose(&mut self, rank: u32) {
        let known_failure = !self.failures.is_empty();
        let Some(v) = self.ranks.get_mut(&rank) else {
            return;
        };
        if v.ended.is_some() || v.lost {
            return;
        }
        v.lost = true;
        if known_failure || self.bye {
            return;
        }
        let stage = v.stage.unwrap_or(Stage::Launch);
        let who = Who {
            rank: Some(rank),
            host: v.host.clone(),
        };
        self.failures.push(
            Failure::new(
                stage,
                &who,
                format!(
                    "its supervisor is gone: its status connection closed without an end report \
                     during the {stage} stage"
                ),
            )
            .cause(
                "the rank's supervisor was killed (SIGKILL, the OOM killer), or its host went down",
            )
            .hint(
                "check the host's kernel log (dmesg) and the scheduler's events for that process",
            ),
        );
    }

    /// Rank 0: names the ranks whose supervisors have said nothing (not even that they are
    /// alive) for longer than their stage's deadline (`limit`), once each. Returns whether any
    /// was named now.
    pub fn name_unresponsive(&mut self, limit: impl Fn(Stage) -> Duration) -> bool {
        let mut named = Vec::new();
        for (rank, v) in self.ranks.iter_mut() {
            let stage = v.stage.unwrap_or(Stage::Launch);
            if v.ended.is_some() || v.lost || v.unresponsive {
                continue;
            }
            let quiet = v.last_heard.elapsed();
            if quiet <= limit(stage) {
                continue;
            }
            v.unresponsive = true;
            let who = Who {
                rank: Some(*rank),
                host: v.host.clone(),
            };
            named.push(
                Failure::new(
                    stage,
                    &who,
                    format!(
                        "its supervisor stopped answering: no status report for {:.1} s during \
                         the {stage} stage (deadline {:.0} s)",
                        quiet.as_secs_f64(),
                        limit(stage).as_secs_f64()
                    ),
                )
                .cause("the rank's supervisor process is stopped (SIGSTOP, a debugger), or its host is \
                        overloaded or cut off from rank 0's")
                .hint("look at that process's state on its host (ps -o stat,pid,cmd)"),
            );
        }
        let any = !named.is_empty();
        self.failures.extend(named);
        any
    }

    /// Rank 0's supervisor was itself stopped for a while (see [`SELF_STOPPED`]): every rank's
    /// silence starts over now.
    pub fn forgive_gap(&mut self) {
        let now = Instant::now();
        for v in self.ranks.values_mut() {
            v.last_heard = now;
        }
    }

    /// Whether a rank that never ended is named for vanishing or not answering: the launcher
    /// cannot tell, so rank 0 ends the job.
    pub fn has_gone_rank(&self) -> bool {
        self.ranks
            .values()
            .any(|v| v.ended.is_none() && (v.unresponsive || (v.lost && !self.failures.is_empty())))
    }

    /// Whether every other rank has connected to the status line (before that, a rank's
    /// failure may not have reached rank 0).
    pub fn all_connected(&self) -> bool {
        (1..self.nranks).all(|r| self.ranks.contains_key(&r))
    }

    /// Rank 0 is ending: tells every rank so, so that none takes the closed line for rank 0's
    /// death.
    pub fn say_bye(&mut self) {
        self.bye = true;
        for c in &mut self.conns {
            let _ = c.write_all(b"bye\n");
        }
    }

    /// Whether every other rank has ended (or was lost).
    pub fn all_ended(&self) -> bool {
        (1..self.nranks).all(|r| {
            self.ranks
                .get(&r)
                .is_some_and(|v| v.ended.is_some() || v.lost)
        })
    }

    /// The per-rank table of the results file: `me` (rank 0), then every other rank, the ones
    /// never heard from included.
    pub fn records(&self, me: RankRecord) -> Vec<RankRecord> {
        let mut out = vec![me];
        for rank in 1..self.nranks.max(1) {
            let Some(v) = self.ranks.get(&rank) else {
                out.push(RankRecord {
                    rank,
                    host: String::new(),
                    state: RankState::Silent,
                    exit_code: None,
                    stage: None,
                    step: None,
                    stages: Vec::new(),
                });
                continue;
            };
            let (state, code) = match &v.ended {
                Some((c, f)) => (RankState::ended(*c, f.as_ref()), Some(*c)),
                None if v.lost => (RankState::Lost, None),
                None if v.unresponsive => (RankState::Unresponsive, None),
                None => (RankState::Running, None),
            };
            out.push(RankRecord {
                rank,
                host: v.host.clone(),
                state,
                exit_code: code,
                stage: v.stage,
                step: v.step.clone(),
                stages: v.stages.clone(),
            });
        }
        out
    }

    /// One line per rank other than rank 0, plus the ranks never heard from: what rank 0
    /// prints when the job fails or hangs.
    pub fn summary(&self, me: Option<(Stage, Option<&str>)>) -> Vec<String> {
        let mut out = Vec::new();
        if let Some((stage, step)) = me {
            out.push(format!(
                "# job: rank 0 in {stage}{}",
                step.map(|s| format!(" ({s})")).unwrap_or_default()
            ));
        }
        for (rank, v) in &self.ranks {
            let state = match (&v.ended, v.lost) {
                (Some((0, _)), _) => "finished".to_string(),
                (Some((code, Some(f))), _) => {
                    format!("ended with exit code {code} (FAIL at {}, above)", f.stage)
                }
                (Some((code, None)), _) => format!("ended with exit code {code}"),
                (None, true) => format!(
                    "lost contact during {} {:.0} s ago (process or host gone)",
                    v.stage.map(|s| s.name()).unwrap_or("launch"),
                    v.last_heard.elapsed().as_secs_f64()
                ),
                (None, false) if v.unresponsive => format!(
                    "stopped answering during {}, last heard {:.0} s ago",
                    v.stage.map(|s| s.name()).unwrap_or("launch"),
                    v.last_heard.elapsed().as_secs_f64()
                ),
                (None, false) => format!(
                    "in {}{}, last heard {:.0} s ago",
                    v.stage.map(|s| s.name()).unwrap_or("launch"),
                    v.step
                        .as_deref()
                        .map(|s| format!(" ({s})"))
                        .unwrap_or_default(),
                    v.last_heard.elapsed().as_secs_f64()
                ),
            };
            out.push(format!("# job: rank {rank} (host {}) {state}", v.host));
        }
        let missing: Vec<String> = (1..self.nranks)
            .filter(|r| !self.ranks.contains_key(r))
            .map(|r| r.to_string())
            .collect();
        if !missing.is_empty() {
            out.push(format!(
                "# job: ranks never heard from after launch: {}",
                missing.join(", ")
            ));
        }
        out
    }
}

/// Rank 0's side: accepts reports into `view` until the process ends, and tells each rank,
/// every [`ALIVE_EVERY`], that rank 0's supervisor is alive (`alive`), that its end report
/// arrived (`ack`), or, once, that rank 0 has ended (`bye`, from [`JobView::say_bye`]).
pub fn serve(listener: TcpListener, view: Arc<Mutex<JobView>>) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let _ = conn.set_write_timeout(Some(WRITE_LIMIT));
            let rank = Arc::new(Mutex::new(None::<u32>));
            if let (Ok(down), Ok(mut v)) = (conn.try_clone(), view.lock()) {
                if let Ok(bye) = down.try_clone() {
                    v.conns.push(bye);
                }
                drop(v);
                answer(down, view.clone(), rank.clone());
            }
            let view = view.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(conn).lines() {
                    let Ok(line) = line else { break };
                    let Ok(r) = serde_json::from_str::<Report>(&line) else {
                        continue;
                    };
                    if let Ok(mut who) = rank.lock() {
                        *who = Some(r.rank);
                    }
                    if let Ok(mut v) = view.lock() {
                        v.apply(r);
                    }
                }
                let who = rank.lock().ok().and_then(|r| *r);
                if let (Some(rank), Ok(mut v)) = (who, view.lock()) {
                    v.lose(rank);
                }
            });
        }
    });
}

/// Rank 0's words down one rank's connection (see [`serve`]).
fn answer(mut down: TcpStream, view: Arc<Mutex<JobView>>, rank: Arc<Mutex<Option<u32>>>) {
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(ALIVE_EVERY);
            let who = rank.lock().ok().and_then(|r| *r);
            let word: &[u8] = match view.lock() {
                Ok(v) if v.bye => return,
                Ok(v)
                    if who
                        .is_some_and(|r| v.ranks.get(&r).is_some_and(|rv| rv.ended.is_some())) =>
                {
                    b"ack\n"
                }
                Ok(_) => b"alive\n",
                Err(_) => return,
            };
            if let Err(e) = down.write_all(word)
                && e.kind() != std::io::ErrorKind::WouldBlock
                && e.kind() != std::io::ErrorKind::TimedOut
            {
                return;
            }
        }
    });
}

/// What a rank hears from rank 0's supervisor.
#[derive(Debug)]
pub struct Downlink {
    /// When rank 0 last said anything.
    pub last: Instant,
    /// Rank 0 has this rank's end report.
    pub acked: bool,
    /// Rank 0 said it has ended.
    pub bye: bool,
    /// The connection closed.
    pub closed: bool,
}

/// Another rank's side: the connection to rank 0's supervisor.
pub struct Uplink {
    stream: TcpStream,
    rank: u32,
    host: String,
    /// Rank 0's host, as it named itself.
    pub rank0_host: String,
    /// What rank 0's supervisor says back.
    pub down: Arc<Mutex<Downlink>>,
    last_alive: Instant,
    last_tick: Instant,
}

impl Uplink {
    /// Tries each address for up to two seconds in all.
    pub fn connect(addrs: &[String], rank: u32, host: &str) -> Option<Uplink> {
        let start = Instant::now();
        // Rank 0 lists its host name last (see `share_status_address`).
        let rank0_host = addrs
            .last()
            .and_then(|a| a.rsplit_once(':'))
            .map(|(h, _)| h.to_string())
            .unwrap_or_default();
        while start.elapsed() < Duration::from_secs(2) {
            for a in addrs {
                let Ok(mut it) = a.to_socket_addrs() else {
                    continue;
                };
                if let Some(sa) = it.next()
                    && let Ok(stream) = TcpStream::connect_timeout(&sa, Duration::from_millis(500))
                {
                    let _ = stream.set_nodelay(true);
                    let _ = stream.set_write_timeout(Some(WRITE_LIMIT));
                    let down = Arc::new(Mutex::new(Downlink {
                        last: Instant::now(),
                        acked: false,
                        bye: false,
                        closed: false,
                    }));
                    if let Ok(read) = stream.try_clone() {
                        listen(read, down.clone());
                    }
                    return Some(Uplink {
                        stream,
                        rank,
                        host: host.to_string(),
                        rank0_host,
                        down,
                        last_alive: Instant::now(),
                        last_tick: Instant::now(),
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Forwards one event; a lost rank 0 is not this rank's failure, so errors are dropped.
    pub fn send(&mut self, event: &Event) {
        let r = Report {
            rank: self.rank,
            host: self.host.clone(),
            event: event.clone(),
        };
        if let Ok(mut line) = serde_json::to_string(&r) {
            line.push('\n');
            let _ = self.stream.write_all(line.as_bytes());
        }
    }

    /// Says this supervisor is alive, at most every [`ALIVE_EVERY`]. Called from the watch
    /// loop; a long gap between calls means this supervisor itself was stopped, and then rank
    /// 0's silence meanwhile says nothing about rank 0.
    pub fn keep_alive(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_tick) > SELF_STOPPED
            && let Ok(mut d) = self.down.lock()
        {
            d.last = now;
        }
        self.last_tick = now;
        if self.last_alive.elapsed() >= ALIVE_EVERY {
            self.last_alive = Instant::now();
            self.send(&Event::Alive);
        }
    }

    /// Whether rank 0's supervisor has gone without a goodbye (`Some(true)`: the line closed;
    /// `Some(false)`: silent for longer than `limit`), or is there (`None`).
    pub fn rank0_gone(&self, limit: Duration) -> Option<bool> {
        let d = self.down.lock().ok()?;
        if d.bye || d.acked {
            None
        } else if d.closed {
            Some(true)
        } else if d.last.elapsed() > limit {
            Some(false)
        } else {
            None
        }
    }

    /// Waits up to `limit` for rank 0 to confirm this rank's end report. `Ok` when it did (or
    /// has ended itself), else whether the line closed (`true`) or stayed silent (`false`).
    pub fn await_ack(&self, limit: Duration) -> Result<(), bool> {
        let start = Instant::now();
        loop {
            match self.down.lock() {
                Ok(d) if d.acked || d.bye => return Ok(()),
                Ok(d) if d.closed => return Err(true),
                Ok(d) if d.last.elapsed() > limit || start.elapsed() > limit => {
                    return Err(false);
                }
                Ok(_) => {}
                Err(_) => return Ok(()),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Uplink {
    /// Closes the line for both directions (the listening thread holds a clone of it).
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Reads rank 0's words (see [`serve`]) into `down` until the line closes.
fn listen(read: TcpStream, down: Arc<Mutex<Downlink>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(read).lines() {
            let Ok(line) = line else { break };
            let Ok(mut d) = down.lock() else { return };
            d.last = Instant::now();
            match line.trim() {
                "ack" => d.acked = true,
                "bye" => d.bye = true,
                _ => {}
            }
        }
        if let Ok(mut d) = down.lock() {
            d.closed = true;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Who;

    fn report(rank: u32, event: Event) -> Report {
        Report {
            rank,
            host: format!("h{rank}"),
            event,
        }
    }

    #[test]
    fn the_summary_names_stages_ends_losses_and_silence() {
        let mut v = JobView {
            nranks: 5,
            ..Default::default()
        };
        v.apply(report(
            1,
            Event::Stage {
                stage: Stage::Init,
                rank: Some(1),
            },
        ));
        v.apply(report(
            2,
            Event::Stage {
                stage: Stage::Alloc,
                rank: Some(2),
            },
        ));
        let who = Who {
            rank: Some(3),
            host: "h3".into(),
        };
        let f = Failure::new(Stage::Device, &who, "boom");
        v.apply(report(
            3,
            Event::Ended {
                code: 13,
                failure: Some(f.clone()),
                stages: Vec::new(),
            },
        ));
        v.ranks.get_mut(&2).unwrap().lost = true;
        let me = RankRecord {
            rank: 0,
            host: "h0".into(),
            state: RankState::Failed,
            exit_code: Some(16),
            stage: Some(Stage::Init),
            step: None,
            stages: Vec::new(),
        };
        let table: Vec<(u32, String, Option<Stage>)> = v
            .records(me)
            .into_iter()
            .map(|r| (r.rank, r.state.to_string(), r.stage))
            .collect();
        assert_eq!(
            table,
            vec![
                (0, "failed".into(), Some(Stage::Init)),
                (1, "running".into(), Some(Stage::Init)),
                (2, "lost".into(), Some(Stage::Alloc)),
                (3, "failed".into(), None),
                (4, "silent".into(), None),
            ]
        );
        assert!(!v.all_ended());
        let s = v.summary(Some((Stage::Init, Some("waiting"))));
        assert_eq!(s[0], "# job: rank 0 in init (waiting)");
        assert!(s[1].starts_with("# job: rank 1 (host h1) in init"), "{s:?}");
        assert!(
            s[2].contains("rank 2 (host h2) lost contact during alloc"),
            "{s:?}"
        );
        assert!(
            s[3].contains("rank 3 (host h3) ended with exit code 13 (FAIL at device, above)"),
            "{s:?}"
        );
        assert_eq!(s[4], "# job: ranks never heard from after launch: 4");
        assert_eq!(v.failures, vec![f]);
    }

    #[test]
    fn a_vanished_or_silent_supervisor_is_named_once_and_a_teardown_is_not() {
        let mut v = JobView {
            nranks: 4,
            ..Default::default()
        };
        for rank in 1..4 {
            v.apply(report(
                rank,
                Event::Stage {
                    stage: Stage::Run,
                    rank: Some(rank),
                },
            ));
        }
        v.lose(2);
        assert_eq!(v.failures.len(), 1);
        assert_eq!(v.failures[0].rank, Some(2));
        assert!(v.failures[0].error.contains("its supervisor is gone"));
        assert!(v.has_gone_rank());
        v.lose(2);
        // The job has failed: a rank lost now is the launcher's teardown, not a culprit.
        v.lose(3);
        assert_eq!(v.failures.len(), 1);
        assert!(!v.name_unresponsive(|_| Duration::from_secs(3600)));
        assert!(v.name_unresponsive(|_| Duration::ZERO));
        assert_eq!(v.failures.len(), 2);
        assert_eq!(v.failures[1].rank, Some(1));
        assert!(v.failures[1].error.contains("stopped answering"));
        assert!(!v.name_unresponsive(|_| Duration::ZERO), "named twice");
        let states: Vec<String> = v
            .records(RankRecord {
                rank: 0,
                host: "h0".into(),
                state: RankState::Stopped,
                exit_code: None,
                stage: None,
                step: None,
                stages: vec![],
            })
            .into_iter()
            .map(|r| r.state.to_string())
            .collect();
        assert_eq!(states, ["stopped", "unresponsive", "lost", "lost"]);
    }

    #[test]
    fn reports_travel_over_tcp() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let view = Arc::new(Mutex::new(JobView {
            nranks: 2,
            ..Default::default()
        }));
        serve(listener, view.clone());
        let mut up = Uplink::connect(&[addr], 1, "h1").unwrap();
        up.send(&Event::Stage {
            stage: Stage::Run,
            rank: Some(1),
        });
        drop(up);
        let start = Instant::now();
        loop {
            let v = view.lock().unwrap();
            if let Some(r) = v.ranks.get(&1)
                && r.lost
            {
                assert_eq!(r.stage, Some(Stage::Run));
                break;
            }
            drop(v);
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "report never arrived"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
