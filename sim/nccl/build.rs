// The harness finds this library by its soname, exactly as it finds the real libnccl.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnccl.so.2");
}
