//! The measurement core: one message size of one pattern on one rank, and the combination of
//! all ranks' measurements into the row rank 0 reports.
//!
//! Timing as nccl-tests (`BenchTime`, `src/common.cu`): warm-up iterations, then `iters` timed
//! ones queued back to back, whose average is the host's wall time over them up to the stream's
//! completion; nothing else is queued inside that loop. Per-iteration latency comes from a
//! separate pass after it ([`latency_iters`] iterations with a device event between each two,
//! no host sync between them), so recording it never changes the time and bandwidth columns.

pub mod on_device;
mod row;
pub mod sweep;
pub mod verify;

use crate::comm::{CommError, Communicator, Poll, Region};
use crate::elements::{DataType, RedOp};
use crate::ffi::cuda::{DeviceBuffer, Event};
use crate::patterns::{Layout, Pattern};
use hdrhistogram::Histogram;
pub use row::{Found, Repeat, SampleError, SizeResult, Times, algbw_gbs, combine, validate};
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
    /// The latency pass runs at least this many iterations on small sizes (see
    /// [`latency_iters`]): [`LATENCY_MIN_SAMPLES`] on a GPU, 0 on the simulation, whose
    /// iterations cost CPU time and whose latency is no GPU figure.
    pub latency_floor: u32,
    /// Where the send data is written and the received data checked.
    pub data_on: DataOn,
    /// The slowest rate, bytes per second, at which the fill and check kernels may go through a
    /// buffer before a wait on them counts against the deadline (see [`Timing::kernel_time`]):
    /// [`GPU_KERNEL_FLOOR`], or [`SIM_KERNEL_FLOOR`] where the simulated driver runs them on a
    /// CPU core.
    pub kernel_floor: f64,
    /// What the supervisor allows the size's iterations between two beats (the sweep's
    /// `size_budget`), announced again after the fill and after the check, whose beats end it.
    pub size_budget: Duration,
}

/// [`Timing::kernel_floor`] on a GPU: 10 GB/s, 30 times below the memory bandwidth of the
/// slowest GPU the kernels target (sm_70 with HBM2 moves 900 GB/s; a PCIe 3 x16 link, which
/// they never cross, 16 GB/s): a fill or check this slow is stuck.
pub const GPU_KERNEL_FLOOR: f64 = 10e9;

/// [`Timing::kernel_floor`] on the simulated driver, which runs the kernels' reference on one
/// CPU core: about 0.6 GB/s measured through fill and check of 1 GiB on an idle two-core
/// machine; 50 MB/s leaves room for a machine busy with other work.
pub const SIM_KERNEL_FLOOR: f64 = 50e6;

impl Timing {
    /// How long a fill or check kernel may take over `bytes` on top of the deadline.
    pub fn kernel_time(&self, bytes: usize) -> Duration {
        let s = bytes as f64 / self.kernel_floor.max(1.0);
        Duration::try_from_secs_f64(s.clamp(0.0, 86_400.0)).unwrap_or_default()
    }
}

/// Where the send data is written and the received data checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum DataOn {
    /// nccl-smoke's kernels fill and check on the GPU, as nccl-tests does; the host sees
    /// counts only, and copies a buffer back only when it holds wrong elements.
    Device,
    /// The host fills and checks every byte through a staging buffer (slow at large sizes).
    Host,
}

/// Host staging per direction: data is filled and checked through it a chunk at a time, so
/// host memory stays the same whatever `-e` is (a full-size host copy of both buffers would be
/// 16 GiB per rank at `-e 8G`).
pub const STAGING_BYTES: usize = 64 << 20;

/// Device buffers sized for the largest message, host staging, and the timing events; reused
/// across sizes.
pub struct Buffers {
    pub send: DeviceBuffer,
    pub recv: DeviceBuffer,
    stage_send: Vec<u8>,
    stage_recv: Vec<u8>,
    /// One more event than the latency pass's most iterations: iteration i runs between events
    /// i and i+1, as nccl-tests' `-I` shares boundary events (`initEvents`, `src/common.cu`),
    /// so recording adds one event per iteration, not two.
    events: Vec<Event>,
    /// The fill and check kernels, with `DataOn::Device`.
    device: Option<on_device::DeviceData>,
}

impl Buffers {
    /// Buffers for `nranks` ranks; with `DataOn::Device`, the kernels loaded into the current
    /// context too.
    pub fn new(
        send_bytes: usize,
        recv_bytes: usize,
        iters: u32,
        data_on: DataOn,
        nranks: u32,
    ) -> Result<Buffers, crate::ffi::cuda::CudaError> {
        let events = (0..event_count(iters))
            .map(|_| Event::new())
            .collect::<Result<Vec<_>, _>>()?;
        let device = match data_on {
            DataOn::Device => Some(on_device::DeviceData::new(nranks)?),
            DataOn::Host => None,
        };
        Ok(Buffers {
            device,
            send: DeviceBuffer::alloc(send_bytes)?,
            recv: DeviceBuffer::alloc(recv_bytes)?,
            stage_send: vec![0; send_bytes.min(STAGING_BYTES)],
            stage_recv: vec![0; recv_bytes.min(STAGING_BYTES)],
            events,
        })
    }

    /// Elements of `dtype` one staging chunk holds (at least one).
    fn chunk_elems(stage: &[u8], dtype: DataType) -> usize {
        (stage.len() / dtype.size()).max(1)
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
    /// What the data check found; `None` when data was not checked (`-c 0`).
    pub check: Option<verify::Check>,
    /// Every timed iteration took less than the event timer's resolution
    /// ([`TIMER_RESOLUTION_US`]) although bytes were to move: the operation did not run.
    #[serde(default)]
    pub below_timer: bool,
}

/// The latency pass runs at least this many iterations on small sizes: a p99 needs 100 samples
/// to be other than their maximum.
pub const LATENCY_MIN_SAMPLES: u32 = 100;
/// Sizes up to this many bytes get [`LATENCY_MIN_SAMPLES`] (their iterations take
/// microseconds on a GPU); larger ones as many as the timed loop (`-n`).
pub const LATENCY_SMALL_BYTES: usize = 64 << 10;

/// Timing events [`Buffers`] holds for a run of `iters` timed iterations: one more than the
/// latency pass's most iterations.
pub fn event_count(iters: u32) -> u32 {
    iters.max(LATENCY_MIN_SAMPLES) + 1
}

/// Iterations of the latency pass for a message of `bytes` when the timed loop runs `iters`:
/// at least `floor` up to [`LATENCY_SMALL_BYTES`], else `iters`. It depends on the flags, the
/// backend and the size alone, so every rank runs the same count.
pub fn latency_iters(iters: u32, floor: u32, bytes: usize) -> u32 {
    if iters > 0 && bytes <= LATENCY_SMALL_BYTES {
        iters.max(floor.min(LATENCY_MIN_SAMPLES))
    } else {
        iters
    }
}

/// The resolution of the device's event timer, µs: CUDA documents `cuEventElapsedTime` as
/// "around 0.5 microseconds" (CUDA driver API reference, `cuEventElapsedTime`). No collective
/// that moves bytes between ranks completes faster.
pub const TIMER_RESOLUTION_US: f64 = 0.5;

/// The message sizes whose transports the connect stage builds: the sweep's sizes thinned to
/// one per doubling, and the largest. From NCCL 2.22 (`NCCL_RUNTIME_CONNECT`, default on,
/// `src/init.cc`) only the algorithm and protocol a size uses are connected, on first use, so
/// a size that first ran inside the sweep would report a transport failure as a *run*
/// failure. nccl-tests warms up every power of two from `-b` to `-e` for the same reason
/// (`TimeTest`, `src/common.cu`).
pub fn connect_sizes(sizes: &[usize]) -> Vec<usize> {
    let mut out: Vec<usize> = Vec::new();
    for &s in sizes {
        if out
            .last()
            .is_none_or(|&last| s >= last.saturating_mul(2).max(1))
        {
            out.push(s);
        }
    }
    if let (Some(&max), Some(&last)) = (sizes.iter().max(), out.last())
        && max != last
    {
        out.push(max);
    }
    out
}

/// Bytes per peer of the connect stage's first message.
pub const CONNECT_MIN_PER_PEER: usize = 16;

/// Queues one operation of `pattern` per connect size (see [`connect_sizes`]), the smallest
/// first, and waits for them: how transports get built ("connect").
pub fn connect(
    comm: &mut Communicator,
    pattern: &dyn Pattern,
    bufs: &Buffers,
    t: &Timing,
    sizes: &[usize],
) -> Result<(), CommError> {
    let (elem, n) = (t.dtype.size(), comm.nranks);
    comm.set_settle_deadline(t.deadline);
    let mut last_count = None;
    // First a message of 16 bytes per peer: the smallest every pattern sends at every rank
    // count (all-to-all rounds each peer's chunk down to 16 bytes).
    for bytes in std::iter::once(CONNECT_MIN_PER_PEER * n as usize).chain(connect_sizes(sizes)) {
        let layout = pattern.layout(bytes, elem, n);
        if layout.count == 0 || last_count == Some(layout.count) {
            continue;
        }
        last_count = Some(layout.count);
        crate::events::step(&format!(
            "first {} of {} bytes (connect)",
            pattern.name(),
            layout.bytes(t.dtype)
        ));
        pattern.launch(
            comm,
            Region::whole(&bufs.send),
            Region::whole(&bufs.recv),
            &layout,
            t.dtype,
            t.op,
        )?;
    }
    comm.wait_idle(
        t.deadline,
        &format!("first {} (connect)", pattern.name()),
        Poll::Relaxed,
    )
}

/// Writes what `rank` sends into the send buffer, a staging chunk at a time.
fn upload(
    comm: &Communicator,
    bufs: &mut Buffers,
    layout: &Layout,
    t: &Timing,
    op: Option<RedOp>,
    epoch: u32,
    what: &str,
) -> Result<(), CommError> {
    if let Some(dd) = &mut bufs.device {
        dd.fill(comm, &bufs.send, layout, t.dtype, op, epoch)?;
        // Waited for here, not in the warm-up: the kernel's time is the fill's, and a
        // simulated driver's fill of a large buffer takes seconds.
        let more = t.kernel_time(layout.bytes(t.dtype));
        crate::events::budget(more.as_secs_f64());
        comm.wait_idle(t.deadline + more, what, Poll::Relaxed)?;
        crate::events::beat();
        return Ok(());
    }
    let sz = t.dtype.size();
    let per = Buffers::chunk_elems(&bufs.stage_send, t.dtype);
    let mut first = 0;
    while first < layout.count {
        let k = per.min(layout.count - first);
        let chunk = &mut bufs.stage_send[..k * sz];
        verify::fill_send_from(first, chunk, t.dtype, op, comm.rank, comm.nranks, epoch);
        bufs.send.copy_from_host(first * sz, chunk, &comm.stream)?;
        // The chunk is refilled next: the copy must have read it.
        comm.wait_idle(t.deadline, what, Poll::Relaxed)?;
        crate::events::beat();
        first += k;
    }
    Ok(())
}

/// Checks the receive buffer: on the device when its kernels are loaded, and again on the
/// host when the device check found wrong elements (or did not compare them all), for the
/// detail only the host's check gives.
fn check_received(
    comm: &Communicator,
    pattern: &dyn Pattern,
    bufs: &mut Buffers,
    layout: &Layout,
    t: &Timing,
    epoch: u32,
    what: &str,
) -> Result<verify::Check, CommError> {
    if let Some(dd) = &mut bufs.device {
        let (dtype, op) = (t.dtype, t.op);
        let more = t.kernel_time(pattern.written(comm.rank, layout) * dtype.size());
        crate::events::budget(more.as_secs_f64());
        let found = dd.check(
            comm,
            &bufs.recv,
            pattern,
            layout,
            dtype,
            op,
            epoch,
            t.deadline + more,
            what,
        )?;
        crate::events::beat();
        if let on_device::DeviceCheck::Clean { elements } = found {
            return Ok(on_device::clean(elements));
        }
    }
    // On the host, a staging chunk at a time.
    let sz = t.dtype.size();
    let per = Buffers::chunk_elems(&bufs.stage_recv, t.dtype);
    let (rank, n) = (comm.rank, comm.nranks);
    let mut checker = verify::Checker::new(pattern, layout, t.dtype, t.op, rank, n, epoch);
    let (mut first, written) = (0, pattern.written(rank, layout));
    while first < written {
        let k = per.min(written - first);
        let chunk = &mut bufs.stage_recv[..k * sz];
        bufs.recv.copy_to_host(first * sz, chunk, &comm.stream)?;
        comm.wait_idle(t.deadline, what, Poll::Relaxed)?;
        checker.chunk(first, chunk);
        crate::events::beat();
        first += k;
    }
    Ok(checker.finish())
}

/// Measures one size on this rank. `barrier` lines the ranks up before the timed loop (the
/// job's bootstrap, or a group's).
pub fn measure(
    comm: &mut Communicator,
    barrier: &dyn Fn(),
    pattern: &dyn Pattern,
    layout: &Layout,
    bufs: &mut Buffers,
    t: &Timing,
    epoch: u32,
) -> Result<RankSample, CommError> {
    let data_op = verify::op_of(pattern, t.op);
    let what = |phase: &str| {
        format!(
            "{} of {} {} bytes",
            phase,
            pattern.name(),
            layout.bytes(t.dtype)
        )
    };
    comm.set_settle_deadline(t.deadline);
    // Without a check nothing is written, as nccl-tests skips `InitData` with `-c 0`
    // (`BenchTime`, `src/common.cu` v2.19.6): the buffers hold whatever they held.
    if t.check {
        bufs.recv.fill(crate::elements::FILL_BYTE, &comm.stream)?;
        let fill = what("fill");
        crate::events::step(&fill);
        upload(comm, bufs, layout, t, data_op, epoch, &fill)?;
        // The fill's beat ended the size's budget: the iterations have it again.
        crate::events::budget(t.size_budget.as_secs_f64());
    }
    let launch = |c: &Communicator, send: &DeviceBuffer, recv: &DeviceBuffer| {
        pattern.launch(
            c,
            Region::whole(send),
            Region::whole(recv),
            layout,
            t.dtype,
            t.op,
        )
    };
    crate::events::step(&what("warm-up"));
    for _ in 0..t.warmup {
        launch(comm, &bufs.send, &bufs.recv)?;
    }
    comm.wait_idle(t.deadline, &what("warm-up"), Poll::Spin)?;
    barrier();

    // The timed loop, as nccl-tests times it: launches back to back, one wait at the end.
    let start = Instant::now();
    for _ in 0..t.iters {
        launch(comm, &bufs.send, &bufs.recv)?;
    }
    comm.wait_idle(t.deadline, &what("timed iterations"), Poll::Spin)?;
    let wall = start.elapsed();

    // The latency pass: an event between each two iterations, one wait at the end.
    let lat = latency_iters(t.iters, t.latency_floor, layout.bytes(t.dtype)) as usize;
    bufs.events[0].record(&comm.stream)?;
    for i in 0..lat {
        launch(comm, &bufs.send, &bufs.recv)?;
        bufs.events[i + 1].record(&comm.stream)?;
    }
    comm.wait_idle(t.deadline, &what("latency iterations"), Poll::Spin)?;

    // 1 ns to 1 h at 3 significant digits: constant bounds that hdrhistogram accepts.
    let mut hist = Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3)
        .expect("constant histogram bounds are valid");
    let mut below_timer = lat > 0 && comm.nranks > 1 && layout.bytes(t.dtype) > 0;
    for pair in bufs.events[..=lat].windows(2) {
        let ms = pair[1].elapsed_ms_since(&pair[0])? as f64;
        below_timer &= ms * 1e3 < TIMER_RESOLUTION_US;
        hist.saturating_record((ms * 1e6).max(1.0) as u64);
    }
    let us = |ns: u64| ns as f64 / 1e3;

    let check = if t.check {
        let step = what("check");
        crate::events::step(&step);
        Some(check_received(
            comm, pattern, bufs, layout, t, epoch, &step,
        )?)
    } else {
        None
    };
    Ok(RankSample {
        rank: comm.rank,
        avg_us: wall.as_secs_f64() * 1e6 / t.iters.max(1) as f64,
        p50_us: us(hist.value_at_quantile(0.5)),
        p99_us: us(hist.value_at_quantile(0.99)),
        max_us: us(hist.max()),
        check,
        below_timer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_pass_has_enough_samples_for_a_p99_where_they_are_cheap() {
        let gpu = LATENCY_MIN_SAMPLES;
        assert_eq!(latency_iters(20, gpu, 8), 100);
        assert_eq!(latency_iters(20, gpu, LATENCY_SMALL_BYTES), 100);
        assert_eq!(latency_iters(20, gpu, LATENCY_SMALL_BYTES + 1), 20);
        assert_eq!(latency_iters(500, gpu, 8), 500);
        assert_eq!(latency_iters(0, gpu, 8), 0);
        // The simulation: as many as the timed loop.
        assert_eq!(latency_iters(3, 0, 8), 3);
        // Enough events for the most iterations any size runs, whatever the floor.
        for iters in [0, 1, 20, 100, 500] {
            assert!(event_count(iters) > latency_iters(iters, u32::MAX, 0));
        }
    }
}
