//! nccl-tests' hypercube (`hypercube_perf`, an all-gather by recursive doubling over sends and
//! receives) under mpirun on the simulation: every data type on 2 and 4 ranks, byte-checked on
//! every rank, with nccl-tests' counts and bandwidth (`src/hypercube.cu`, NVIDIA/nccl-tests
//! v2.19.6); skipped on 3 ranks, as there.

mod common;
use clap::ValueEnum;
use common::*;
use nccl_smoke::elements::DataType;
use nccl_smoke::report::results;
use nccl_smoke::stage::Stage;
use std::process::Output;

fn sim(np: u32, patterns: &str, dtype: &str, json: Option<&std::path::Path>) -> Output {
    let mut args = vec!["-f", "8", "-d", dtype, "--patterns", patterns];
    if let Some(j) = json {
        args.extend(["--json", j.to_str().unwrap()]);
    }
    one_pass(np, ("1K", "64K"), &args, &[], 120)
}

fn check(np: u32, dtype: &str) -> Result<(), String> {
    let dir = scratch(&format!("hypercube-{np}-{dtype}"));
    let json = dir.join("run.json");
    let o = sim(np, "hypercube", dtype, Some(&json));
    let t = text(&o);
    let fail = |why: String| Err(format!("{np} ranks, -d {dtype}: {why}\n{t}"));
    if code(&o) != 0 || !t.lines().any(|l| l.starts_with("PASS [SIMULATED]")) {
        return fail(format!("exit code {}, no PASS", code(&o)));
    }
    let doc = results::load(&json).map_err(|e| format!("results file: {e}"))?;
    let elem = DataType::from_str(dtype, true)?.size();
    let n = np as usize;
    if doc.results.len() != 3 {
        return fail(format!("{} rows, want 3 (1K, 8K, 64K)", doc.results.len()));
    }
    for r in &doc.results {
        let asked = r.requested_bytes.unwrap_or(r.size_bytes);
        // `base = (count/(ALIGN*nranks))*ALIGN`, ALIGN 4; algbw over `base × (nranks − 1)`
        // elements, busbw = algbw.
        let base = asked / elem / (4 * n) * 4;
        let algbw = (base * elem * (n - 1)) as f64 / r.time_us.avg / 1e3;
        let checks = [
            (r.pattern == "hypercube", "the hypercube"),
            (r.wrong == 0 && r.checked, "checked, nothing wrong"),
            (r.count == base, "nccl-tests' count"),
            (r.size_bytes == base * n * elem, "nccl-tests' size"),
            (
                (r.algbw_gbs - algbw).abs() <= 1e-9 * algbw.max(1.0) && r.busbw_gbs == r.algbw_gbs,
                "nccl-tests' bandwidth",
            ),
            (
                r.found.checked_elements > 0 && r.rank_avg_us.len() == n,
                "every rank's sample",
            ),
        ];
        if let Some((_, what)) = checks.iter().find(|(ok, _)| !ok) {
            return fail(format!("{asked} B: not {what}: {r:?}"));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn every_type_passes_on_2_and_4_ranks() {
    require_sim();
    let mut wrong = Vec::new();
    for np in [2, 4] {
        for d in DataType::value_variants() {
            let name = d.to_possible_value().unwrap().get_name().to_string();
            if let Err(e) = check(np, &name) {
                wrong.push(e);
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// On 3 ranks the hypercube is left out and said so; alone, nothing would be measured, which
/// is a failure, not a pass.
#[test]
fn three_ranks_skip_it_as_nccl_tests_does() {
    require_sim();
    let o = sim(3, "all_reduce,hypercube", "float", None);
    let t = text(&o);
    assert_eq!(code(&o), 0, "{t}");
    assert!(
        t.lines()
            .any(|l| l == "# skipped hypercube: 3 ranks is not a power of 2"),
        "{t}"
    );
    let o = sim(3, "hypercube", "float", None);
    let t = text(&o);
    assert_eq!(code(&o), Stage::Launch.exit_code() as i32, "{t}");
    assert!(
        t.lines().any(|l| l.starts_with("VERDICT: ")
            && l.contains(
                "no selected pattern runs on 3 ranks (hypercube: 3 ranks is not a power of 2)"
            )),
        "{t}"
    );
}

/// A forwarded block is checked where it lands: data spoiled on one rank is found.
#[test]
fn a_data_fault_is_found() {
    require_sim();
    let o = one_pass(
        4,
        ("4K", "4K"),
        &["--patterns", "hypercube"],
        &[("NCCL_SMOKE_SIM_FAULT", "verify@2:flip")],
        60,
    );
    let t = text(&o);
    assert_eq!(code(&o), Stage::Verify.exit_code() as i32, "{t}");
    assert!(
        t.lines()
            .any(|l| l.starts_with("VERDICT: FAIL at verify on rank")),
        "{t}"
    );
}
