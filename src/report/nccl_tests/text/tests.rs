use super::lines::untag;
use super::*;

const LOG: &str = "\
# nccl-tests version 2.17.6 nccl-headers=22705 nccl-library=22705
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1234 on      node1 device  0 [0000:19:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   1235 on      node1 device  1 [0000:3b:00] NVIDIA H100 80GB HBM3
node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    10.50    0.00    0.00      0    10.20    0.00    0.00      0
         128            32     float     sum      -1    11.00    0.01    0.01    N/A    10.90    0.01    0.01    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.005
#
# Collective test concluded: all_reduce_perf
";

#[test]
fn a_log_gives_rows_ranks_and_version() {
    let s = parse(Path::new("x.log"), LOG, None, None).unwrap();
    assert_eq!(s.ranks, 2);
    assert_eq!(s.nccl_version.as_deref(), Some("2.27.5"));
    assert_eq!(s.rows.len(), 2);
    let r = &s.rows[1];
    assert_eq!(
        (r.pattern.as_str(), r.size_bytes, r.kind.as_str()),
        ("all_reduce", 128, "float/sum")
    );
    assert_eq!(
        (r.times_us.clone(), r.busbw_gbs.clone()),
        (vec![11.0], vec![0.01])
    );
}

#[test]
fn cycles_become_repeats() {
    let twice = LOG.replace(
            "# Out of bounds",
            "           8             2     float     sum      -1    12.50    0.00    0.00      0    10.20    0.00    0.00      0\n# Out of bounds",
        );
    let s = parse(Path::new("x.log"), &twice, None, None).unwrap();
    assert_eq!(s.rows[0].times_us, vec![10.5, 12.5]);
}

#[test]
fn cut_logs_keep_their_complete_rows_and_say_where_they_end() {
    let cut: String = LOG.lines().take(13).collect::<Vec<_>>().join("\n");
    let s = parse(Path::new("cut.log"), &cut, None, None).unwrap();
    assert_eq!(s.rows.len(), 1);
    assert!(
        s.notes.iter().any(|n| n
            .starts_with("the log is cut short: it ends inside a results table at line 13")
            && n.ends_with("its 1 complete row(s) are read")),
        "{:?}",
        s.notes
    );
    // Cut before its first row: nothing to read, and it says so.
    let cut: String = LOG.lines().take(12).collect::<Vec<_>>().join("\n");
    let e = parse(Path::new("cut.log"), &cut, None, None).unwrap_err();
    assert!(
        e.to_string().starts_with(
            "cut.log:12: the log ends inside a results table before its first complete row"
        ),
        "{e}"
    );
}

#[test]
fn a_bad_row_is_skipped_and_named_unless_every_row_is_bad() {
    // Only the out-of-place group is read: a row cut in its in-place group still is.
    let half = LOG.replace("10.20    0.00    0.00      0\n", "10.20\n");
    let s = parse(Path::new("half.log"), &half, None, None).unwrap();
    assert_eq!(s.rows.len(), 2);
    assert!(
        !s.notes.iter().any(|n| n.contains("skipped")),
        "{:?}",
        s.notes
    );
    let half = LOG.replace(
        "10.50    0.00    0.00      0    10.20    0.00    0.00      0\n",
        "10.50\n",
    );
    let s = parse(Path::new("half.log"), &half, None, None).unwrap();
    assert_eq!(s.rows.len(), 1);
    assert!(
        s.notes.iter().any(|n| n
            .starts_with("1 row(s) could not be read and were skipped: line 13: row cut short")),
        "{:?}",
        s.notes
    );
    let bad = LOG.replace("10.50", "ten").replace("11.00", "eleven");
    let e = parse(Path::new("bad.log"), &bad, None, None).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("bad.log:13: 'ten' is not a number (time)"),
        "{e}"
    );
    let e = parse(Path::new("e.log"), "hello\n", None, None).unwrap_err();
    assert!(e.to_string().contains("no nccl-tests results table"), "{e}");
}

#[test]
fn the_columns_come_from_the_header_in_every_layout() {
    // nccl-tests before 2.10: an error column, no root; all_gather without redop;
    // broadcast with a root and no redop.
    let old = "\
#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)             (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        1024           256   float    34.27    0.03    0.02  0e+00    33.57    0.03    0.02  0e+00
# Avg bus bandwidth    : 0.02
";
    let s = parse(
        Path::new("all_gather_perf.log"),
        old,
        None,
        Some("all_gather_perf"),
    )
    .unwrap();
    let r = &s.rows[0];
    assert_eq!(
        (r.pattern.as_str(), r.kind.as_str()),
        ("all_gather", "float/-")
    );
    assert_eq!(
        (r.times_us.clone(), r.busbw_gbs.clone()),
        (vec![34.27], vec![0.02])
    );
    let bcast = old
        .replace("type     time", "type    root     time")
        .replace("float    34.27", "float       0    34.27");
    let s = parse(Path::new("b.log"), &bcast, Some("broadcast_perf"), None).unwrap();
    assert_eq!(s.rows[0].times_us, vec![34.27]);
}

#[test]
fn the_program_comes_from_the_command_when_the_log_does_not_name_it() {
    let old = LOG.replace("# Collective test starting: all_reduce_perf\n", "");
    let cmd = format!("$ mpirun -np 2 ./build/alltoall_perf -b 8 -e 128 -f 2\n{old}");
    let s = parse(Path::new("run.log"), &cmd, None, None).unwrap();
    assert_eq!(s.rows[0].pattern, "all_to_all");
    assert!(
        s.notes[0].starts_with("all_to_all: the program named by the command in the log (line 1)"),
        "{:?}",
        s.notes
    );
    // The command and the file name disagree: ask.
    let e = parse(Path::new("x.log"), &cmd, None, Some("all_reduce_perf")).unwrap_err();
    assert!(e.to_string().contains("--nccl-tests-pattern"), "{e}");
    // The file name alone.
    let s = parse(Path::new("x.log"), &old, None, Some("sendrecv_perf")).unwrap();
    assert_eq!(s.rows[0].pattern, "send_recv_ring");
    assert_eq!(
        s.notes[0],
        "send_recv_ring: the program named by the file name"
    );
}

#[test]
fn devices_give_hosts_and_gpu_models_and_nccl_info_its_version() {
    let s = parse(Path::new("x.log"), LOG, None, None).unwrap();
    assert_eq!(s.hosts, vec!["node1".to_string()]);
    assert_eq!(s.gpu_models().as_deref(), Some("2 × NVIDIA H100 80GB HBM3"));
    let info = LOG
        .replace(" nccl-headers=22705 nccl-library=22705", "")
        .replace(
            "Bootstrap : Using eth0:10.0.0.1<0>",
            "NCCL version 2.26.2+cuda12.8",
        );
    let s = parse(Path::new("x.log"), &info, None, None).unwrap();
    assert_eq!(s.nccl_version.as_deref(), Some("2.26.2"));
}

#[test]
fn open_mpi_tags_inside_a_row_and_blank_redops_read() {
    let row = "[1,0]<stdout>:           8             2     float     sum      -1[1,0]<stdout>:    85.14    0.00    0.00      0[1,0]<stdout>:    62.82    0.00    0.00      0";
    let clean = untag_within(row);
    assert_eq!(
        unprefix(&clean).split_whitespace().collect::<Vec<_>>(),
        [
            "8", "2", "float", "sum", "-1", "85.14", "0.00", "0.00", "0", "62.82", "0.00", "0.00",
            "0"
        ]
    );
    assert_eq!(untag_within("[a] [1,0]<x"), "[a] [1,0]<x");
    let a2a = "\
#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        1024           256   float             1.63    0.60    0.55    N/A     1.38    0.00    0.00    N/A
# Avg bus bandwidth    : 0.5
";
    let s = parse(Path::new("a.log"), a2a, Some("alltoall_perf"), None).unwrap();
    assert_eq!(
        (
            s.rows[0].kind.as_str(),
            s.rows[0].times_us.clone(),
            s.rows[0].busbw_gbs.clone()
        ),
        ("float/-", vec![1.63], vec![0.55])
    );
}

#[test]
fn the_rank_count_comes_from_nccl_or_the_command_without_device_lines() {
    assert_eq!(
        command_ranks("mpirun -np 4 ./build/all_reduce_perf -b 8 -e 1G -g 2"),
        Some(8)
    );
    assert_eq!(
        command_ranks("srun --ntasks=16 all_reduce_perf -b 8"),
        Some(16)
    );
    assert_eq!(command_ranks("./build/all_reduce_perf -b 8 -g 8"), None);
    let bare: String = LOG
        .lines()
        .filter(|l| !l.starts_with("#  Rank"))
        .map(|l| format!("{l}\n"))
        .collect();
    let s = parse(Path::new("x.log"), &bare, None, None).unwrap();
    assert_eq!(s.ranks, 1);
    assert!(
        s.notes
            .iter()
            .any(|n| n.starts_with("the rank count is unknown")),
        "{:?}",
        s.notes
    );
    let info = bare.replace(
        "Bootstrap : Using eth0:10.0.0.1<0>",
        "comm 0x1 rank 0 nranks 16 cudaDev 0 busId 1000 - Init COMPLETE",
    );
    let s = parse(Path::new("x.log"), &info, None, None).unwrap();
    assert_eq!(s.ranks, 16);
    let cmd = format!("mpirun -np 2 ./all_reduce_perf -g 4\n{bare}");
    let s = parse(Path::new("x.log"), &cmd, None, None).unwrap();
    assert_eq!(s.ranks, 8);
}

#[test]
fn srun_labels_are_stripped() {
    let labelled: String = LOG.lines().map(|l| format!("  0: {l}\n")).collect();
    let s = parse(Path::new("t.log"), &labelled, None, None).unwrap();
    assert_eq!((s.rows.len(), s.ranks), (2, 2));
    assert_eq!(unprefix("12: # x"), "# x");
    assert_eq!(unprefix("  0: "), "");
    // A row's size is no label; NCCL's host:pid:tid prefix neither.
    assert_eq!(
        unprefix("           8             2"),
        "           8             2"
    );
    assert_eq!(unprefix("10:1:2 [0] NCCL INFO x"), "10:1:2 [0] NCCL INFO x");
}

#[test]
fn tagged_output_and_pasted_logs_without_hashes_read() {
    let tagged: String = LOG
        .lines()
        .map(|l| format!("[1,0]<stdout>:{l}\n"))
        .collect();
    let s = parse(Path::new("t.log"), &tagged, None, None).unwrap();
    assert_eq!(s.rows.len(), 2);
    assert_eq!(untag("[1,12]<stderr>:x"), "x");
    assert_eq!(
        untag("[a0000:0:2916721 - context.c:589] INFO"),
        "[a0000:0:2916721 - context.c:589] INFO"
    );
    let bare: String = LOG
        .lines()
        .map(|l| format!("{}\n", l.trim_start_matches('#')))
        .collect();
    let s = parse(Path::new("b.log"), &bare, None, None).unwrap();
    assert_eq!(s.rows.len(), 2);
}

#[test]
fn an_old_log_without_program_or_root_needs_a_name() {
    let old = LOG
        .replace("# Collective test starting: all_reduce_perf\n", "")
        .replace("      -1 ", " ")
        .replace("    root", "");
    let e = parse(Path::new("old.log"), &old, None, None).unwrap_err();
    assert!(e.to_string().contains("--nccl-tests-pattern"), "{e}");
    let s = parse(Path::new("old.log"), &old, Some("all_to_all"), None).unwrap();
    assert_eq!(s.rows[0].kind, "float/-");
    assert_eq!(s.rows[0].times_us, vec![10.5]);
    // Without a root column, a time printed as an integer is still the time.
    let int = old.replace("10.50 ", "19340 ");
    let s = parse(Path::new("old.log"), &int, Some("all_reduce"), None).unwrap();
    assert_eq!(s.rows[0].times_us, vec![19340.0]);
}
