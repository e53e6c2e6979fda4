//! The Kubernetes manifests in deploy/k8s/ and the Dockerfile: every document parses; each kind
//! has the fields its API requires (MPIJob v2beta1, Trainer v1alpha1 TrainingRuntime and
//! TrainJob, an indexed Job with its headless Service); every pod that asks for GPUs mounts a
//! memory-backed, size-limited /dev/shm and adds IPC_LOCK; every mpirun turns HCOLL off; the
//! nccl-smoke commands use only flags `run --help` knows.

use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every document of every deploy/k8s/*.yaml, with its file name.
fn documents() -> Vec<(String, Value)> {
    let dir = root().join("deploy/k8s");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "manifests in {}: {files:?}",
        dir.display()
    );
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for d in serde_yaml_ng::Deserializer::from_str(&text) {
            let v = Value::deserialize(d).unwrap_or_else(|e| panic!("{name}: {e}"));
            docs.push((name.clone(), v));
        }
    }
    docs
}

fn of_kind<'a>(docs: &'a [(String, Value)], kind: &str) -> Vec<&'a (String, Value)> {
    docs.iter().filter(|(_, d)| d["kind"] == kind).collect()
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// Every pod template below `v` (any `template` with a `spec.containers`).
fn pod_templates(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(m) => {
            if let Some(t) = m.get("template")
                && t["spec"]["containers"].is_array()
            {
                out.push(t.clone());
            }
            for x in m.values() {
                pod_templates(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| pod_templates(x, out)),
        _ => {}
    }
}

/// A container's command and args as one list of words.
fn words(c: &Value) -> Vec<String> {
    ["command", "args"]
        .iter()
        .flat_map(|k| c[*k].as_array().cloned().unwrap_or_default())
        .map(|w| s(&w).to_string())
        .collect()
}

/// Whether the words pass `-mca coll_hcoll_enable 0` to mpirun.
fn hcoll_flag_off(w: &[String]) -> bool {
    w.windows(3)
        .any(|x| x[0] == "-mca" && x[1] == "coll_hcoll_enable" && x[2] == "0")
}

/// The value after `-np`.
fn np_of(w: &[String]) -> Option<String> {
    w.iter().position(|x| x == "-np").map(|i| w[i + 1].clone())
}

fn env_of<'a>(c: &'a Value, name: &str) -> Option<&'a str> {
    c["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .map(|e| s(&e["value"]))
}

/// Checks one pod template; returns what is wrong.
fn pod_problems(file: &str, pod: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let spec = &pod["spec"];
    let volumes = spec["volumes"].as_array().cloned().unwrap_or_default();
    let init = spec["initContainers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for c in spec["containers"].as_array().unwrap().iter().chain(&init) {
        let name = s(&c["name"]);
        let w = words(c);
        if w.iter().any(|x| x == "mpirun")
            && !hcoll_flag_off(&w)
            && env_of(c, "OMPI_MCA_coll_hcoll_enable") != Some("0")
        {
            bad.push(format!(
                "{file}: container {name} runs mpirun with HCOLL on"
            ));
        }
        if c["resources"]["limits"]["nvidia.com/gpu"].is_null() {
            continue;
        }
        let shm = c["volumeMounts"]
            .as_array()
            .and_then(|m| m.iter().find(|m| m["mountPath"] == "/dev/shm"))
            .map(|m| s(&m["name"]).to_string());
        match shm.and_then(|n| volumes.iter().find(|v| v["name"] == n.as_str()).cloned()) {
            Some(v)
                if v["emptyDir"]["medium"] == "Memory"
                    && !s(&v["emptyDir"]["sizeLimit"]).is_empty() => {}
            _ => bad.push(format!(
                "{file}: container {name} asks for GPUs without a memory-backed, size-limited \
                 emptyDir at /dev/shm"
            )),
        }
        let caps = c["securityContext"]["capabilities"]["add"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if !caps.iter().any(|x| x == "IPC_LOCK") {
            bad.push(format!(
                "{file}: container {name} asks for GPUs without IPC_LOCK"
            ));
        }
    }
    bad
}

/// The flags `nccl-smoke run --help` documents.
fn run_flags() -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_nccl-smoke"))
        .args(["run", "--help"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The words after `nccl-smoke run` in a command, for the flag check.
fn nccl_smoke_flags(w: &[String]) -> Vec<String> {
    match w.iter().position(|x| x == "nccl-smoke") {
        Some(i) => w[i + 1..]
            .iter()
            .filter(|x| x.starts_with("--"))
            .map(|x| x.split('=').next().unwrap().to_string())
            .collect(),
        None => Vec::new(),
    }
}

#[test]
fn every_manifest_has_its_required_fields_and_the_pod_settings_nccl_needs() {
    let docs = documents();
    let help = run_flags();
    let mut bad = Vec::new();
    let mut runs = 0;
    for (file, d) in &docs {
        for k in ["apiVersion", "kind"] {
            if s(&d[k]).is_empty() {
                bad.push(format!("{file}: no {k}"));
            }
        }
        if s(&d["metadata"]["name"]).is_empty() {
            bad.push(format!("{file}: a {} without metadata.name", d["kind"]));
        }
        let mut pods = Vec::new();
        pod_templates(&d["spec"], &mut pods);
        for p in &pods {
            bad.extend(pod_problems(file, p));
            let init = p["spec"]["initContainers"].as_array().cloned();
            for c in (p["spec"]["containers"].as_array().unwrap())
                .iter()
                .chain(init.iter().flatten())
            {
                let w = words(c);
                if w.iter().any(|x| x == "nccl-smoke") {
                    runs += 1;
                }
                for f in nccl_smoke_flags(&w) {
                    if !help.contains(&format!("{f} ")) && !help.contains(&format!("{f}\n")) {
                        bad.push(format!("{file}: `nccl-smoke run {f}` is not a flag"));
                    }
                }
            }
        }
        // The TrainJob's own command replaces the launcher's: it too must turn HCOLL off.
        if d["kind"] == "TrainJob" {
            let w = words(&d["spec"]["trainer"]);
            if w.iter().any(|x| x == "nccl-smoke") {
                runs += 1;
            }
            if w.iter().any(|x| x == "mpirun") && !hcoll_flag_off(&w) {
                bad.push(format!("{file}: the TrainJob's mpirun leaves HCOLL on"));
            }
        }
    }
    assert!(runs >= 4, "nccl-smoke runs found: {runs}");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_mpijob_has_a_launcher_and_workers() {
    let docs = documents();
    let jobs = of_kind(&docs, "MPIJob");
    assert_eq!(jobs.len(), 1);
    let (file, j) = jobs[0];
    assert_eq!(j["apiVersion"], "kubeflow.org/v2beta1", "{file}");
    let specs = &j["spec"]["mpiReplicaSpecs"];
    assert!(
        specs["Launcher"]["template"].is_object(),
        "{file}: Launcher"
    );
    assert!(specs["Worker"]["template"].is_object(), "{file}: Worker");
    let slots = j["spec"]["slotsPerWorker"].as_u64().unwrap();
    let workers = specs["Worker"]["replicas"].as_u64().unwrap();
    // mpirun -np covers every slot, and each worker has a GPU per slot.
    let launcher = &specs["Launcher"]["template"]["spec"]["containers"][0];
    let w = words(launcher);
    let np = np_of(&w);
    assert_eq!(np, Some((slots * workers).to_string()), "{file}: -np");
    let gpus = &specs["Worker"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"];
    assert_eq!(gpus.as_u64(), Some(slots), "{file}: GPUs per worker");
    // The launcher starts once every worker's sshd answers (v2beta1 launcherCreationPolicy).
    assert_eq!(
        j["spec"]["launcherCreationPolicy"], "WaitForWorkersReady",
        "{file}"
    );
    let probe = &specs["Worker"]["template"]["spec"]["containers"][0]["readinessProbe"];
    assert_eq!(probe["tcpSocket"]["port"], 22, "{file}: worker sshd probe");
}

/// The `NCCL_*` variables set in `c`'s environment that the words' mpirun does not pass on
/// with `-x` (ranks started over ssh do not inherit the pod's environment).
fn nccl_env_not_exported(c: &Value, w: &[String]) -> Vec<String> {
    let exported: Vec<&str> = w
        .windows(2)
        .filter(|x| x[0] == "-x")
        .map(|x| x[1].split('=').next().unwrap_or(""))
        .collect();
    c["env"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| s(&e["name"]).to_string())
        .filter(|n| n.starts_with("NCCL_") && !exported.contains(&n.as_str()))
        .collect()
}

#[test]
fn every_mpirun_passes_the_pods_nccl_settings_to_its_ranks() {
    let docs = documents();
    let mut checked = 0;
    let mut bad = Vec::new();
    for (file, d) in &docs {
        let mut pods = Vec::new();
        pod_templates(d, &mut pods);
        for pod in &pods {
            for c in pod["spec"]["containers"].as_array().into_iter().flatten() {
                let w = words(c);
                if w.first().map(String::as_str) == Some("mpirun") {
                    checked += 1;
                    for n in nccl_env_not_exported(c, &w) {
                        bad.push(format!("{file}: mpirun does not pass {n} (-x)"));
                    }
                }
            }
        }
    }
    // The TrainJob's command replaces the command of its runtime's launcher, whose environment
    // is the runtime's.
    let runtime_env = docs
        .iter()
        .find(|(_, d)| d["kind"] == "TrainingRuntime")
        .and_then(|(_, d)| {
            let mut pods = Vec::new();
            pod_templates(d, &mut pods);
            pods.iter()
                .flat_map(|p| {
                    p["spec"]["containers"]
                        .as_array()
                        .cloned()
                        .unwrap_or_default()
                })
                .find(|c| c["env"].is_array())
        });
    for (file, d) in of_kind(&docs, "TrainJob") {
        let w = words(&d["spec"]["trainer"]);
        if let Some(c) = &runtime_env {
            checked += 1;
            for n in nccl_env_not_exported(c, &w) {
                bad.push(format!(
                    "{file}: the TrainJob's mpirun does not pass {n} (-x)"
                ));
            }
        }
    }
    assert!(checked >= 3, "mpirun commands checked: {checked}");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_indexed_job_names_rank_0_through_its_headless_service() {
    let docs = documents();
    let jobs: Vec<_> = of_kind(&docs, "Job")
        .into_iter()
        .filter(|(_, j)| j["spec"]["completionMode"] == "Indexed")
        .collect();
    assert_eq!(jobs.len(), 1);
    let (file, j) = jobs[0];
    let spec = &j["spec"];
    assert_eq!(spec["completionMode"], "Indexed", "{file}");
    assert_eq!(spec["completions"], spec["parallelism"], "{file}");
    let n = spec["completions"].as_u64().unwrap();
    let pod = &spec["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(
        env_of(c, "WORLD_SIZE"),
        Some(n.to_string().as_str()),
        "{file}"
    );
    let sub = s(&pod["subdomain"]);
    let job = s(&j["metadata"]["name"]);
    assert_eq!(
        env_of(c, "MASTER_ADDR"),
        Some(format!("{job}-0.{sub}").as_str()),
        "{file}: MASTER_ADDR must be pod 0's name through the Service"
    );
    assert!(env_of(c, "MASTER_PORT").is_some_and(|p| p.parse::<u16>().is_ok()));
    let services = of_kind(&docs, "Service");
    let svc = services
        .iter()
        .find(|(f, sv)| f == file && sv["metadata"]["name"] == sub)
        .unwrap_or_else(|| panic!("{file}: no Service named {sub}"));
    assert_eq!(
        svc.1["spec"]["clusterIP"], "None",
        "{file}: the Service is headless"
    );
    assert_eq!(
        svc.1["spec"]["selector"]["job-name"], job,
        "{file}: the Service selects the Job's pods"
    );
    assert!(
        words(c)
            .windows(2)
            .any(|w| w[0] == "--bootstrap" && w[1] == "env"),
        "{file}: the ranks meet over the env bootstrap"
    );
}

#[test]
fn the_trainjob_uses_a_runtime_shipped_beside_it() {
    let docs = documents();
    let jobs = of_kind(&docs, "TrainJob");
    assert_eq!(jobs.len(), 1);
    let (file, j) = jobs[0];
    assert_eq!(j["apiVersion"], "trainer.kubeflow.org/v1alpha1", "{file}");
    let r = &j["spec"]["runtimeRef"];
    let runtime = docs
        .iter()
        .find(|(f, d)| f == file && d["kind"] == r["kind"] && d["metadata"]["name"] == r["name"])
        .unwrap_or_else(|| panic!("{file}: runtimeRef {r} names no runtime in the file"));
    let mpi = &runtime.1["spec"]["mlPolicy"]["mpi"];
    assert_eq!(mpi["mpiImplementation"], "OpenMPI", "{file}");
    let jobs: Vec<&str> = runtime.1["spec"]["template"]["spec"]["replicatedJobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| s(&j["name"]))
        .collect();
    assert_eq!(jobs, ["launcher", "node"], "{file}");
    let procs = mpi["numProcPerNode"].as_u64().unwrap();
    let nodes = j["spec"]["trainer"]["numNodes"].as_u64().unwrap();
    let w = words(&j["spec"]["trainer"]);
    let np = np_of(&w);
    assert_eq!(np, Some((procs * nodes).to_string()), "{file}: -np");
}

#[test]
fn a_manifest_without_the_shm_limit_is_caught() {
    // The check itself: the MPIJob with its /dev/shm sizeLimit removed must be reported.
    let text = std::fs::read_to_string(root().join("deploy/k8s/mpijob.yaml")).unwrap();
    let broken = text.replace("sizeLimit: 16Gi", "");
    assert_ne!(broken, text);
    let d = Value::deserialize(serde_yaml_ng::Deserializer::from_str(&broken)).unwrap();
    let mut pods = Vec::new();
    pod_templates(&d["spec"], &mut pods);
    let bad: Vec<String> = pods.iter().flat_map(|p| pod_problems("x", p)).collect();
    assert!(
        bad.iter()
            .any(|b| b.contains("size-limited emptyDir at /dev/shm")),
        "{bad:?}"
    );
}

fn dockerfile() -> String {
    std::fs::read_to_string(root().join("Dockerfile")).unwrap()
}

#[test]
fn the_dockerfile_builds_then_ships_a_slim_runtime_with_mpi_and_sshd() {
    let d = dockerfile();
    let stages: Vec<&str> = d.split("\nFROM ").skip(1).collect();
    assert!(stages.len() >= 2, "two stages at least");
    let runtime = stages.last().unwrap();
    for p in ["openmpi-bin", "openssh-server"] {
        assert!(runtime.contains(p), "the runtime stage installs {p}");
    }
    assert!(
        runtime.contains("COPY --from=tree"),
        "copies the installed tree"
    );
    // Docker Hub's images by default, and the tree from the build stage: `docker build .`
    // elsewhere compiles as before; scripts/image.sh overrides the three arguments.
    for default in [
        "ARG BUILD_IMAGE=rust:1-bookworm",
        "ARG RUNTIME_IMAGE=debian:bookworm-slim",
        "ARG TREE=build",
    ] {
        assert!(d.contains(default), "{default}");
    }
    assert!(d.contains("FROM ${BUILD_IMAGE} AS build") && d.contains("FROM ${TREE} AS tree"));
    assert!(
        stages[0].contains("scripts/install.sh"),
        "installs with install.sh"
    );
    assert!(Path::new(&root().join(".dockerignore")).exists());
    // The operators mount ~/.ssh from a Secret, without known_hosts and with its own file modes.
    for setting in [
        "StrictHostKeyChecking no",
        "UserKnownHostsFile /dev/null",
        "StrictModes no",
    ] {
        assert!(
            runtime.contains(setting),
            "the runtime stage sets {setting}"
        );
    }
}
