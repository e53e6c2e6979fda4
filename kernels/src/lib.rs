//! The data every rank sends, and the check of what it received, in one place for the three
//! that need them: nccl-smoke's host code, the PTX kernels that fill and check on a GPU, and
//! the simulated driver, which runs the same kernels by name on the CPU.
//!
//! - [`values`]: the element a rank puts at each index (small integers, exact in every type).
//! - [`args`]: the one by-value parameter each kernel takes, laid out as the PTX reads it.
//! - [`reference`](mod@reference): what each kernel does, in Rust. The simulated driver runs it; a GPU test
//!   compares the PTX with it byte for byte.
//! - [`PTX`]: the kernels as PTX text, JIT-compiled by the driver (`cuModuleLoadData`).
//!
//! The kernels know no element type: each writes and compares the low `elsize` bytes of a
//! [`args::TABLE_LEN`]-entry table that the host encodes for the type (value `v` → its bytes),
//! so every type, present and future, is one table.

#![forbid(unsafe_code)]

pub mod args;
pub mod reference;
pub mod values;

/// The kernels, PTX ISA 7.0 for sm_70 and later (the driver JIT-compiles it for the GPU it
/// runs on). Checked by `ptxas` for several architectures in the tests.
pub const PTX: &str = include_str!("kernels.ptx");

/// The fill kernel's name in [`PTX`].
pub const FILL: &str = "ncclsmoke_fill";
/// The check kernel's name in [`PTX`].
pub const CHECK: &str = "ncclsmoke_check";

/// Threads per block both kernels are launched with.
pub const BLOCK: u32 = 256;
/// The most blocks a launch uses: each thread walks the buffer with a grid-wide stride.
pub const MAX_GRID: u32 = 4096;

/// Blocks for a launch over `elements` elements.
pub fn grid(elements: u64) -> u32 {
    elements.div_ceil(BLOCK as u64).clamp(1, MAX_GRID as u64) as u32
}

#[cfg(test)]
mod tests {
    #[test]
    fn grid_covers_small_and_caps_large_launches() {
        assert_eq!(super::grid(0), 1);
        assert_eq!(super::grid(1), 1);
        assert_eq!(super::grid(257), 2);
        assert_eq!(super::grid(1 << 40), super::MAX_GRID);
    }

    #[test]
    fn the_ptx_names_both_kernels_and_their_one_parameter() {
        for (name, bytes) in [
            (super::FILL, std::mem::size_of::<super::args::FillArgs>()),
            (super::CHECK, std::mem::size_of::<super::args::CheckArgs>()),
        ] {
            let decl = format!(".visible .entry {name}(.param .align 8 .b8 args[{bytes}])");
            assert!(super::PTX.contains(&decl), "{decl}");
        }
    }
}
