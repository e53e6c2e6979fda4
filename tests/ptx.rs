//! The PTX of nccl-smoke's kernels assembles with NVIDIA's `ptxas` for each GPU generation the
//! tool is meant for (Volta to Blackwell), with no warning. `scripts/setup.sh` puts ptxas in
//! `.deps/cuda-nvcc/bin` (from the CUDA 12.9 nvcc wheel); `PTXAS=PATH` names another.

use std::path::PathBuf;
use std::process::Command;

fn ptxas() -> PathBuf {
    let p = std::env::var_os("PTXAS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".deps/cuda-nvcc/bin/ptxas")
        });
    assert!(
        p.is_file(),
        "no ptxas at {}: run scripts/setup.sh (or set PTXAS=PATH)",
        p.display()
    );
    p
}

#[test]
fn the_kernels_assemble_for_volta_to_blackwell_without_warnings() {
    let dir = std::env::temp_dir().join(format!("nccl-smoke-ptx.{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("kernels.ptx");
    std::fs::write(&src, nccl_smoke_kernels::PTX).unwrap();
    for arch in ["sm_70", "sm_80", "sm_90", "sm_100"] {
        let cubin = dir.join(format!("{arch}.cubin"));
        let o = Command::new(ptxas())
            .args(["-arch", arch, "--warning-as-error", "-o"])
            .arg(&cubin)
            .arg(&src)
            .output()
            .expect("ptxas runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "ptxas -arch {arch}: {err}");
        assert!(err.trim().is_empty(), "ptxas -arch {arch} said: {err}");
        let size = std::fs::metadata(&cubin).unwrap().len();
        assert!(size > 1000, "{arch}: a {size}-byte cubin");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
