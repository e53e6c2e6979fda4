//! The status line's unit tests.
use super::*;
use crate::error::Who;
use crate::events::Address;
use crate::report::results::{RankRecord, RankState};
use crate::run::rank0_line::Uplink;

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
    let s = v.summary(Some((Stage::Init, Some("waiting"), None)));
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

/// A rank whose failure has arrived but whose process has not ended yet is `failed` in the
/// table and in the summary, never `running`; rank 0's own line agrees with its failure.
#[test]
fn a_reported_failure_is_never_shown_as_running() {
    let mut v = JobView {
        nranks: 3,
        ..Default::default()
    };
    for rank in 1..3 {
        v.apply(report(
            rank,
            Event::Stage {
                stage: Stage::Connect,
                rank: Some(rank),
            },
        ));
    }
    let who = |rank: u32| Who {
        rank: Some(rank),
        host: format!("h{rank}"),
    };
    let f = Failure::new(Stage::ConnectShm, &who(2), "no space in /dev/shm");
    v.apply(report(2, Event::Failed { failure: f }));
    let me = RankRecord {
        rank: 0,
        host: "h0".into(),
        state: RankState::Failed,
        exit_code: Some(20),
        stage: Some(Stage::Connect),
        step: None,
        stages: Vec::new(),
    };
    let states: Vec<String> = v.records(me).iter().map(|r| r.state.to_string()).collect();
    assert_eq!(states, ["failed", "running", "failed"]);
    let mine = Failure::new(Stage::ConnectShm, &who(0), "no space in /dev/shm");
    let s = v.summary(Some((Stage::Connect, None, Some(&mine))));
    assert_eq!(s[0], "# job: rank 0 failed at connect:shm (above)");
    assert!(
        s[1].starts_with("# job: rank 1 (host h1) in connect"),
        "{s:?}"
    );
    assert_eq!(
        s[2],
        "# job: rank 2 (host h2) failed at connect:shm (above), not ended yet"
    );
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
    // The summary agrees with the table: the failures named for ranks 1 and 2 are the
    // supervisor's own words for them, not failures they reported.
    let s = v.summary(None);
    assert!(
        s[0].contains("rank 1 (host h1) stopped answering during run"),
        "{s:?}"
    );
    assert!(
        s[1].contains("rank 2 (host h2) lost contact during run"),
        "{s:?}"
    );
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
    let mut up = Uplink::connect(&[Address::parse(&addr).unwrap()], 1, "h1").unwrap();
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

#[test]
fn silence_is_bounded_by_missed_beats_not_only_by_the_stage() {
    assert_eq!(
        super::liveness(Duration::from_secs(120)),
        super::ALIVE_EVERY * super::MISSED_BEATS
    );
    assert_eq!(
        super::liveness(Duration::from_secs(3)),
        Duration::from_secs(3)
    );
    assert!(super::ALIVE_EVERY * super::MISSED_BEATS <= Duration::from_secs(5));
}

#[test]
fn one_listener_thread_answers_alive_ack_and_bye_on_each_line() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let view = Arc::new(Mutex::new(JobView {
        nranks: 4,
        ..Default::default()
    }));
    serve(listener, view.clone());
    let mut ups: Vec<Uplink> = (1..4)
        .map(|r| Uplink::connect(&[Address::parse(&addr).unwrap()], r, &format!("h{r}")).unwrap())
        .collect();
    for (i, up) in ups.iter_mut().enumerate() {
        up.send(&Event::Stage {
            stage: Stage::Run,
            rank: Some(i as u32 + 1),
        });
    }
    // Rank 2 ends: rank 0 acknowledges it, and only it.
    ups[1].send(&Event::Ended {
        code: 0,
        failure: None,
        stages: Vec::new(),
    });
    assert_eq!(ups[1].await_ack(Duration::from_secs(5)), Ok(()));
    assert!(!ups[0].down.lock().unwrap().acked);
    assert!(ups[0].rank0_gone(Duration::from_secs(5)).is_none());
    {
        let v = view.lock().unwrap();
        assert_eq!(v.conns.len(), 3);
        assert!((1..4).all(|r| v.ranks[&r].stage == Some(Stage::Run)));
    }
    // Rank 0 ends: every rank hears it, so none takes the silence after for rank 0's death.
    view.lock().unwrap().say_bye(Some(14));
    let start = Instant::now();
    while !ups.iter().all(|u| u.down.lock().unwrap().bye) {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "bye never arrived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // With the job's code: the rank whose end rank 0 had takes it, the others do not (the
    // verdict may not count them).
    assert!(
        ups.iter()
            .all(|u| u.down.lock().unwrap().job_code == Some(14))
    );
    assert_eq!(ups[1].await_bye(Duration::from_secs(1), || false), Some(14));
    assert_eq!(ups[0].await_bye(Duration::from_secs(1), || false), None);
    // A rank whose line closes without an end report is lost; the ended one is not.
    drop(ups.remove(0));
    let start = Instant::now();
    while !view.lock().unwrap().ranks[&1].lost {
        assert!(start.elapsed() < Duration::from_secs(5), "loss never seen");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(view.lock().unwrap().conns.len(), 2);
}

#[test]
fn a_host_cut_off_is_one_verdict_whatever_stage_each_of_its_ranks_was_in() {
    // Seen in CI: host h3 cut off mid-run, rank 4 last heard in connect, rank 5 in run.
    let mut v = JobView {
        nranks: 6,
        ..Default::default()
    };
    for (rank, host, stage) in [
        (4, "h3", Stage::Connect),
        (5, "h3", Stage::Run),
        (2, "h2", Stage::Run),
    ] {
        v.apply(Report {
            rank,
            host: host.into(),
            event: Event::Stage {
                stage,
                rank: Some(rank),
            },
        });
    }
    let past = Instant::now() - Duration::from_secs(6);
    v.ranks.get_mut(&4).unwrap().last_heard = past;
    v.ranks.get_mut(&5).unwrap().last_heard = past + Duration::from_millis(400);
    assert!(v.name_unresponsive(|_| Duration::from_secs(5)));
    let verdict = crate::report::results::job_verdict(&v.failures, None).unwrap();
    assert_eq!(verdict.ranks, vec![4, 5]);
    assert!(
        verdict
            .line
            .contains("on ranks 4, 5 (host h3): its supervisor stopped answering"),
        "{}",
        verdict.line
    );
    assert!(
        verdict.consequences.is_empty(),
        "{:?}",
        verdict.consequences
    );
}

#[test]
fn ranks_inside_the_stage_where_only_waits_ran_out_are_stuck_alongside() {
    let mut v = JobView {
        nranks: 5,
        ..Default::default()
    };
    for r in 1..5 {
        v.apply(report(
            r,
            Event::Stage {
                stage: Stage::Run,
                rank: Some(r),
            },
        ));
        v.apply(report(
            r,
            Event::Step {
                what: "all_reduce 512 B: its iterations".into(),
                waiting: false,
            },
        ));
    }
    let who = |rank| Who {
        rank: Some(rank),
        host: format!("h{rank}"),
    };
    // Rank 1's wait ran out; rank 2 was stopped by the launcher; rank 3 is still in run; rank
    // 4 finished its run stage and went on to finalize.
    let waited = Failure::new(
        Stage::Run,
        &who(1),
        "latency iterations of all_reduce 512 bytes did not complete within 5.5 s",
    )
    .kind(crate::error::Kind::Waited);
    v.apply(report(
        1,
        Event::Failed {
            failure: waited.clone(),
        },
    ));
    let stop = Failure::new(
        Stage::Run,
        &who(2),
        format!("{} during the run stage", crate::error::STOPPED),
    )
    .kind(crate::error::Kind::Stopped);
    v.apply(report(
        2,
        Event::Ended {
            code: 143,
            failure: Some(stop),
            stages: Vec::new(),
        },
    ));
    v.apply(report(
        4,
        Event::Stage {
            stage: Stage::Finalize,
            rank: Some(4),
        },
    ));
    let known = v.failures.clone();
    let stuck = v.stuck_alongside(&known);
    let ranks: Vec<Option<u32>> = stuck.iter().map(|f| f.rank).collect();
    assert_eq!(ranks, vec![Some(2), Some(3)]);
    assert!(stuck.iter().all(|f| f.kind == crate::error::Kind::Waited
        && f.stage == Stage::Run
        && f.error.contains("(all_reduce 512 B: its iterations)")));
    // Read back from the results file, the words say the same.
    assert_eq!(
        crate::error::Kind::read(&stuck[0].error, &[]),
        crate::error::Kind::Waited
    );
    // A failure of a rank's own names the culprit: nobody is stuck alongside it.
    let own = Failure::new(Stage::Run, &who(3), "unhandled cuda error");
    assert!(v.stuck_alongside(&[waited.clone(), own]).is_empty());
    // Waits in two stages point nowhere in particular either: nothing is added.
    let other = Failure::new(
        Stage::Finalize,
        &who(4),
        "communicator teardown did not complete within 5.5 s",
    )
    .kind(crate::error::Kind::Waited);
    assert!(v.stuck_alongside(&[waited, other]).is_empty());
}
