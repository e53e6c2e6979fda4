//! `compare`: two real simulated runs, the second on a slow link with another driver version,
//! give a regression naming the driver change and the patterns that lost bandwidth; a run
//! compared with itself does not regress; files that cannot be compared are refused.

mod common;
use common::*;
use nccl_smoke::report::results;

fn sweep(json: &std::path::Path, env: &[(&str, &str)]) {
    let args = [
        "run",
        "--backend",
        "sim",
        "-b",
        "1M",
        "-e",
        "4M",
        "-n",
        "5",
        "-w",
        "1",
        "--json",
    ];
    let mut all: Vec<&str> = args.to_vec();
    all.push(json.to_str().unwrap());
    let o = mpirun(2, &all, env, 120);
    assert_eq!(code(&o), 0, "{}", text(&o));
}

#[test]
fn a_slower_second_run_regresses_and_a_run_matches_itself() {
    require_sim();
    let dir = scratch("compare");
    let (a, b, svg) = (dir.join("a.json"), dir.join("b.json"), dir.join("c.svg"));
    sweep(&a, &[]);
    sweep(
        &b,
        &[
            ("NCCL_SMOKE_SIM_FAULT", "net:slow=4"),
            ("NCCL_SMOKE_SIM_DRIVER_VERSION", "13000"),
        ],
    );
    let paths = |x: &std::path::Path, y: &std::path::Path| {
        vec![
            "compare".to_string(),
            x.display().to_string(),
            y.display().to_string(),
        ]
    };
    let mut args = paths(&a, &b);
    args.extend(["--plot".into(), svg.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run1(&args, &[]);
    let t = text(&o);
    assert_eq!(code(&o), 30, "{t}");
    assert!(
        t.contains("# changed: driver.version: 12.8 (12080) -> 13.0 (13000)"),
        "{t}"
    );
    for pattern in [
        "all_reduce",
        "all_to_all",
        "send_recv_ring",
        "send_recv_pairwise",
    ] {
        assert!(
            t.contains(&format!("{pattern}: bus bandwidth down beyond 5% at")),
            "{pattern}:\n{t}"
        );
    }
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.contains("<svg") && picture.contains("all_reduce (second run)"));

    let same = paths(&a, &a);
    let same: Vec<&str> = same.iter().map(String::as_str).collect();
    let o = run1(&same, &[]);
    assert_eq!(code(&o), 0, "{}", text(&o));
    assert!(text(&o).contains("NO REGRESSION"), "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_that_cannot_be_compared_are_refused() {
    require_sim();
    let dir = scratch("compare-bad");
    let a = dir.join("a.json");
    sweep(&a, &[]);
    let mut gpu = results::load(&a).unwrap();
    gpu.simulated = false;
    let g = dir.join("gpu.json");
    results::save(&g, &gpu).unwrap();
    let garbage = dir.join("garbage.json");
    std::fs::write(&garbage, b"{\"not\": \"results\"}").unwrap();
    for (other, says) in [
        (g.as_path(), "one run is SIMULATED and the other is not"),
        (garbage.as_path(), "is not an nccl-smoke results file"),
        (
            dir.join("missing.json").as_path(),
            "cannot read results file",
        ),
    ] {
        let o = run1(
            &["compare", a.to_str().unwrap(), other.to_str().unwrap()],
            &[],
        );
        assert_eq!(code(&o), 2, "{}", text(&o));
        assert!(text(&o).contains(says), "{says}:\n{}", text(&o));
    }
    let o = run1(
        &[
            "compare",
            a.to_str().unwrap(),
            a.to_str().unwrap(),
            "--threshold",
            "150",
        ],
        &[],
    );
    assert_eq!(code(&o), 2, "{}", text(&o));
    let _ = std::fs::remove_dir_all(&dir);
}
