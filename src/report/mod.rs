//! What rank 0 shows and keeps: the fingerprint, nccl-tests-style tables, the results file.

pub mod compare;
pub mod fingerprint;
pub mod output;
pub mod plot;
pub mod results;
pub mod table;
pub mod verdict;
