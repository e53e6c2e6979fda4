//! The cuMem export/import probe against the simulated driver: a second process imports what
//! this one exported and reads it back; with an import fault injected, the probe says so in
//! the driver's words.

mod common;
use common::*;
use nccl_smoke::diagnose::probe;
use nccl_smoke::ffi::cuda::{Device, Driver};
use nccl_smoke::stage::Stage;

#[test]
fn a_second_process_imports_and_reads_back_the_buffer() {
    require_sim();
    let lib = bin().parent().unwrap().join("libcuda.so");
    let driver = Driver::load(Some(lib.to_str().unwrap())).expect("simulated driver loads");
    assert!(driver.vmm, "the simulated driver has the cuMem calls");
    let dev = Device::open(0).expect("device 0");

    let ok = probe::shareable_import(&driver, &dev, &bin());
    assert!(
        ok.contains("import OK, 4096 bytes read back intact"),
        "{ok}"
    );
}

/// In a run, a buffer-import failure (field report 000) carries the probe's finding: the
/// second process inherits the rank's fault, so its import fails in the driver's words.
#[test]
fn a_buffer_import_failure_carries_the_probe() {
    let o = sim_run(2, &[], &[("NCCL_SMOKE_SIM_FAULT", "import@1:error")]);
    let t = text(&o);
    assert_eq!(code(&o), Stage::ConnectImport.exit_code() as i32, "{t}");
    assert!(
        t.contains("evidence: probe: cuMem buffer exported as a file descriptor on device 1, imported by a second process on this node: import FAILED: cuMemImportFromShareableHandle failed: CUDA_ERROR_INVALID_DEVICE"),
        "{t}"
    );
}

/// An init failure naming a peer's address carries a TCP probe to it (and to rank 0's host):
/// here rank 0 still listens, so the probe connects and the failure is not one of routing.
#[test]
fn an_init_failure_carries_a_tcp_probe_to_the_peer_nccl_named() {
    let o = sim_run(2, &[], &[("NCCL_SMOKE_SIM_FAULT", "init@1:error")]);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Init.exit_code() as i32, "{t}");
    let probe = t
        .lines()
        .find(|l| {
            l.contains(
                "evidence: probe: TCP connect from the default route to a peer NCCL named at ",
            )
        })
        .unwrap_or_else(|| panic!("no TCP probe line:\n{t}"));
    assert!(probe.ends_with(": connected"), "{probe}");
}
