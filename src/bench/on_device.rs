//! Filling send buffers and checking receive buffers with nccl-smoke's kernels
//! (`nccl_smoke_kernels`), as nccl-tests does on the device (`InitData`, `CheckData`,
//! NVIDIA/nccl-tests v2.19.6 `src/common.cu`): the host copies a few small tables down and 24
//! bytes of counts back, whatever the message size.
//!
//! The check is trusted only when the kernel says it compared every element (a driver that
//! records launches without running them reports 0). When it finds wrong elements, or did not
//! compare them all, the caller checks the buffer again on the host, which tells whose data
//! the wrong elements are.

use super::verify;
use crate::comm::{CommError, Communicator, Poll};
use crate::elements::{self, DataType, RedOp};
use crate::ffi::cuda::{CudaError, DeviceBuffer, Kernels};
use crate::patterns::{Layout, Pattern, Source};
use nccl_smoke_kernels::args::{Block, CheckArgs, CheckResult, FillArgs, blocks_bytes};

/// The kernels and the small device buffers they read.
pub struct DeviceData {
    kernels: Kernels,
    /// The encoding table of `table_for`'s type.
    table: DeviceBuffer,
    table_host: Vec<u8>,
    table_for: Option<DataType>,
    /// A copying pattern's blocks (one per peer at most).
    blocks: DeviceBuffer,
    blocks_host: Vec<u8>,
    result: DeviceBuffer,
    result_host: [u8; 24],
}

/// What the device check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceCheck {
    /// Every element compared, none wrong.
    Clean { elements: u64 },
    /// Wrong elements, or not every element compared: check again on the host.
    Recheck(CheckResult),
    /// The kernels cannot check this pattern on this rank (a reduction whose element i is
    /// not the reduction of the ranks' element i: reduce-scatter's block of rank > 0): the
    /// host checks it.
    OnHost,
}

impl DeviceData {
    /// Loads the kernels into the current context; `nranks` sizes the block list.
    pub fn new(nranks: u32) -> Result<DeviceData, CudaError> {
        let blocks = nranks.max(1) as usize * std::mem::size_of::<Block>();
        Ok(DeviceData {
            kernels: Kernels::load()?,
            table: DeviceBuffer::alloc(nccl_smoke_kernels::args::TABLE_LEN * 8)?,
            table_host: Vec::new(),
            table_for: None,
            blocks: DeviceBuffer::alloc(blocks)?,
            blocks_host: Vec::new(),
            result: DeviceBuffer::alloc(24)?,
            result_host: [0; 24],
        })
    }

    /// Queues the upload of `dtype`'s encoding table, unless it is there already.
    fn table(&mut self, dtype: DataType, comm: &Communicator) -> Result<u64, CudaError> {
        if self.table_for != Some(dtype) {
            self.table_host = elements::kernel_table(dtype);
            self.table
                .copy_from_host(0, &self.table_host, &comm.stream)?;
            self.table_for = Some(dtype);
        }
        Ok(self.table.ptr().0)
    }

    /// Queues the fill of `send` with what this rank sends in `epoch`.
    #[allow(clippy::too_many_arguments)]
    pub fn fill(
        &mut self,
        comm: &Communicator,
        send: &DeviceBuffer,
        layout: &Layout,
        dtype: DataType,
        op: Option<RedOp>,
        epoch: u32,
    ) -> Result<(), CudaError> {
        if layout.count == 0 {
            return Ok(());
        }
        let table = self.table(dtype, comm)?;
        self.kernels.fill(
            FillArgs {
                out: send.ptr().0,
                count: layout.count as u64,
                first: 0,
                table,
                elsize: dtype.size() as u64,
                op: elements::kernel_op(op) as u64,
                nranks: comm.nranks as u64,
                sender: comm.rank as u64,
                epoch: epoch as u64,
            },
            &comm.stream,
        )
    }

    /// Checks `recv` on the device and waits for the counts.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &mut self,
        comm: &Communicator,
        recv: &DeviceBuffer,
        pattern: &dyn Pattern,
        layout: &Layout,
        dtype: DataType,
        op: RedOp,
        epoch: u32,
        deadline: std::time::Duration,
        what: &str,
    ) -> Result<DeviceCheck, CommError> {
        let count = pattern.written(comm.rank, layout) as u64;
        if count == 0 {
            return Ok(DeviceCheck::Clean { elements: 0 });
        }
        if on_host(pattern, layout, comm.rank, comm.nranks) {
            return Ok(DeviceCheck::OnHost);
        }
        let table = self.table(dtype, comm)?;
        let (kop, per) = match blocks(pattern, layout, comm.rank, comm.nranks) {
            Some((list, per)) => {
                self.blocks_host = blocks_bytes(&list);
                if self.blocks_host.len() > self.blocks.len() {
                    self.blocks = DeviceBuffer::alloc(self.blocks_host.len())?;
                }
                self.blocks
                    .copy_from_host(0, &self.blocks_host, &comm.stream)?;
                (nccl_smoke_kernels::values::Op::Copy, per)
            }
            None => (elements::kernel_op(Some(op)), count as usize),
        };
        self.result_host = CheckResult::START.to_bytes();
        self.result
            .copy_from_host(0, &self.result_host, &comm.stream)?;
        self.kernels.check(
            CheckArgs {
                got: recv.ptr().0,
                count,
                table,
                elsize: dtype.size() as u64,
                op: kop as u64,
                nranks: comm.nranks as u64,
                epoch: epoch as u64,
                blocks: self.blocks.ptr().0,
                per_peer: per as u64,
                result: self.result.ptr().0,
            },
            &comm.stream,
        )?;
        self.result
            .copy_to_host(0, &mut self.result_host, &comm.stream)?;
        comm.wait_idle(deadline, what, Poll::Relaxed)?;
        let r = CheckResult::from_bytes(&self.result_host);
        Ok(if r.checked == count && r.wrong == 0 {
            DeviceCheck::Clean { elements: count }
        } else {
            DeviceCheck::Recheck(r)
        })
    }
}

/// Whether `rank`'s receive buffer is a reduction the kernels cannot check: they compare
/// element i with the reduction of the ranks' element i, and reduce-scatter's block on rank
/// r > 0 starts at element `r × recvcount` of the reduction.
pub fn on_host(pattern: &dyn Pattern, layout: &Layout, rank: u32, nranks: u32) -> bool {
    pattern.reduces()
        && pattern.written(rank, layout) > 0
        && pattern.source(rank, nranks, 0, layout) != (Source::Reduced { index: 0 })
}

/// A copying pattern's receive buffer as blocks of `per` elements, each a run of one sender's
/// send buffer (from the pattern's own source map, read at each block's start); `None` for a
/// reduction, whose every element is the reduction of all ranks' (the test below holds each
/// pattern's source map to both).
pub fn blocks(
    pattern: &dyn Pattern,
    layout: &Layout,
    rank: u32,
    nranks: u32,
) -> Option<(Vec<Block>, usize)> {
    if pattern.reduces() {
        return None;
    }
    let per = layout.per_peer.clamp(1, layout.recv_count.max(1));
    let mut out = Vec::new();
    let mut start = 0;
    while start < layout.recv_count {
        match pattern.source(rank, nranks, start, layout) {
            Source::Reduced { .. } => return None,
            Source::Rank { rank, index } => out.push(Block {
                sender: rank as u64,
                base: index as u64,
            }),
        }
        start += per;
    }
    Some((out, per))
}

/// The check this device check stands for, when it was clean.
pub fn clean(elements: u64) -> verify::Check {
    verify::Check {
        elements,
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::REGISTRY;

    /// The blocks describe every element of every copying pattern's receive buffer exactly as
    /// the pattern's source map does (what the check kernel relies on).
    #[test]
    fn blocks_follow_each_patterns_source_map() {
        for p in REGISTRY {
            for n in [1u32, 2, 3, 4, 7] {
                for bytes in [0usize, 16, 1000, 4096, 65536] {
                    let layout = p.layout(bytes, 4, n);
                    for rank in 0..n {
                        let Some((list, per)) = blocks(*p, &layout, rank, n) else {
                            if on_host(*p, &layout, rank, n) {
                                continue;
                            }
                            for i in 0..p.written(rank, &layout) {
                                assert_eq!(
                                    p.source(rank, n, i, &layout),
                                    Source::Reduced { index: i },
                                    "{}",
                                    p.name()
                                );
                            }
                            continue;
                        };
                        for i in 0..layout.recv_count {
                            let b = list[i / per];
                            let want = Source::Rank {
                                rank: b.sender as u32,
                                index: b.base as usize + i % per,
                            };
                            assert_eq!(
                                p.source(rank, n, i, &layout),
                                want,
                                "{} n={n} rank={rank} bytes={bytes} i={i}",
                                p.name()
                            );
                        }
                    }
                }
            }
        }
    }
}
