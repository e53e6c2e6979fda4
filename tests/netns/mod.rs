//! Several hosts on one machine for the isolate tests: scripts/netns/cluster.sh makes network
//! namespaces on a bridge, each with its own address and host name; the ranks are started in
//! them with torchrun-style variables, against the simulation. Needs root.

#![allow(dead_code)] // each test binary uses a part of it

use crate::common::*;
use nccl_smoke::report::isolate::HostStatus;
use nccl_smoke::report::results;
use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const HOSTS: usize = 4;
pub const PER_HOST: usize = 2;
/// The most one isolate tier may take here (each failing group costs at most its round's
/// deadline per step; the rounds below use 10 s).
pub const TIER_LIMIT_S: u64 = 120;

/// One cluster at a time: the slow-host verdict compares hosts' bandwidth, which a second
/// cluster's load on the same cores would disturb.
pub static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

pub fn script() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/netns/cluster.sh")
}

pub fn cluster(args: &[&str]) -> String {
    let o = Command::new("bash")
        .arg(script())
        .args(args)
        .output()
        .expect("bash");
    assert!(
        o.status.success(),
        "cluster.sh {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A cluster that is taken down, with every rank it started, however the test ends.
pub struct Cluster {
    name: String,
    hosts: usize,
    ranks: Vec<Child>,
}

impl Cluster {
    pub fn up(name: &str) -> Cluster {
        Cluster::up_with(name, HOSTS)
    }

    pub fn up_with(name: &str, hosts: usize) -> Cluster {
        cluster(&["down", name]);
        cluster(&["up", name, &hosts.to_string()]);
        Cluster {
            name: name.to_string(),
            hosts,
            ranks: Vec::new(),
        }
    }

    /// Starts every rank with `args`; `fault` (host number, spec) sets the simulation's fault
    /// on that host's ranks only. Rank 0's stdout is piped; the others' output is discarded.
    pub fn start(&mut self, args: &[&str], fault: Option<(usize, &str)>) {
        let master = cluster(&["addr", &self.name, "1"]);
        let n = self.hosts * PER_HOST;
        for h in 1..=self.hosts {
            for l in 0..PER_HOST {
                let rank = (h - 1) * PER_HOST + l;
                let mut cmd = Command::new("bash");
                cmd.arg(script())
                    .args(["exec", &self.name, &h.to_string(), "env"])
                    .arg(format!("RANK={rank}"))
                    .arg(format!("WORLD_SIZE={n}"))
                    .arg(format!("LOCAL_RANK={l}"))
                    .arg(format!("MASTER_ADDR={master}"))
                    .arg("MASTER_PORT=29411");
                if let Some((fh, spec)) = fault
                    && fh == h
                {
                    cmd.arg(format!("NCCL_SMOKE_SIM_FAULT={spec}"));
                }
                cmd.arg(bin()).args(args).stdin(Stdio::null());
                if rank == 0 {
                    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
                } else {
                    cmd.stdout(Stdio::null()).stderr(Stdio::null());
                }
                self.ranks.push(cmd.spawn().expect("start a rank"));
            }
        }
    }

    /// Rank 0's lines as they come, each with when it came.
    pub fn rank0_lines(&mut self) -> std::sync::mpsc::Receiver<(Instant, String)> {
        let (tx, rx) = std::sync::mpsc::channel();
        let r0 = &mut self.ranks[0];
        for pipe in [
            Box::new(r0.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(r0.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = tx.send((Instant::now(), line));
                }
            });
        }
        rx
    }

    /// Waits for every rank up to `limit`; returns rank 0's exit code and the time taken.
    pub fn wait(&mut self, limit: Duration) -> (Option<i32>, Duration) {
        let start = Instant::now();
        let mut code0 = None;
        for (i, c) in self.ranks.iter_mut().enumerate() {
            loop {
                match c.try_wait() {
                    Ok(Some(s)) => {
                        if i == 0 {
                            code0 = s.code();
                        }
                        break;
                    }
                    Ok(None) if start.elapsed() < limit => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    _ => {
                        let _ = c.kill();
                        let _ = c.wait();
                        break;
                    }
                }
            }
        }
        self.ranks.clear();
        (code0, start.elapsed())
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.ranks {
            let _ = c.kill();
            let _ = c.wait();
        }
        // The namespaces' processes (supervisors, workers) die with their namespaces' last
        // user gone; anything left is named by the leftover check of each test.
        let _ = Command::new("bash")
            .arg(script())
            .args(["down", &self.name])
            .status();
    }
}

/// Processes of this test's binary still running, after a moment to exit.
pub fn rank_leftovers() -> Vec<String> {
    leftovers_after_grace(&bin().to_string_lossy())
}

pub fn namespaces_of(name: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with(&format!("{name}-")))
        .map(String::from)
        .collect()
}

/// One isolate tier: the hosts' statuses from the results file, rank 0's output and the time.
/// The slow bound of these tests, %: a host slowed by the fault is far below it, noise is not.
pub const SLOW_BELOW: &str = "50";

pub fn tier(
    name: &str,
    fault: Option<(usize, &str)>,
    prepare: impl Fn(&str),
) -> (Vec<(String, HostStatus)>, String, Option<i32>, Duration) {
    tier_with(name, fault, prepare, "auto", HOSTS, &[])
}

/// As [`tier`], with `--groups groups` on `hosts` hosts.
pub fn tier_with(
    name: &str,
    fault: Option<(usize, &str)>,
    prepare: impl Fn(&str),
    groups: &str,
    hosts: usize,
    extra: &[&str],
) -> (Vec<(String, HostStatus)>, String, Option<i32>, Duration) {
    require_sim();
    let dir = scratch(name);
    let json = dir.join("isolate.json");
    let json_s = json.to_str().unwrap().to_string();
    let mut c = Cluster::up_with(name, hosts);
    prepare(name);
    let mut args = vec![
        "isolate",
        "--backend",
        "sim",
        "-e",
        "1M",
        // More iterations than the default 20: steadier figures on a loaded machine.
        "-n",
        "50",
        // The simulation's bandwidth moves by a quarter between rounds on a loaded machine
        // (seen: a healthy host at 73 % of the median, called slow at the default 25 %).
        "--slow-below",
        SLOW_BELOW,
        "--round-timeout",
        "10",
        "--groups",
        groups,
        "--json",
        &json_s,
    ];
    args.extend_from_slice(extra);
    c.start(&args, fault);
    let rx = c.rank0_lines();
    let (code, took) = c.wait(Duration::from_secs(TIER_LIMIT_S));
    drop(c);
    let out: Vec<String> = rx.try_iter().map(|(_, l)| l).collect();
    let out = out.join("\n");
    let doc = results::load(&json).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let report = doc
        .isolate
        .unwrap_or_else(|| panic!("no isolate report\n{out}"));
    let statuses = report
        .hosts
        .iter()
        .map(|v| (v.host.clone(), v.status))
        .collect();
    assert!(namespaces_of(name).is_empty(), "namespaces left behind");
    let left = rank_leftovers();
    assert!(left.is_empty(), "processes left behind: {left:?}");
    eprintln!("{name}: {:.1} s\n{out}", took.as_secs_f64());
    (statuses, out, code, took)
}

pub fn expect(statuses: &[(String, HostStatus)], want: &[(&str, HostStatus)], out: &str) {
    let want: Vec<(String, HostStatus)> = want.iter().map(|(h, s)| (h.to_string(), *s)).collect();
    assert_eq!(statuses, want.as_slice(), "{out}");
}
