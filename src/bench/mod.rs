//! The measurement core: one message size of one pattern on one rank, and the combination of
//! all ranks' measurements into the row rank 0 reports.
//!
//! Timing as nccl-tests: warm-up iterations, then `iters` timed ones whose average is wall time
//! over the iterations. Each timed iteration is also bracketed by device events, so its own
//! latency goes into a histogram without a host sync between iterations.

pub mod sweep;
pub mod verify;

use crate::bootstrap::Bootstrap;
use crate::comm::{CommError, Communicator, Region};
use crate::data::{DataType, RedOp};
use crate::ffi::cuda::{DeviceBuffer, Event};
use crate::patterns::{Layout, Pattern};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};
pub use verify::WrongElement;

/// How each size is measured.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub warmup: u32,
    pub iters: u32,
    pub check: bool,
    pub dtype: DataType,
    pub op: RedOp,
    /// Longest wait for one batch of queued operations.
    pub deadline: Duration,
}

/// Device and host buffers sized for the largest message, reused across sizes.
pub struct Buffers {
    pub send: DeviceBuffer,
    pub recv: DeviceBuffer,
    host_send: Vec<u8>,
    host_recv: Vec<u8>,
    events: Vec<(Event, Event)>,
}

impl Buffers {
    pub fn new(
        send_bytes: usize,
        recv_bytes: usize,
        iters: u32,
    ) -> Result<Buffers, crate::ffi::cuda::CudaError> {
        let events = (0..iters)
            .map(|_| Ok((Event::new()?, Event::new()?)))
            .collect::<Result<Vec<_>, crate::ffi::cuda::CudaError>>()?;
        Ok(Buffers {
            send: DeviceBuffer::alloc(send_bytes)?,
            recv: DeviceBuffer::alloc(recv_bytes)?,
            host_send: vec![0; send_bytes],
            host_recv: vec![0; recv_bytes],
            events,
        })
    }
}

/// What one rank measured for one size; gathered to rank 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankSample {
    pub rank: u32,
    /// Wall time per iteration, µs.
    pub avg_us: f64,
    /// Per-iteration latency percentiles from device events, µs.
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    /// Elements that differed from what their senders sent (0 when unchecked).
    pub wrong: u64,
    pub first_wrong: Option<WrongElement>,
}

/// Queues one operation of `pattern` and waits for it: how transports get built ("connect").
pub fn connect(
    comm: &mut Communicator,
    pattern: &dyn Pattern,
    bufs: &Buffers,
    t: &Timing,
) -> Result<(), CommError> {
    let layout = pattern.layout(
        t.dtype.size() * comm.nranks as usize,
        t.dtype.size(),
        comm.nranks,
    );
    pattern.launch(
        comm,
        Region::whole(&bufs.send),
        Region::whole(&bufs.recv),
        &layout,
        t.dtype,
        t.op,
    )?;
    comm.wait_idle(t.deadline, &format!("first {} (connect)", pattern.name()))
}

/// Measures one size on this rank.
pub fn measure(
    comm: &mut Communicator,
    boot: &dyn Bootstrap,
    pattern: &dyn Pattern,
    layout: &Layout,
    bufs: &mut Buffers,
    t: &Timing,
    epoch: u32,
) -> Result<RankSample, CommError> {
    let what = |phase: &str| {
        format!(
            "{} of {} {} bytes",
            phase,
            pattern.name(),
            layout.bytes(t.dtype)
        )
    };
    let (rank, n) = (comm.rank, comm.nranks);
    let send_bytes = layout.count * t.dtype.size();
    let recv_bytes = layout.recv_count * t.dtype.size();
    verify::fill_send(&mut bufs.host_send, layout, t.dtype, t.op, rank, n, epoch);
    bufs.send
        .copy_from_host(&bufs.host_send[..send_bytes], &comm.stream)?;
    bufs.recv.fill(0xff, &comm.stream)?;
    let launch = |c: &Communicator| {
        pattern.launch(
            c,
            Region::whole(&bufs.send),
            Region::whole(&bufs.recv),
            layout,
            t.dtype,
            t.op,
        )
    };
    for _ in 0..t.warmup {
        launch(comm)?;
    }
    comm.wait_idle(t.deadline, &what("warm-up"))?;
    boot.barrier();

    let start = Instant::now();
    for (begin, end) in &bufs.events[..t.iters as usize] {
        begin.record(&comm.stream)?;
        launch(comm)?;
        end.record(&comm.stream)?;
    }
    comm.wait_idle(t.deadline, &what("timed iterations"))?;
    let wall = start.elapsed();

    // 1 ns to 1 h at 3 significant digits: constant bounds that hdrhistogram accepts.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant histogram bounds are valid");
    for (begin, end) in &bufs.events[..t.iters as usize] {
        let ns = (end.elapsed_ms_since(begin)? as f64 * 1e6).max(1.0) as u64;
        hist.saturating_record(ns);
    }
    let us = |ns: u64| ns as f64 / 1e3;

    let (wrong, first_wrong) = if t.check {
        bufs.recv
            .copy_to_host(&mut bufs.host_recv[..recv_bytes], &comm.stream)?;
        comm.wait_idle(t.deadline, &what("copy-back"))?;
        verify::check(
            &bufs.host_recv,
            pattern,
            layout,
            t.dtype,
            t.op,
            rank,
            n,
            epoch,
        )
    } else {
        (0, None)
    };
    Ok(RankSample {
        rank,
        avg_us: wall.as_secs_f64() * 1e6 / t.iters.max(1) as f64,
        p50_us: us(hist.value_at_quantile(0.5)),
        p99_us: us(hist.value_at_quantile(0.99)),
        max_us: us(hist.max()),
        wrong,
        first_wrong,
    })
}

/// One row of a pattern's table, combined over ranks: a collective is as fast as its slowest
/// member, so times are the maximum over ranks and the slowest rank is named.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub pattern: String,
    /// Bytes each rank sends (nccl-tests' "size").
    pub size_bytes: usize,
    /// Elements in each rank's send buffer.
    pub count: usize,
    pub dtype: DataType,
    /// The reduction, for patterns that reduce.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redop: Option<RedOp>,
    pub time_us: Times,
    /// size / time, GB/s (10^9 bytes per second).
    pub algbw_gbs: f64,
    /// algbw × the pattern's factor, GB/s.
    pub busbw_gbs: f64,
    /// Wrong elements over all ranks (0 when unchecked).
    pub wrong: u64,
    /// Whether data was checked.
    pub checked: bool,
    /// The rank with the largest average time.
    pub slowest_rank: u32,
    /// Each rank's average time, µs, in rank order.
    pub rank_avg_us: Vec<f64>,
    /// The first wrong element and the rank that received it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<(u32, WrongElement)>,
}

/// Times of one size, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Wall time per iteration on the slowest rank.
    pub avg: f64,
    /// Per-iteration latency percentiles, worst over ranks.
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// algbw in GB/s for `bytes` moved in `us` microseconds.
pub fn algbw_gbs(bytes: usize, us: f64) -> f64 {
    if us <= 0.0 {
        0.0
    } else {
        bytes as f64 / us / 1e3
    }
}

/// Combines all ranks' samples (rank order) into one row.
pub fn combine(
    pattern: &dyn Pattern,
    layout: &Layout,
    t: &Timing,
    nranks: u32,
    samples: &[RankSample],
) -> SizeResult {
    let slowest = samples
        .iter()
        .max_by(|a, b| a.avg_us.total_cmp(&b.avg_us))
        .map(|s| (s.rank, s.avg_us))
        .unwrap_or((0, 0.0));
    let worst = |f: fn(&RankSample) -> f64| samples.iter().map(f).fold(0.0, f64::max);
    let bytes = layout.bytes(t.dtype);
    let algbw = algbw_gbs(bytes, slowest.1);
    SizeResult {
        pattern: pattern.name().into(),
        size_bytes: bytes,
        count: layout.count,
        dtype: t.dtype,
        redop: pattern.reduces().then_some(t.op),
        time_us: Times {
            avg: slowest.1,
            p50: worst(|s| s.p50_us),
            p99: worst(|s| s.p99_us),
            max: worst(|s| s.max_us),
        },
        algbw_gbs: algbw,
        busbw_gbs: algbw * pattern.busbw_factor(nranks),
        wrong: samples.iter().map(|s| s.wrong).sum(),
        checked: t.check,
        slowest_rank: slowest.0,
        rank_avg_us: samples.iter().map(|s| s.avg_us).collect(),
        first_wrong: samples
            .iter()
            .find_map(|s| s.first_wrong.clone().map(|w| (s.rank, w))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::select;

    fn sample(rank: u32, avg_us: f64) -> RankSample {
        RankSample {
            rank,
            avg_us,
            p50_us: avg_us * 0.9,
            p99_us: avg_us * 1.1,
            max_us: avg_us * 1.2,
            wrong: 0,
            first_wrong: None,
        }
    }

    #[test]
    fn bandwidth_follows_nccl_tests_formulas() {
        // 1 GB in 1000 µs = 1000 GB/s... nccl-tests: algbw = bytes / time(s) / 1e9.
        assert_eq!(algbw_gbs(1_000_000_000, 1_000_000.0), 1.0);
        assert_eq!(algbw_gbs(128 << 20, 1000.0), 134.217728);
        let p = select(&["all_reduce".into()]).unwrap()[0];
        let t = Timing {
            warmup: 1,
            iters: 1,
            check: true,
            dtype: DataType::Float,
            op: RedOp::Sum,
            deadline: Duration::from_secs(1),
        };
        let layout = p.layout(1 << 20, 4, 8);
        let r = combine(
            p,
            &layout,
            &t,
            8,
            &[sample(0, 100.0), sample(1, 250.0), sample(2, 90.0)],
        );
        assert_eq!(r.slowest_rank, 1);
        assert_eq!(r.time_us.avg, 250.0);
        let algbw = (1u64 << 20) as f64 / 250.0 / 1e3;
        assert!((r.algbw_gbs - algbw).abs() < 1e-12);
        assert!((r.busbw_gbs - algbw * 2.0 * 7.0 / 8.0).abs() < 1e-12);
        assert_eq!(r.time_us.max, 300.0);
        assert_eq!(r.redop, Some(RedOp::Sum));
    }

    #[test]
    fn zero_time_gives_zero_bandwidth_not_infinity() {
        assert_eq!(algbw_gbs(0, 0.0), 0.0);
        assert_eq!(algbw_gbs(8, 0.0), 0.0);
    }
}
