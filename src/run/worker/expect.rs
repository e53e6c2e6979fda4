//! `run --expect FILE`, on rank 0 once every stage has passed: the sweep's rows against the
//! file's bus bandwidth floors (see [`crate::report::expect`]). A shortfall fails the run with
//! its own exit code and names the sizes and hosts.

use super::Run;
use crate::bench::SizeResult;
use crate::report::expect;
use crate::report::results::Status;
use crate::stage::exit;

impl Run<'_> {
    /// The exit code of a run below a floor; `None` without a file, off rank 0, or with every
    /// floor met.
    pub(super) fn below_expected(&mut self, rows: &[SizeResult], nranks: u32) -> Option<u8> {
        let console = self.console();
        if !console.speaks_for_the_job() {
            return None;
        }
        let (path, exp) = self.plan.expect.as_ref()?;
        console.job_lines(expect::unchecked(exp, rows, nranks).iter().map(|f| {
            format!("# expect: not checked (no such size or rank count in this run): {f}")
        }));
        let short = expect::check(exp, rows, nranks);
        if short.is_empty() {
            console.job(format!("# expect: every floor of {} met", path.display()));
            return None;
        }
        let hosts: Vec<String> = (0..nranks)
            .map(|r| self.host_of(r).unwrap_or_else(|| "?".into()))
            .collect();
        let lines = expect::describe(&short, &hosts);
        console.job_lines(lines.iter().map(|l| format!("# below expected: {l}")));
        let line = format!("BELOW EXPECTED — {}", lines.join("; "));
        console.job(&line);
        self.save_end(Status::Fail, line, exit::BELOW_EXPECTED);
        Some(exit::BELOW_EXPECTED)
    }
}
