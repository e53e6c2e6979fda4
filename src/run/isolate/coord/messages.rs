//! What the coordinator makes of each rank's messages in a round: its group's progress, a
//! rank gone (its connection closed), and each group's outcome.

use super::*;

pub(super) fn handle(st: &mut State, live: &mut [Live], n: u32, rank: u32, msg: Option<Up>) {
    let Some(msg) = msg else {
        mark_gone(
            st,
            live,
            rank,
            "its connection to the isolate coordinator closed (the process or its host is gone)"
                .into(),
        );
        return;
    };
    if let Some(c) = st.conns.get_mut(&rank) {
        c.last = Instant::now();
    }
    // A rank sitting out lost its part of the job-wide communicator in the split.
    if let Up::ParentUp { failure: Some(f) } = &msg {
        if st.source.split {
            st.source.fresh(format!(
                "switched after round {n}: rank {rank} (host {}), sitting out, failed in the \
                 split: {}",
                f.host, f.error
            ));
        }
        return;
    }
    let Some(g) = live.iter_mut().find(|g| g.ranks.contains(&rank)) else {
        return;
    };
    match msg {
        Up::Stage { round, stage } if round == n => {
            if let Some(c) = st.conns.get_mut(&rank) {
                c.stage = stage;
            }
        }
        Up::Id { round, id, failure } if round == n && !g.id_sent => {
            g.id_sent = true;
            let why = failure.as_ref().map(|f| {
                format!(
                    "the group's leader, rank {rank} (host {}), could not create a unique id",
                    f.host
                )
            });
            if let Some(f) = failure {
                g.failures.push(f);
            }
            for r in &g.ranks {
                if let Some(c) = st.conns.get(r) {
                    c.tx.send(&Down::Go {
                        round: n,
                        id: id.clone(),
                        why: why.clone(),
                    });
                }
            }
        }
        Up::Barrier { round } if round == n => {
            g.barrier.insert(rank);
            if g.ranks.iter().all(|r| g.barrier.contains(r)) {
                g.barrier.clear();
                for r in &g.ranks {
                    if let Some(c) = st.conns.get(r) {
                        c.tx.send(&Down::Release { round: n });
                    }
                }
            }
        }
        Up::Outcome {
            round,
            samples,
            failure,
        } if round == n => {
            match failure {
                Some(f) => g.failures.push(f),
                None => {
                    g.samples.insert(rank, samples);
                }
            }
            g.done.insert(rank);
        }
        _ => {}
    }
}

pub(super) fn gone_failure(st: &State, rank: u32, why: &str) -> Failure {
    let c = &st.conns[&rank];
    Failure::new(
        c.stage,
        &Who {
            rank: Some(rank),
            host: c.host.clone(),
        },
        why,
    )
    .cause("the rank's process died, or its host went down or was cut off from rank 0's")
    .hint("check the host: is it up, is its network link up (ip link, the switch port)?")
}

pub(super) fn mark_gone(st: &mut State, live: &mut [Live], rank: u32, why: String) {
    let Some(c) = st.conns.get_mut(&rank) else {
        return;
    };
    if c.gone.is_some() {
        return;
    }
    c.gone = Some(why.clone());
    c.tx.close();
    let f = gone_failure(st, rank, &why);
    if let Some(g) = live.iter_mut().find(|g| g.ranks.contains(&rank)) {
        if !g.done.contains(&rank) {
            g.failures.push(f);
            g.done.insert(rank);
        }
        // A leader gone before its id: the others are told, not left waiting.
        if !g.id_sent && g.ranks.first() == Some(&rank) {
            g.id_sent = true;
            for r in &g.ranks {
                if let Some(c) = st.conns.get(r) {
                    c.tx.send(&Down::Go {
                        round: st.round,
                        id: None,
                        why: Some(format!("the group's leader, rank {rank}, is gone")),
                    });
                }
            }
        }
    }
}

/// The group's outcome: its culprit's failure, or its rows (a row with wrong bytes fails the
/// group at verify).
pub(super) fn outcome_of(st: &State, g: &Live) -> Outcome {
    let host_of = |r: u32| st.conns.get(&r).map(|c| c.host.clone()).unwrap_or_default();
    if let Some(v) = job_verdict(&g.failures, None) {
        let mut hosts: Vec<String> = v.ranks.iter().map(|r| host_of(*r)).collect();
        hosts.dedup();
        return Outcome::Failed {
            stage: v.stage.unwrap_or(Stage::Run),
            culprits: hosts,
            line: v.line,
            exit_code: v.exit_code,
        };
    }
    let n = g.ranks.len() as u32;
    let t = &st.setup.timing;
    let mut rows = Vec::new();
    for (i, p) in st.setup.patterns.iter().enumerate() {
        let layout = p.layout(st.setup.bytes, t.dtype.size(), n);
        // Every rank of the group must have sent this pattern's sample, checked: a row of fewer
        // ranks than ran would pass on ranks nobody heard from.
        let missing = g.ranks.iter().enumerate().find_map(|(local, r)| {
            let want = p.written(local as u32, &layout) as u64;
            g.samples
                .get(r)
                .and_then(|s| s.get(i))
                .is_none_or(|s| t.check && s.check.as_ref().is_none_or(|c| c.elements != want))
                .then_some(r)
        });
        // A wrong or missing result of rank `r`: the group fails at verify, on r's host.
        let verify_failed = |r: u32, what: String| Outcome::Failed {
            stage: Stage::Verify,
            culprits: vec![host_of(r)],
            line: format!(
                "{} of {} bytes: {what} (host {})",
                p.name(),
                layout.bytes(t.dtype),
                host_of(r)
            ),
            exit_code: Stage::Verify.exit_code(),
        };
        if let Some(&r) = missing {
            return verify_failed(
                r,
                format!("rank {r} sent no sample, or one not wholly checked"),
            );
        }
        let samples: Vec<RankSample> = g
            .ranks
            .iter()
            .filter_map(|r| g.samples.get(r).and_then(|s| s.get(i)).cloned())
            .collect();
        let row = bench::combine(*p, &layout, t, n, &samples);
        if row.wrong > 0 {
            let rank = row.first_wrong.as_ref().map(|(r, _)| *r).unwrap_or(0);
            let r = g.ranks.get(rank as usize).copied().unwrap_or(rank);
            return verify_failed(
                r,
                format!(
                    "{} wrong element(s), the first received by rank {r}",
                    row.wrong
                ),
            );
        }
        rows.push(row);
    }
    Outcome::Passed { rows }
}
