//! `ncclAllGather`, `ncclReduceScatter`, `ncclBroadcast`, `ncclReduce`, and NCCL 2.28's
//! `ncclGather` and `ncclScatter`: what each rank sends to whom, and what it makes of what
//! arrives. The data flow is the one NCCL's API defines
//! (`src/nccl.h.in`, NVIDIA/nccl v2.28.3-1: counts, root, in-place offsets); NCCL's algorithms
//! (rings, trees) are not simulated: each rank's share travels straight to the ranks that need
//! it, and reductions fold in rank order, the same on every rank, as the all-reduce here does.

/// A collective beyond all-reduce and all-to-all.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    /// `count` elements from each rank; every rank receives all, rank j's at `j × count`.
    AllGather,
    /// `nranks × count` elements from each rank; rank j receives the reduction of chunk j.
    ReduceScatter,
    /// `count` elements from `root` to every rank (root's receive buffer too).
    Broadcast,
    /// The reduction of every rank's `count` elements, on `root` only.
    Reduce,
    /// `count` elements from each rank to `root`, rank j's at `j × count` there.
    Gather,
    /// `root`'s `nranks × count` elements, block j to rank j.
    Scatter,
}

/// Where what arrives for one operation goes on this rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lands {
    /// Rank j's share at `j × len` of the receive buffer.
    Place,
    /// Every rank's share folded in rank order into the receive buffer.
    Fold,
    /// The root's share, copied into the receive buffer.
    Copy,
    /// Nothing: this rank receives nothing (a reduce's non-root ranks).
    Nothing,
}

impl Coll {
    pub const ALL: [Coll; 6] = [
        Coll::AllGather,
        Coll::ReduceScatter,
        Coll::Broadcast,
        Coll::Reduce,
        Coll::Gather,
        Coll::Scatter,
    ];

    /// NCCL's name for it, as its COLL log lines and WARNs give it.
    pub fn name(self) -> &'static str {
        match self {
            Coll::AllGather => "AllGather",
            Coll::ReduceScatter => "ReduceScatter",
            Coll::Broadcast => "Broadcast",
            Coll::Reduce => "Reduce",
            Coll::Gather => "Gather",
            Coll::Scatter => "Scatter",
        }
    }

    pub fn from_name(name: &str) -> Option<Coll> {
        Coll::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Bytes this operation writes in `rank`'s receive buffer, for `len` bytes of NCCL's count.
    pub fn recv_len(self, len: usize, rank: usize, root: usize, nranks: usize) -> usize {
        match self.lands(rank, root) {
            Lands::Place => len * nranks,
            Lands::Nothing => 0,
            Lands::Fold | Lands::Copy => len,
        }
    }

    /// What `rank` sends: (peer, byte offset in its send buffer), `len` bytes each; its own
    /// share (peer == rank) stays here.
    pub fn sends(self, rank: usize, root: usize, nranks: usize, len: usize) -> Vec<(usize, usize)> {
        match self {
            Coll::AllGather => (0..nranks).map(|j| (j, 0)).collect(),
            Coll::ReduceScatter => (0..nranks).map(|j| (j, j * len)).collect(),
            Coll::Broadcast if rank == root => (0..nranks).map(|j| (j, 0)).collect(),
            Coll::Broadcast => Vec::new(),
            Coll::Reduce | Coll::Gather => vec![(root, 0)],
            Coll::Scatter if rank == root => (0..nranks).map(|j| (j, j * len)).collect(),
            Coll::Scatter => Vec::new(),
        }
    }

    /// Where what arrives goes on `rank`.
    pub fn lands(self, rank: usize, root: usize) -> Lands {
        match self {
            Coll::AllGather => Lands::Place,
            Coll::ReduceScatter => Lands::Fold,
            Coll::Broadcast => Lands::Copy,
            Coll::Reduce if rank == root => Lands::Fold,
            Coll::Reduce => Lands::Nothing,
            Coll::Gather if rank == root => Lands::Place,
            Coll::Gather => Lands::Nothing,
            Coll::Scatter => Lands::Copy,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every byte a rank expects is sent by exactly one rank, and nothing is sent that no rank
    /// takes: the sends and the landings describe the same data flow.
    #[test]
    fn what_is_sent_is_what_lands() {
        for kind in Coll::ALL {
            for n in 1..=5usize {
                for root in 0..n {
                    let len = 8;
                    // (sender, receiver) pairs, from the senders' side.
                    let mut sent: Vec<(usize, usize)> = (0..n)
                        .flat_map(|r| {
                            kind.sends(r, root, n, len)
                                .into_iter()
                                .map(move |(j, _)| (r, j))
                        })
                        .collect();
                    let mut want: Vec<(usize, usize)> = Vec::new();
                    for r in 0..n {
                        match kind.lands(r, root) {
                            Lands::Place | Lands::Fold => want.extend((0..n).map(|j| (j, r))),
                            Lands::Copy => want.push((root, r)),
                            Lands::Nothing => {}
                        }
                        let expect = kind.recv_len(len, r, root, n);
                        let pieces = want.iter().filter(|(_, to)| *to == r).count();
                        let per = if kind.lands(r, root) == Lands::Place {
                            len
                        } else {
                            0
                        };
                        assert!(per == 0 || expect == pieces * per, "{kind:?} n={n}");
                    }
                    sent.sort();
                    want.sort();
                    assert_eq!(sent, want, "{kind:?} n={n} root={root}");
                    // Every share lies inside the send buffer NCCL's API gives the rank.
                    let send_len = match kind {
                        Coll::ReduceScatter | Coll::Scatter => len * n,
                        _ => len,
                    };
                    for r in 0..n {
                        for (_, off) in kind.sends(r, root, n, len) {
                            assert!(off + len <= send_len, "{kind:?}");
                        }
                    }
                }
            }
        }
        assert_eq!(Coll::from_name("ReduceScatter"), Some(Coll::ReduceScatter));
        assert_eq!(Coll::from_name("AllReduce"), None);
    }
}
