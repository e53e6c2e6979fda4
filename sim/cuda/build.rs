// The harness and cudarc find this library by its soname, exactly as they find the real driver.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libcuda.so.1");
}
