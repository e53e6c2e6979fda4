//! A rank's part in one round of `isolate`: its group's unique id, communicator, the
//! measurement of each pattern at the largest size, and the report to the coordinator.

use super::wire::{Down, Up};
use super::*;

impl Run<'_> {
    /// This rank's part in one group of one round.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn round(
        &mut self,
        line: &mut Line,
        nccl: &Nccl,
        selected: &[&'static dyn Pattern],
        bufs: &mut Buffers,
        timing: &Timing,
        bytes: usize,
        round: u32,
        group: &[u32],
        from: GroupFrom<'_, '_>,
    ) -> Result<Vec<RankSample>, Failure> {
        let me = self.who.rank.unwrap_or(0);
        let idx = group.iter().position(|r| *r == me).unwrap_or(0) as u32;
        let n = group.len() as u32;
        let limit = timing.deadline;

        let mut comm = match from {
            GroupFrom::Split(parent, color) => {
                self.enter_round(line, round, Stage::Init);
                events::waiting("in ncclCommSplit for this round's group");
                let Some(p) = parent.as_ref() else {
                    return Err(Failure::new(
                        Stage::Init,
                        &self.who,
                        "this rank's part of the job-wide communicator is gone: nothing to split",
                    ));
                };
                // Key: the rank's place in the group, so child ranks are in group order (the
                // leader first), as with a fresh id; the coordinator maps them back so.
                match p.split(color, idx as i32, limit) {
                    Ok(Some(c)) => c,
                    Ok(None) => {
                        return Err(Failure::new(
                            Stage::Init,
                            &self.who,
                            "ncclCommSplit gave this rank no communicator",
                        ));
                    }
                    Err(e) => {
                        // Aborted, or unusable: no more splits from it.
                        *parent = None;
                        return Err(self.comm_failure(Stage::Init, e));
                    }
                }
            }
            GroupFrom::Fresh => {
                let id = self.group_id(line, nccl, round, idx, limit)?;
                self.enter_round(line, round, Stage::Init);
                events::waiting("in ncclCommInitRank for this round's group");
                Communicator::init_nonblocking(nccl, &id, idx, n, limit)
                    .map_err(|e| self.comm_failure(Stage::Init, e))?
            }
        };
        if comm.nranks != n {
            return Err(Failure::new(
                Stage::Init,
                &self.who,
                format!(
                    "the group's communicator has {} ranks, not {n}",
                    comm.nranks
                ),
            ));
        }

        self.enter_round(line, round, Stage::Connect);
        for p in selected {
            bench::connect(&mut comm, *p, bufs, timing, &[bytes])
                .map_err(|e| self.comm_failure(Stage::Connect, e))?;
        }

        self.enter_round(line, round, Stage::Run);
        let elem = timing.dtype.size();
        let mut samples = Vec::new();
        for p in selected {
            let layout = p.layout(bytes, elem, n);
            let barrier = || {
                line.tx.send(&Up::Barrier { round });
                // A barrier that never releases ends in the measurement's own deadline.
                let start = Instant::now();
                while start.elapsed() < limit {
                    match line.rx.recv_timeout(Duration::from_millis(20)) {
                        Ok((_, Some(Down::Release { .. }))) | Ok((_, None)) => return,
                        Ok(_) => line.last.set(Instant::now()),
                        Err(_) => {}
                    }
                }
            };
            let sample = bench::measure(&mut comm, &barrier, *p, &layout, bufs, timing, round)
                .map_err(|e| self.comm_failure(Stage::Run, e))?;
            samples.push(sample);
        }

        self.enter_round(line, round, Stage::Finalize);
        comm.finalize(limit)
            .map_err(|e| self.comm_failure(Stage::Finalize, e))?;
        Ok(samples)
    }

    /// Enters `stage` of `round` and tells the coordinator.
    pub(super) fn enter_round(&mut self, line: &Line, round: u32, stage: Stage) {
        self.enter(stage);
        line.tx.send(&Up::Stage { round, stage });
    }

    /// A leader's part: a new unique id for `round` (0: the job-wide communicator), or why
    /// there is none, to the coordinator, which passes it on.
    pub(super) fn offer_id(&self, line: &Line, nccl: &Nccl, round: u32) {
        let (id, failure) = match nccl.get_unique_id() {
            Ok(id) => (Some(id.to_vec()), None),
            Err(e) => (None, Some(self.nccl_failure(Stage::UniqueId, &e))),
        };
        line.tx.send(&Up::Id { round, id, failure });
    }

    /// The group's unique id: made by its leader (`idx` 0), passed on by the coordinator.
    pub(super) fn group_id(
        &mut self,
        line: &Line,
        nccl: &Nccl,
        round: u32,
        idx: u32,
        limit: Duration,
    ) -> Result<nccl::UniqueId, Failure> {
        self.enter_round(line, round, Stage::UniqueId);
        if idx == 0 {
            self.offer_id(line, nccl, round);
        }
        events::waiting("waiting for the group's unique id");
        match line.next(limit, true) {
            Ok(Down::Go { id: Some(id), .. }) if let Some(id) = unique_id(&id) => Ok(id),
            Ok(Down::Go { why, .. }) => Err(Failure::new(
                Stage::UniqueId,
                &self.who,
                why.unwrap_or_else(|| "no unique id for the group".into()),
            )
            .kind(error::Kind::PeerGone)),
            Ok(other) => Err(Failure::new(
                Stage::UniqueId,
                &self.who,
                format!("expected the group's unique id, got {other:?}"),
            )),
            Err(e) => Err(Failure::new(Stage::UniqueId, &self.who, e).kind(error::Kind::Waited)),
        }
    }
}
