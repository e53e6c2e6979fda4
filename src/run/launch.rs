//! `nccl-smoke launch -n N <subcommand…>`: N local ranks without MPI.
//!
//! Like mpirun on one node: the first rank to fail ends the job (the others are killed) and
//! its exit code is the launcher's. Ctrl-C or SIGTERM to the launcher is passed to every rank,
//! which cancel the run (rank 0 says CANCELLED and keeps what was measured); the launcher waits
//! for them, up to [`CANCEL_GRACE`], and exits with rank 0's code.

use crate::bootstrap::{launcher, rendezvous};
use crate::stage::exit;
use std::ffi::OsString;
use std::process::{Child, Command};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long the ranks get to end a cancelled run before they are killed.
pub const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// Starts `np` ranks of nccl-smoke on this host, each running `command` (its arguments), over
/// nccl-smoke's TCP rendezvous; returns the launcher's exit code.
pub fn launch(np: u32, command: &[OsString]) -> u8 {
    let port = match std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()) {
        Ok(a) => a.port(),
        Err(e) => {
            eprintln!("nccl-smoke launch: no free local port for the bootstrap: {e}");
            return exit::USAGE;
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("nccl-smoke launch: cannot locate nccl-smoke itself: {e}");
            return exit::USAGE;
        }
    };
    // Registered before any rank starts: a signal then is still passed on.
    let signalled = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_usize(sig, signalled.clone(), sig as usize);
    }
    let mut children: Vec<Child> = Vec::new();
    for rank in 0..np {
        let spawned = Command::new(&exe)
            .args(command)
            .env(rendezvous::ADDR_ENV, format!("127.0.0.1:{port}"))
            .env(launcher::RANK_ENV, rank.to_string())
            .env(launcher::SIZE_ENV, np.to_string())
            .env(launcher::LOCAL_RANK_ENV, rank.to_string())
            .spawn();
        match spawned {
            Ok(c) => children.push(c),
            Err(e) => {
                eprintln!("nccl-smoke launch: cannot start rank {rank}: {e}");
                kill_all(&mut children);
                return exit::USAGE;
            }
        }
    }
    wait_all(children, &signalled)
}

/// Waits for every rank; the first non-zero exit ends the others and is returned. Once a
/// signal came, it is passed to every rank and they are waited for (rank 0's code returned).
fn wait_all(mut children: Vec<Child>, signalled: &AtomicUsize) -> u8 {
    let mut running: Vec<bool> = vec![true; children.len()];
    let mut cancelled: Option<Instant> = None;
    let mut codes: Vec<Option<i32>> = vec![None; children.len()];
    loop {
        let sig = signalled.load(Ordering::SeqCst);
        if sig != 0 && cancelled.is_none() {
            eprintln!(
                "nccl-smoke launch: {} received; passing it to the ranks",
                crate::ffi::os::signal_name(sig as i32)
            );
            for (i, c) in children.iter().enumerate() {
                if running[i] {
                    let _ = crate::ffi::os::signal(c.id(), sig as i32);
                }
            }
            cancelled = Some(Instant::now());
        }
        for (i, c) in children.iter_mut().enumerate() {
            if !running[i] {
                continue;
            }
            match c.try_wait() {
                Ok(Some(status)) => {
                    running[i] = false;
                    let code = status.code().unwrap_or(exit::INTERNAL as i32);
                    codes[i] = Some(code);
                    if code != 0 && cancelled.is_none() {
                        eprintln!(
                            "nccl-smoke launch: rank {i} exited with {code}; stopping the other ranks"
                        );
                        kill_all(&mut children);
                        return code.clamp(0, 255) as u8;
                    }
                }
                Ok(None) => {}
                Err(_) => running[i] = false,
            }
        }
        if let Some(since) = cancelled {
            let done = running.iter().all(|r| !r);
            if done || since.elapsed() > CANCEL_GRACE {
                if !done {
                    eprintln!(
                        "nccl-smoke launch: ranks still running {} s after the signal; killing them",
                        CANCEL_GRACE.as_secs()
                    );
                    kill_all(&mut children);
                }
                let rank0 = codes.first().copied().flatten();
                return rank0
                    .filter(|c| *c != 0)
                    .or_else(|| codes.iter().flatten().copied().find(|c| *c != 0))
                    .map_or(
                        // Every rank ended well before the signal reached it: a pass.
                        if codes.iter().all(|c| *c == Some(0)) {
                            exit::PASS
                        } else {
                            exit::CANCELLED
                        },
                        |c| c.clamp(0, 255) as u8,
                    );
            }
        } else if running.iter().all(|r| !r) {
            return exit::PASS;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn kill_all(children: &mut [Child]) {
    for c in children.iter_mut() {
        let _ = c.kill();
        let _ = c.wait();
    }
}
