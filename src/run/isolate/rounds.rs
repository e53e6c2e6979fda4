//! Which hosts meet in which round. Hosts are numbered in the order of their lowest rank.

use crate::report::isolate::{GroupResult, HostStatus, IsolateReport, Phase};
use std::collections::BTreeSet;

/// Which pairs of hosts meet (`isolate --pairs`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
pub enum Pairs {
    /// A perfect matching, then a shifted one: every host meets two partners in two rounds.
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

/// The pair rounds. Quick: (0,1),(2,3),… then (1,2),(3,4),…,(n−1,0) — with an odd count one
/// host sits out of each. All: the circle method's n − 1 rounds (n rounds for odd n), every
/// pair once.
pub fn pairs(n: usize, which: Pairs) -> Vec<Round> {
    if n < 2 {
        return Vec::new();
    }
    match which {
        Pairs::Quick => {
            let first: Round = (0..n / 2).map(|i| vec![2 * i, 2 * i + 1]).collect();
            let mut second: Round = (0..(n - 1) / 2)
                .map(|i| vec![2 * i + 1, 2 * i + 2])
                .collect();
            if n.is_multiple_of(2) && n > 2 {
                second.push(vec![n - 1, 0]);
            }
            [first, second]
                .into_iter()
                .filter(|r| !r.is_empty())
                .collect()
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
    fn quick_gives_each_host_two_partners_in_two_rounds() {
        let r = pairs(4, Pairs::Quick);
        assert_eq!(
            r,
            vec![vec![vec![0, 1], vec![2, 3]], vec![vec![1, 2], vec![3, 0]]]
        );
        assert_eq!(pairs(2, Pairs::Quick), vec![vec![vec![0, 1]]]);
        // Odd: one host sits out of each round, a different one.
        assert_eq!(
            pairs(3, Pairs::Quick),
            vec![vec![vec![0, 1]], vec![vec![1, 2]]]
        );
        assert!(pairs(1, Pairs::Quick).is_empty());
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
