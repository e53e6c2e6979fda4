//! When the injected faults of `NCCL_SMOKE_SIM_FAULT` strike, per the README:
//! transport setup (`import`, `shm`, `net`, `proxy`) when an operation is enqueued, `run` and
//! `verify` when the stream runs an operation.

use crate::SUCCESS;
use crate::comm::Comm;
use crate::datafault;
use crate::ops::Op;
use crate::texts;
use nccl_smoke_fault::{Kind, Where};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// `NCCL_SMOKE_SIM_RUN_FAULT_OP`: the operation index (per communicator, from 0) at which a
/// `run` fault strikes.
pub fn run_fault_op() -> u64 {
    std::env::var("NCCL_SMOKE_SIM_RUN_FAULT_OP")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(200)
}

/// Six characters as mkstemp would pick for `/dev/shm/nccl-XXXXXX`.
fn shm_name() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut n = crate::ids::random_u64();
    (0..6)
        .map(|_| {
            let c = ALPHABET[(n % 62) as usize] as char;
            n /= 62;
            c
        })
        .collect()
}

/// Size of the SHM transport's segment in NCCL's reports (9637888 bytes).
const SHM_SEGMENT: usize = 9_637_888;

/// What transport setup decided for an operation about to be enqueued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Setup {
    Go,
    /// A `hang` at setup: the queued operation never completes (until abort).
    Hang,
}

/// The checks NCCL's transport setup fails at, made when a batch is enqueued: the first
/// operation sets up the transports (P2P import and SHM with a peer on this host, the
/// network), the first send/recv group connects through the proxy. `Err` is the code the
/// call returns.
pub fn setup(comm: &Comm, p2p: bool) -> Result<Setup, u32> {
    let first = comm.first_op.swap(false, Ordering::SeqCst);
    let first_p2p = p2p && comm.first_p2p.swap(false, Ordering::SeqCst);
    let local = comm.local_peer();
    let checks = [
        (first && local.is_some(), Where::Import),
        (first && local.is_some(), Where::Shm),
        (first, Where::Net),
        (first_p2p, Where::Proxy),
    ];
    let mut outcome = Setup::Go;
    for (due, at) in checks {
        if !due {
            continue;
        }
        match comm.fault(at) {
            Some(Kind::Error) => {
                let report = transport_error(comm, at, local);
                report.emit(comm.id.dev);
                // A non-blocking communicator also carries the error (NCCL sets it as the
                // group's async result); the call returns it either way.
                if !comm.blocking {
                    comm.fail(report.code);
                }
                return Err(report.code);
            }
            Some(Kind::Crash) => std::process::abort(),
            Some(Kind::Hang) => outcome = Setup::Hang,
            Some(Kind::Slow(f)) => comm.set_slow(f),
            Some(Kind::Corrupt | Kind::Data { .. }) | None => {}
        }
    }
    Ok(outcome)
}

fn transport_error(comm: &Comm, at: Where, local: Option<usize>) -> texts::Report {
    let (v, rank, dev) = (comm.id.version, comm.id.rank, comm.id.dev);
    match at {
        Where::Import => {
            let j = local.unwrap_or(rank);
            let peer_dev = comm.peer(j).map(|p| p.dev).unwrap_or(dev);
            texts::import(v, rank, j, dev, peer_dev)
        }
        Where::Shm => texts::shm(v, &shm_name(), SHM_SEGMENT),
        Where::Proxy => texts::proxy(v, rank),
        _ => texts::net(v, next_peer_addr(comm)),
    }
}

/// The bootstrap address of the next rank on the ring (this rank's own when alone).
fn next_peer_addr(comm: &Comm) -> std::net::SocketAddrV4 {
    let next = (comm.id.rank + 1) % comm.id.nranks.max(1);
    comm.peer(next)
        .map(|p| p.addr)
        .unwrap_or(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::LOCALHOST,
            0,
        ))
}

/// The body of a stream task: one batch of operations, with the `run` and `verify` faults.
pub fn run_batch(comm: &Arc<Comm>, ops: &[Op], setup: Setup) {
    let _task = comm.start_task();
    let index = comm.executed.fetch_add(1, Ordering::SeqCst);
    // The stream runs whatever the host-side state: `ncclInProgress` only means a later call is
    // still being launched by a thread of the library's.
    if comm.aborted() || !matches!(comm.async_error(), SUCCESS | crate::INPROGRESS) {
        return;
    }
    if setup == Setup::Hang {
        comm.hang();
        return;
    }
    if index == comm.id.run_fault_op {
        match comm.fault(Where::Run) {
            Some(Kind::Error) => {
                comm.report(&texts::run_error(comm.id.version, next_peer_addr(comm)));
                // The peers see this rank's connections drop, as when its link fails.
                comm.break_links();
                return;
            }
            Some(Kind::Hang) => {
                comm.hang();
                return;
            }
            Some(Kind::Crash) => std::process::abort(),
            Some(Kind::Slow(f)) => comm.set_slow(f),
            Some(Kind::Corrupt | Kind::Data { .. }) | None => {}
        }
    }
    let corrupt = index >= 1 && comm.fault(Where::Verify) == Some(Kind::Corrupt);
    let nranks = comm.id.nranks;
    let data = match comm.fault(Where::Verify) {
        Some(Kind::Data {
            fault,
            bytes,
            every,
        }) => comm
            .data_strikes(datafault::matches(ops, nranks, bytes), every)
            .then_some((fault, bytes)),
        _ => None,
    };
    let saved = data.map(|(f, b)| datafault::before(f, b, ops, nranks));
    let sent = match crate::moves::execute(comm, ops, corrupt) {
        Ok(bytes) => {
            if let (Some((f, b)), Some(saved)) = (data, saved) {
                datafault::after(f, b, ops, nranks, saved);
            }
            bytes
        }
        Err(r) => {
            comm.report(&r);
            comm.break_links();
            return;
        }
    };
    let slow = comm.slow();
    if slow > 1.0 {
        comm.sleep(slow_link_delay(sent, slow));
    }
}

/// The link a `slow=F` fault models: F times slower than a reference link of
/// [`LINK_BYTES_PER_S`] with [`LINK_LATENCY`] per batch. The extra time depends on the bytes
/// this rank sent alone, never on time spent waiting for peers (which would feed back: each
/// rank's delay would stretch the others' and grow without bound).
fn slow_link_delay(bytes: usize, factor: f64) -> Duration {
    let base = LINK_LATENCY + Duration::from_secs_f64(bytes as f64 / LINK_BYTES_PER_S);
    base.mul_f64(factor - 1.0)
}

/// The reference link of [`slow_link_delay`]: about what loopback TCP gives the simulation.
const LINK_BYTES_PER_S: f64 = 400e6;
const LINK_LATENCY: Duration = Duration::from_micros(20);

#[cfg(test)]
mod tests {
    #[test]
    fn a_slow_link_adds_time_by_bytes_sent_only() {
        use std::time::Duration;
        assert_eq!(super::slow_link_delay(0, 1.0), Duration::ZERO);
        let mib = super::slow_link_delay(1 << 20, 4.0);
        let two = super::slow_link_delay(2 << 20, 4.0);
        assert!(
            mib > Duration::from_millis(7) && mib < Duration::from_millis(8),
            "{mib:?}"
        );
        assert!(two > mib.mul_f64(1.9) && two < mib.mul_f64(2.1), "{two:?}");
    }

    #[test]
    fn shm_names_look_like_mkstemp() {
        let n = super::shm_name();
        assert_eq!(n.len(), 6);
        assert!(n.chars().all(|c| c.is_ascii_alphanumeric()));
    }
}
