//! Communication patterns: one file each, one trait, one registry.
//!
//! A pattern says how a message size maps to buffers, how to launch itself on a communicator,
//! its busbw factor (as nccl-tests defines it), and where each received element comes from, so
//! verification needs no extra communication and a wrong element is attributed to its sender.
//! Adding a pattern is one new file and one line in [`REGISTRY`].

mod all_gather;
mod all_reduce;
mod all_to_all;
mod broadcast;
mod gather;
mod hypercube;
mod reduce;
mod reduce_scatter;
mod scatter;
mod send_recv_pairwise;
mod send_recv_ring;

use crate::comm::{Collective, CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

/// Buffer shapes for one message size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Elements in the send buffer of each rank: the "count" column.
    pub count: usize,
    /// Elements each rank receives.
    pub recv_count: usize,
    /// Elements per peer, for patterns that split the buffer by peer (else `count`).
    pub per_peer: usize,
}

impl Layout {
    /// One buffer of `bytes / elem_size` elements sent and received (all-reduce, broadcast,
    /// reduce).
    pub fn whole(bytes: usize, elem_size: usize) -> Layout {
        let count = bytes / elem_size;
        Layout {
            count,
            recv_count: count,
            per_peer: count,
        }
    }

    /// nccl-tests' `base = (count/nranks) & ~(16/eltSize - 1)` sent by each rank and `nranks`
    /// times that received (all-gather, gather; `src/all_gather.cu`, `src/gather.cu`).
    pub fn gathered(bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        let per = per_peer_count(bytes, elem_size, nranks as usize);
        Layout {
            count: per,
            recv_count: per * nranks as usize,
            per_peer: per,
        }
    }

    /// `nranks × base` sent by each rank and `base` received (reduce-scatter, scatter;
    /// `src/reduce_scatter.cu`, `src/scatter.cu`).
    pub fn scattered(bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        let l = Layout::gathered(bytes, elem_size, nranks);
        Layout {
            count: l.recv_count,
            recv_count: l.count,
            per_peer: l.per_peer,
        }
    }

    /// Bytes each rank sends.
    pub fn bytes(&self, dtype: DataType) -> usize {
        self.count * dtype.size()
    }

    /// nccl-tests' "size" column: the larger of the send and receive bytes
    /// (`max(args->sendBytes, args->expectedBytes)` in `TimeTest`, `src/common.cu`).
    pub fn size_column(&self, dtype: DataType) -> usize {
        self.count.max(self.recv_count) * dtype.size()
    }
}

/// Elements per peer for a message of `bytes` split over `peers`, rounded down to a multiple
/// of 16 bytes as nccl-tests' all-to-all does (`(count/nranks) & ~(16/eltSize - 1)`,
/// `AlltoAllGetCollByteCount`, `src/alltoall.cu`), so sizes match its at any rank count.
pub fn per_peer_count(bytes: usize, elem_size: usize, peers: usize) -> usize {
    let per = bytes / elem_size / peers.max(1);
    let align = (16 / elem_size.max(1)).max(1);
    per & !(align - 1)
}

/// The root of the rooted collectives (broadcast, reduce): rank 0, nccl-tests' default (`-r`).
pub const ROOT: u32 = 0;

/// nccl-tests' busbw factor of the collectives that move `(nranks - 1) / nranks` of the data
/// across ranks (all-to-all, all-gather, reduce-scatter, gather, scatter).
pub fn spread(nranks: u32) -> f64 {
    (nranks as f64 - 1.0) / nranks as f64
}

/// What a rooted pattern's rank receives: everything on the root, nothing elsewhere (reduce,
/// gather).
pub fn on_root_only(rank: u32, layout: &Layout) -> usize {
    if rank == ROOT { layout.recv_count } else { 0 }
}

/// Where a received element comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Element `index` of `rank`'s send buffer.
    Rank { rank: u32, index: usize },
    /// The reduction over all ranks of their element `index`.
    Reduced { index: usize },
}

impl Source {
    /// Element `index` of a buffer made of one block of `per` elements from each rank in rank
    /// order (all-gather, a gather's root): rank `index / per`'s element `index % per`.
    pub fn block(index: usize, per: usize) -> Source {
        let per = per.max(1);
        Source::Rank {
            rank: (index / per) as u32,
            index: index % per,
        }
    }
}

/// One communication pattern.
pub trait Pattern: Sync {
    /// The name used in `--patterns`, tables and JSON.
    fn name(&self) -> &'static str;
    /// Whether the reduction op matters (the "redop" column).
    fn reduces(&self) -> bool {
        false
    }
    /// Buffer shapes for a message of about `bytes` bytes (rounded down to what divides evenly).
    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout;
    /// busbw = algbw × this factor (nccl-tests' definition).
    fn busbw_factor(&self, nranks: u32) -> f64;
    /// The bytes algbw counts per operation: nccl-tests' size column
    /// ([`Layout::size_column`]) for every program whose `GetBw` divides the size by the time.
    fn algbw_bytes(&self, layout: &Layout, dtype: DataType, _nranks: u32) -> usize {
        layout.size_column(dtype)
    }
    /// Whether the pattern runs on `nranks` ranks: `Err` says why not, and the run goes on
    /// without it, as nccl-tests skips such a program.
    fn runs_on(&self, _nranks: u32) -> Result<(), String> {
        Ok(())
    }
    /// nccl-tests' "count" column: the count passed to NCCL (`paramcount`).
    fn count_column(&self, layout: &Layout) -> usize {
        layout.count
    }
    /// Elements of `rank`'s receive buffer the operation writes, the first ones: every
    /// element, but for a reduce, whose non-root ranks receive nothing.
    fn written(&self, _rank: u32, layout: &Layout) -> usize {
        layout.recv_count
    }
    /// The NCCL collective this pattern is, when it is one call of [`Collective`] (its count
    /// argument is [`Pattern::count_column`], its root [`ROOT`]); `None` for a pattern that
    /// launches itself (sends and receives).
    fn collective(&self) -> Option<Collective> {
        None
    }
    /// Queues one operation on the communicator's stream: by default the pattern's collective.
    fn launch(
        &self,
        comm: &Communicator,
        send: Region,
        recv: Region,
        layout: &Layout,
        dtype: DataType,
        op: RedOp,
    ) -> Result<(), CommError> {
        let Some(c) = self.collective() else {
            return Err(CommError::GivenUp {
                what: format!(
                    "{}: a pattern with neither a collective nor a launch",
                    self.name()
                ),
            });
        };
        let n = self.count_column(layout);
        comm.collective(c, send, recv, n, dtype.nccl(), op.nccl_code(), ROOT)
    }
    /// Where element `index` of `rank`'s receive buffer comes from (`index` below
    /// [`Pattern::written`]).
    fn source(&self, rank: u32, nranks: u32, index: usize, layout: &Layout) -> Source;
}

/// Every pattern nccl-smoke knows, in the order it runs them.
pub static REGISTRY: &[&dyn Pattern] = &[
    &all_reduce::AllReduce,
    &all_to_all::AllToAll,
    &send_recv_ring::SendRecvRing,
    &send_recv_pairwise::SendRecvPairwise,
    &all_gather::AllGather,
    &reduce_scatter::ReduceScatter,
    &broadcast::Broadcast,
    &reduce::Reduce,
    &gather::Gather,
    &scatter::Scatter,
    &hypercube::Hypercube,
];

/// Resolves a `--patterns` list: exact names, or a prefix (`send_recv` selects both shapes).
pub fn select(names: &[String]) -> Result<Vec<&'static dyn Pattern>, String> {
    let mut out: Vec<&'static dyn Pattern> = Vec::new();
    for want in names {
        // An exact name selects that pattern alone (`reduce` is not `reduce_scatter`).
        let exact: Vec<_> = REGISTRY.iter().filter(|p| p.name() == want).collect();
        let hits: Vec<_> = if exact.is_empty() {
            REGISTRY
                .iter()
                .filter(|p| p.name().starts_with(&format!("{want}_")))
                .collect()
        } else {
            exact
        };
        if hits.is_empty() {
            let known: Vec<_> = REGISTRY.iter().map(|p| p.name()).collect();
            return Err(format!(
                "unknown pattern '{want}': known patterns are {}",
                known.join(", ")
            ));
        }
        for p in hits {
            if !out.iter().any(|q| q.name() == p.name()) {
                out.push(*p);
            }
        }
    }
    Ok(out)
}

/// `--patterns`' long help, listing the registry.
pub fn help() -> String {
    let names: Vec<&str> = REGISTRY.iter().map(|p| p.name()).collect();
    format!(
        "Patterns to run, comma-separated; a prefix selects a family (`send_recv` is every \
         send_recv_* pattern). Known: {}.",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_name(n: &str) -> &'static dyn Pattern {
        select(&[n.to_string()]).unwrap()[0]
    }

    #[test]
    fn busbw_factors_are_nccl_tests_ones() {
        let n = 8;
        assert_eq!(by_name("all_reduce").busbw_factor(n), 2.0 * 7.0 / 8.0);
        assert_eq!(by_name("all_to_all").busbw_factor(n), 7.0 / 8.0);
        assert_eq!(by_name("send_recv_ring").busbw_factor(n), 1.0);
        assert_eq!(by_name("send_recv_pairwise").busbw_factor(n), 1.0);
        // NVIDIA/nccl-tests v2.19.6: AllGatherGetBw and ReduceScatterGetBw
        // (`factor = (nranks - 1)/nranks`, src/all_gather.cu:42, src/reduce_scatter.cu:41),
        // BroadcastGetBw (`factor = 1`, src/broadcast.cu:38), ReduceGetBw (`busBw = baseBw`,
        // src/reduce.cu:39).
        assert_eq!(by_name("all_gather").busbw_factor(n), 7.0 / 8.0);
        assert_eq!(by_name("reduce_scatter").busbw_factor(n), 7.0 / 8.0);
        assert_eq!(by_name("broadcast").busbw_factor(n), 1.0);
        assert_eq!(by_name("reduce").busbw_factor(n), 1.0);
    }

    /// nccl-tests v2.19.6's GetCollByteCount of each program (src/all_gather.cu:10,
    /// src/reduce_scatter.cu:10, src/broadcast.cu:10, src/reduce.cu:10): the count column is
    /// `paramcount`, the size column (algbw's bytes) `max(sendcount, recvcount) × eltSize`,
    /// which for all-gather and reduce-scatter is `count × nranks` as in their GetBw.
    #[test]
    fn counts_are_nccl_tests_ones() {
        // 1 MiB of floats over 3 ranks: base = (262144/3) & ~3 = 87380.
        let ag = by_name("all_gather").layout(1 << 20, 4, 3);
        assert_eq!((ag.count, ag.recv_count), (87380, 262140));
        assert_eq!(by_name("all_gather").count_column(&ag), 87380);
        assert_eq!(ag.size_column(DataType::Float), 262140 * 4);
        let rs = by_name("reduce_scatter").layout(1 << 20, 4, 3);
        assert_eq!((rs.count, rs.recv_count), (262140, 87380));
        assert_eq!(by_name("reduce_scatter").count_column(&rs), 87380);
        assert_eq!(rs.size_column(DataType::Float), 262140 * 4);
        for name in ["broadcast", "reduce"] {
            let l = by_name(name).layout(1000, 8, 3);
            assert_eq!((l.count, l.recv_count), (125, 125), "{name}");
            assert_eq!(by_name(name).count_column(&l), 125, "{name}");
        }
        // Gather and scatter: src/gather.cu:8, src/scatter.cu:8.
        let g = by_name("gather").layout(1 << 20, 4, 3);
        assert_eq!((g.count, g.recv_count), (87380, 262140));
        assert_eq!(by_name("gather").count_column(&g), 87380);
        let s = by_name("scatter").layout(1 << 20, 4, 3);
        assert_eq!((s.count, s.recv_count), (262140, 87380));
        assert_eq!(by_name("scatter").count_column(&s), 87380);
        assert_eq!(s.size_column(DataType::Float), 262140 * 4);
        // GatherGetBw, ScatterGetBw: factor (nranks - 1)/nranks (src/gather.cu:36,
        // src/scatter.cu:32).
        assert_eq!(by_name("gather").busbw_factor(4), 0.75);
        assert_eq!(by_name("scatter").busbw_factor(4), 0.75);
        // A reduce writes the root's receive buffer only, as a gather does; every other
        // pattern every rank's.
        let l = by_name("reduce").layout(64, 4, 4);
        assert_eq!(
            (0..4)
                .map(|r| by_name("reduce").written(r, &l))
                .collect::<Vec<_>>(),
            [16, 0, 0, 0]
        );
        assert_eq!(by_name("broadcast").written(3, &l), 16);
        let l = by_name("gather").layout(64, 4, 4);
        assert_eq!(
            (0..4)
                .map(|r| by_name("gather").written(r, &l))
                .collect::<Vec<_>>(),
            [16, 0, 0, 0]
        );
    }

    #[test]
    fn gathered_and_broadcast_elements_name_their_sender() {
        let ag = by_name("all_gather");
        let l = ag.layout(4 * 16, 4, 4); // 4 elements (16 bytes) from each rank
        assert_eq!(ag.source(2, 4, 0, &l), Source::Rank { rank: 0, index: 0 });
        assert_eq!(ag.source(2, 4, 13, &l), Source::Rank { rank: 3, index: 1 });
        let bc = by_name("broadcast");
        let l = bc.layout(64, 4, 4);
        assert_eq!(
            bc.source(3, 4, 7, &l),
            Source::Rank {
                rank: ROOT,
                index: 7
            }
        );
        let g = by_name("gather");
        let l = g.layout(4 * 16, 4, 4);
        assert_eq!(g.source(ROOT, 4, 9, &l), Source::Rank { rank: 2, index: 1 });
        let sc = by_name("scatter");
        let l = sc.layout(4 * 16, 4, 4);
        assert_eq!(
            sc.source(3, 4, 1, &l),
            Source::Rank {
                rank: ROOT,
                index: 13
            }
        );
        // Reduce-scatter: rank r's element i is element r × recvcount + i of the reduction.
        let rs = by_name("reduce_scatter");
        let l = rs.layout(4 * 16, 4, 4);
        assert_eq!(rs.source(2, 4, 1, &l), Source::Reduced { index: 9 });
    }

    #[test]
    fn selection_by_prefix_and_errors() {
        let names: Vec<_> = select(&["send_recv".into(), "all_reduce".into()])
            .unwrap()
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(
            names,
            ["send_recv_ring", "send_recv_pairwise", "all_reduce"]
        );
        // An exact name is that pattern alone; a prefix a family.
        let names: Vec<_> = select(&["reduce".into()])
            .unwrap()
            .iter()
            .map(|p| p.name())
            .collect();
        assert_eq!(names, ["reduce"]);
        let e = select(&["allreduce".into()]).err().unwrap();
        assert!(
            e.contains("unknown pattern 'allreduce'") && e.contains("all_reduce"),
            "{e}"
        );
    }

    #[test]
    fn layouts_round_down_to_what_divides_evenly() {
        let a2a = by_name("all_to_all").layout(100, 4, 3);
        assert_eq!((a2a.count, a2a.per_peer, a2a.recv_count), (24, 8, 24));
        let pw = by_name("send_recv_pairwise").layout(100, 4, 3);
        assert_eq!((pw.count, pw.per_peer, pw.recv_count), (24, 12, 24));
        // Per-peer chunks are whole multiples of 16 bytes, as in nccl-tests' alltoall.cu:
        // 1 MiB of floats over 3 ranks is 87381 per peer, rounded to 87380.
        let a2a = by_name("all_to_all").layout(1 << 20, 4, 3);
        assert_eq!((a2a.per_peer, a2a.count), (87380, 262140));
        assert_eq!(by_name("all_to_all").count_column(&a2a), 87380);
        assert_eq!(a2a.size_column(DataType::Float), 1048560);
        assert_eq!(per_peer_count(1000, 8, 3), 40);
        assert_eq!(per_peer_count(1000, 1, 3), 320);
        assert_eq!(per_peer_count(1000, 2, 7), 64);
        let ar = by_name("all_reduce").layout(10, 4, 3);
        assert_eq!((ar.count, ar.recv_count), (2, 2));
        assert_eq!(by_name("all_reduce").layout(0, 4, 3).count, 0);
    }

    /// Every element a rank receives is claimed by exactly one sender element, and each sender
    /// element goes to exactly one receiver: the data flow is a permutation.
    #[test]
    fn point_to_point_sources_form_a_permutation() {
        for name in [
            "all_to_all",
            "send_recv_ring",
            "send_recv_pairwise",
            "scatter",
        ] {
            let p = by_name(name);
            for n in [1u32, 2, 3, 4, 5] {
                let l = p.layout(4 * 60, 4, n);
                let mut seen = std::collections::HashSet::new();
                for r in 0..n {
                    for i in 0..l.recv_count {
                        match p.source(r, n, i, &l) {
                            Source::Rank { rank, index } => {
                                assert!(rank < n && index < l.count, "{name} n={n}");
                                assert!(seen.insert((rank, index)), "{name} n={n} dup");
                            }
                            Source::Reduced { .. } => panic!("{name} does not reduce"),
                        }
                    }
                }
                assert_eq!(seen.len(), n as usize * l.recv_count, "{name} n={n}");
            }
        }
    }

    #[test]
    fn all_to_all_chunk_j_comes_from_rank_j() {
        let p = by_name("all_to_all");
        let l = p.layout(4 * 16, 4, 4); // 4 elements (16 bytes) per peer
        assert_eq!(p.source(1, 4, 0, &l), Source::Rank { rank: 0, index: 4 });
        assert_eq!(p.source(1, 4, 15, &l), Source::Rank { rank: 3, index: 7 });
    }

    #[test]
    fn ring_receives_from_the_previous_rank() {
        let p = by_name("send_recv_ring");
        let l = p.layout(16, 4, 4);
        assert_eq!(p.source(0, 4, 2, &l), Source::Rank { rank: 3, index: 2 });
        assert_eq!(p.source(2, 4, 0, &l), Source::Rank { rank: 1, index: 0 });
    }
}
