//! `ncclAllReduce`: every rank ends with the reduction of all ranks' buffers.

use super::{Layout, Pattern, Source};
use crate::comm::{CommError, Communicator, Region};
use crate::data::{DataType, RedOp};

pub struct AllReduce;

impl Pattern for AllReduce {
    fn name(&self) -> &'static str {
        "all_reduce"
    }

    fn reduces(&self) -> bool {
        true
    }

    fn layout(&self, bytes: usize, elem_size: usize, _nranks: u32) -> Layout {
        let count = bytes / elem_size;
        Layout {
            count,
            recv_count: count,
            per_peer: count,
        }
    }

    fn busbw_factor(&self, nranks: u32) -> f64 {
        2.0 * (nranks as f64 - 1.0) / nranks as f64
    }

    fn launch(
        &self,
        comm: &Communicator,
        send: Region,
        recv: Region,
        layout: &Layout,
        dtype: DataType,
        op: RedOp,
    ) -> Result<(), CommError> {
        comm.all_reduce(send, recv, layout.count, dtype.nccl(), op.nccl_code())
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, _layout: &Layout) -> Source {
        Source::Reduced { index }
    }
}
