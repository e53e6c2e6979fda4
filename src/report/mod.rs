//! What rank 0 shows and keeps: the fingerprint, nccl-tests-style tables, the results file.

pub mod atomic_file;
pub mod backing;
pub mod burn_in;
pub mod compare;
pub mod control_plane;
pub mod expect;
pub mod exports;
pub mod fingerprint;
pub mod footer;
pub mod isolate;
pub mod nccl_tests;
pub mod plot;
pub mod repeats;
pub mod results;
pub mod stats;
pub mod table;
pub mod verdict;
pub mod writer;
