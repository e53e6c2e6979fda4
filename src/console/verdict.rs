//! What `nccl-smoke verdict FILE` prints: a results file's verdict line (or one of its fields);
//! its exit code is the verdict's.

use crate::report::results::{self, Verdict};
use crate::stage::exit;
use std::path::Path;

/// Which part of the verdict to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Field {
    Line,
    Status,
    Stage,
    ExitCode,
}

impl Field {
    /// The field of `v`, as printed (the stage: empty when the verdict names none).
    pub fn of(self, v: &Verdict) -> String {
        match self {
            Field::Line => v.line.clone(),
            Field::Status => results::status_name(v.status),
            Field::Stage => v.stage.map(|s| s.name().to_string()).unwrap_or_default(),
            Field::ExitCode => v.exit_code.to_string(),
        }
    }
}

/// Prints `field` of the verdict of the results file at `path` and returns its exit code
/// (`USAGE` when the file is not a results file).
pub fn run(path: &Path, field: Field) -> u8 {
    match results::load(path) {
        Ok(doc) => {
            println!("{}", field.of(&doc.verdict));
            doc.verdict.exit_code
        }
        Err(e) => {
            eprintln!("nccl-smoke verdict: {e}");
            exit::USAGE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::results::Status;
    use crate::stage::Stage;

    #[test]
    fn each_field_of_a_failed_and_a_passed_verdict() {
        let mut v = crate::report::results::tests::sample_doc().verdict;
        assert_eq!(Field::Status.of(&v), "PASS");
        assert_eq!(Field::Stage.of(&v), "");
        assert_eq!(Field::ExitCode.of(&v), "0");
        v.status = Status::Fail;
        v.stage = Some(Stage::ConnectNet);
        v.exit_code = Stage::ConnectNet.exit_code();
        v.line = "VERDICT: FAIL at connect:net".into();
        assert_eq!(Field::Status.of(&v), "FAIL");
        assert_eq!(Field::Stage.of(&v), "connect:net");
        assert_eq!(
            Field::ExitCode.of(&v),
            Stage::ConnectNet.exit_code().to_string()
        );
        assert_eq!(Field::Line.of(&v), v.line);
    }
}
