//! Which hosts meet in which round. Hosts are numbered in the order of their lowest rank.

use crate::report::isolate::{GroupResult, HostStatus, IsolateReport, Phase};
use std::collections::BTreeSet;

/// Which pairs of hosts meet (`isolate --pairs`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum Pairs {
    /// Every host meets at least three partners (every pair up to 5 hosts): 3 rounds for an
    /// even host count, 5 for an odd one.
    Quick,
    /// Every pair of hosts (n − 1 rounds for n hosts, n when n is odd).
    All,
}

/// One round: the groups of host numbers that run together (the others sit out).
pub type Round = Vec<Vec<usize>>;

/// Every host on its own.
pub fn alone(n: usize) -> Round {
    (0..n).map(|h| vec![h]).collect()
}

/// The pair rounds. Quick: every host meets at least three partners where there are that many
/// (every pair up to 5 hosts), on a circulant: the ring (i, i+1) plus the diameters (i, i+n/2)
/// for an even count, plus the chords (i, i+2) for an odd one. So while at most two hosts are
/// slow, every healthy host meets a healthy one and its best pair figure is a healthy figure. The
/// ring's pairs come first, (0,1),(2,3),… then (1,2),(3,4),…,(n−1,0). All: the circle method's
/// n − 1 rounds (n rounds for odd n), every pair once.
pub fn pairs(n: usize, which: Pairs) -> Vec<Round> {
    if n < 2 {
        return Vec::new();
    }
    match which {
        Pairs::Quick => {
            let offsets = if n.is_multiple_of(2) {
                [1, n / 2]
            } else {
                [1, 2]
            };
            let mut seen = BTreeSet::new();
            let mut left: Vec<(usize, usize)> = offsets
                .iter()
                .flat_map(|o| (0..n).map(move |i| (i, (i + o) % n)))
                .filter(|&(a, b)| a != b && seen.insert((a.min(b), a.max(b))))
                .collect();
            // Greedy matchings, shortest chords first, each in ring order.
            left.sort_by_key(|&(a, b)| (a.abs_diff(b).min(n - a.abs_diff(b)), a));
            let mut rounds = Vec::new();
            while !left.is_empty() {
                let mut busy = BTreeSet::new();
                let mut round = Round::new();
                left.retain(|&(a, b)| {
                    if busy.contains(&a) || busy.contains(&b) {
                        return true;
                    }
                    busy.extend([a, b]);
                    round.push(vec![a, b]);
                    false
                });
                rounds.push(round);
            }
            rounds
        }
        Pairs::All => {
            // Circle method over m (even) slots; slot n is a bye when n is odd.
            let m = n + n % 2;
            let mut slots: Vec<usize> = (0..m).collect();
            let mut rounds = Vec::new();
            for _ in 0..m - 1 {
                let round: Round = (0..m / 2)
                    .map(|i| vec![slots[i], slots[m - 1 - i]])
                    .filter(|p| p.iter().all(|h| *h < n))
                    .collect();
                rounds.push(round);
                slots[1..].rotate_right(1);
            }
            rounds
        }
    }
}

/// The next confirmation round: each host the verdict so far does not clear (failed with a
/// partner, linked, slow, or never passed with anyone) re-paired with a host that passed every round
/// and has not met it yet, one pair per host. Empty when no such pair is left.
pub fn confirm(report: &IsolateReport, names: &[String], groups: &[GroupResult]) -> Round {
    let index = |h: &str| names.iter().position(|n| n == h);
    let met = |a: usize, b: usize| {
        groups.iter().any(|g| {
            g.hosts.len() > 1
                && g.hosts.iter().any(|h| index(h) == Some(a))
                && g.hosts.iter().any(|h| index(h) == Some(b))
        })
    };
    let passed_with_someone = |h: &str| {
        groups.iter().any(|g| {
            g.hosts.len() > 1
                && g.hosts.iter().any(|x| x == h)
                && matches!(g.outcome, crate::report::isolate::Outcome::Passed { .. })
        })
    };
    let failed_alone = |h: &str| {
        groups.iter().any(|g| {
            g.phase == Phase::Alone
                && g.hosts.iter().any(|x| x == h)
                && !matches!(g.outcome, crate::report::isolate::Outcome::Passed { .. })
        })
    };
    let mut suspects = Vec::new();
    let mut good = Vec::new();
    for v in &report.hosts {
        let Some(i) = index(&v.host) else { continue };
        if failed_alone(&v.host) {
            continue;
        }
        match v.status {
            HostStatus::Ok if passed_with_someone(&v.host) => good.push(i),
            // Slow is re-measured too: one slow figure (a busy moment, a noisy partner) is
            // not yet a host to drain; a host that is slow stays slow with a new partner.
            _ => suspects.push(i),
        }
    }
    let mut used: BTreeSet<usize> = BTreeSet::new();
    let mut round = Vec::new();
    for s in suspects {
        if used.contains(&s) {
            continue;
        }
        if let Some(g) = good
            .iter()
            .copied()
            .find(|g| !used.contains(g) && !met(s, *g))
        {
            used.insert(s);
            used.insert(g);
            round.push(vec![s, g]);
        }
    }
    round
}

#[cfg(test)]
mod sim_tests;

#[cfg(test)]
mod tests {
    use super::*;

    fn all_pairs(rounds: &[Round]) -> BTreeSet<(usize, usize)> {
        rounds
            .iter()
            .flatten()
            .map(|p| (p[0].min(p[1]), p[0].max(p[1])))
            .collect()
    }

    #[test]
    fn quick_starts_with_the_ring_and_meets_every_pair_up_to_five_hosts() {
        assert_eq!(pairs(2, Pairs::Quick), vec![vec![vec![0, 1]]]);
        assert_eq!(
            pairs(4, Pairs::Quick),
            vec![
                vec![vec![0, 1], vec![2, 3]],
                vec![vec![1, 2], vec![3, 0]],
                vec![vec![0, 2], vec![1, 3]]
            ]
        );
        assert_eq!(
            pairs(3, Pairs::Quick),
            vec![vec![vec![0, 1]], vec![vec![1, 2]], vec![vec![2, 0]]]
        );
        for n in 3..=5 {
            assert_eq!(
                all_pairs(&pairs(n, Pairs::Quick)).len(),
                n * (n - 1) / 2,
                "n={n}"
            );
        }
        assert!(pairs(1, Pairs::Quick).is_empty());
    }

    #[test]
    fn quick_gives_every_host_three_distinct_partners_beyond_five_hosts() {
        for n in 6..=64 {
            let r = pairs(n, Pairs::Quick);
            let met = all_pairs(&r);
            let mut degree = vec![0; n];
            for (a, b) in &met {
                degree[*a] += 1;
                degree[*b] += 1;
            }
            let want = if n % 2 == 0 { 3 } else { 4 };
            assert!(degree.iter().all(|d| *d == want), "n={n}: {degree:?}");
            for round in &r {
                let hosts: BTreeSet<usize> = round.iter().flatten().copied().collect();
                assert_eq!(hosts.len(), 2 * round.len(), "n={n}: {round:?}");
            }
            // Greedy matchings: a round or two above the degree at most.
            assert!(r.len() <= want + 2, "n={n}: {} rounds", r.len());
        }
    }

    #[test]
    fn all_meets_every_pair_once_with_no_host_twice_in_a_round() {
        for n in 2..=9 {
            let r = pairs(n, Pairs::All);
            assert_eq!(r.len(), if n % 2 == 0 { n - 1 } else { n }, "n={n}");
            let every: usize = r.iter().map(Vec::len).sum();
            assert_eq!(every, n * (n - 1) / 2, "n={n}");
            assert_eq!(all_pairs(&r).len(), n * (n - 1) / 2, "n={n}");
            for round in &r {
                let hosts: BTreeSet<usize> = round.iter().flatten().copied().collect();
                assert_eq!(
                    hosts.len(),
                    2 * round.len(),
                    "n={n}: a host twice in {round:?}"
                );
            }
        }
    }

    #[test]
    fn alone_is_one_group_per_host() {
        assert_eq!(alone(3), vec![vec![0], vec![1], vec![2]]);
    }
}
