//! nccl-tests' `-J FILE.json` output, file version 3 (NVIDIA/nccl-tests v2.19.6 `src/util.cu`:
//! `JSON_FILE_VERSION`, `jsonOutputInit`, `writeDeviceReport`, `writeBenchmarkLine*`,
//! `writeResultFooter`). One object: `version`, `start_time`, `args` (argv, the program
//! first), `env`, `nccl_version` (the code, e.g. 22705), `config` (with `devices`, one per
//! process: each process's first `#  Rank` line; a process drives `nthreads` × `ngpus` ranks),
//! `results` (one object per size: `size`, `count`, `type`, `redop`, `root`, `out_of_place`
//! and `in_place` each `{time | cpu_time, alg_bw, bus_bw, nwrong}` or null), `out_of_bounds`,
//! `average_bus_bandwidth`, `errors`, `end_time`. Numbers are C's `%lf`; a NaN is the string
//! `"nan"`. A test that dies leaves the object unterminated.

use super::super::compare::Side;
use super::{InputError, Row, add, pattern_of, version_of_code};
use serde_json::Value;
use std::path::Path;

/// The file version this reader knows.
pub const VERSION: i64 = 3;

/// Parses a nccl-tests `-J` JSON document.
pub fn parse(path: &Path, text: &str) -> Result<Side, InputError> {
    let v: Value = serde_json::from_str(text).map_err(|e| {
        let what = if e.is_eof() {
            "the JSON ends early (truncated, or the test died before it finished writing)"
        } else {
            "not valid JSON"
        };
        InputError::at(path, e.line(), format!("{what}: {e}"))
    })?;
    // serde_json does not say where a value sat; errors about fields name line 1 and the key.
    let bad = |msg: String| InputError::at(path, 1, msg);
    match v.get("version").and_then(Value::as_i64) {
        Some(VERSION) => {}
        Some(n) => {
            return Err(bad(format!(
                "nccl-tests JSON file version {n}; this reads version {VERSION}"
            )));
        }
        None => {
            return Err(bad(
                "neither a nccl-smoke results file nor a nccl-tests -J file (no \"version\")"
                    .into(),
            ));
        }
    }
    let program = v
        .get("args")
        .and_then(|a| a.get(0))
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no \"args\" list with the program first".into()))?;
    let pattern = pattern_of(program);
    let results = v
        .get("results")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no \"results\" list".into()))?;
    let mut rows = Vec::new();
    for (i, r) in results.iter().enumerate() {
        let at = |what: &str| bad(format!("results[{i}]: {what}"));
        let Some(oop) = r.get("out_of_place").filter(|o| !o.is_null()) else {
            continue; // in-place only (trace replay): nothing out of place to compare
        };
        let size = r
            .get("size")
            .and_then(Value::as_u64)
            .ok_or_else(|| at("no \"size\""))?;
        let text_of = |key: &str| r.get(key).and_then(Value::as_str).unwrap_or("");
        let time = oop
            .get("time")
            .or_else(|| oop.get("cpu_time"))
            .ok_or_else(|| at("out_of_place has no \"time\""))?;
        add(
            &mut rows,
            Row {
                pattern: &pattern,
                size: size as usize,
                dtype: text_of("type"),
                redop: text_of("redop"),
                time_us: number(time).ok_or_else(|| at("out_of_place.time is no number"))?,
                busbw: oop.get("bus_bw").and_then(number).unwrap_or(f64::NAN),
                wrong: oop.get("nwrong").and_then(number).unwrap_or(0.0) as u64,
            },
        );
    }
    if rows.is_empty() {
        return Err(bad("no out-of-place results in \"results\"".into()));
    }
    // One `devices` entry per process, each driving nthreads × ngpus ranks (writeDeviceReport:
    // rank = proc × nThreads × nGpus + i).
    let config = v.get("config");
    let per_process = |k: &str| {
        config
            .and_then(|c| c.get(k))
            .and_then(Value::as_u64)
            .map_or(1, |n| n.max(1) as usize)
    };
    let processes = config
        .and_then(|c| c.get("devices"))
        .and_then(Value::as_array)
        .map_or(1, |d| d.len().max(1));
    let ranks = processes * per_process("nthreads") * per_process("ngpus");
    Ok(Side {
        source: "nccl-tests JSON".into(),
        started_at: v
            .get("start_time")
            .and_then(Value::as_str)
            .map(str::to_string),
        ranks,
        simulated: false,
        fingerprint: None,
        nccl_version: v
            .get("nccl_version")
            .and_then(Value::as_i64)
            .map(version_of_code),
        failed: None,
        rows,
        gpus: Vec::new(),
        hosts: Vec::new(),
        notes: Vec::new(),
    })
}

/// A `%lf` number, or the string `"nan"` nccl-tests writes for a NaN.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) if s.eq_ignore_ascii_case("nan") => Some(f64::NAN),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = r#"{"version":3,"start_time":"2025-01-01 10:00:00","args":["./build/alltoall_perf","-b","8","-e","16","-J","a.json"],"env":[],"nccl_version":22705,
"config":{"nthreads":1,"ngpus":1,"minimum_bytes":8,"maximum_bytes":16,"step_factor":2,"warmup_iters":5,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false","per_iter_timing":"false","per_iter_skip":0,"parallel_init":"false","devices":[{"rank":0},{"rank":1}]},
"results":[{"size":8,"count":2,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":20.500000,"alg_bw":0.000390,"bus_bw":0.000195,"nwrong":0.000000},"in_place":{"time":20.0,"alg_bw":0.0,"bus_bw":0.0,"nwrong":0.0},"actual_iterations":20,"experiment_name":""},
{"size":16,"count":4,"type":"float","redop":"none","root":"    -1","out_of_place":{"time":"nan","alg_bw":0.0,"bus_bw":0.0,"nwrong":null},"in_place":null,"actual_iterations":20,"experiment_name":""}],
"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.0,"okay":"unchecked"},"errors":[],"end_time":"2025-01-01 10:00:01"}"#;

    #[test]
    fn a_version_3_file_reads() {
        let s = parse(Path::new("a.json"), DOC).unwrap();
        assert_eq!((s.ranks, s.nccl_version.as_deref()), (2, Some("2.27.5")));
        assert_eq!(s.rows.len(), 2);
        assert_eq!(s.rows[0].pattern, "all_to_all");
        assert_eq!(s.rows[0].kind, "float/-");
        assert_eq!(s.rows[0].times_us, vec![20.5]);
        assert!(s.rows[1].times_us[0].is_nan());
    }

    #[test]
    fn truncated_or_foreign_files_say_where_and_why() {
        let cut = &DOC[..DOC.len() / 2];
        let e = parse(Path::new("cut.json"), cut).unwrap_err();
        assert!(e.to_string().starts_with("cut.json:"), "{e}");
        assert!(e.to_string().contains("the JSON ends early"), "{e}");
        let v2 = DOC.replacen("\"version\":3", "\"version\":2", 1);
        let e = parse(Path::new("v2.json"), &v2).unwrap_err();
        assert!(
            e.to_string()
                .contains("file version 2; this reads version 3"),
            "{e}"
        );
        let e = parse(Path::new("x.json"), "{\"a\":1}").unwrap_err();
        assert!(e.to_string().contains("no \"version\""), "{e}");
    }
}
