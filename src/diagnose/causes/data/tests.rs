use super::*;

/// The lead row's failure (the only one when no wrong value names several ranks).
fn verify_failure(
    rows: &[SizeResult],
    me: &Who,
    host_of: impl Fn(u32) -> Option<String>,
) -> Option<Failure> {
    verify_failures(rows, me, host_of).into_iter().next()
}

fn who() -> Who {
    Who {
        rank: Some(0),
        host: "h0".into(),
    }
}

fn row(extra: serde_json::Value) -> SizeResult {
    let mut v = serde_json::json!({
        "pattern": "all_reduce", "size_bytes": 1024, "count": 256, "dtype": "float",
        "time_us": {"avg": 1.0, "p50": 1.0, "p99": 1.0, "max": 1.0},
        "algbw_gbs": 1.0, "busbw_gbs": 1.0, "wrong": 0, "checked": true,
        "slowest_rank": 0, "rank_avg_us": [1.0, 1.0], "checked_elements": 512
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

#[test]
fn nothing_written_is_its_own_finding() {
    let r = row(
        serde_json::json!({"wrong": 512, "unwritten": 512, "nothing_written_ranks": [0, 1],
            "first_wrong": [0, {"index": 0, "expected": 2.0, "got": "NaN", "got_hex": "ffffffff"}]}),
    );
    let mut bigger = r.clone();
    bigger.size_bytes = 2048;
    let f = verify_failure(&[r, bigger], &who(), |_| None).unwrap();
    assert_eq!((f.stage, f.rank), (Stage::Verify, Some(0)));
    assert_eq!(
        f.error,
        "all_reduce 1024 B: the collective wrote nothing into the receive buffer (it still \
             holds the fill pattern) on every rank (and 1 more pattern × size(s) wrong: evidence \
             below)"
    );
    assert_eq!(
        f.evidence,
        [
            "all_reduce 1024 B to 2048 B (2 sizes): the collective wrote nothing into the \
              receive buffer (it still holds the fill pattern) on every rank"
        ]
    );
    assert!(
        f.cause
            .unwrap()
            .starts_with("the kernel did not run or wrote elsewhere")
    );
}

#[test]
fn wrong_copies_name_the_ranks_the_wrong_data_points_at() {
    // Receiver and the senders of its written wrong elements.
    let named = |pairs: &[(u32, &[u32])]| {
        let pairs: Vec<(u32, Vec<u32>)> = pairs.iter().map(|(r, s)| (*r, s.to_vec())).collect();
        copy_culprits(&pairs)
    };
    // One rank's sends spoiled: wrong at every receiver, from it alone.
    assert_eq!(named(&[(0, &[1]), (1, &[1]), (2, &[1])]), [1]);
    // Every rank's sends spoiled (all-to-all): every rank.
    let all: &[u32] = &[0, 1, 2];
    assert_eq!(named(&[(0, all), (1, all), (2, all)]), [0, 1, 2]);
    // A ring, every rank's sends spoiled: each pair alone, pinned on its sender.
    assert_eq!(named(&[(1, &[0]), (2, &[1]), (0, &[2])]), [0, 1, 2]);
    // One rank's receives spoiled, from three senders: that rank.
    assert_eq!(named(&[(1, &[0, 2, 3])]), [1]);
    // A single wrong pair: its sender, as before.
    assert_eq!(named(&[(1, &[0])]), [0]);
    assert!(named(&[]).is_empty());
}

#[test]
fn every_rank_named_gets_a_failure_alike_but_for_its_rank() {
    let r = row(serde_json::json!({"pattern": "all_to_all", "wrong": 9,
            "first_wrong": [0, {"index": 2, "sender": 0, "expected": 3.0, "got": 7.0, "got_hex": "0000e040"}],
            "wrong_pairs": [[0, [0, 1, 2]], [1, [0, 1, 2]], [2, [0, 1, 2]]]}));
    let all = verify_failures(std::slice::from_ref(&r), &who(), |r| Some(format!("h{r}")));
    let named: Vec<_> = all.iter().map(|f| (f.rank, f.host.as_str())).collect();
    assert_eq!(named, [(Some(0), "h0"), (Some(1), "h1"), (Some(2), "h2")]);
    assert!(
        all.iter()
            .all(|f| f.error == all[0].error && f.stage == Stage::Verify)
    );
    // The job's verdict reads them as one line naming the three ranks.
    let v = crate::report::verdict::job_verdict(&all, None).unwrap();
    assert_eq!(v.ranks, [0, 1, 2]);
    assert!(
        v.line
            .starts_with("FAIL at verify on ranks 0, 1, 2 (hosts h0, h1, h2)"),
        "{}",
        v.line
    );
    // The lead row's rank leads even when it is not the smallest; a row that names no
    // senders (a reduction) names the lead alone.
    let mut one = r.clone();
    one.found.wrong_pairs = vec![(0, vec![2]), (1, vec![2])];
    one.first_wrong.as_mut().unwrap().1.sender = Some(2);
    let only: Vec<_> = verify_failures(&[one], &who(), |_| None)
        .iter()
        .map(|f| f.rank)
        .collect();
    assert_eq!(only, [Some(2)]);
    let mut reduced = r;
    reduced.pattern = "all_reduce".into();
    reduced.first_wrong.as_mut().unwrap().1.sender = None;
    assert_eq!(verify_failures(&[reduced], &who(), |_| None).len(), 1);
}

#[test]
fn partly_written_names_the_ranges() {
    let r = row(
        serde_json::json!({"wrong": 20, "unwritten": 20, "unwritten_ranges": [[1, [[100, 120]]]]}),
    );
    let f = verify_failure(&[r], &who(), |r| Some(format!("h{r}"))).unwrap();
    assert_eq!((f.rank, f.host.as_str()), (Some(1), "h1"));
    assert!(f.error.ends_with("rank 1: elements 100..120"), "{f}");
    assert!(f.cause.unwrap().contains("stopped part-way"));
}

#[test]
fn another_ranks_data_and_wrong_values_differ() {
    let peer = row(serde_json::json!({"pattern": "all_to_all", "wrong": 64,
            "first_wrong": [1, {"index": 0, "sender": 0, "expected": 3.0, "got": 7.0, "got_hex": "0000e040", "from_rank": 3}]}));
    let f = verify_failure(&[peer], &who(), |_| None).unwrap();
    assert!(
        f.error
            .contains("rank 1 received rank 3's data where rank 0's was due"),
        "{f}"
    );
    assert_eq!(f.rank, Some(1));
    let flip = row(serde_json::json!({"pattern": "send_recv_ring", "wrong": 1,
            "first_wrong": [1, {"index": 7, "sender": 0, "expected": 3.0, "got": "inf", "got_hex": "0000807f"}]}));
    let f = verify_failure(&[flip], &who(), |_| None).unwrap();
    assert!(
        f.error.contains(
            "element 7 received by rank 1 is inf (bytes 0000807f) instead of 3, sent by rank 0"
        ),
        "{f}"
    );
    assert_eq!(f.rank, Some(0));
    assert!(verify_failure(&[row(serde_json::json!({}))], &who(), |_| None).is_none());
}

#[test]
fn nothing_measured_or_checked_is_never_a_pass() {
    let me = who();
    assert!(
        coverage_failure(&[], 1, 2, true, &me)
            .unwrap()
            .error
            .contains("no size was measured")
    );
    let ok = row(serde_json::json!({}));
    assert!(coverage_failure(std::slice::from_ref(&ok), 1, 2, true, &me).is_none());
    assert!(
        coverage_failure(std::slice::from_ref(&ok), 2, 2, true, &me)
            .unwrap()
            .error
            .contains("1 of the plan's 2")
    );
    assert!(
        coverage_failure(std::slice::from_ref(&ok), 1, 4, true, &me)
            .unwrap()
            .error
            .contains("2 of the 4 ranks")
    );
    let unchecked = row(serde_json::json!({"checked_elements": 0}));
    assert!(
        coverage_failure(&[unchecked], 1, 2, true, &me)
            .unwrap()
            .error
            .contains("no element was checked")
    );
    let empty = row(serde_json::json!({"checked_elements": 0, "size_bytes": 0}));
    assert!(coverage_failure(&[empty.clone(), ok.clone()], 2, 2, true, &me).is_none());
    assert!(
        coverage_failure(&[empty], 1, 2, true, &me)
            .unwrap()
            .error
            .contains("every size is 0 bytes")
    );
}

#[test]
fn nans_everywhere_are_named() {
    let r = row(serde_json::json!({"wrong": 512, "nan": 512,
            "first_wrong": [1, {"index": 0, "expected": 3.0, "got": "NaN", "got_hex": "007e"}]}));
    let f = verify_failure(&[r], &who(), |_| None).unwrap();
    assert!(
        f.error
            .contains("512 wrong elements, every one of them NaN (rank 1, from element 0)"),
        "{f}"
    );
    assert_eq!(f.rank, Some(1));
}

#[test]
fn a_collective_faster_than_the_timer_did_not_run() {
    let r = row(serde_json::json!({"below_timer_ranks": [0, 1]}));
    let f = timer_failure(&[r], &who(), |_| None).unwrap();
    assert_eq!(f.stage, Stage::Run);
    assert!(
        f.error
            .contains("on rank(s) 0, 1: the collective did not run"),
        "{f}"
    );
    assert!(timer_failure(&[row(serde_json::json!({}))], &who(), |_| None).is_none());
}
