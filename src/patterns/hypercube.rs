//! nccl-tests' `hypercube_perf`: an all-gather by recursive doubling over sends and receives.
//! Each rank first places its own block at `rank × count` of its receive buffer; then, for each
//! bit `mask` of the rank number, it exchanges every block it holds with rank `rank ^ mask`,
//! the exchange doubling each step. Powers of 2 ranks only, as there.
//! Counts, bandwidth and steps as `HyperCubeGetCollByteCount`, `HyperCubeGetBw` and
//! `HyperCubeRunColl` set them (`src/hypercube.cu`, NVIDIA/nccl-tests v2.19.6).

use super::{Layout, Pattern, Source};
use crate::comm::{CommError, Communicator, Region};
use crate::elements::{DataType, RedOp};

pub struct Hypercube;

/// `ALIGN` of `src/hypercube.cu`: each rank's block is a multiple of 4 elements.
const ALIGN: usize = 4;

impl Pattern for Hypercube {
    fn name(&self) -> &'static str {
        "hypercube"
    }

    /// `base = (count/(ALIGN*nranks))*ALIGN` sent by each rank, `base × nranks` received.
    fn layout(&self, bytes: usize, elem_size: usize, nranks: u32) -> Layout {
        let n = nranks.max(1) as usize;
        let base = bytes / elem_size.max(1) / (ALIGN * n) * ALIGN;
        Layout {
            count: base,
            recv_count: base * n,
            per_peer: base,
        }
    }

    /// `HyperCubeGetBw`: `busBw = baseBw`.
    fn busbw_factor(&self, _nranks: u32) -> f64 {
        1.0
    }

    /// `HyperCubeGetBw`: `baseBw = count × typesize × (nranks − 1) / sec`, `count` being the
    /// `paramcount` (one rank's block): the blocks a rank receives.
    fn algbw_bytes(&self, layout: &Layout, dtype: DataType, nranks: u32) -> usize {
        layout.count * dtype.size() * (nranks.max(1) as usize - 1)
    }

    /// `HyperCubeRunTest` runs only when `nRanks` is a power of 2.
    fn runs_on(&self, nranks: u32) -> Result<(), String> {
        if nranks.is_power_of_two() {
            Ok(())
        } else {
            Err(format!("{nranks} ranks is not a power of 2"))
        }
    }

    fn launch(
        &self,
        comm: &Communicator,
        send: Region,
        recv: Region,
        layout: &Layout,
        dtype: DataType,
        _op: RedOp,
    ) -> Result<(), CommError> {
        let (me, n) = (comm.rank, comm.nranks);
        let block = layout.count * dtype.size();
        let at = |r: u32| r as usize * block;
        // nccl-tests copies the rank's block with cudaMemcpyAsync; here a send to itself does.
        comm.group(|c| {
            c.send(send.slice(0, block)?, layout.count, dtype.nccl(), me)?;
            c.recv(recv.slice(at(me), block)?, layout.count, dtype.nccl(), me)
        })?;
        let mut mask = 1;
        while mask < n {
            // The `mask` blocks this rank holds start at `s`; its peer's at `r`.
            let s = me & !(mask - 1);
            let r = s ^ mask;
            let (len, count) = (block * mask as usize, layout.count * mask as usize);
            comm.group(|c| {
                c.send(recv.slice(at(s), len)?, count, dtype.nccl(), me ^ mask)?;
                c.recv(recv.slice(at(r), len)?, count, dtype.nccl(), me ^ mask)
            })?;
            mask <<= 1;
        }
        Ok(())
    }

    /// Every rank's block in rank order, as after an all-gather.
    fn source(&self, _rank: u32, _nranks: u32, index: usize, layout: &Layout) -> Source {
        Source::block(index, layout.per_peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `src/hypercube.cu` v2.19.6, lines 12–18 (counts) and 41–46 (bandwidth).
    #[test]
    fn counts_and_bandwidth_are_nccl_tests_ones() {
        // 1 MiB of floats on 4 ranks: base = (262144/(4*4))*4 = 65536.
        let l = Hypercube.layout(1 << 20, 4, 4);
        assert_eq!((l.count, l.recv_count), (65536, 262144));
        assert_eq!(Hypercube.count_column(&l), 65536);
        assert_eq!(l.size_column(DataType::Float), 1 << 20);
        // 1000 bytes of doubles on 8 ranks: 125 / 32 * 4 = 12 per rank.
        assert_eq!(Hypercube.layout(1000, 8, 8).count, 12);
        // algbw counts the 3 blocks of 64 KiB elements a rank receives; busbw = algbw.
        assert_eq!(Hypercube.algbw_bytes(&l, DataType::Float, 4), 65536 * 4 * 3);
        assert_eq!(Hypercube.busbw_factor(4), 1.0);
    }

    #[test]
    fn only_powers_of_two_run() {
        assert!([1, 2, 4, 8].iter().all(|&n| Hypercube.runs_on(n).is_ok()));
        let e = Hypercube.runs_on(3).unwrap_err();
        assert!(e.contains("3 ranks is not a power of 2"), "{e}");
    }
}
