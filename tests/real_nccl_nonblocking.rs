//! Non-blocking communicators (`NCCL_COMM_BLOCKING=0`) on the real libnccl of 2.19.3, 2.23.4
//! and 2.32.3, on the stand-in driver, 2 ranks. NCCL 2.21-2.23 return `ncclSuccess` from a
//! collective whose launch still runs on NCCL's thread (its state `ncclInProgress`); the next
//! call used to fail with `ncclInvalidArgument` ("Attempt to use communicator before the
//! previous operation returned ncclSuccess"). Every release must get through init and connect;
//! since no kernel runs on the stand-in, the run then ends at verify: nothing was written.

mod common;
mod stand_in;
use common::*;
use stand_in::*;

#[test]
fn non_blocking_gets_past_connect_on_every_release() {
    let libs = lib_dir();
    for version in ["2.19.3", "2.23.4", "2.32.3"] {
        let lib = wheel(version);
        let o = real_run(
            2,
            &[
                "run",
                "--nccl-lib",
                lib.to_str().unwrap(),
                "-e",
                "64K",
                "--timeout",
                "20",
            ],
            &[("NCCL_COMM_BLOCKING", "0"), ("NCCL_DEBUG", "WARN")],
            &libs,
            180,
        );
        let t = text(&o);
        assert!(
            t.contains(&format!("# nccl: {version} (")),
            "{version}: {t}"
        );
        assert!(
            t.contains("# nccl communicator: non-blocking (NCCL_COMM_BLOCKING=0)"),
            "{version}: {t}"
        );
        for never in [
            "ncclInvalidArgument",
            "Attempt to use communicator before the previous operation returned ncclSuccess",
            "FAIL at init",
            "FAIL at connect",
            "panicked",
        ] {
            assert!(!t.contains(never), "{version}: '{never}' in\n{t}");
        }
        assert_eq!(code(&o), 23, "{version}: {t}");
        let v = verdict(&t);
        assert!(
            v.starts_with(&format!(
                "VERDICT: [REAL NCCL {version} · SIMULATED GPUS] FAIL at verify on rank 0 (host "
            )) && v.contains("the collective wrote nothing into the receive buffer"),
            "{version}: {v}"
        );
    }
}
