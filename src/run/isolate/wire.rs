//! The isolate coordinator's line: JSON messages, one per line, over TCP, with a heartbeat in
//! both directions (every [`ALIVE_EVERY`]; silence for [`liveness`] of a round names the
//! silent side, as the status line does).
//!
//! [`ALIVE_EVERY`]: crate::run::status::ALIVE_EVERY
//! [`liveness`]: crate::run::status::liveness

use crate::bench::RankSample;
use crate::error::Failure;
use crate::stage::Stage;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// A rank's words to the coordinator.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
pub enum Up {
    Hello {
        rank: u32,
        host: String,
        /// The rank's library has ncclCommSplit and `--groups` lets it be used.
        #[serde(default)]
        split: bool,
    },
    Beat,
    /// The rank entered `stage` of `round`.
    Stage {
        round: u32,
        stage: Stage,
    },
    /// A group leader's unique id (or why there is none).
    Id {
        round: u32,
        id: Option<Vec<u8>>,
        failure: Option<Failure>,
    },
    Barrier {
        round: u32,
    },
    /// Whether the rank's part of the job-wide communicator came up.
    ParentUp {
        failure: Option<Failure>,
    },
    /// The rank's end of the round: a sample per pattern, or its failure.
    Outcome {
        round: u32,
        samples: Vec<RankSample>,
        failure: Option<Failure>,
    },
}

/// The coordinator's words to a rank.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "kebab-case")]
pub enum Down {
    Alive,
    /// Join the job-wide communicator: rank 0 makes its unique id (an [`Up::Id`] of round 0),
    /// the coordinator passes it on (a [`Down::Go`] of round 0).
    Parent,
    /// Whether the rounds split the job-wide communicator; when not, a rank aborts its part.
    Source {
        split: bool,
        why: Option<String>,
    },
    /// The ranks of this rank's group in `round` (group order; the first is the leader), or
    /// none: this rank sits the round out.
    Round {
        round: u32,
        group: Vec<u32>,
        /// The group is split off the job-wide communicator (every rank calls ncclCommSplit,
        /// those sitting out with NCCL_SPLIT_NOCOLOR), not made from a fresh unique id.
        #[serde(default)]
        split: bool,
        /// The group's index in the round: its color when split.
        #[serde(default)]
        color: i32,
    },
    /// The group's unique id, or why there is none.
    Go {
        round: u32,
        id: Option<Vec<u8>>,
        why: Option<String>,
    },
    Release {
        round: u32,
    },
    End {
        code: u8,
    },
}

/// A write that takes longer than this is given up: a cut-off peer must not stop the writer.
pub const WRITE_LIMIT: Duration = Duration::from_millis(500);

/// The sending half of a connection, shared by the threads that write on it.
#[derive(Clone)]
pub struct Sender(Arc<Mutex<TcpStream>>);

impl Sender {
    pub fn new(stream: &TcpStream) -> std::io::Result<Sender> {
        let s = stream.try_clone()?;
        s.set_write_timeout(Some(WRITE_LIMIT))?;
        let _ = s.set_nodelay(true);
        Ok(Sender(Arc::new(Mutex::new(s))))
    }

    /// Sends one message; `false` when the line is broken (or the write timed out).
    pub fn send<T: Serialize>(&self, msg: &T) -> bool {
        let Ok(mut line) = serde_json::to_string(msg) else {
            return false;
        };
        line.push('\n');
        match self.0.lock() {
            Ok(mut s) => s.write_all(line.as_bytes()).is_ok(),
            Err(_) => false,
        }
    }

    pub fn close(&self) {
        if let Ok(s) = self.0.lock() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// Reads messages off `stream` into `tx`, tagged with `tag`, then `None` when the line closes.
pub fn read_into<T: serde::de::DeserializeOwned + Send + 'static, K: Copy + Send + 'static>(
    stream: TcpStream,
    tag: K,
    tx: mpsc::Sender<(K, Option<T>)>,
) {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Ok(msg) = serde_json::from_str::<T>(&line)
                && tx.send((tag, Some(msg))).is_err()
            {
                return;
            }
        }
        let _ = tx.send((tag, None));
    });
}
