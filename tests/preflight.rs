//! A sweep that cannot fit is refused before its buffers are allocated (after init, as
//! nccl-tests allocates), with the numbers: device buffers against the GPU's free memory and
//! what NCCL's communicator took at init, host memory against what the node has available (on
//! the simulation the device buffers are host memory too).

mod common;
use common::*;
use nccl_smoke::stage::Stage;

fn refused(size: &str, gpu_gib: &str) -> String {
    require_sim();
    let o = run1(
        &["run", "--backend", "sim", "-b", size, "-e", size],
        &[("NCCL_SMOKE_SIM_MEM_GIB", gpu_gib)],
    );
    let t = text(&o);
    assert_eq!(code(&o), Stage::Alloc.exit_code() as i32, "{t}");
    let line = t
        .lines()
        .find(|l| l.contains("FAIL at alloc on rank 0"))
        .unwrap_or_else(|| panic!("no alloc verdict:\n{t}"))
        .to_string();
    assert!(
        line.contains("its buffers were refused before any was allocated"),
        "{line}"
    );
    assert!(!t.contains("panicked"), "{t}");
    line
}

#[test]
fn a_sweep_larger_than_the_gpus_free_memory_is_refused() {
    let line = refused("1G", "1");
    assert!(
        line.contains("needs 2048 MiB of device memory per rank (send 1024 MiB + receive 1024 MiB")
            && line
                .contains("the GPU has 1024 MiB free after NCCL's communicator took 0 MiB at init"),
        "{line}"
    );
}

#[test]
fn a_sweep_larger_than_the_nodes_host_memory_is_refused() {
    // A 1 TiB simulated GPU takes it; no test machine has 128 GiB available for its buffers.
    let line = refused("64G", "1024");
    assert!(
        line.contains("of host memory on this node") && line.contains("is available ("),
        "{line}"
    );
}
