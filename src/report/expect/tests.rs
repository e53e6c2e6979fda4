//! Floors against rows: which apply, what falls short, what a bad file is refused for.

use super::*;

fn floors(json: &str) -> Expectations {
    serde_json::from_str(json).unwrap()
}

fn row(pattern: &str, size: usize, busbw: f64) -> SizeResult {
    let mut r = super::super::repeats::tests::measured(size, 100.0, 0);
    r.pattern = pattern.into();
    r.busbw_gbs = busbw;
    r.slowest_rank = 1;
    r
}

const EXP: &str = r#"{"schema":"nccl-smoke/expect/v1","floors":[
    {"name":"8x H100","pattern":"all_reduce","ranks":8,"size":"16G","busbw_gbs":460.0,"source":"https://example/azure"},
    {"pattern":"all_to_all","min_size":"1M","busbw_gbs":1.0,"source":"ours"}]}"#;

#[test]
fn rows_below_a_floor_that_applies_fall_short_and_name_their_hosts() {
    let e = floors(EXP);
    let rows = vec![
        row("all_reduce", 16 << 30, 455.0),
        row("all_reduce", 8 << 30, 10.0),
        row("all_to_all", 1 << 19, 0.5),
        row("all_to_all", 1 << 20, 0.9),
        row("all_to_all", 1 << 21, 1.1),
    ];
    let short = check(&e, &rows, &System::ranks_only(8));
    let found: Vec<(&str, usize)> = short
        .iter()
        .map(|s| (s.pattern.as_str(), s.size_bytes))
        .collect();
    assert_eq!(
        found,
        vec![("all_reduce", 16 << 30), ("all_to_all", 1 << 20)]
    );
    assert!(
        check(&e, &rows, &System::ranks_only(4))
            .iter()
            .all(|s| s.pattern == "all_to_all")
    );
    let hosts = ["a".to_string(), "b".to_string(), "a".to_string()];
    assert_eq!(
        describe(&short[..1], &hosts),
        vec![format!(
            "all_reduce {} B: bus bandwidth 455.00 GB/s, 1.1 % below the floor 460 GB/s for 8x H100 \
             (source: https://example/azure); slowest rank 1 on host b; host(s) a, b",
            16u64 << 30
        )]
    );
    assert_eq!(
        unchecked(&e, &rows, &System::ranks_only(4)),
        vec!["all_reduce 16G on 8 ranks".to_string()]
    );
    assert!(unchecked(&e, &rows, &System::ranks_only(8)).is_empty());
}

#[test]
fn a_size_range_is_judged_by_its_lowest_row_and_says_by_how_much() {
    let e = floors(
        r#"{"schema":"nccl-smoke/expect/v1","floors":[
        {"name":"8x X","pattern":"all_reduce","gpu":"nvidia x 80gb","gpus_per_node":2,"nodes":1,
         "min_size":"1M","max_size":"4M","busbw_gbs":100.0,"source":"https://example/x"}]}"#,
    );
    let rows = vec![
        row("all_reduce", 1 << 19, 1.0),
        row("all_reduce", 1 << 20, 120.0),
        row("all_reduce", 2 << 20, 75.0),
        row("all_reduce", 4 << 20, 101.0),
        row("all_reduce", 8 << 20, 2.0),
    ];
    let sys = System {
        ranks: 2,
        gpu: Some("NVIDIA X 80GB".into()),
        gpus_per_node: Some(2),
        nodes: Some(1),
        nics: None,
    };
    let j = judge(&e, &rows, &sys);
    assert_eq!(j.len(), 1);
    assert_eq!(
        (j[0].rows, j[0].below, j[0].lowest),
        (3, 1, (75.0, 2 << 20))
    );
    assert_eq!(
        j[0].line(),
        "all_reduce 1M-4M for 8x X: lowest 75.00 GB/s at 2097152 B, 1 of 3 size(s) BELOW \
         FLOOR 100 GB/s by up to 25.0 % (source: https://example/x)"
    );
    assert_eq!(check(&e, &rows, &sys).len(), 1);
    // Another shape: not judged, and said so.
    let other = System {
        gpus_per_node: Some(8),
        ..sys.clone()
    };
    assert!(judge(&e, &rows, &other).is_empty());
    assert_eq!(
        unchecked(&e, &rows, &other),
        vec!["all_reduce 1M-4M with 2 GPUs per host".to_string()]
    );
    let fast: Vec<SizeResult> = rows
        .iter()
        .map(|r| row("all_reduce", r.size_bytes, 200.0))
        .collect();
    assert!(
        judge(&e, &fast, &sys)[0]
            .line()
            .contains(": PASS (floor 100 GB/s")
    );
}

#[test]
fn bad_files_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let write = |text: &str| {
        let p = dir.path().join("e.json");
        std::fs::write(&p, text).unwrap();
        load(&p)
    };
    assert!(write(EXP).is_ok());
    let both = EXP.replace(r#""min_size":"1M""#, r#""min_size":"1M","size":"2M""#);
    assert!(write(&both).unwrap_err().contains("floors[1]: give one of"));
    let typo = EXP.replace("busbw_gbs\":1.0", "busbw\":1.0");
    assert!(write(&typo).unwrap_err().contains("unknown field"));
    let pattern = EXP.replace("all_to_all", "all_to_none");
    assert!(write(&pattern).unwrap_err().contains("floors[1]"));
    let size = EXP.replace("16G", "lots");
    assert!(write(&size).unwrap_err().contains("floors[0]"));
    assert!(write("{").unwrap_err().contains("e.json:1:"));
    let upside = EXP.replace(r#""min_size":"1M""#, r#""min_size":"1M","max_size":"64K""#);
    assert!(
        write(&upside)
            .unwrap_err()
            .contains("max_size is below min_size")
    );
    let lone = EXP.replace(r#""size":"16G""#, r#""size":"16G","max_size":"32G""#);
    assert!(write(&lone).unwrap_err().contains("goes with"));
}

#[test]
fn a_peak_is_judged_less_its_margin_by_every_caller() {
    // No system needed (an isolate group's): the floor is 10 % below the peak of 100.
    let e = floors(
        r#"{"schema":"nccl-smoke/expect/v1","floors":[
        {"name":"peak","pattern":"all_reduce","size":"1M","below_peak_pct":10,"busbw_gbs":100.0,"source":"ours"}]}"#,
    );
    let sys = System::ranks_only(4);
    let fine = vec![row("all_reduce", 1 << 20, 95.0)];
    assert!(check(&e, &fine, &sys).is_empty());
    let j = judge(&e, &fine, &sys);
    assert!(
        j[0].line().contains(
            "for peak (less 10 % of 100 GB/s): lowest 95.00 GB/s at 1048576 B: PASS (floor 90 GB/s"
        ),
        "{}",
        j[0].line()
    );
    let slow = vec![row("all_reduce", 1 << 20, 85.0)];
    let short = check(&e, &slow, &sys);
    assert_eq!(short.len(), 1);
    assert_eq!(short[0].floor.busbw_gbs, 90.0);
}
