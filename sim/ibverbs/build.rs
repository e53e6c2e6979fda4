// The stand-in is found as the real library is: soname `libibverbs.so.1`, every entry point
// versioned (`IBVERBS_1.1` and later), since NCCL resolves them with `dlvsym`. The C types come
// from the system's rdma-core header (`<infiniband/verbs.h>`, Debian `libibverbs-dev`), so that
// the context NCCL reads through (`struct verbs_context`) is laid out exactly as rdma-core's.
use std::path::PathBuf;

fn main() {
    let dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let map = dir.join("libibverbs.map");
    println!("cargo:rerun-if-changed={}", map.display());
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    let header = "infiniband/verbs.h";
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("verbs.rs");
    let bindings = bindgen::Builder::default()
        .header_contents("wrap.h", &format!("#include <{header}>\n"))
        .allowlist_type("ibv_.*")
        .allowlist_type("verbs_context")
        .allowlist_var("IBV_.*")
        .constified_enum_module("ibv_.*")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| {
            panic!(
                "bindgen could not read <{header}> ({e}): install rdma-core's development \
                 header (Debian: libibverbs-dev, which scripts/setup.sh installs)"
            )
        });
    bindings.write_to_file(&out).unwrap();
}
