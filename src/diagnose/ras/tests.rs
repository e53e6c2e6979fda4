//! Reports built line by line from the format strings of `src/ras/client_support.cc`
//! (v2.28.7-1 unless a test says otherwise), read as JSON and as text.

use super::*;

pub(super) const HASH: u64 = 0x5c2f_1e0d_9a8b_7c6d;

/// `jsonWriteRankData`: one rank with its AllReduce count (the other four functions at 0).
pub(super) fn json_rank(
    rank: u32,
    host: &str,
    pid: i64,
    async_error: i32,
    abort: bool,
    ar: u64,
) -> String {
    format!(
        "        {{\n          \"rank\": {rank},\n          \"host\": \"{host}\",\n          \"pid\": {pid},\n          \"cuda_dev\": {rank},\n          \"nvml_dev\": {rank},\n          \"status\": {{\n            \"init_state\": 0,\n            \"async_error\": {async_error},\n            \"finalize_called\": false,\n            \"destroy_flag\": false,\n            \"abort_flag\": {abort}\n          }},\n          \"collective_counts\": {{\n            \"Broadcast\": 0,\n            \"Reduce\": 0,\n            \"AllGather\": 0,\n            \"ReduceScatter\": 0,\n            \"AllReduce\": {ar}\n          }}\n        }}"
    )
}

/// `jsonWriteMissingRank` as v2.28.7-1 writes it: no comma after `nvml_dev`.
fn json_missing(rank: u32, host: &str, pid: i64, unresponsive: bool, dead: bool) -> String {
    format!(
        "        {{\n          \"rank\": {rank},\n          \"host\": \"{host}\",\n          \"pid\": {pid},\n          \"cuda_dev\": {rank},\n          \"nvml_dev\": {rank}\n          \"status\": {{\n            \"unresponsive\": {unresponsive},\n            \"considered_dead\": {dead}\n          }}\n        }}"
    )
}

/// `jsonWriteHeader` … `jsonWriteFooter` around one communicator.
pub(super) fn json_report(
    size: u32,
    ranks: &[String],
    missing: &[String],
    timeouts: u32,
) -> String {
    format!(
        "{{\n  \"nccl_version\": \"2.28.7\",\n  \"cuda_runtime_version\": 12090,\n  \"cuda_driver_version\": 12090,\n  \"timestamp\": \"2026-11-24 19:00:00\",\n  \"communicators_count\": 1,\n  \"communicators\": [\n    {{\n      \"hash\": \"{HASH:#x}\",\n      \"secondary_hash\": \"0x1:0x2\",\n      \"size\": {size},\n      \"ranks_count\": {},\n      \"missing_ranks_count\": {},\n      \"ranks\": [\n{}\n      ],\n      \"missing_ranks\": [\n{}\n      ]\n    }}\n  ],\n  \"ras\": {{\n    \"collection_time_sec\": 0.012,\n    \"timeouts_count\": {timeouts}\n  }}\n}}\n",
        ranks.len(),
        missing.len(),
        ranks.join(",\n"),
        missing.join(",\n"),
    )
}

#[test]
fn json_names_missing_dead_errors_and_counts() {
    let text = json_report(
        5,
        &[
            json_rank(0, "10.0.0.3", 100, 0, false, 121),
            json_rank(1, "10.0.0.3", 101, 6, false, 121),
            json_rank(2, "10.0.0.4", 102, 0, true, 120),
        ],
        &[
            json_missing(3, "10.0.0.4", 103, true, false),
            json_missing(4, "10.0.0.5", 104, true, true),
        ],
        1,
    );
    // As sent, v2.28.7-1's missing ranks are not valid JSON.
    assert!(serde_json::from_str::<serde_json::Value>(&text).is_err());
    let r = parse::json(&text).unwrap();
    assert_eq!(r.nccl_version.as_deref(), Some("2.28.7"));
    assert_eq!(r.timeouts, 1);
    let c = r.comm(HASH).unwrap();
    assert_eq!((c.size, c.answered), (Some(5), Some(3)));
    let lines = r.evidence(HASH);
    let want = [
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 3 (host 10.0.0.4, pid 103) missing (no data came back from its process)",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 4 (host 10.0.0.5, pid 104) considered dead (unreachable over the RAS network)",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 1 (host 10.0.0.3, pid 101) reported Remote process error (asynchronous error)",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 2 (host 10.0.0.4, pid 102) has status ABORT (unlike the other ranks)",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 2 (host 10.0.0.4, pid 102) launched up to AllReduce operation 120 (most ranks: 121)",
        "NCCL RAS: 1 communication timeouts while gathering (the answer may be partial)",
    ];
    assert_eq!(lines, want);
    assert!(r.evidence(HASH + 1).is_empty());
    assert!(r.knows(HASH) && !r.knows(HASH + 1));
}

#[test]
fn json_of_a_healthy_job_says_so_and_fixed_json_reads_too() {
    let text = json_report(
        2,
        &[
            json_rank(0, "h0", 10, 7, false, 5),
            json_rank(1, "h1", 11, 0, false, 5),
        ],
        &[],
        0,
    );
    // No missing ranks: the report is valid JSON as it is (and so is v2.29's fixed form).
    assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
    let r = parse::json(&text).unwrap();
    assert_eq!(
        r.evidence(HASH),
        [
            "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: all 2 ranks answered; none missing, dead or in error, and their operation counts agree"
        ]
    );
    // Two ranks, two counts: neither is the usual one, both are named.
    let r = parse::json(&json_report(
        2,
        &[
            json_rank(0, "h0", 10, 0, false, 7),
            json_rank(1, "h1", 11, 0, false, 6),
        ],
        &[json_missing(2, "unknown", -1, false, false)],
        0,
    ))
    .unwrap();
    let c = r.comm(HASH).unwrap();
    assert_eq!(c.findings.len(), 3);
    assert_eq!(c.findings[0].state, State::NoComm);
    assert_eq!(
        (c.findings[0].host.as_deref(), c.findings[0].pid),
        (None, None)
    );
    assert!(matches!(
        c.findings[2].state,
        State::Launched {
            count: 6,
            usual: None,
            ..
        }
    ));
}

/// A 2.28.7 text report: `rasClientRunInit` and `rasClientRunComms`'s format strings.
pub(super) const TEXT_2287: &str = "NCCL version 2.28.7+cuda12.9 compiled with CUDA 12.9
CUDA runtime version 12090, driver version 12090

Job summary
===========

  Nodes  Processes         GPUs  Processes     GPUs
(total)   per node  per process    (total)  (total)
      2          2            1          4        4

Communicators... (0.012s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         2         2         4         4   RUNNING  INCOMPLETE,ERROR,MISMATCH

Errors
======

INCOMPLETE
  Missing communicator data from 1 job process
  Process 4242 on node 10.0.0.4 managing GPU 3

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 4250 on node 10.0.0.9 managing GPU 0

#0-0 (5c2f1e0d9a8b7c6d) INCOMPLETE
  Missing communicator data from 1 rank
  Rank 3 -- GPU 3 managed by process 4242 on node 10.0.0.4

#0-0 (5c2f1e0d9a8b7c6d) ERROR
  Asynchronous errors on 2 ranks
  2 ranks reported Remote process error
  Rank 0 -- GPU 0 managed by process 4239 on node 10.0.0.3
  Rank 1 -- GPU 1 managed by process 4240 on node 10.0.0.3

Warnings
========

TIMEOUT
  Encountered 2 communication timeouts while gathering communicator data

#0-0 (5c2f1e0d9a8b7c6d) MISMATCH
  Communicator ranks have different AllReduce operation counts
  2 ranks have launched up to operation 121
  Rank 2 has launched up to operation 120 -- GPU 2 (NVML 5) managed by process 4241 on node 10.0.0.4

";

#[test]
fn text_2_28_names_the_same_categories() {
    let r = text::read(TEXT_2287).unwrap();
    assert!(r.knows(HASH) && !r.knows(HASH + 1));
    assert_eq!(r.nccl_version.as_deref(), Some("2.28.7+cuda12.9"));
    assert_eq!(r.timeouts, 2);
    let lines = r.evidence(HASH);
    let want = [
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 3 (host 10.0.0.4, pid 4242) missing (no data came back from its process)",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 0 (host 10.0.0.3, pid 4239) reported Remote process error",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 1 (host 10.0.0.3, pid 4240) reported Remote process error",
        "NCCL RAS: communicator 0x5c2f1e0d9a8b7c6d: rank 2 (host 10.0.0.4, pid 4241) launched up to AllReduce operation 120 (most ranks: 121)",
        // The dead process is no rank of this report's communicator lines; the missing one is.
        "NCCL RAS: process (host 10.0.0.9, pid 4250) considered dead (unreachable over the RAS network)",
        "NCCL RAS: 2 communication timeouts while gathering (the answer may be partial)",
    ];
    assert_eq!(lines, want);
}

#[test]
fn text_2_24_lists_missing_ranks_and_statuses() {
    let t = "NCCL version 2.24.3+cuda12.6 compiled with CUDA 12.6
CUDA runtime version 12060, driver version 12060

Errors
======

#0-0 (00000000deadbeef) INCOMPLETE
  Missing communicator data from 2 ranks
  The missing ranks: 2,3

Warnings
========

#0-0 (00000000deadbeef) MISMATCH
  Communicator ranks have different status
  Rank 1 has status FINALIZE -- GPU 1 managed by process 77 on node h1
  Communicator ranks have different collective operation counts
  Rank 0 has not launched any operations -- [process information not found]
";
    let r = text::read(t).unwrap();
    let c = r.comm(0xdead_beef).unwrap();
    let states: Vec<(Option<u32>, State)> = c
        .findings
        .iter()
        .map(|f| (f.rank, f.state.clone()))
        .collect();
    assert_eq!(
        states,
        [
            (Some(2), State::Missing),
            (Some(3), State::Missing),
            (Some(1), State::Status("FINALIZE".into())),
            (
                Some(0),
                State::Launched {
                    op: "collective".into(),
                    count: 0,
                    usual: None
                }
            ),
        ]
    );
    assert_eq!(c.findings[2].pid, Some(77));
    assert_eq!(c.findings[2].host.as_deref(), Some("h1"));
}

#[test]
fn garbled_and_truncated_reports_are_refused_or_partial_never_a_panic() {
    for bad in [
        "",
        "HTTP/1.1 400 Bad Request\r\n\r\n",
        "{",
        "[1,2]",
        "{\"communicators\": [{}]}",
    ] {
        assert!(parse::json(bad).is_err(), "{bad:?}");
    }
    assert!(text::read("").is_err());
    assert!(text::read("hello\nworld\n").is_err());
    // A JSON report cut anywhere is refused (the connection closed early).
    let full = json_report(
        2,
        &[json_rank(0, "h0", 1, 0, false, 1)],
        &[json_missing(1, "h1", 2, true, false)],
        0,
    );
    for cut in (0..full.len() - 1).step_by(7) {
        assert!(parse::json(&full[..cut]).is_err(), "cut at {cut}");
    }
    // A text report cut anywhere reads as far as it goes.
    for cut in 0..TEXT_2287.len() {
        if TEXT_2287.is_char_boundary(cut) {
            let _ = text::read(&TEXT_2287[..cut]).map(|r| r.evidence(HASH));
        }
    }
    // Odd numbers in the right places.
    let t = "Errors\n\n#x-y (zz) INCOMPLETE\n  Rank -- GPU managed by process x on node \n  Rank 99999999999 has launched up to operation q\n";
    let r = text::read(t).unwrap();
    assert!(r.comms.is_empty());
}

#[test]
fn a_text_report_naming_no_communicator_has_nothing_against_any() {
    let t = "NCCL version 2.26.2+cuda12.8 compiled with CUDA 12.8
CUDA runtime version 12080, driver version 12080

Job summary
===========

Communicators... (0.001s)
=============

Group     Comms     Nodes     Ranks     Ranks     Ranks    Status  Errors
    #  in group  per comm  per node  per comm  in group
    0         1         1         2         2         2   RUNNING      OK

Errors
======

Warnings
========

";
    let r = text::read(t).unwrap();
    assert!(r.knows(HASH));
    assert_eq!(
        r.evidence(HASH),
        [
            "NCCL RAS: no communicator has missing, dead, failed or mismatched ranks (a text report, which names a communicator only when it has)"
        ]
    );
}

#[test]
fn a_text_report_naming_no_communicator_but_a_dead_process_never_says_none_missing() {
    // The asking rank's communicator is fine in RAS's eyes (no section names it), while the job
    // level lists a process RAS cannot reach: the first line must not contradict the second.
    let t = "Job summary
===========

Communicators... (0.002s)
=============

Errors
======

DEAD
  1 job process is considered dead (unreachable via the RAS network)
  Process 4250 on node 10.0.0.9 managing GPU 0

Warnings
========

";
    let r = text::read(t).unwrap();
    assert!(r.knows(HASH));
    let lines = r.evidence(HASH);
    assert_eq!(
        lines,
        [
            "NCCL RAS: no communicator is named (a text report names one only when its ranks disagree), but at the job level:",
            "NCCL RAS: process (host 10.0.0.9, pid 4250) considered dead (unreachable over the RAS network)",
        ]
    );
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("no communicator has missing"))
    );
}

#[test]
fn text_count_groups_name_only_the_outliers() {
    // `rasClientRunComms`: groups most frequent first; a group of more than one rank gets a
    // header, and its ranks are listed only when it is an outlier (here the 2 of 10 at 40).
    let t = "Warnings
========

#0-0 (0000000000000abc) MISMATCH
  Communicator ranks have different AllReduce operation counts
  7 ranks have launched up to operation 41
  2 ranks have launched up to operation 40
  Rank 3 -- GPU 3 managed by process 13 on node h1
  Rank 4 -- GPU 4 managed by process 14 on node h1
  Rank 9 has not launched any operations -- GPU 1 managed by process 19 on node h2

#0-1 (0000000000000abd) MISMATCH
  Communicator ranks have different AllReduce operation counts
  Rank 1 has launched up to operation 6 -- GPU 1 managed by process 11 on node h0
  Rank 0 has launched up to operation 5 -- GPU 0 managed by process 10 on node h0
";
    let r = text::read(t).unwrap();
    let got = |hash| -> Vec<(Option<u32>, u64, Option<u64>)> {
        r.comm(hash)
            .unwrap()
            .findings
            .iter()
            .map(|f| match &f.state {
                State::Launched { count, usual, .. } => (f.rank, *count, *usual),
                other => panic!("{other:?}"),
            })
            .collect()
    };
    assert_eq!(
        got(0xabc),
        [
            (Some(3), 40, Some(41)),
            (Some(4), 40, Some(41)),
            (Some(9), 0, Some(41))
        ]
    );
    // Two ranks, two counts: neither is usual.
    assert_eq!(got(0xabd), [(Some(1), 6, None), (Some(0), 5, None)]);
}
