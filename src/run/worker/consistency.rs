//! Rank 0, once every rank's setup is gathered (before NCCL's init): ranks started differently
//! are named, as warnings, or as the run's failure with `--strict` (see
//! [`crate::diagnose::consistency`]).

use super::Run;
use crate::diagnose::consistency::{self, Mismatch};
use crate::error::Failure;
use crate::report::fingerprint::RankInfo;
use crate::stage::Stage;

impl Run<'_> {
    pub(super) fn ranks_agree(&mut self, infos: &[RankInfo]) -> Result<(), Failure> {
        let differ = consistency::mismatches(infos);
        if differ.is_empty() {
            return Ok(());
        }
        let lines: Vec<String> = differ.iter().map(Mismatch::line).collect();
        let cause = "ranks of one job were started with different libraries or settings: NCCL \
                     expects the same on every rank, and older releases hang or fail in ways that \
                     look like network faults when they are not (NCCL 2.31 and later check some \
                     of it at init)";
        let hint = "start every rank from the same image and environment (the launcher's -x / \
                    --export, the job spec's env); the results file's fingerprint.ranks[].setup \
                    has each rank's";
        if self.plan.strict {
            return Err(Failure::new(
                Stage::Launch,
                &self.who,
                format!("ranks differ (--strict): {}", lines.join("; ")),
            )
            .cause(cause)
            .hint(hint));
        }
        for l in &lines {
            let f = Failure::new(Stage::Launch, &self.who, format!("ranks differ: {l}"))
                .cause(cause)
                .hint(hint);
            eprintln!("{}", f.warning_line());
            self.preflight_warnings.push(f);
        }
        Ok(())
    }
}
