//! The one error type that crosses layers: a failure pinned to a stage, a rank and a host.

use crate::stage::Stage;
use serde::{Deserialize, Serialize};
use std::fmt;

/// Who is speaking: this process's rank (once known) and host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Who {
    pub rank: Option<u32>,
    pub host: String,
}

impl Who {
    pub fn rank_label(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r}"),
            None => "rank ?".into(),
        }
    }
}

/// A failure, pinned down: the verdict line and the exit code come from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub struct Failure {
    pub stage: Stage,
    /// The rank that failed (`None` when it failed before it knew its rank).
    pub rank: Option<u32>,
    pub host: String,
    /// What failed, in the library's own words where it gave any.
    pub error: String,
    /// The likely cause, when nccl-smoke can tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// What to try.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Lines that support the diagnosis (library log lines, probe results).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evidence: Vec<String>,
    /// This rank's own NCCL log names a failure that only happens locally (file descriptors,
    /// host or device memory, /dev/shm), so an error that looks like a peer's doing (a closed
    /// connection) is this rank's own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub own_evidence: bool,
}

impl Failure {
    pub fn new(stage: Stage, who: &Who, error: impl fmt::Display) -> Failure {
        Failure {
            stage,
            rank: who.rank,
            host: who.host.clone(),
            error: error.to_string(),
            cause: None,
            hint: None,
            evidence: Vec::new(),
            own_evidence: false,
        }
    }

    pub fn cause(mut self, cause: impl Into<String>) -> Failure {
        self.cause = Some(cause.into());
        self
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Failure {
        self.hint = Some(hint.into());
        self
    }

    pub fn exit_code(&self) -> u8 {
        self.stage.exit_code()
    }
}

impl Failure {
    /// The same finding as a warning: it explains a slow run instead of failing it.
    pub fn warning_line(&self) -> String {
        let line = self.to_string();
        line.replacen("FAIL at", "WARN at", 1)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rank = match self.rank {
            Some(r) => format!("rank {r}"),
            None => "rank ?".into(),
        };
        write!(
            f,
            "FAIL at {} on {} (host {}): {}",
            self.stage, rank, self.host, self.error
        )?;
        if let Some(c) = &self.cause {
            write!(f, " — likely cause: {c}")?;
        }
        if let Some(h) = &self.hint {
            write!(f, " — try: {h}")?;
        }
        Ok(())
    }
}

/// Failures that are one failure seen on several ranks: the same stage, error, cause and hint
/// (numbers aside); the line quotes the first of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Group<'a> {
    /// The first of them, whose words the group speaks.
    pub first: &'a Failure,
    pub ranks: Vec<Option<u32>>,
    pub hosts: Vec<String>,
}

impl Group<'_> {
    /// Alike: the same stage, and the same words but for numbers (ranks, ports, pids).
    fn same(a: &Failure, b: &Failure) -> bool {
        let words = |f: &Failure| {
            let text = format!(
                "{}|{}|{}",
                f.error,
                f.cause.as_deref().unwrap_or(""),
                f.hint.as_deref().unwrap_or("")
            );
            text.split(|c: char| c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join("#")
        };
        a.stage == b.stage && words(a) == words(b)
    }
}

/// Groups `failures` (in order of first appearance), so that eight ranks failing alike read as
/// one line naming eight ranks.
pub fn group(failures: &[Failure]) -> Vec<Group<'_>> {
    let mut out: Vec<Group> = Vec::new();
    for f in failures {
        match out.iter_mut().find(|g| Group::same(g.first, f)) {
            Some(g) => {
                if !g.ranks.contains(&f.rank) {
                    g.ranks.push(f.rank);
                }
                if !g.hosts.contains(&f.host) {
                    g.hosts.push(f.host.clone());
                }
            }
            None => out.push(Group {
                first: f,
                ranks: vec![f.rank],
                hosts: vec![f.host.clone()],
            }),
        }
    }
    out
}

impl fmt::Display for Group<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ranks.len() == 1 {
            return self.first.fmt(f);
        }
        let mut ranks: Vec<String> = self
            .ranks
            .iter()
            .map(|r| r.map(|r| r.to_string()).unwrap_or_else(|| "?".into()))
            .collect();
        ranks.sort_by_key(|r| r.parse::<u64>().unwrap_or(u64::MAX));
        let hosts = if self.hosts.len() == 1 {
            "host"
        } else {
            "hosts"
        };
        let line = self.first.to_string();
        let detail = line.split_once("): ").map(|(_, d)| d).unwrap_or(&line);
        write!(
            f,
            "FAIL at {} on ranks {} ({hosts} {}): {detail}",
            self.first.stage,
            ranks.join(", "),
            self.hosts.join(", ")
        )
    }
}

/// Pins any displayable error to a stage.
pub trait AtStage<T> {
    fn at(self, stage: Stage, who: &Who) -> Result<T, Failure>;
}

impl<T, E: fmt::Display> AtStage<T> for Result<T, E> {
    fn at(self, stage: Stage, who: &Who) -> Result<T, Failure> {
        self.map_err(|e| Failure::new(stage, who, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_line_names_stage_rank_host_cause_and_hint() {
        let who = Who {
            rank: Some(3),
            host: "node7".into(),
        };
        let f = Failure::new(Stage::ConnectShm, &who, "ncclSystemError")
            .cause("/dev/shm too small (64 MiB)")
            .hint("mount a memory-backed emptyDir at /dev/shm");
        assert_eq!(
            f.to_string(),
            "FAIL at connect:shm on rank 3 (host node7): ncclSystemError — likely cause: /dev/shm too small (64 MiB) — try: mount a memory-backed emptyDir at /dev/shm"
        );
        assert_eq!(f.exit_code(), Stage::ConnectShm.exit_code());
    }

    #[test]
    fn alike_failures_on_several_ranks_read_as_one_line() {
        let at = |rank, host: &str, error: &str| {
            Failure::new(
                Stage::ConnectProxy,
                &Who {
                    rank: Some(rank),
                    host: host.into(),
                },
                error,
            )
            .hint("raise the open-file limit")
        };
        let fs = [
            at(3, "b", "ncclInternalError"),
            at(1, "a", "ncclInternalError"),
            at(2, "a", "ncclRemoteError"),
            at(1, "a", "ncclInternalError"),
            at(4, "c", "ncclInternalError on port 4711"),
            at(5, "c", "ncclInternalError on port 4712"),
        ];
        let g = group(&fs);
        assert_eq!(g.len(), 3);
        assert_eq!(g[2].ranks, vec![Some(4), Some(5)]);
        assert_eq!(g[0].ranks, vec![Some(3), Some(1)]);
        assert_eq!(
            g[0].to_string(),
            "FAIL at connect:proxy on ranks 1, 3 (hosts b, a): ncclInternalError — try: raise the open-file limit"
        );
        assert_eq!(g[1].to_string(), fs[2].to_string());
    }

    #[test]
    fn unknown_rank_is_said_so() {
        let who = Who {
            rank: None,
            host: "h".into(),
        };
        let f: Result<(), Failure> = Err::<(), _>("boom").at(Stage::Launch, &who);
        assert!(
            f.unwrap_err()
                .to_string()
                .starts_with("FAIL at launch on rank ? (host h): boom")
        );
    }
}
