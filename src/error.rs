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
