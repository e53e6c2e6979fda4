//! The MPIJob rehearsal's harness (tests/mpijob.rs): the image, the namespace hosts, the
//! manifest read as the operator reads it, and the containers it starts.

use crate::common::*;
use serde_yaml_ng::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

pub const IMAGE: &str = "localhost/nccl-smoke:rehearsal";
pub const SLOTS: usize = 2;
pub const WORKERS: usize = 2;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The build folder of the binary under test (target/), whose release tree the image takes.
fn target_dir() -> PathBuf {
    bin().parent().unwrap().parent().unwrap().to_path_buf()
}

fn containers_conf() -> PathBuf {
    target_dir().join("image/containers.conf")
}

/// scripts/image.sh, once per test binary: the image, and the one derived from it with the
/// oldest real NCCL wheel (its version); the base image's tarball stays cached in target/image
/// between runs.
fn images() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| {
        require_sim();
        let (version, _) = wheel_nccls().remove(0);
        let mut cmd = Command::new("bash");
        cmd.arg(root().join("scripts/image.sh"))
            .arg(IMAGE)
            .env("CARGO_TARGET_DIR", target_dir())
            .env("IMAGE_WORK", target_dir().join("image"))
            .env("IMAGE_WHEEL", &version)
            .current_dir(root());
        let o = bounded(cmd, 600);
        assert_eq!(code(&o), 0, "scripts/image.sh:\n{}", text(&o));
        version
    })
}

fn podman(args: &[&str]) -> Output {
    let mut cmd = Command::new("podman");
    cmd.args(args).env("CONTAINERS_CONF", containers_conf());
    bounded(cmd, 180)
}

fn cluster(args: &[&str]) -> String {
    let o = Command::new("bash")
        .arg(root().join("scripts/netns/cluster.sh"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success(), "cluster.sh {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// The manifest's launcher and worker, as the rehearsal uses them.
pub struct Manifest {
    /// The launcher's command, `-np` set to WORKERS x SLOTS.
    pub launcher: Vec<String>,
    pub launcher_env: Vec<(String, String)>,
    pub worker: Vec<String>,
    pub readiness_port: u16,
    /// Worker volume mounts by name.
    pub worker_mounts: Vec<(String, String)>,
}

pub fn manifest() -> Manifest {
    let y: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(root().join("deploy/k8s/mpijob.yaml")).unwrap(),
    )
    .unwrap();
    let specs = &y["spec"]["mpiReplicaSpecs"];
    let first = |role: &str| specs[role]["template"]["spec"]["containers"][0].clone();
    let strings = |v: &Value| -> Vec<String> {
        v.as_sequence()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let l = first("Launcher");
    let w = first("Worker");
    let mut launcher = strings(&l["command"]);
    let np = launcher.iter().position(|a| a == "-np").unwrap();
    launcher[np + 1] = (WORKERS * SLOTS).to_string();
    Manifest {
        launcher,
        launcher_env: l["env"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["name"].as_str().unwrap().to_string(),
                    e["value"].as_str().unwrap().to_string(),
                )
            })
            .collect(),
        worker: strings(&w["command"]),
        readiness_port: w["readinessProbe"]["tcpSocket"]["port"].as_u64().unwrap() as u16,
        worker_mounts: w["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap().to_string(),
                    m["mountPath"].as_str().unwrap().to_string(),
                )
            })
            .collect(),
    }
}

/// What to break.
#[derive(Clone, Copy, PartialEq)]
pub enum Break {
    Nothing,
    /// Worker 1 runs without its sshd.
    WorkerSshd,
    /// The results volume is mounted read-only on the workers.
    ResultsReadOnly,
    /// Each worker host has an IPoIB-like interface `ib0` whose subnet does not route between
    /// hosts, and the launcher's `-x NCCL_SOCKET_IFNAME` is gone from the manifest's command.
    NoSocketIfname,
}

pub struct Rehearsal {
    name: &'static str,
    image: String,
    dir: tempfile::TempDir,
    containers: Vec<String>,
}

impl Drop for Rehearsal {
    fn drop(&mut self) {
        for c in &self.containers {
            let _ = podman(&["rm", "-f", "-t", "0", c]);
        }
        cluster(&["down", self.name]);
    }
}

impl Rehearsal {
    /// Hosts: h1 the launcher, h2.. the workers.
    pub fn up(name: &'static str) -> Rehearsal {
        images();
        // Containers a killed run left behind.
        for c in ["l", "w0", "w1"] {
            let _ = podman(&["rm", "-f", "-t", "0", &format!("{name}-{c}")]);
        }
        cluster(&["down", name]);
        cluster(&["up", name, &(WORKERS + 1).to_string()]);
        Rehearsal {
            name,
            image: IMAGE.to_string(),
            dir: tempfile::tempdir().unwrap(),
            containers: Vec::new(),
        }
    }

    /// The same, with the image that holds a real libnccl.so.2 (its version).
    pub fn up_real(name: &'static str) -> (Rehearsal, &'static str) {
        let mut r = Rehearsal::up(name);
        let version = images();
        r.image = format!("{IMAGE}-nccl{version}");
        (r, version)
    }

    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    pub fn worker_name(i: usize) -> String {
        format!("nccl-smoke-worker-{i}")
    }

    /// `--add-host` for every pod, as the job's headless service resolves them.
    fn hosts(&self) -> Vec<String> {
        let mut out = vec![format!(
            "--add-host=nccl-smoke-launcher:{}",
            cluster(&["addr", self.name, "1"])
        )];
        for i in 0..WORKERS {
            out.push(format!(
                "--add-host={}:{}",
                Self::worker_name(i),
                cluster(&["addr", self.name, &(i + 2).to_string()])
            ));
        }
        out
    }

    /// The Secret: a key pair and its authorized_keys, in the folder mounted at /root/.ssh.
    fn secret(&self) -> PathBuf {
        let ssh = self.path("ssh");
        if !ssh.exists() {
            std::fs::create_dir_all(&ssh).unwrap();
            let o = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(ssh.join("id_rsa"))
                .output()
                .unwrap();
            assert!(o.status.success(), "ssh-keygen: {}", text(&o));
            std::fs::copy(ssh.join("id_rsa.pub"), ssh.join("authorized_keys")).unwrap();
        }
        ssh
    }

    /// Starts the workers and waits for their readiness port, as WaitForWorkersReady does.
    pub fn workers(&mut self, m: &Manifest, broken: Break) {
        let secret = self.secret();
        if broken == Break::NoSocketIfname {
            for i in 0..WORKERS {
                let ns = format!("{}-h{}", self.name, i + 2);
                for cmd in [
                    "ip link add ib0 type veth peer name ib0peer".to_string(),
                    format!("ip addr add 192.168.{}.{}/24 dev ib0", 100 + i, i + 2),
                    "ip link set ib0peer up && ip link set ib0 up".to_string(),
                ] {
                    let o = Command::new("ip")
                        .args(["netns", "exec", &ns, "sh", "-c", &cmd])
                        .output()
                        .unwrap();
                    assert!(o.status.success(), "{cmd}: {}", text(&o));
                }
            }
        }
        for i in 0..WORKERS {
            let c = format!("{}-w{i}", self.name);
            let mut args: Vec<String> = vec![
                "run".into(),
                "-d".into(),
                "--name".into(),
                c.clone(),
                format!("--hostname={}", Self::worker_name(i)),
                format!("--network=ns:/run/netns/{}-h{}", self.name, i + 2),
                format!("--volume={}:/root/.ssh:ro", secret.display()),
            ];
            args.extend(self.hosts());
            for (vol, at) in &m.worker_mounts {
                if vol == "dshm" {
                    // The manifest's memory-backed emptyDir at /dev/shm.
                    args.push("--shm-size=1g".into());
                    continue;
                }
                let dir = self.path(&format!("{vol}-w{i}"));
                std::fs::create_dir_all(&dir).unwrap();
                let ro = if vol == "results" && broken == Break::ResultsReadOnly {
                    ":ro"
                } else {
                    ""
                };
                args.push(format!("--volume={}:{at}{ro}", dir.display()));
            }
            args.push(self.image.clone());
            if i == 1 && broken == Break::WorkerSshd {
                args.extend(["sleep".to_string(), "infinity".to_string()]);
            } else {
                args.extend(m.worker.iter().cloned());
            }
            let a: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = podman(&a);
            assert_eq!(code(&o), 0, "podman run worker {i}: {}", text(&o));
            self.containers.push(c);
        }
        for i in 0..WORKERS {
            if i == 1 && broken == Break::WorkerSshd {
                continue;
            }
            let addr = cluster(&["addr", self.name, &(i + 2).to_string()]);
            let probe = format!("exec 3<>/dev/tcp/{addr}/{}", m.readiness_port);
            let ready = (0..100).any(|_| {
                let ok = Command::new("ip")
                    .args(["netns", "exec", &format!("{}-h1", self.name), "bash", "-c"])
                    .arg(&probe)
                    .output()
                    .is_ok_and(|o| o.status.success());
                if !ok {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                ok
            });
            assert!(
                ready,
                "worker {i}'s port {} never answered",
                m.readiness_port
            );
        }
    }

    /// The launcher: the operator's hostfile and the manifest's environment and command, with
    /// `extra` appended to nccl-smoke's arguments.
    pub fn launch(&mut self, m: &Manifest, extra: &[&str]) -> Output {
        let mpi = self.path("mpi");
        std::fs::create_dir_all(&mpi).unwrap();
        let hostfile: String = (0..WORKERS)
            .map(|i| format!("{} slots={SLOTS}\n", Self::worker_name(i)))
            .collect();
        std::fs::write(mpi.join("hostfile"), hostfile).unwrap();
        let c = format!("{}-l", self.name);
        let mut args: Vec<String> = vec![
            "run".into(),
            "--rm".into(),
            "--name".into(),
            c.clone(),
            "--hostname=nccl-smoke-launcher".into(),
            format!("--network=ns:/run/netns/{}-h1", self.name),
            format!("--volume={}:/root/.ssh:ro", self.secret().display()),
            format!("--volume={}:/etc/mpi:ro", mpi.display()),
            "--env=OMPI_MCA_orte_default_hostfile=/etc/mpi/hostfile".into(),
        ];
        args.extend(self.hosts());
        for (k, v) in &m.launcher_env {
            args.push(format!("--env={k}={v}"));
        }
        args.push(self.image.clone());
        args.extend(m.launcher.iter().cloned());
        args.extend(extra.iter().map(|s| s.to_string()));
        self.containers.push(c);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        podman(&a)
    }

    /// `nccl-smoke explain` on the launcher's output, as an operator would run it on
    /// `kubectl logs job/nccl-smoke-launcher`.
    pub fn explain(&self, o: &Output) -> (i32, String) {
        let log = self.path("launcher.log");
        std::fs::write(&log, text(o)).unwrap();
        let e = run1(&["explain", log.to_str().unwrap()], &[]);
        (code(&e), text(&e))
    }
}
