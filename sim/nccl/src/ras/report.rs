//! The status report, in the 2.28.7 JSON layout or the text format, from the gathered views.

use super::peers::{Missing, Rank, View};
use super::*;

pub(super) fn version_text(v: i32) -> String {
    version::text(v)
}

/// The JSON report: `jsonWriteHeader` … `jsonWriteFooter`, `client_support.cc` v2.28.7-1,
/// including that release's missing comma after a missing rank's `nvml_dev` (fixed in
/// v2.29.2-1).
pub(super) fn json_report(v: i32, views: &[View]) -> String {
    let mut o = String::new();
    o += "{\n";
    o += &format!("  \"nccl_version\": \"{}\",\n", version_text(v));
    o += "  \"cuda_runtime_version\": 12080,\n";
    o += &format!(
        "  \"cuda_driver_version\": {},\n",
        crate::cuda::driver_version().unwrap_or(-1)
    );
    o += "  \"timestamp\": \"\",\n";
    o += &format!("  \"communicators_count\": {},\n", views.len());
    o += "  \"communicators\": [\n";
    for (i, c) in views.iter().enumerate() {
        if i > 0 {
            o += ",\n";
        }
        o += "    {\n";
        o += &format!("      \"hash\": \"{:#x}\",\n", c.hash);
        o += "      \"secondary_hash\": \"0x0:0x0\",\n";
        o += &format!("      \"size\": {},\n", c.size);
        o += &format!("      \"ranks_count\": {},\n", c.ranks.len());
        o += &format!("      \"missing_ranks_count\": {},\n", c.missing.len());
        o += "      \"ranks\": [\n";
        for (j, r) in c.ranks.iter().enumerate() {
            if j > 0 {
                o += ",\n";
            }
            o += "        {\n";
            o += &format!("          \"rank\": {},\n", r.rank);
            o += &format!("          \"host\": \"{}\",\n", r.ip);
            o += &format!("          \"pid\": {},\n", r.pid);
            o += &format!("          \"cuda_dev\": {},\n", r.dev);
            o += &format!("          \"nvml_dev\": {},\n", r.dev);
            o += "          \"status\": {\n";
            o += &format!("            \"init_state\": {},\n", r.init);
            o += &format!("            \"async_error\": {},\n", r.async_error);
            o += &format!("            \"finalize_called\": {},\n", r.finalize);
            o += "            \"destroy_flag\": false,\n";
            o += &format!("            \"abort_flag\": {}\n", r.abort);
            o += "          },\n";
            o += "          \"collective_counts\": {\n";
            for (k, f) in FUNCTIONS.iter().enumerate() {
                let n = if *f == "AllReduce" { r.allreduce } else { 0 };
                let comma = if k + 1 < FUNCTIONS.len() { "," } else { "" };
                o += &format!("            \"{f}\": {n}{comma}\n");
            }
            o += "          }\n";
            o += "        }";
        }
        o += "\n      ],\n";
        o += "      \"missing_ranks\": [\n";
        for (j, m) in c.missing.iter().enumerate() {
            if j > 0 {
                o += ",\n";
            }
            let comma = if v < 22902 { "" } else { "," };
            o += "        {\n";
            o += &format!("          \"rank\": {},\n", m.rank);
            o += &format!(
                "          \"host\": \"{}\",\n",
                m.ip.as_deref().unwrap_or("unknown")
            );
            o += &format!("          \"pid\": {},\n", m.pid);
            o += &format!("          \"cuda_dev\": {},\n", m.dev);
            o += &format!("          \"nvml_dev\": {}{comma}\n", m.dev);
            o += "          \"status\": {\n";
            o += &format!("            \"unresponsive\": {},\n", m.unresponsive);
            o += &format!("            \"considered_dead\": {}\n", m.dead);
            o += "          }\n";
            o += "        }";
        }
        o += "\n      ]\n";
        o += "    }";
    }
    o += "\n  ],\n";
    o += "  \"ras\": {\n";
    o += "    \"collection_time_sec\": 0.000,\n";
    o += "    \"timeouts_count\": 0\n";
    o += "  }\n";
    o += "}\n";
    o
}

/// The functions RAS counts (`NCCL_NUM_FUNCTIONS` = 5, in `ncclFunc_t` order,
/// `src/include/nccl_common.h` v2.28.7-1); of them the simulation has AllReduce only.
pub(super) const FUNCTIONS: [&str; 5] = [
    "Broadcast",
    "Reduce",
    "AllGather",
    "ReduceScatter",
    "AllReduce",
];

/// `ncclErrorToString`, `client_support.cc` v2.28.7-1.
pub(super) fn error_text(code: u32) -> &'static str {
    match code {
        1 => "Unhandled CUDA error",
        2 => "System error",
        3 => "Internal error",
        4 => "Invalid argument",
        5 => "Invalid usage",
        6 => "Remote process error",
        7 => "NCCL operation in progress",
        _ => "Unexpected error",
    }
}

/// `rasCountIsOutlier` (not verbose), `client_support.cc` v2.28.7-1: a group NCCL lists rank
/// by rank.
pub(super) fn outlier(count: usize, total: usize) -> bool {
    count == 1 || (count <= 10 && count as f64 <= total as f64 * 0.25)
}

pub(super) fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}

/// The text report: `rasClientRunInit` and `rasClientRunComms`, `client_support.cc`
/// v2.28.7-1 (the 2.26+ rank lines for every text release; see `sim/README.md`).
pub(super) fn text_report(v: i32, views: &[View]) -> String {
    let mut o = String::new();
    o += &format!(
        "NCCL version {}+sim compiled with CUDA 12.8\n",
        version_text(v)
    );
    o += &format!(
        "CUDA runtime version 12080, driver version {}\n\n",
        crate::cuda::driver_version().unwrap_or(-1)
    );
    // The job: the processes this process knows of (its own and its peers').
    let mut procs: Vec<(String, i64)> = Vec::new();
    for r in views.iter().flat_map(|c| &c.ranks) {
        if !procs.contains(&(r.ip.clone(), r.pid)) {
            procs.push((r.ip.clone(), r.pid));
        }
    }
    let mut nodes: Vec<&String> = procs.iter().map(|(ip, _)| ip).collect();
    nodes.sort();
    nodes.dedup();
    o += "Job summary\n===========\n\n";
    o += "  Nodes  Processes         GPUs  Processes     GPUs\n(total)   per node  per process    (total)  (total)\n";
    o += &format!(
        "{:7}  {:9}  {:11}  {:9}  {:7}\n\n",
        nodes.len(),
        procs.len() / nodes.len().max(1),
        1,
        procs.len(),
        procs.len()
    );
    o += "Communicators... (0.000s)\n=============\n\n";
    if views.is_empty() {
        o += "No communicator data collected!\n";
    } else {
        o += "Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors\n    #  in group  per comm  per node  per comm  in group\n";
    }
    for (i, c) in views.iter().enumerate() {
        let mut ips: Vec<&String> = c.ranks.iter().map(|r| &r.ip).collect();
        ips.sort();
        ips.dedup();
        let per_node = c.ranks.len() / ips.len().max(1);
        // statusStr of the highest status bit, errorStr of the error bits (`rasClientRunComms`).
        let status = if c.ranks.iter().any(|r| r.abort) {
            "ABORT"
        } else if c.ranks.iter().any(|r| r.finalize) {
            "FINALIZE"
        } else if c.ranks.iter().any(|r| r.init == crate::SUCCESS) {
            "RUNNING"
        } else if !c.ranks.is_empty() {
            "INIT"
        } else {
            "NOCOMM"
        };
        let mut counts: Vec<u64> = c.ranks.iter().map(|r| r.allreduce).collect();
        counts.dedup();
        let statuses = {
            let mut s: Vec<(bool, bool, bool)> = c
                .ranks
                .iter()
                .map(|r| (r.abort, r.finalize, r.init == crate::SUCCESS))
                .collect();
            s.sort();
            s.dedup();
            s.len()
        };
        let mismatch =
            counts.len() > 1 || statuses > 1 || c.missing.iter().any(|m| !m.unresponsive);
        let error = c
            .ranks
            .iter()
            .any(|r| !matches!(r.async_error, crate::SUCCESS | crate::INPROGRESS));
        let incomplete = c.missing.iter().any(|m| m.unresponsive);
        let errors = [
            "OK",
            "MISMATCH",
            "ERROR",
            "ERROR,MISMATCH",
            "INCOMPLETE",
            "INCOMPLETE,MISMATCH",
            "INCOMPLETE,ERROR",
            "INCOMPLETE,ERROR,MISMATCH",
        ][usize::from(mismatch) | (usize::from(error) << 1) | (usize::from(incomplete) << 2)];
        o += &format!(
            "{:5}  {:8}  {:8}  {:>8}  {:8}  {:8}  {:>8}  {:>6}\n",
            i,
            1,
            ips.len(),
            per_node,
            c.size,
            c.ranks.len(),
            status,
            errors
        );
    }
    o += "\nErrors\n======\n\n";
    let mut silent: Vec<&Missing> = Vec::new();
    let mut dead: Vec<&Missing> = Vec::new();
    for m in views.iter().flat_map(|c| &c.missing) {
        let list = if m.dead { &mut dead } else { &mut silent };
        if m.unresponsive && m.pid > 0 && !list.iter().any(|x| x.pid == m.pid && x.ip == m.ip) {
            list.push(m);
        }
    }
    let process = |m: &Missing| {
        format!(
            "  Process {} on node {} managing GPU {}\n",
            m.pid,
            m.ip.as_deref().unwrap_or(""),
            m.dev
        )
    };
    if !silent.is_empty() {
        let n = silent.len();
        o += &format!(
            "INCOMPLETE\n  Missing communicator data from {n} job process{}\n",
            plural(n, "", "es")
        );
        silent.iter().for_each(|m| o += &process(m));
        o += "\n";
    }
    if !dead.is_empty() {
        let n = dead.len();
        o += &format!(
            "DEAD\n  {n} job process{} considered dead (unreachable via the RAS network)\n",
            plural(n, " is", "es are")
        );
        dead.iter().for_each(|m| o += &process(m));
        o += "\n";
    }
    let rank_line = |rank: usize, dev: i32, pid: i64, ip: &str| {
        if pid > 0 {
            format!("Rank {rank} -- GPU {dev} managed by process {pid} on node {ip}\n")
        } else {
            format!("Rank {rank} -- [process information not found]\n")
        }
    };
    for (i, c) in views.iter().enumerate() {
        let incomplete: Vec<&Missing> = c.missing.iter().filter(|m| m.unresponsive).collect();
        if !incomplete.is_empty() {
            let n = incomplete.len();
            o += &format!(
                "#0-{i} ({:016x}) INCOMPLETE\n  Missing communicator data from {n} rank{}\n",
                c.hash,
                plural(n, "", "s")
            );
            for m in incomplete {
                o += "  ";
                o += &rank_line(m.rank, m.dev, m.pid, m.ip.as_deref().unwrap_or(""));
            }
            o += "\n";
        }
        let failed: Vec<&Rank> = c
            .ranks
            .iter()
            .filter(|r| !matches!(r.async_error, crate::SUCCESS | crate::INPROGRESS))
            .collect();
        if !failed.is_empty() {
            let n = failed.len();
            o += &format!(
                "#0-{i} ({:016x}) ERROR\n  Asynchronous error{} on {n} rank{}\n",
                c.hash,
                plural(n, "", "s"),
                plural(n, "", "s")
            );
            for r in failed {
                o += &format!(
                    "  Rank {} reported {} -- GPU {} managed by process {} on node {}\n",
                    r.rank,
                    error_text(r.async_error),
                    r.dev,
                    r.pid,
                    r.ip
                );
            }
            o += "\n";
        }
    }
    o += "Warnings\n========\n\n";
    for (i, c) in views.iter().enumerate() {
        let status = |r: &Rank| {
            if r.abort {
                "ABORT"
            } else if r.finalize {
                "FINALIZE"
            } else if r.init == crate::SUCCESS {
                "RUNNING"
            } else {
                "INIT"
            }
        };
        let mut statuses: BTreeMap<&str, Vec<&Rank>> = BTreeMap::new();
        c.ranks
            .iter()
            .for_each(|r| statuses.entry(status(r)).or_default().push(r));
        let nocomm: Vec<&Missing> = c.missing.iter().filter(|m| !m.unresponsive).collect();
        let mut counts: BTreeMap<u64, Vec<&Rank>> = BTreeMap::new();
        c.ranks
            .iter()
            .for_each(|r| counts.entry(r.allreduce).or_default().push(r));
        let status_mismatch = statuses.len() + usize::from(!nocomm.is_empty()) > 1;
        if !status_mismatch && counts.len() < 2 {
            continue;
        }
        o += &format!("#0-{i} ({:016x}) MISMATCH\n", c.hash);
        // Groups most frequent first (`rasValCountsCompareRev`); a group of more than one
        // rank gets a header; its ranks are listed only when it is an outlier.
        let detail = |o: &mut String, n: usize, state: &str, rows: Vec<String>| {
            if n > 1 {
                *o += &format!("  {n} ranks {}\n", state.replacen("has", "have", 1));
            }
            if outlier(n, c.size) {
                for (rank, rest) in rows.iter().map(|l| l.split_once(" -- ").unwrap_or((l, ""))) {
                    if n > 1 {
                        *o += &format!("  {rank} -- {rest}");
                    } else {
                        *o += &format!("  {rank} {state} -- {rest}");
                    }
                }
            }
        };
        if status_mismatch {
            o += "  Communicator ranks have different status\n";
            let mut groups: Vec<(String, Vec<String>)> = statuses
                .iter()
                .map(|(s, rs)| {
                    let rows = rs
                        .iter()
                        .map(|r| rank_line(r.rank, r.dev, r.pid, &r.ip))
                        .collect();
                    (format!("has status {s}"), rows)
                })
                .collect();
            if !nocomm.is_empty() {
                let rows = nocomm
                    .iter()
                    .map(|m| rank_line(m.rank, m.dev, m.pid, m.ip.as_deref().unwrap_or("")))
                    .collect();
                groups.push(("has status NOCOMM".into(), rows));
            }
            groups.sort_by_key(|g| std::cmp::Reverse(g.1.len()));
            for (state, rows) in groups {
                detail(&mut o, rows.len(), &state, rows);
            }
        }
        if counts.len() > 1 {
            o += "  Communicator ranks have different AllReduce operation counts\n";
            let mut groups: Vec<(&u64, &Vec<&Rank>)> = counts.iter().collect();
            groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(b.0.cmp(a.0)));
            for (n, rs) in groups {
                let state = if *n > 0 {
                    format!("has launched up to operation {n}")
                } else {
                    "has not launched any operations".into()
                };
                let rows = rs
                    .iter()
                    .map(|r| rank_line(r.rank, r.dev, r.pid, &r.ip))
                    .collect();
                detail(&mut o, rs.len(), &state, rows);
            }
        }
        o += "\n";
    }
    o
}
