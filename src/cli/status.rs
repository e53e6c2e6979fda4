//! The job's status line, independent of NCCL and of MPI collectives: every rank's supervisor
//! reports its worker's stages, heartbeats and end to rank 0's supervisor over TCP. Rank 0 can
//! then say, at any moment, which ranks are in which stage, which never reported, which died,
//! and keeps every rank's failure in its results file.
//!
//! Rank 0's worker learns the address at launch (from its supervisor's environment) and
//! broadcasts it with the first MPI collective; before that, each supervisor names only its own
//! rank (and says whether it reached the first collective).

use crate::error::Failure;
use crate::progress::Event;
use crate::report::results::RankRecord;
use crate::stage::{Stage, StageRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How a supervisor's failure begins when the launcher stopped its rank.
pub const STOPPED: &str = "stopped by the launcher";

/// Whether `f` says only that the launcher stopped the rank (because another rank failed, or
/// the job was cancelled): no failure of that rank's own.
pub fn stopped(f: &Failure) -> bool {
    f.error.starts_with(STOPPED)
}

/// A rank's state in the results file's table, from how it ended: `finished`, `stopped` or
/// `failed`.
pub fn end_state(code: u8, failure: Option<&Failure>) -> &'static str {
    match (code, failure) {
        (0, _) => "finished",
        (_, Some(f)) if stopped(f) => "stopped",
        _ => "failed",
    }
}

/// The port of this rank's supervisor's status listener, for its worker.
pub const PORT_ENV: &str = "NCCL_SMOKE_STATUS_PORT";

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
}

/// Rank 0's view of the job.
#[derive(Debug, Default)]
pub struct JobView {
    pub nranks: u32,
    pub ranks: BTreeMap<u32, RankView>,
    /// Failures reported by other ranks, in arrival order.
    pub failures: Vec<Failure>,
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
            Event::Beat | Event::Results { .. } | Event::StatusAddr { .. } => {}
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
                    state: "silent".into(),
                    exit_code: None,
                    stage: None,
                    step: None,
                    stages: Vec::new(),
                });
                continue;
            };
            let (state, code) = match &v.ended {
                Some((c, f)) => (end_state(*c, f.as_ref()), Some(*c)),
                None if v.lost => ("lost", None),
                None => ("running", None),
            };
            out.push(RankRecord {
                rank,
                host: v.host.clone(),
                state: state.into(),
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

/// Rank 0's side: accepts reports into `view` until the process ends.
pub fn serve(listener: TcpListener, view: Arc<Mutex<JobView>>) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let view = view.clone();
            std::thread::spawn(move || {
                let mut who = None;
                for line in BufReader::new(conn).lines() {
                    let Ok(line) = line else { break };
                    let Ok(r) = serde_json::from_str::<Report>(&line) else {
                        continue;
                    };
                    who = Some(r.rank);
                    if let Ok(mut v) = view.lock() {
                        v.apply(r);
                    }
                }
                if let (Some(rank), Ok(mut v)) = (who, view.lock())
                    && let Some(rv) = v.ranks.get_mut(&rank)
                    && rv.ended.is_none()
                {
                    rv.lost = true;
                }
            });
        }
    });
}

/// Another rank's side: the connection to rank 0's supervisor.
pub struct Uplink {
    stream: TcpStream,
    rank: u32,
    host: String,
}

impl Uplink {
    /// Tries each address for up to two seconds in all.
    pub fn connect(addrs: &[String], rank: u32, host: &str) -> Option<Uplink> {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            for a in addrs {
                let Ok(mut it) = a.to_socket_addrs() else {
                    continue;
                };
                if let Some(sa) = it.next()
                    && let Ok(stream) = TcpStream::connect_timeout(&sa, Duration::from_millis(500))
                {
                    let _ = stream.set_nodelay(true);
                    return Some(Uplink {
                        stream,
                        rank,
                        host: host.to_string(),
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
            state: "failed".into(),
            exit_code: Some(16),
            stage: Some(Stage::Init),
            step: None,
            stages: Vec::new(),
        };
        let table: Vec<(u32, String, Option<Stage>)> = v
            .records(me)
            .into_iter()
            .map(|r| (r.rank, r.state, r.stage))
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
