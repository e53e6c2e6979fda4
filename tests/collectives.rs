//! The collectives beyond all-reduce and all-to-all (all_gather, reduce_scatter, broadcast,
//! reduce, gather, scatter) under mpirun on the simulation: every data type, on 2, 3 and 4
//! ranks, byte-checked on every rank that receives, with nccl-tests' counts and bus-bandwidth
//! factors in the results file (NVIDIA/nccl-tests v2.19.6 `src/all_gather.cu`,
//! `src/reduce_scatter.cu`, `src/broadcast.cu`, `src/reduce.cu`, `src/gather.cu`,
//! `src/scatter.cu`).

mod common;
use clap::ValueEnum;
use common::*;
use nccl_smoke::elements::DataType;
use nccl_smoke::report::results;

const PATTERNS: [&str; 6] = [
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
];
const OPS: [&str; 4] = ["sum", "prod", "max", "min"];

/// nccl-tests' count column and busbw factor of `pattern` for `bytes` of `elem`-byte elements.
fn nccl_tests(pattern: &str, bytes: usize, elem: usize, n: usize) -> (usize, f64) {
    // `base = (count/nranks) & ~(16/eltSize - 1)` in the all-gather and reduce-scatter files.
    let base = (bytes / elem / n) & !((16 / elem).max(1) - 1);
    let spread = (n as f64 - 1.0) / n as f64;
    match pattern {
        "all_gather" | "reduce_scatter" | "gather" | "scatter" => (base, spread),
        _ => (bytes / elem, 1.0),
    }
}

fn run(np: u32, dtype: &str, op: &str) -> Result<(), String> {
    let dir = scratch(&format!("colls-{np}-{dtype}"));
    let json = dir.join("run.json");
    let o = mpirun(
        np,
        &[
            "run",
            "--backend",
            "sim",
            "-b",
            "1K",
            "-e",
            "64K",
            "-f",
            "8",
            "-n",
            "1",
            "-w",
            "0",
            "-d",
            dtype,
            "-o",
            op,
            "--patterns",
            &PATTERNS.join(","),
            "--json",
            json.to_str().unwrap(),
        ],
        &[],
        120,
    );
    let t = text(&o);
    let fail = |why: String| Err(format!("{np} ranks, -d {dtype} -o {op}: {why}\n{t}"));
    if code(&o) != 0 || !t.lines().any(|l| l.starts_with("PASS [SIMULATED]")) {
        return fail(format!("exit code {}, no PASS", code(&o)));
    }
    let doc = results::load(&json).map_err(|e| format!("results file: {e}"))?;
    let elem = DataType::from_str(dtype, true)?.size();
    for p in PATTERNS {
        let rows: Vec<_> = doc.results.iter().filter(|r| r.pattern == p).collect();
        if rows.len() != 3 {
            return fail(format!("{p}: {} rows, want 3 (1K, 8K, 64K)", rows.len()));
        }
        for r in rows {
            let asked = r.requested_bytes.unwrap_or(r.size_bytes);
            let (count, factor) = nccl_tests(p, asked, elem, np as usize);
            let algbw = r.size_bytes as f64 / r.time_us.avg / 1e3;
            let checks = [
                (r.wrong == 0 && r.checked, "checked, nothing wrong"),
                (r.count == count, "nccl-tests' count"),
                (
                    (r.busbw_gbs - algbw * factor).abs() <= 1e-9 * algbw.max(1.0),
                    "nccl-tests' busbw factor",
                ),
                (
                    r.found.checked_elements > 0 && r.rank_avg_us.len() == np as usize,
                    "every rank's sample",
                ),
            ];
            if let Some((_, what)) = checks.iter().find(|(ok, _)| !ok) {
                return fail(format!("{p} {asked} B: not {what}: {r:?}"));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn every_type_passes_on_2_3_and_4_ranks() {
    require_sim();
    let mut wrong = Vec::new();
    for np in [2, 3, 4] {
        for (i, d) in DataType::value_variants().iter().enumerate() {
            let name = d.to_possible_value().unwrap().get_name().to_string();
            if let Err(e) = run(np, &name, OPS[i % OPS.len()]) {
                wrong.push(e);
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A reduce and a gather write the root's receive buffer only: a data fault there (rank 0) is
/// found and named, one on another rank strikes nothing that the operation wrote.
#[test]
fn reduce_and_gather_are_checked_on_their_root() {
    require_sim();
    for (pattern, fault, want) in [
        ("reduce", "verify@0:flip", 23),
        ("reduce", "verify@0:nothing", 23),
        ("reduce", "verify@0:peer", 23),
        ("reduce", "verify@1:flip", 0),
        ("gather", "verify@0:partial", 23),
        ("gather", "verify@0:peer", 23),
        ("gather", "verify@2:nan", 0),
    ] {
        let o = mpirun(
            3,
            &[
                "run",
                "--backend",
                "sim",
                "-b",
                "4K",
                "-e",
                "4K",
                "-n",
                "1",
                "-w",
                "0",
                "--patterns",
                pattern,
            ],
            &[("NCCL_SMOKE_SIM_FAULT", fault)],
            60,
        );
        let t = text(&o);
        assert_eq!(code(&o), want, "{pattern} {fault}: {t}");
        if want == 23 {
            assert!(
                t.lines()
                    .any(|l| l.starts_with("VERDICT: FAIL at verify on rank 0 ")),
                "{pattern} {fault}: {t}"
            );
        }
    }
}

/// A run of reduce_scatter and of broadcast meets a real nccl-tests log of the same program
/// (2 ranks, `tests/fixtures/nccl-tests-wild`) row for row in `compare`: same pattern name,
/// same size column.
#[test]
fn runs_meet_real_nccl_tests_logs_of_the_same_program() {
    require_sim();
    let wild =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-tests-wild");
    for (pattern, log, size) in [
        (
            "reduce_scatter",
            "reduce_scatter_perf-thomaslie210-gdr-off.log",
            "1048576",
        ),
        (
            "broadcast",
            "broadcast_perf-thomaslie210-small-steps.log",
            "1024",
        ),
    ] {
        let dir = scratch(&format!("meet-{pattern}"));
        let json = dir.join("run.json");
        let o = mpirun(
            2,
            &[
                "run",
                "--backend",
                "sim",
                "-b",
                size,
                "-e",
                size,
                "-n",
                "2",
                "-w",
                "0",
                "--patterns",
                pattern,
                "--json",
                json.to_str().unwrap(),
            ],
            &[],
            60,
        );
        assert_eq!(code(&o), 0, "{}", text(&o));
        let c = std::process::Command::new(bin())
            .args(["compare", "--mixed-backends"])
            .arg(wild.join(log))
            .arg(&json)
            .output()
            .unwrap();
        let t = text(&c);
        let row = t
            .lines()
            .find(|l| l.split_whitespace().next() == Some(size))
            .unwrap_or_else(|| panic!("{pattern}: no row of {size} B met:\n{t}"));
        assert!(
            row.contains("INCONCLUSIVE") || row.contains('%'),
            "{pattern}: {row}\n{t}"
        );
        assert!(
            t.contains(&format!("# {pattern} (medians")),
            "{pattern}:\n{t}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
