//! `run --expect FILE|auto`, on rank 0 once every stage has passed: the sweep's rows against
//! bus bandwidth floors (see [`crate::report::expect`]): one line per floor, PASS or BELOW
//! FLOOR by how much over the sizes it covers. A shortfall fails the run with its own exit code
//! and names the sizes and hosts. With `auto`, the floors are the built-in table's rows for the
//! system the ranks reported; none for it is said, and nothing is judged.

use super::Run;
use crate::bench::SizeResult;
use crate::report::expect::{self, System};
use crate::report::results::Status;
use crate::stage::exit;

impl Run<'_> {
    /// The exit code of a run below a floor; `None` without `--expect`, off rank 0, or with
    /// every floor met.
    pub(super) fn below_expected(&mut self, rows: &[SizeResult], nranks: u32) -> Option<u8> {
        let console = self.console();
        if !console.speaks_for_the_job() {
            return None;
        }
        let (path, exp) = self.plan.expect.as_ref()?;
        let sys = if self.ranks.len() == nranks as usize {
            System::of(&self.ranks)
        } else {
            System::ranks_only(nranks)
        };
        let auto = path.as_os_str() == expect::AUTO;
        let (exp, from) = if auto {
            (
                expect::system::fitting(exp, &sys),
                "the built-in floors".to_string(),
            )
        } else {
            (exp.clone(), path.display().to_string())
        };
        if auto && exp.floors.is_empty() {
            console.job(format!(
                "# expect: no built-in floor for {}: bus bandwidth not judged (give --expect FILE \
                 with your fleet's figures)",
                sys.describe()
            ));
            return None;
        }
        console.job_lines(
            expect::unchecked(&exp, rows, &sys).iter().map(|f| {
                format!("# expect: not checked (no such size or system in this run): {f}")
            }),
        );
        let judged = expect::judge(&exp, rows, &sys);
        console.job_lines(judged.iter().map(|j| format!("# expect: {}", j.line())));
        if judged.is_empty() {
            console.job(format!(
                "# expect: no floor of {from} covers a size this run measured: bus bandwidth not \
                 judged"
            ));
            return None;
        }
        let short = expect::check(&exp, rows, &sys);
        if short.is_empty() {
            console.job(format!("# expect: every floor of {from} met"));
            return None;
        }
        let hosts: Vec<String> = (0..nranks)
            .map(|r| self.host_of(r).unwrap_or_else(|| "?".into()))
            .collect();
        let lines = expect::describe(&short, &hosts);
        console.job_lines(lines.iter().map(|l| format!("# below floor: {l}")));
        let line = format!("BELOW FLOOR — {}", lines.join("; "));
        console.job(&line);
        self.save_end(Status::Fail, line, exit::BELOW_EXPECTED);
        Some(exit::BELOW_EXPECTED)
    }
}
