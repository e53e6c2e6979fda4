//! `ncclBroadcast` from rank [`ROOT`]: every rank ends with the root's buffer. Counts as
//! nccl-tests' `broadcast_perf` sets them (`BroadcastGetCollByteCount`, `src/broadcast.cu`,
//! NVIDIA/nccl-tests v2.19.6), with its default root, 0.

use super::{Layout, Pattern, ROOT, Source};
use crate::comm::Collective;

pub struct Broadcast;

impl Pattern for Broadcast {
    fn name(&self) -> &'static str {
        "broadcast"
    }

    fn layout(&self, bytes: usize, elem_size: usize, _nranks: u32) -> Layout {
        Layout::whole(bytes, elem_size)
    }

    /// `BroadcastGetBw`: busbw factor 1.
    fn busbw_factor(&self, _nranks: u32) -> f64 {
        1.0
    }

    fn collective(&self) -> Option<Collective> {
        Some(Collective::Broadcast)
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, _layout: &Layout) -> Source {
        Source::Rank { rank: ROOT, index }
    }
}
