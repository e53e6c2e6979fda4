//! What one rank's worker shows a person on standard output. Rank 0 speaks for the job: the
//! header, the tables, the advisories, the verdict. Every rank says its own failure. This is
//! the one place a worker's output asks which rank it is. A closed standard output (the
//! launcher went first) is no reason to stop, nor to panic as `println!` would.

use std::fmt::Display;
use std::io::Write;

/// A worker's console (see the module's note).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Console {
    rank0: bool,
}

impl Console {
    /// The console of rank `rank` (`None`: not known yet, so not rank 0).
    pub fn of(rank: Option<u32>) -> Console {
        Console {
            rank0: rank == Some(0),
        }
    }

    /// Whether this rank speaks for the job.
    pub fn speaks_for_the_job(&self) -> bool {
        self.rank0
    }

    /// One line of the job's output: printed on rank 0 only.
    pub fn job(&self, line: impl Display) {
        if self.rank0 {
            print_line(line);
        }
    }

    /// Lines of the job's output, in order: printed on rank 0 only.
    pub fn job_lines<S: Display>(&self, lines: impl IntoIterator<Item = S>) {
        if self.rank0 {
            lines.into_iter().for_each(print_line);
        }
    }

    /// One line of this rank's own (its failure): printed on every rank.
    pub fn own(&self, line: impl Display) {
        print_line(line);
    }

    /// Where a sweep is, over itself on a terminal's standard error: rank 0 only.
    pub fn progress(&self, text: impl Display) {
        use std::io::IsTerminal;
        if self.rank0 && std::io::stderr().is_terminal() {
            let _ = write!(std::io::stderr().lock(), "\r{text}   ");
        }
    }
}

fn print_line(line: impl Display) {
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_0_speaks_for_the_job_and_a_rank_not_known_yet_does_not() {
        assert!(Console::of(Some(0)).speaks_for_the_job());
        assert!(!Console::of(Some(3)).speaks_for_the_job());
        assert!(!Console::of(None).speaks_for_the_job());
    }
}
