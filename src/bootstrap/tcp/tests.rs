use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Every rank grows the tree (rank `bad`, when given, advertising a closed port), then
/// runs `rounds` barriers; no rank may leave barrier `k` before every rank has reached
/// it. Returns each rank's barrier description.
fn barriers(n: u32, rounds: u32, bad: Option<u32>) -> Vec<String> {
    let arrived = Arc::new(AtomicU32::new(0));
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let handles: Vec<_> = Tcp::loopback_star(n)
        .unwrap()
        .into_iter()
        .map(|mut t| {
            let arrived = arrived.clone();
            std::thread::spawn(move || {
                let me = t.rank;
                t.grow_tree_advertising(Duration::from_secs(2), |a| {
                    if Some(me) == bad { closed } else { a }
                });
                for k in 0..rounds {
                    arrived.fetch_add(1, Ordering::SeqCst);
                    t.barrier();
                    let seen = arrived.load(Ordering::SeqCst);
                    assert!(seen >= (k + 1) * n, "rank {me} left barrier {k} at {seen}");
                    t.barrier();
                }
                t.describe()
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

#[test]
fn the_tree_barrier_holds_every_rank_until_all_arrive() {
    let said = barriers(83, 20, None);
    assert!(
        said.iter()
            .all(|d| d.contains("a tree of fan-out 8, 3 level(s)")),
        "{said:?}"
    );
}

#[test]
fn a_job_within_the_fanout_is_its_own_tree() {
    let said = barriers(9, 20, None);
    assert!(said.iter().all(|d| !d.contains("barrier")), "{said:?}");
}

#[test]
fn a_parent_nobody_can_reach_leaves_the_star_for_every_rank() {
    // Rank 2's children (17..=24) are told a port nobody listens on.
    let said = barriers(30, 10, Some(2));
    assert!(
        said.iter()
            .all(|d| d.contains("rank 0's star (the tree's connections")),
        "{said:?}"
    );
}
