//! A rank's side of the status line: its supervisor's reports to rank 0's, and what rank 0's
//! says back (alive, ack, bye).

use super::status::{ALIVE_EVERY, RANK0_SILENCE_FLOOR, Report, SELF_STOPPED, WRITE_LIMIT};
use crate::events::{Address, Event};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What a rank hears from rank 0's supervisor.
#[derive(Debug)]
pub struct Downlink {
    /// When rank 0 last said anything.
    pub last: Instant,
    /// Rank 0 has this rank's end report.
    pub acked: bool,
    /// Rank 0 said it has ended.
    pub bye: bool,
    /// The job's exit code, when rank 0 said it with its goodbye (it had concluded the job).
    pub job_code: Option<u8>,
    /// The connection closed.
    pub closed: bool,
}

/// Another rank's side: the connection to rank 0's supervisor.
pub struct Uplink {
    stream: TcpStream,
    rank: u32,
    host: String,
    /// Rank 0's host, as it named itself.
    pub rank0_host: String,
    /// What rank 0's supervisor says back.
    pub down: Arc<Mutex<Downlink>>,
    last_alive: Instant,
    last_tick: Instant,
}

impl Uplink {
    /// Tries each address for up to two seconds in all.
    pub fn connect(addrs: &[Address], rank: u32, host: &str) -> Option<Uplink> {
        let start = Instant::now();
        // Rank 0 lists its host name last (see `share_status_address`).
        let rank0_host = addrs.last().map(|a| a.host.clone()).unwrap_or_default();
        while start.elapsed() < Duration::from_secs(2) {
            for a in addrs {
                if let Some(sa) = a.resolve()
                    && let Ok(stream) = TcpStream::connect_timeout(&sa, Duration::from_millis(500))
                {
                    let _ = stream.set_nodelay(true);
                    let _ = stream.set_write_timeout(Some(WRITE_LIMIT));
                    let down = Arc::new(Mutex::new(Downlink {
                        last: Instant::now(),
                        acked: false,
                        bye: false,
                        job_code: None,
                        closed: false,
                    }));
                    if let Ok(read) = stream.try_clone() {
                        listen(read, down.clone());
                    }
                    return Some(Uplink {
                        stream,
                        rank,
                        host: host.to_string(),
                        rank0_host,
                        down,
                        last_alive: Instant::now(),
                        last_tick: Instant::now(),
                    });
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        None
    }

    /// Forwards one event; a lost rank 0 is not this rank's failure, so errors are dropped.
    pub fn send(&mut self, event: &Event) {
        let r = Report {
            rank: self.rank,
            host: self.host.clone(),
            event: event.clone(),
        };
        if let Ok(mut line) = serde_json::to_string(&r) {
            line.push('\n');
            let _ = self.stream.write_all(line.as_bytes());
        }
    }

    /// Says this supervisor is alive, at most every [`ALIVE_EVERY`]. Called from the watch
    /// loop; a long gap between calls means this supervisor itself was stopped, and then rank
    /// 0's silence meanwhile says nothing about rank 0.
    pub fn keep_alive(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_tick) > SELF_STOPPED
            && let Ok(mut d) = self.down.lock()
        {
            d.last = now;
        }
        self.last_tick = now;
        if self.last_alive.elapsed() >= ALIVE_EVERY {
            self.last_alive = Instant::now();
            self.send(&Event::Alive);
        }
    }

    /// Whether rank 0's supervisor has gone without a goodbye (`Some(true)`: the line closed;
    /// `Some(false)`: silent for longer than `limit`, and never less than
    /// [`RANK0_SILENCE_FLOOR`]), or is there (`None`).
    pub fn rank0_gone(&self, limit: Duration) -> Option<bool> {
        let limit = limit.max(RANK0_SILENCE_FLOOR);
        let d = self.down.lock().ok()?;
        if d.bye || d.acked {
            None
        } else if d.closed {
            Some(true)
        } else if d.last.elapsed() > limit {
            Some(false)
        } else {
            None
        }
    }

    /// Waits up to `limit` for rank 0 to confirm this rank's end report. `Ok` when it did (or
    /// has ended itself), else whether the line closed (`true`) or stayed silent (`false`).
    pub fn await_ack(&self, limit: Duration) -> Result<(), bool> {
        let limit = limit.max(RANK0_SILENCE_FLOOR);
        let start = Instant::now();
        loop {
            match self.down.lock() {
                Ok(d) if d.acked || d.bye => return Ok(()),
                Ok(d) if d.closed => return Err(true),
                Ok(d) if d.last.elapsed() > limit || start.elapsed() > limit => {
                    return Err(false);
                }
                Ok(_) => {}
                Err(_) => return Ok(()),
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits up to `limit` for rank 0's goodbye (it has concluded the job), its line closing,
    /// or `stop` (the launcher's signal). Returns the job's exit code when rank 0 said it with
    /// its goodbye after it had this rank's end report (the job's verdict counts this rank).
    pub fn await_bye(&self, limit: Duration, stop: impl Fn() -> bool) -> Option<u8> {
        let start = Instant::now();
        while start.elapsed() < limit && !stop() {
            match self.down.lock() {
                Ok(d) if !(d.bye || d.closed) => {}
                Ok(d) => return d.job_code.filter(|_| d.acked),
                Err(_) => return None,
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Uplink {
    /// Closes the line for both directions (the listening thread holds a clone of it).
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Reads rank 0's words (see [`serve`]) into `down` until the line closes.
fn listen(read: TcpStream, down: Arc<Mutex<Downlink>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(read).lines() {
            let Ok(line) = line else { break };
            let Ok(mut d) = down.lock() else { return };
            d.last = Instant::now();
            let mut words = line.split_whitespace();
            match words.next() {
                Some("ack") => d.acked = true,
                Some("bye") => {
                    d.bye = true;
                    d.job_code = words.next().and_then(|c| c.parse().ok()).or(d.job_code);
                }
                _ => {}
            }
        }
        if let Ok(mut d) = down.lock() {
            d.closed = true;
        }
    });
}
