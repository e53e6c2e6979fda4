//! The measurement core: one message size of one pattern on one rank, and the combination of
//! all ranks' measurements into the row rank 0 reports.
//!
//! Timing as nccl-tests (`BenchTime`, `src/common.cu`): warm-up iterations, then `iters` timed
//! ones queued back to back, whose average is the host's wall time over them up to the stream's
//! completion; nothing else is queued inside that loop. Per-iteration latency comes from a
//! separate pass after it ([`latency_iters`] iterations with a device event between each two,
//! no host sync between them), so recording it never changes the time and bandwidth columns.

pub mod on_device;
pub mod sweep;
pub mod verify;

use crate::comm::{CommError, Communicator, Poll, Region};
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
        crate::progress::step(&format!(
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
        crate::progress::budget(more.as_secs_f64());
        comm.wait_idle(t.deadline + more, what, Poll::Relaxed)?;
        crate::progress::beat();
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
        crate::progress::beat();
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
        crate::progress::budget(more.as_secs_f64());
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
        crate::progress::beat();
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
        crate::progress::beat();
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
        bufs.recv.fill(crate::data::FILL_BYTE, &comm.stream)?;
        let fill = what("fill");
        crate::progress::step(&fill);
        upload(comm, bufs, layout, t, data_op, epoch, &fill)?;
        // The fill's beat ended the size's budget: the iterations have it again.
        crate::progress::budget(t.size_budget.as_secs_f64());
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
    crate::progress::step(&what("warm-up"));
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
        crate::progress::step(&step);
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

/// One row of a pattern's table, combined over ranks as nccl-tests combines them by default
/// (`-a 1`: the time is the mean of the ranks' times, `Allreduce(args, &deltaSec, average)`
/// in `BenchTime`, `src/common.cu`), with the slowest rank's time and number kept beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SizeResult {
    pub pattern: String,
    /// nccl-tests' "size": the larger of a rank's send and receive bytes.
    pub size_bytes: usize,
    /// nccl-tests' "count": the element count passed to NCCL (per peer for all-to-all).
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
    /// The rank with the largest time.
    pub slowest_rank: u32,
    /// Each rank's average time, µs, in rank order.
    pub rank_avg_us: Vec<f64>,
    /// The first wrong element and the rank that received it (a written one when any rank
    /// has one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_wrong: Option<(u32, WrongElement)>,
    /// What the data check and the timer found, rank by rank (flattened into the row).
    #[serde(flatten)]
    pub found: Found,
    /// Every repeat's figures when the size was measured more than once (`run --repeat`);
    /// the row's own figures are then their medians (see `report::repeats`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<Repeat>,
    /// The range of the repeats' times (largest − smallest), % of their median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread_pct: Option<f64>,
    /// The size asked for (`-b`..`-e`), before the pattern rounded it to whole elements per
    /// peer as nccl-tests rounds; `compare` matches rows on it, so runs of different rank
    /// counts line up. Absent in files written before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_bytes: Option<usize>,
}

/// What the data check and the timer found in one row, over all ranks.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Found {
    /// Elements checked, over all ranks: every rank's whole receive buffer when `checked`.
    #[serde(default)]
    pub checked_elements: u64,
    /// Of the wrong elements, those never written (they still hold the fill pattern).
    #[serde(default)]
    pub unwritten: u64,
    /// Of the wrong elements, those written with a NaN.
    #[serde(default)]
    pub nan: u64,
    /// Ranks whose whole receive buffer still holds the fill pattern: nothing arrived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nothing_written_ranks: Vec<u32>,
    /// Ranks with some elements unwritten, and their first runs of them, `[start, end)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwritten_ranges: Vec<(u32, Vec<(usize, usize)>)>,
    /// Ranks whose every timed iteration took less than the event timer's resolution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub below_timer_ranks: Vec<u32>,
    /// Ranks that received written wrong elements in a pattern that copies, each with the
    /// ranks whose data those elements should have been (at most `verify::MAX_SENDERS` of
    /// each): who sent to whom, for naming every rank the wrong data points at.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub wrong_pairs: Vec<(u32, Vec<u32>)>,
}

impl Found {
    /// Adds what another repeat of the same size found: nothing one repeat saw is lost.
    pub fn merge(&mut self, other: Found) {
        self.checked_elements += other.checked_elements;
        self.unwritten += other.unwritten;
        self.nan += other.nan;
        let union = |a: &mut Vec<u32>, b: Vec<u32>| {
            a.extend(b);
            a.sort_unstable();
            a.dedup();
        };
        union(&mut self.nothing_written_ranks, other.nothing_written_ranks);
        union(&mut self.below_timer_ranks, other.below_timer_ranks);
        if self.unwritten_ranges.is_empty() {
            self.unwritten_ranges = other.unwritten_ranges;
        }
        if self.wrong_pairs.is_empty() {
            self.wrong_pairs = other.wrong_pairs;
        }
    }
}

/// One repeat of one size (`run --repeat`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Repeat {
    /// Wall time per iteration, mean over ranks, µs.
    pub time_us: f64,
    /// Wall time per iteration on the slowest rank, µs.
    pub slowest_us: f64,
    /// GB/s.
    pub busbw_gbs: f64,
    /// Each rank's average time, µs, in rank order.
    pub rank_avg_us: Vec<f64>,
    /// Wrong elements over all ranks.
    pub wrong: u64,
}

/// Times of one size, µs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Times {
    /// Wall time per iteration, mean over ranks (nccl-tests' "time").
    pub avg: f64,
    /// Wall time per iteration on the slowest rank (absent in files from before it was kept).
    #[serde(default)]
    pub slowest: f64,
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

/// Why a set of samples cannot make a row: a rank's sample is missing, doubled, out of place
/// or incomplete. Never skipped: a row made of fewer ranks than ran would be a claim about
/// ranks nobody heard from.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleError {
    /// The rank whose sample is wrong (the first missing one, when one is missing).
    pub rank: Option<u32>,
    pub what: String,
}

/// Checks that `samples` hold one sample per rank, in rank order, each with the whole
/// receive buffer checked when the data is checked.
pub fn validate(
    pattern: &dyn Pattern,
    layout: &Layout,
    t: &Timing,
    nranks: u32,
    samples: &[RankSample],
) -> Result<(), SampleError> {
    for (i, s) in samples.iter().enumerate() {
        if s.rank as usize != i {
            let rank = (s.rank as usize) < i;
            return Err(SampleError {
                rank: Some(if rank { s.rank } else { i as u32 }),
                what: if rank {
                    format!("rank {}'s sample came twice", s.rank)
                } else {
                    format!(
                        "rank {i}'s sample is missing (rank {} came in its place)",
                        s.rank
                    )
                },
            });
        }
        let want = pattern.written(s.rank, layout) as u64;
        match (&s.check, t.check) {
            (None, true) => {
                return Err(SampleError {
                    rank: Some(s.rank),
                    what: format!("rank {}'s data was not checked", s.rank),
                });
            }
            (Some(c), true) if c.elements != want => {
                return Err(SampleError {
                    rank: Some(s.rank),
                    what: format!(
                        "rank {} checked {} of its {want} received elements",
                        s.rank, c.elements
                    ),
                });
            }
            _ => {}
        }
    }
    if samples.len() != nranks as usize {
        let rank = samples.len() as u32;
        return Err(SampleError {
            rank: (rank < nranks).then_some(rank),
            what: format!("{} samples for {nranks} ranks", samples.len()),
        });
    }
    Ok(())
}

/// Combines all ranks' samples (rank order, see [`validate`]) into one row.
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
    let mean = if samples.is_empty() {
        0.0
    } else {
        samples.iter().map(|s| s.avg_us).sum::<f64>() / samples.len() as f64
    };
    let worst = |f: fn(&RankSample) -> f64| samples.iter().map(f).fold(0.0, f64::max);
    let bytes = layout.size_column(t.dtype);
    let algbw = algbw_gbs(bytes, mean);
    let checks = || {
        samples
            .iter()
            .filter_map(|s| s.check.as_ref().map(|c| (s.rank, c)))
    };
    // A check's first wrong element is a written one whenever it found any (see
    // `verify::Checker`), i.e. when not every wrong element was unwritten.
    let written_first = checks().find_map(|(r, c)| {
        c.first
            .clone()
            .filter(|_| c.wrong > c.unwritten)
            .map(|w| (r, w))
    });
    SizeResult {
        pattern: pattern.name().into(),
        size_bytes: bytes,
        count: pattern.count_column(layout),
        dtype: t.dtype,
        redop: pattern.reduces().then_some(t.op),
        time_us: Times {
            avg: mean,
            slowest: slowest.1,
            p50: worst(|s| s.p50_us),
            p99: worst(|s| s.p99_us),
            max: worst(|s| s.max_us),
        },
        algbw_gbs: algbw,
        busbw_gbs: algbw * pattern.busbw_factor(nranks),
        wrong: checks().map(|(_, c)| c.wrong).sum(),
        checked: t.check && !samples.is_empty() && samples.iter().all(|s| s.check.is_some()),
        slowest_rank: slowest.0,
        rank_avg_us: samples.iter().map(|s| s.avg_us).collect(),
        first_wrong: written_first
            .or_else(|| checks().find_map(|(r, c)| c.first.clone().map(|w| (r, w)))),
        found: Found {
            checked_elements: checks().map(|(_, c)| c.elements).sum(),
            unwritten: checks().map(|(_, c)| c.unwritten).sum(),
            nan: checks().map(|(_, c)| c.nan).sum(),
            nothing_written_ranks: checks()
                .filter(|(_, c)| c.nothing_written())
                .map(|(r, _)| r)
                .collect(),
            unwritten_ranges: checks()
                .filter(|(_, c)| c.unwritten > 0 && !c.nothing_written())
                .map(|(r, c)| (r, c.unwritten_ranges.clone()))
                .collect(),
            below_timer_ranks: samples
                .iter()
                .filter(|s| s.below_timer)
                .map(|s| s.rank)
                .collect(),
            wrong_pairs: checks()
                .filter(|(_, c)| !c.wrong_from.is_empty())
                .take(verify::MAX_SENDERS)
                .map(|(r, c)| (r, c.wrong_from.iter().map(|(q, _)| *q).collect()))
                .collect(),
        },
        repeats: Vec::new(),
        spread_pct: None,
        requested_bytes: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patterns::select;

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

    fn sample(rank: u32, avg_us: f64) -> RankSample {
        RankSample {
            rank,
            avg_us,
            p50_us: avg_us * 0.9,
            p99_us: avg_us * 1.1,
            max_us: avg_us * 1.2,
            check: None,
            below_timer: false,
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
            latency_floor: 0,
            data_on: crate::bench::DataOn::Device,
            kernel_floor: crate::bench::GPU_KERNEL_FLOOR,
            size_budget: std::time::Duration::ZERO,
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
        assert_eq!(r.time_us.slowest, 250.0);
        assert!((r.time_us.avg - 440.0 / 3.0).abs() < 1e-12);
        let algbw = (1u64 << 20) as f64 / (440.0 / 3.0) / 1e3;
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
