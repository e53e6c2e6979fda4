//! The whole decision, rounds and verdict together, on a model of a cluster: a pair's bus
//! bandwidth is its slower host's, a host alone runs at its intra-host speed (which a slow NIC
//! does not touch). The rounds are played as the coordinator plays them (alone, the pair
//! rounds, then confirmation rounds until none is left), for 2 to 8 hosts with one and two slow
//! hosts, with and without a floor.

use super::*;
use crate::report::expect::{Expectations, Floor, SCHEMA};
use crate::report::isolate::{Outcome, judge};
use crate::report::repeats::tests::measured;
use crate::stage::exit;

const SIZE: usize = 1 << 20;
const FAST: f64 = 40.0;
const SLOW: f64 = 13.0;
const INTRA: f64 = 100.0;

fn name(h: usize) -> String {
    format!("h{}", h + 1)
}

/// A passed group whose all_reduce bus bandwidth is `busbw` GB/s.
fn group(round: u32, phase: Phase, hs: &[usize], busbw: f64) -> GroupResult {
    let us = 2.0 * SIZE as f64 / (busbw * 1e3);
    GroupResult {
        round,
        phase,
        hosts: hs.iter().map(|h| name(*h)).collect(),
        ranks: hs
            .iter()
            .flat_map(|h| [2 * *h as u32, 2 * *h as u32 + 1])
            .collect(),
        outcome: Outcome::Passed {
            rows: vec![measured(SIZE, us, 0)],
        },
    }
}

fn floor(busbw_gbs: f64) -> Expectations {
    Expectations {
        schema: SCHEMA.into(),
        note: None,
        floors: vec![Floor {
            name: None,
            pattern: "all_reduce".into(),
            ranks: Some(4),
            size: Some("1M".into()),
            busbw_gbs,
            source: "this test".into(),
            ..Floor::default()
        }],
    }
}

/// Plays every round on hosts whose NICs run at `cap` and returns the final verdict.
fn play(cap: &[f64], floors: Option<&Expectations>) -> IsolateReport {
    let n = cap.len();
    let hosts: Vec<(String, Vec<u32>)> = (0..n)
        .map(|h| (name(h), vec![2 * h as u32, 2 * h as u32 + 1]))
        .collect();
    let names: Vec<String> = hosts.iter().map(|h| h.0.clone()).collect();
    let mut groups = Vec::new();
    let mut round = 0;
    let mut run = |groups: &mut Vec<GroupResult>, phase: Phase, r: Round| {
        round += 1;
        for g in r {
            let bw = match phase {
                Phase::Alone => INTRA,
                _ => g.iter().map(|h| cap[*h]).fold(f64::INFINITY, f64::min),
            };
            groups.push(group(round, phase, &g, bw));
        }
    };
    run(&mut groups, Phase::Alone, alone(n));
    for r in pairs(n, Pairs::Quick) {
        run(&mut groups, Phase::Pairs, r);
    }
    for _ in 0..4 {
        let so_far = judge(&hosts, &groups, 0.25, floors);
        let r = confirm(&so_far, &names, &groups);
        if r.is_empty() {
            break;
        }
        run(&mut groups, Phase::Confirm, r);
    }
    judge(&hosts, &groups, 0.25, floors)
}

fn statuses(r: &IsolateReport) -> Vec<HostStatus> {
    r.hosts.iter().map(|v| v.status).collect()
}

fn caps(n: usize, slow: &[usize]) -> Vec<f64> {
    (0..n)
        .map(|h| if slow.contains(&h) { SLOW } else { FAST })
        .collect()
}

#[test]
fn one_slow_host_is_named_for_any_count_from_three_and_never_passes() {
    for n in 3..=8 {
        for bad in 0..n {
            for floors in [None, Some(floor(30.0))] {
                let r = play(&caps(n, &[bad]), floors.as_ref());
                let want: Vec<HostStatus> = (0..n)
                    .map(|h| {
                        if h == bad {
                            HostStatus::Slow
                        } else {
                            HostStatus::Ok
                        }
                    })
                    .collect();
                assert_eq!(
                    statuses(&r),
                    want,
                    "n={n} bad={bad} floor={}: {r:#?}",
                    floors.is_some()
                );
                assert_eq!(r.drain, vec![name(bad)]);
                assert_eq!(r.exit_code, exit::BELOW_EXPECTED);
            }
        }
    }
}

#[test]
fn two_slow_hosts_are_both_named_from_four_hosts_on() {
    for n in 4..=8 {
        for a in 0..n {
            for b in a + 1..n {
                for floors in [None, Some(floor(30.0))] {
                    let r = play(&caps(n, &[a, b]), floors.as_ref());
                    let want: Vec<HostStatus> = (0..n)
                        .map(|h| {
                            if h == a || h == b {
                                HostStatus::Slow
                            } else {
                                HostStatus::Ok
                            }
                        })
                        .collect();
                    assert_eq!(
                        statuses(&r),
                        want,
                        "n={n} bad={a},{b} floor={}: {r:#?}",
                        floors.is_some()
                    );
                    assert_eq!(r.exit_code, exit::BELOW_EXPECTED);
                }
            }
        }
    }
}

#[test]
fn two_slow_hosts_of_three_with_a_floor_are_not_passed_and_not_pinned_on_the_healthy_one() {
    // Every pair holds a slow host: the pairs cannot say which hosts, and the verdict says so.
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        let r = play(&caps(3, &[a, b]), Some(&floor(30.0)));
        assert!(
            r.hosts.iter().all(|v| v.status == HostStatus::Undecided),
            "{a},{b}: {r:#?}"
        );
        assert!(r.drain.is_empty(), "a victim drained: {:?}", r.drain);
        assert_eq!(r.exit_code, exit::BELOW_EXPECTED);
        assert!(
            r.line.contains("cannot tell which of h1, h2, h3 is slow"),
            "{}",
            r.line
        );
    }
}

#[test]
fn two_hosts_without_a_floor_are_not_judged_and_their_figures_are_given() {
    for slow in [&[][..], &[0], &[1], &[0, 1]] {
        let r = play(&caps(2, slow), None);
        assert_eq!(
            statuses(&r),
            vec![HostStatus::Undecided; 2],
            "{slow:?}: {r:#?}"
        );
        assert_eq!(r.exit_code, exit::NOT_JUDGED, "{slow:?}");
        assert!(!r.line.starts_with("every host passed"), "{}", r.line);
        assert!(
            r.line
                .contains("h1 alone 100.00 GB/s, h2 alone 100.00 GB/s, together"),
            "{}",
            r.line
        );
        assert!(r.line.contains("--expect"), "{}", r.line);
    }
}

#[test]
fn two_hosts_with_a_floor_pass_above_it_and_are_not_pinned_below_it() {
    let r = play(&caps(2, &[]), Some(&floor(30.0)));
    assert_eq!(statuses(&r), vec![HostStatus::Ok; 2], "{r:#?}");
    assert_eq!(r.exit_code, exit::PASS);
    for slow in [&[0][..], &[1], &[0, 1]] {
        let r = play(&caps(2, slow), Some(&floor(30.0)));
        assert_eq!(
            statuses(&r),
            vec![HostStatus::Undecided; 2],
            "{slow:?}: {r:#?}"
        );
        assert!(r.drain.is_empty());
        assert_eq!(r.exit_code, exit::BELOW_EXPECTED);
        let v = &r.hosts[0];
        assert!(v.evidence[0].contains("below the floor 30 GB/s"), "{v:?}");
    }
}

#[test]
fn a_floor_that_fits_no_group_changes_nothing() {
    // A floor for 16 ranks applies to no pair of 4 ranks: the hosts are judged as without one.
    let mut f = floor(30.0);
    f.floors[0].ranks = Some(16);
    let r = play(&caps(3, &[1]), Some(&f));
    assert_eq!(
        statuses(&r),
        vec![HostStatus::Ok, HostStatus::Slow, HostStatus::Ok]
    );
    assert_eq!(r.unchecked_floors, vec!["all_reduce 1M on 16 ranks"]);
    let table = crate::report::isolate::table(&r, None);
    assert!(
        table.last().unwrap().contains("not checked") && table.last().unwrap().contains("16 ranks"),
        "{table:?}"
    );
    let r = play(&caps(2, &[]), Some(&f));
    assert_eq!(r.exit_code, exit::NOT_JUDGED);
    assert_eq!(r.unchecked_floors.len(), 1);
    // A floor that fits the pairs is checked: nothing is listed.
    let r = play(&caps(3, &[1]), Some(&floor(30.0)));
    assert!(r.unchecked_floors.is_empty(), "{:?}", r.unchecked_floors);
}
