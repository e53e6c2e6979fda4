//! deploy/k8s/node-check.yaml's two containers, run here as the pod runs them: the check's
//! script with the real binary (on the simulation, one rank, the sweep given instead of the
//! manifest's GPU one) and the marking script with a kubectl that records its calls. A failed
//! check labels and taints the node with the failed stage; a pass labels it and lifts the taint;
//! no verdict at all is a failure too. And the RBAC lets the pod do just that.

mod common;
use common::*;
use serde_yaml_ng::Value;
use std::path::Path;
use std::process::Command;

const MANIFEST: &str = "deploy/k8s/node-check.yaml";

fn documents() -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(MANIFEST);
    let text = std::fs::read_to_string(&path).unwrap();
    serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("{MANIFEST}: no {kind}"))
}

/// A container's `sh -c` script, with the results folder moved to `results`.
fn script(c: &Value, results: &Path) -> String {
    c["command"][2]
        .as_str()
        .unwrap()
        .replace("/results", results.to_str().unwrap())
}

/// Runs the check container's script with `args` for nccl-smoke (and `--json` into the
/// results folder), unless `None`, then the marking container's with a recording kubectl; the
/// kubectl calls, one per line.
fn pod(name: &str, args: Option<&[&str]>, env: &[(&str, &str)]) -> String {
    let docs = documents();
    let spec = &of_kind(&docs, "Job")["spec"]["template"]["spec"];
    let dir = scratch(name);
    let results = dir.join("results");
    let stubs = dir.join("bin");
    std::fs::create_dir_all(&results).unwrap();
    std::fs::create_dir_all(&stubs).unwrap();
    let calls = dir.join("kubectl.calls");
    let kubectl = stubs.join("kubectl");
    std::fs::write(
        &kubectl,
        format!("#!/bin/sh\necho \"$*\" >> {}\n", calls.display()),
    )
    .unwrap();
    std::fs::set_permissions(
        &kubectl,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}:{}",
        stubs.display(),
        bin().parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    if let Some(args) = args {
        let mut check = Command::new("sh");
        check
            .arg("-c")
            .arg(script(&spec["initContainers"][0], &results))
            .arg("nccl-smoke")
            .args(args)
            .arg("--json")
            .arg(results.join("run.json"))
            .env("PATH", &path)
            .env_remove("NCCL_SMOKE_SIM_FAULT");
        for (k, v) in env {
            check.env(k, v);
        }
        let o = bounded(check, 120);
        assert_eq!(code(&o), 0, "the check container failed:\n{}", text(&o));
    }
    let mut mark = Command::new("sh");
    mark.arg("-c")
        .arg(script(&spec["containers"][0], &results))
        .env("PATH", &path)
        .env("NODE", "gpu-node-7");
    let o = bounded(mark, 30);
    assert_eq!(code(&o), 0, "the marking container failed:\n{}", text(&o));
    std::fs::read_to_string(&calls).unwrap_or_default()
}

/// One rank of the simulation, a short sweep.
const SIM: &[&str] = &[
    "run",
    "--backend",
    "sim",
    "-e",
    "64K",
    "--patterns",
    "all_reduce",
];

fn lines(calls: &str) -> Vec<&str> {
    calls.lines().collect()
}

#[test]
fn a_failed_check_labels_and_taints_the_node_with_its_stage() {
    let calls = pod(
        "node-check-fail",
        Some(SIM),
        &[("NCCL_SMOKE_SIM_FAULT", "init@0:error")],
    );
    assert_eq!(
        lines(&calls),
        [
            "label node gpu-node-7 nccl-smoke/verdict=fail nccl-smoke/stage=init --overwrite",
            "taint node gpu-node-7 nccl-smoke/failed=init:NoSchedule --overwrite",
        ],
        "{calls}"
    );
}

#[test]
fn a_passed_check_labels_the_node_and_lifts_the_taint() {
    let calls = pod("node-check-pass", Some(SIM), &[]);
    assert_eq!(
        lines(&calls),
        [
            "label node gpu-node-7 nccl-smoke/verdict=pass nccl-smoke/stage- --overwrite",
            "taint node gpu-node-7 nccl-smoke/failed:NoSchedule-",
        ],
        "{calls}"
    );
}

#[test]
fn a_check_that_left_no_verdict_is_a_failure() {
    let calls = pod("node-check-none", None, &[]);
    assert_eq!(
        lines(&calls),
        [
            "label node gpu-node-7 nccl-smoke/verdict=unknown nccl-smoke/stage=unknown --overwrite",
            "taint node gpu-node-7 nccl-smoke/failed=unknown:NoSchedule --overwrite",
        ],
        "{calls}"
    );
}

#[test]
fn the_pod_may_read_and_patch_nodes_and_knows_its_own() {
    let docs = documents();
    let sa = &of_kind(&docs, "ServiceAccount")["metadata"]["name"];
    let role = of_kind(&docs, "ClusterRole");
    let rule = &role["rules"][0];
    assert_eq!(rule["resources"][0], "nodes");
    let verbs: Vec<&str> = rule["verbs"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(verbs, ["get", "patch"]);
    let binding = of_kind(&docs, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(&binding["subjects"][0]["name"], sa);
    let spec = &of_kind(&docs, "Job")["spec"]["template"]["spec"];
    assert_eq!(&spec["serviceAccountName"], sa);
    let node = &spec["containers"][0]["env"][0];
    assert_eq!(node["name"], "NODE");
    assert_eq!(node["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
    // A node this check tainted still takes its re-check.
    assert_eq!(spec["tolerations"][0]["key"], "nccl-smoke/failed");
}
