//! `ncclAllReduce`: every rank ends with the reduction of all ranks' buffers.

use super::{Layout, Pattern, Source};
use crate::comm::Collective;

pub struct AllReduce;

impl Pattern for AllReduce {
    fn name(&self) -> &'static str {
        "all_reduce"
    }

    fn reduces(&self) -> bool {
        true
    }

    fn layout(&self, bytes: usize, elem_size: usize, _nranks: u32) -> Layout {
        Layout::whole(bytes, elem_size)
    }

    fn busbw_factor(&self, nranks: u32) -> f64 {
        2.0 * (nranks as f64 - 1.0) / nranks as f64
    }

    fn collective(&self) -> Option<Collective> {
        Some(Collective::AllReduce)
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, _layout: &Layout) -> Source {
        Source::Reduced { index }
    }
}
