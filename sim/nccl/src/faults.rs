//! What the simulated library logs and returns when a fault strikes, in the real library's
//! words (learned from NCCL's sources and public issue threads, 2.19 onwards).

use crate::comm::Comm;
use crate::log;
use crate::{INTERNAL_ERROR, SYSTEM_ERROR, UNHANDLED_CUDA_ERROR};
use nccl_smoke_fault::Where;

/// The operation index (per communicator, from 0) at which a `run` fault strikes.
pub fn run_fault_op() -> u64 {
    std::env::var("NCCL_SMOKE_SIM_RUN_FAULT_OP")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(60)
}

fn shm_name() -> String {
    let n = std::process::id().wrapping_mul(2654435761);
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    (0..6)
        .map(|i| alphabet[((n >> (i * 5)) % 62) as usize] as char)
        .collect()
}

/// Logs a transport-setup failure at `at` and returns the code the real library returns.
pub fn log_transport_error(comm: &Comm, at: Where) -> u32 {
    let d = comm.dev;
    match at {
        Where::Import => {
            log::info(
                d,
                "P2P",
                &format!(
                    "Channel 00/0 : {}[{d}] -> {}[{d}] via P2P/CUMEM",
                    comm.rank,
                    (comm.rank + 1) % comm.nranks
                ),
            );
            log::warn(
                d,
                "transport/p2p.cc:275",
                "Cuda failure 101 'invalid device ordinal'",
            );
            log::warn(
                d,
                "transport/p2p.cc:288",
                "ncclP2pImportShareableBuffer: cuMemImportFromShareableHandle failed: Cuda failure 101 'invalid device ordinal'",
            );
            UNHANDLED_CUDA_ERROR
        }
        Where::Shm => {
            let name = shm_name();
            log::warn(
                d,
                "misc/shmutils.cc:88",
                &format!(
                    "Error: failed to extend /dev/shm/nccl-{name} to 9637892 bytes, error: No space left on device (28)"
                ),
            );
            log::warn(
                d,
                "misc/shmutils.cc:132",
                &format!(
                    "Error while creating shared memory segment /dev/shm/nccl-{name} (size 9637888), error: No space left on device (28)"
                ),
            );
            SYSTEM_ERROR
        }
        Where::Proxy => {
            let local = comm.rank;
            log::warn(
                d,
                "proxy.cc:1458",
                "[Service thread] Accept failed Resource temporarily unavailable",
            );
            log::warn(
                d,
                "proxy.cc:1497",
                &format!(
                    "[Service thread] Could not receive type from localRank {local}, res=3, closed=0"
                ),
            );
            log::warn(
                d,
                "proxy.cc:1521",
                &format!(
                    "[Proxy Service {local}] Failed to execute operation Close from rank {local}, retcode 3"
                ),
            );
            log::info(d, "INIT", &format!("{} - Abort COMPLETE", comm.describe()));
            INTERNAL_ERROR
        }
        _ => {
            log::warn(
                d,
                "transport/net_ib.cc:1105",
                "NET/IB : Got completion from peer 10.0.0.2<49189> with error 12, opcode 0, len 0, vendor err 129 (Send)",
            );
            SYSTEM_ERROR
        }
    }
}

/// Logs the failure a `run` fault stands for: a peer's link dropping mid-run.
pub fn log_run_error(comm: &Comm) {
    log::warn(
        comm.dev,
        "misc/socket.cc:60",
        "socketProgress: Connection reset by peer (NET/Socket) during the run",
    );
}
