//! `--prometheus FILE`: the results as node-exporter's textfile collector reads them (the
//! Prometheus text exposition format), named by Prometheus' conventions: base units (bytes per
//! second, seconds), a `nccl_smoke_` prefix, state as one series per value (1 for the one that
//! holds, 0 for the others), so that an alert is `nccl_smoke_verdict{status="FAIL"} == 1` or
//! `nccl_smoke_failed_stage{stage="connect:net"} == 1`. Rewritten with the results file, so
//! while a run goes on it holds the sizes measured so far and `status="INCOMPLETE"`.

use crate::report::results::{ResultsDoc, Status, status_name};
use crate::stage::Stage;
use prometheus::{Encoder, Gauge, GaugeVec, Opts, Registry, TextEncoder};

/// Every verdict status, as the results file spells it.
const STATUSES: [Status; 7] = [
    Status::Pass,
    Status::Fail,
    Status::Unverified,
    Status::ControlPlaneOk,
    Status::NotJudged,
    Status::Incomplete,
    Status::Cancelled,
];

/// The labels of a measured size.
const ROW_LABELS: [&str; 3] = ["pattern", "size_bytes", "type"];

/// The whole file.
pub fn render(doc: &ResultsDoc) -> std::io::Result<Vec<u8>> {
    let reg = Registry::new();
    fill(&reg, doc).map_err(std::io::Error::other)?;
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&reg.gather(), &mut out)
        .map_err(std::io::Error::other)?;
    Ok(out)
}

fn gauge(reg: &Registry, name: &str, help: &str) -> prometheus::Result<Gauge> {
    let g = Gauge::new(format!("nccl_smoke_{name}"), help)?;
    reg.register(Box::new(g.clone()))?;
    Ok(g)
}

fn gauges(reg: &Registry, name: &str, help: &str, labels: &[&str]) -> prometheus::Result<GaugeVec> {
    let g = GaugeVec::new(Opts::new(format!("nccl_smoke_{name}"), help), labels)?;
    reg.register(Box::new(g.clone()))?;
    Ok(g)
}

fn fill(reg: &Registry, doc: &ResultsDoc) -> prometheus::Result<()> {
    let verdict = gauges(
        reg,
        "verdict",
        "The run's verdict: 1 for its status, 0 for the others (INCOMPLETE while it runs).",
        &["status"],
    )?;
    for s in STATUSES {
        verdict
            .with_label_values(&[status_name(s).as_str()])
            .set(f64::from(u8::from(doc.verdict.status == s)));
    }
    let failed = gauges(
        reg,
        "failed_stage",
        "The stage the run failed at: 1 for it, 0 for every other stage (all 0 unless failed).",
        &["stage"],
    )?;
    let at = (doc.verdict.status == Status::Fail)
        .then_some(doc.verdict.stage)
        .flatten();
    for s in Stage::ALL {
        failed
            .with_label_values(&[s.name()])
            .set(f64::from(u8::from(at == Some(s))));
    }
    if doc.verdict.status != Status::Incomplete {
        gauge(reg, "exit_code", "nccl-smoke's exit code for this verdict.")?
            .set(f64::from(doc.verdict.exit_code));
    }
    gauge(
        reg,
        "simulated",
        "1 when any library that ran was nccl-smoke's simulation: the figures are CPU figures.",
    )?
    .set(f64::from(u8::from(doc.simulated)));
    let nccl = doc
        .fingerprint
        .nccl
        .as_ref()
        .map_or("", |n| n.version.as_str());
    let cuda = doc
        .fingerprint
        .driver
        .as_ref()
        .map_or("", |d| d.cuda_version.as_str());
    gauges(
        reg,
        "run_info",
        "What the run ran on: its backend, NCCL version and CUDA driver version (value 1).",
        &["backend", "nccl_version", "cuda_driver_version"],
    )?
    .with_label_values(&[doc.backend.as_str(), nccl, cuda])
    .set(1.0);
    gauge(reg, "ranks", "Ranks in the job.")?.set(doc.fingerprint.ranks.len() as f64);
    gauge(reg, "hosts", "Hosts in the job.")?.set(doc.fingerprint.hosts.len() as f64);
    if let Ok(start) = humantime::parse_rfc3339(&doc.started_at) {
        let since = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64())
        };
        gauge(
            reg,
            "run_start_timestamp_seconds",
            "When the run started (Unix time).",
        )?
        .set(since(start));
        gauge(
            reg,
            "run_duration_seconds",
            "Seconds from the run's start to this file's last write.",
        )?
        .set((since(std::time::SystemTime::now()) - since(start)).max(0.0));
    }
    rows(reg, doc)
}

fn rows(reg: &Registry, doc: &ResultsDoc) -> prometheus::Result<()> {
    let per_row = |name: &str, help: &str| gauges(reg, name, help, &ROW_LABELS);
    let busbw = per_row(
        "bus_bandwidth_bytes_per_second",
        "Bus bandwidth as nccl-tests defines it (busbw), at the mean time over ranks.",
    )?;
    let algbw = per_row(
        "algorithm_bandwidth_bytes_per_second",
        "Algorithm bandwidth (algbw): the size over the mean time over ranks.",
    )?;
    let time = per_row(
        "iteration_time_seconds",
        "Wall time per iteration, mean over ranks (nccl-tests' time column).",
    )?;
    let p50 = per_row(
        "iteration_latency_p50_seconds",
        "Median time between events around each iteration, on the slowest rank.",
    )?;
    let p99 = per_row(
        "iteration_latency_p99_seconds",
        "99th percentile of the time between events around each iteration, on the slowest rank.",
    )?;
    let wrong = per_row(
        "wrong_elements",
        "Wrong elements over all ranks (0 when unchecked: see nccl_smoke_checked).",
    )?;
    let checked = per_row("checked", "1 when every element of the size was checked.")?;
    for r in &doc.results {
        let size = r.size_bytes.to_string();
        let labels = [r.pattern.as_str(), size.as_str(), r.dtype.name()];
        busbw.with_label_values(&labels).set(r.busbw_gbs * 1e9);
        algbw.with_label_values(&labels).set(r.algbw_gbs * 1e9);
        time.with_label_values(&labels).set(r.time_us.avg * 1e-6);
        p50.with_label_values(&labels).set(r.time_us.p50 * 1e-6);
        p99.with_label_values(&labels).set(r.time_us.p99 * 1e-6);
        wrong.with_label_values(&labels).set(r.wrong as f64);
        checked
            .with_label_values(&labels)
            .set(f64::from(u8::from(r.checked)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::exports::tests::{doc_on, row};

    fn text(doc: &ResultsDoc) -> String {
        String::from_utf8(render(doc).unwrap()).unwrap()
    }

    /// The value of the one series whose line starts with `series`.
    fn value(text: &str, series: &str) -> f64 {
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with(series) && l.as_bytes().get(series.len()) == Some(&b' '))
            .collect();
        assert_eq!(lines.len(), 1, "{series} in:\n{text}");
        lines[0].rsplit(' ').next().unwrap().parse().unwrap()
    }

    #[test]
    fn a_passed_run_has_its_verdict_rows_and_identity() {
        let mut doc = doc_on(&["a", "b"]);
        doc.results
            .push(row("all_reduce", 1 << 20, &[100.0, 100.0]));
        let t = text(&doc);
        assert_eq!(value(&t, r#"nccl_smoke_verdict{status="PASS"}"#), 1.0);
        assert_eq!(value(&t, r#"nccl_smoke_verdict{status="FAIL"}"#), 0.0);
        assert_eq!(value(&t, "nccl_smoke_exit_code"), 0.0);
        assert_eq!(value(&t, r#"nccl_smoke_failed_stage{stage="init"}"#), 0.0);
        let labels = r#"{pattern="all_reduce",size_bytes="1048576",type="float"}"#;
        let time = value(&t, &format!("nccl_smoke_iteration_time_seconds{labels}"));
        assert!((time - 100e-6).abs() < 1e-12, "{t}");
        let busbw = value(
            &t,
            &format!("nccl_smoke_bus_bandwidth_bytes_per_second{labels}"),
        );
        assert!((busbw - doc.results[0].busbw_gbs * 1e9).abs() < 1.0, "{t}");
        assert_eq!(value(&t, &format!("nccl_smoke_checked{labels}")), 1.0);
        assert_eq!(value(&t, "nccl_smoke_simulated"), 1.0);
        assert_eq!(value(&t, "nccl_smoke_ranks"), 2.0);
        assert!(t.contains("# TYPE nccl_smoke_verdict gauge"), "{t}");
        assert!(
            t.contains("# HELP nccl_smoke_bus_bandwidth_bytes_per_second "),
            "{t}"
        );
    }

    #[test]
    fn a_failed_run_names_its_stage_and_a_running_one_no_exit_code() {
        let mut doc = doc_on(&["a"]);
        doc.verdict.status = Status::Fail;
        doc.verdict.stage = Some(Stage::ConnectNet);
        doc.verdict.exit_code = Stage::ConnectNet.exit_code();
        let t = text(&doc);
        assert_eq!(
            value(&t, r#"nccl_smoke_failed_stage{stage="connect:net"}"#),
            1.0
        );
        assert_eq!(value(&t, r#"nccl_smoke_failed_stage{stage="init"}"#), 0.0);
        assert_eq!(
            value(&t, "nccl_smoke_exit_code"),
            f64::from(Stage::ConnectNet.exit_code())
        );
        doc.verdict.status = Status::Incomplete;
        let t = text(&doc);
        assert_eq!(value(&t, r#"nccl_smoke_verdict{status="INCOMPLETE"}"#), 1.0);
        assert!(!t.contains("nccl_smoke_exit_code"), "{t}");
        assert!(
            t.lines()
                .filter(|l| l.contains("failed_stage{"))
                .all(|l| l.ends_with(" 0"))
        );
    }
}
