//! `ncclAllReduce`: every rank ends with the reduction of all ranks' buffers.

use super::{Layout, Pattern, Source};
use crate::comm::{Collective, CommError, Communicator, Region};
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
        Layout::whole(bytes, elem_size)
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
        comm.collective(
            Collective::AllReduce,
            send,
            recv,
            layout.count,
            dtype.nccl(),
            op.nccl_code(),
            0,
        )
    }

    fn source(&self, _rank: u32, _nranks: u32, index: usize, _layout: &Layout) -> Source {
        Source::Reduced { index }
    }
}
