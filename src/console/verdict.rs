//! What `nccl-smoke verdict FILE` prints: a results file's verdict line; its exit code is the
//! verdict's.

use crate::report::results;
use crate::stage::exit;
use std::path::Path;

/// Prints the verdict line of the results file at `path` and returns its exit code (`USAGE`
/// when the file is not a results file).
pub fn run(path: &Path) -> u8 {
    match results::load(path) {
        Ok(doc) => {
            println!("{}", doc.verdict.line);
            doc.verdict.exit_code
        }
        Err(e) => {
            eprintln!("nccl-smoke verdict: {e}");
            exit::USAGE
        }
    }
}
