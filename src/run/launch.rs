//! `nccl-smoke launch -n N <subcommand…>`: N local ranks without MPI.
//!
//! Like mpirun on one node: the first rank to fail ends the job (the others are killed) and
//! its exit code is the launcher's.

use crate::bootstrap::{launcher, rendezvous};
use crate::stage::exit;
use std::ffi::OsString;
use std::process::{Child, Command};
use std::time::Duration;

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
    wait_all(children)
}

/// Waits for every rank; the first non-zero exit ends the others and is returned.
fn wait_all(mut children: Vec<Child>) -> u8 {
    let mut running: Vec<bool> = vec![true; children.len()];
    loop {
        for (i, c) in children.iter_mut().enumerate() {
            if !running[i] {
                continue;
            }
            match c.try_wait() {
                Ok(Some(status)) => {
                    running[i] = false;
                    let code = status.code().unwrap_or(exit::INTERNAL as i32);
                    if code != 0 {
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
        if running.iter().all(|r| !r) {
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
