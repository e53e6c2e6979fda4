//! cudarc opens the CUDA driver by its own list of names, `libcuda.so` first. When another
//! library answers to that name (a CUDA toolkit's `stubs/` folder on the library path, or a
//! second driver), cudarc's calls would go to it while nccl-smoke and NCCL use `libcuda.so.1`.
//! The run must refuse that at the driver stage, naming both files.

mod common;
use common::*;

#[test]
fn a_second_driver_found_first_by_cudarc_fails_at_driver_naming_both() {
    require_sim();
    let dir = scratch("two-drivers");
    let built = bin().parent().unwrap().to_path_buf();
    // Folder `so1` holds the driver under its soname, folder `stubs` another copy under the
    // development name cudarc tries first.
    let (so1, stubs) = (dir.join("so1"), dir.join("stubs"));
    std::fs::create_dir_all(&so1).unwrap();
    std::fs::create_dir_all(&stubs).unwrap();
    std::fs::copy(built.join("libcuda.so"), so1.join("libcuda.so.1")).unwrap();
    std::fs::copy(built.join("libcuda.so"), stubs.join("libcuda.so")).unwrap();
    let path = format!("{}:{}", so1.display(), stubs.display());
    let nccl = built.join("libnccl.so");
    let o = run1(
        &["run", "--nccl-lib", nccl.to_str().unwrap(), "-e", "1K"],
        &[("LD_LIBRARY_PATH", &path)],
    );
    let t = text(&o);
    assert_eq!(code(&o), 12, "{t}");
    let line = t
        .lines()
        .find(|l| l.contains("FAIL at driver on rank 0"))
        .unwrap_or_else(|| panic!("no driver verdict:\n{t}"));
    for file in [so1.join("libcuda.so.1"), stubs.join("libcuda.so")] {
        let canon = std::fs::canonicalize(&file).unwrap();
        assert!(line.contains(&canon.display().to_string()), "{line}");
    }
    assert!(line.contains("stubs/"), "{line}");
    assert!(!t.contains("panicked"), "{t}");

    // The same folders without the second copy: cudarc finds the one nccl-smoke loaded.
    std::fs::remove_file(stubs.join("libcuda.so")).unwrap();
    let o = run1(
        &["run", "--nccl-lib", nccl.to_str().unwrap(), "-e", "1K"],
        &[("LD_LIBRARY_PATH", &path)],
    );
    let t = text(&o);
    assert!(!t.contains("two CUDA driver libraries"), "{t}");
    assert!(t.contains("PASS [SIMULATED]"), "{t}");
    let _ = std::fs::remove_dir_all(&dir);
}
