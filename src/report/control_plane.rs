//! `--backend control-plane`: which transport NCCL chose per peer and channel, read from
//! NCCL's own INFO lines (`Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM`), and the verdict of a
//! run that got through init and connect on simulated GPUs.

use serde::{Deserialize, Serialize};

/// One connection NCCL logged: `Channel CC/I : FROM[dev] -> TO[dev] [send|receive] via VIA`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The rank whose NCCL printed the line.
    pub rank: u32,
    /// NCCL's channel (and connection index), as printed: `00/0`.
    pub channel: String,
    pub from: u32,
    pub to: u32,
    /// `send` or `receive` when NCCL said (network connections).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<String>,
    /// The transport, exactly as NCCL printed it after `via`: `P2P/CUMEM`, `P2P/IPC`,
    /// `SHM/direct/direct`, `NET/Socket/0`, …
    pub via: String,
}

/// What a control-plane run found, in the results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlPlane {
    /// The real libnccl's version.
    pub nccl: String,
    pub ranks: u32,
    pub hosts: usize,
    /// The patterns whose connections were made.
    pub patterns: Vec<String>,
    /// Every distinct transport NCCL printed, in the order first seen.
    pub transports: Vec<String>,
    /// Every connection line, rank by rank.
    pub links: Vec<Link>,
    /// Ranks whose NCCL log had no connection line (none written, or NCCL_DEBUG hid it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub silent_ranks: Vec<u32>,
}

/// The connection a line of NCCL's log (of `rank`'s process) reports, if it is one.
pub fn parse_line(rank: u32, line: &str) -> Option<Link> {
    let (_, rest) = line.split_once(" NCCL INFO Channel ")?;
    let (channel, rest) = rest.split_once(" : ")?;
    let (left, right) = rest.split_once(" -> ")?;
    let (target, via) = right.split_once(" via ")?;
    let rank_of = |s: &str| s.trim().split('[').next()?.trim().parse::<u32>().ok();
    let from = rank_of(left)?;
    let to = rank_of(target)?;
    let direction = ["send", "receive"]
        .into_iter()
        .find(|d| target.contains(&format!("[{d}]")))
        .map(str::to_string);
    let via = via.trim();
    if via.is_empty() || channel.contains(' ') {
        return None;
    }
    Some(Link {
        rank,
        channel: channel.trim().to_string(),
        from,
        to,
        direction,
        via: via.to_string(),
    })
}

/// Every distinct transport of `links`, in the order first seen.
pub fn transports(links: &[Link]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for l in links {
        if !out.contains(&l.via) {
            out.push(l.via.clone());
        }
    }
    out
}

impl ControlPlane {
    /// From every rank's links (index = rank).
    pub fn new(nccl: &str, hosts: usize, patterns: Vec<String>, per_rank: Vec<Vec<Link>>) -> Self {
        let silent_ranks = (0..per_rank.len() as u32)
            .filter(|r| per_rank[*r as usize].is_empty())
            .collect();
        let ranks = per_rank.len() as u32;
        let links: Vec<Link> = per_rank.into_iter().flatten().collect();
        ControlPlane {
            nccl: nccl.to_string(),
            ranks,
            hosts,
            patterns,
            transports: transports(&links),
            links,
            silent_ranks,
        }
    }

    /// The transports as the verdict says them.
    pub fn transports_text(&self) -> String {
        if self.ranks <= 1 {
            "none (1 rank: no peer to connect to)".into()
        } else if self.transports.is_empty() {
            "unknown (nccl-smoke read no connection line of NCCL's: it reads NCCL's INFO log, \
             which it sets up itself unless NCCL_DEBUG is set; with NCCL_DEBUG set, NCCL_DEBUG=INFO \
             and NCCL_DEBUG_FILE=nccl.%h.%p.log let it read yours)"
                .into()
        } else {
            self.transports.join(", ")
        }
    }

    /// One line per (from, to, direction, transport), with its channels: what rank 0 prints.
    pub fn lines(&self) -> Vec<String> {
        // (from, to, direction, transport) and its channels.
        type Group = ((u32, u32, Option<String>, String), Vec<String>);
        let mut groups: Vec<Group> = Vec::new();
        for l in &self.links {
            let key = (l.from, l.to, l.direction.clone(), l.via.clone());
            match groups.iter_mut().find(|g| g.0 == key) {
                Some(g) if !g.1.contains(&l.channel) => g.1.push(l.channel.clone()),
                Some(_) => {}
                None => groups.push((key, vec![l.channel.clone()])),
            }
        }
        groups.sort_by_key(|g| (g.0.0, g.0.1));
        let mut out: Vec<String> = groups
            .iter()
            .map(|((from, to, dir, via), channels)| {
                format!(
                    "# transport: rank {from} -> rank {to}{} via {via} ({} channel(s): {})",
                    dir.as_deref()
                        .map(|d| format!(" [{d}]"))
                        .unwrap_or_default(),
                    channels.len(),
                    channels.join(" ")
                )
            })
            .collect();
        if !self.silent_ranks.is_empty() && self.ranks > 1 {
            let r: Vec<String> = self.silent_ranks.iter().map(u32::to_string).collect();
            out.push(format!(
                "# transport: rank(s) {} printed no connection line nccl-smoke could read \
                 (NCCL_DEBUG=INFO, into NCCL_DEBUG_FILE when NCCL_DEBUG is set, shows them)",
                r.join(", ")
            ));
        }
        out
    }

    /// The verdict line: never a pass, and it says what was not done.
    pub fn verdict_line(&self, label: &str) -> String {
        format!(
            "CONTROL PLANE OK — {label} — init and connect of {} on {} rank(s), {} host(s); \
             transports: {}; ncclCommAbort ok; no kernel ran: no data checked, no bandwidth \
             measured",
            self.patterns.join(", "),
            self.ranks,
            self.hosts,
            self.transports_text()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines as NCCL 2.19.3 and 2.32.3 printed them on the stand-in driver.
    #[test]
    fn reads_the_connection_lines_nccl_prints() {
        let p2p = "vm:27121:27121 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/CUMEM";
        let l = parse_line(0, p2p).unwrap();
        assert_eq!((l.channel.as_str(), l.from, l.to), ("01/0", 0, 1));
        assert_eq!((l.via.as_str(), l.direction), ("P2P/CUMEM", None));
        let net = "h:1:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] [receive] via NET/Socket/0";
        let l = parse_line(1, net).unwrap();
        assert_eq!((l.from, l.to, l.via.as_str()), (1, 0, "NET/Socket/0"));
        assert_eq!(l.direction.as_deref(), Some("receive"));
        let shm = "h:1:2 [2] NCCL INFO Channel 03/0 : 2[2] -> 3[3] via SHM/direct/direct";
        assert_eq!(parse_line(2, shm).unwrap().via, "SHM/direct/direct");
        // The ring's order is no connection.
        assert!(parse_line(0, "h:1:2 [0] NCCL INFO Channel 00/04 : 0 1").is_none());
        assert!(parse_line(0, "h:1:2 [0] NCCL INFO Connected all rings").is_none());
    }

    #[test]
    fn the_verdict_names_the_transports_and_what_was_not_done() {
        let a = parse_line(
            0,
            "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
        );
        let b = parse_line(
            0,
            "h:1:1 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[1] via P2P/IPC",
        );
        let c = parse_line(
            1,
            "h:2:2 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via P2P/IPC",
        );
        let cp = ControlPlane::new(
            "2.19.3",
            1,
            vec!["all_reduce".into()],
            vec![vec![a.unwrap(), b.unwrap()], vec![c.unwrap()]],
        );
        assert_eq!(cp.transports, vec!["P2P/IPC"]);
        let v = cp.verdict_line("REAL NCCL 2.19.3 · SIMULATED GPUS");
        assert!(
            v.starts_with("CONTROL PLANE OK — REAL NCCL 2.19.3 · SIMULATED GPUS — "),
            "{v}"
        );
        assert!(
            v.contains("transports: P2P/IPC;") && v.contains("no bandwidth measured"),
            "{v}"
        );
        assert!(!v.contains("PASS"));
        assert_eq!(
            cp.lines()[0],
            "# transport: rank 0 -> rank 1 via P2P/IPC (2 channel(s): 00/0 01/0)"
        );
        let silent = ControlPlane::new("2.19.3", 1, vec![], vec![vec![], vec![]]);
        assert!(silent.transports_text().starts_with("unknown"));
    }
}
