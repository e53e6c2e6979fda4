// NCCL dlopens NVML by this soname (`libnvidia-ml.so.1`), exactly as it finds the real one.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
}
