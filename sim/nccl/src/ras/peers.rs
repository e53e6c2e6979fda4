//! The simulation's stand-in for RAS's peer network: every process writes a snapshot of each of
//! its ranks to a shared folder every 250 ms and reads the others' there.

use super::*;

/// One rank as a report shows it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Rank {
    pub(super) rank: usize,
    pub(super) ip: String,
    pub(super) pid: i64,
    pub(super) dev: i32,
    pub(super) init: u32,
    pub(super) async_error: u32,
    pub(super) finalize: bool,
    pub(super) abort: bool,
    pub(super) allreduce: u64,
}

/// A rank no data came for: its process did not answer (`unresponsive`), or answered without
/// the communicator.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Missing {
    pub(super) rank: usize,
    pub(super) ip: Option<String>,
    pub(super) pid: i64,
    pub(super) dev: i32,
    pub(super) unresponsive: bool,
    pub(super) dead: bool,
}

#[derive(Debug)]
pub(super) struct View {
    pub(super) hash: u64,
    pub(super) size: usize,
    pub(super) ranks: Vec<Rank>,
    pub(super) missing: Vec<Missing>,
}

pub(super) fn folder() -> PathBuf {
    std::env::temp_dir().join("nccl-sim-ras")
}

/// Folders of jobs long gone (older than an hour) are removed when a process starts RAS.
pub(super) fn clean_old_folders() {
    let Ok(d) = std::fs::read_dir(folder()) else {
        return;
    };
    for e in d.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|a| a > Duration::from_secs(3600));
        if old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

pub(super) fn me(c: &Comm) -> Rank {
    Rank {
        rank: c.id.rank,
        ip: c.id.ip.to_string(),
        pid: std::process::id() as i64,
        dev: c.id.dev,
        // ncclInProgress until the connections are up, as `comm->initState`.
        init: if c.peers().is_empty() && c.id.nranks > 1 {
            crate::INPROGRESS
        } else {
            crate::SUCCESS
        },
        async_error: c.async_error(),
        finalize: c.finalize_called.load(std::sync::atomic::Ordering::SeqCst),
        abort: c.aborted(),
        allreduce: c
            .allreduce_launched
            .load(std::sync::atomic::Ordering::SeqCst),
    }
}

/// `v1 rank pid ip dev init async finalize abort allreduce host` (or `gone pid ip host`).
pub(super) fn snapshot_line(r: &Rank) -> String {
    format!(
        "v1 {} {} {} {} {} {} {} {} {} {}\n",
        r.rank,
        r.pid,
        r.ip,
        r.dev,
        r.init,
        r.async_error,
        r.finalize as u8,
        r.abort as u8,
        r.allreduce,
        log::host()
    )
}

pub(super) fn write_atomically(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

pub(super) fn snapshot_path(hash: u64, rank: usize) -> PathBuf {
    folder().join(format!("{hash:016x}")).join(rank.to_string())
}

/// Every 250 ms: this process's ranks of every live communicator, for the other processes'
/// reports (the simulation's stand-in for RAS's peer network).
pub(super) fn refresh_loop() {
    loop {
        for c in comm::all() {
            let p = snapshot_path(c.id.hash, c.id.rank);
            if let Some(d) = p.parent() {
                let _ = std::fs::create_dir_all(d);
            }
            write_atomically(&p, &snapshot_line(&me(&c)));
        }
        std::thread::sleep(REFRESH);
    }
}

/// A communicator leaves this process (destroy, abort): its process still answers, without it.
pub fn gone(c: &Comm) {
    if c.id.version < 22400 {
        return;
    }
    let p = snapshot_path(c.id.hash, c.id.rank);
    let Some(dir) = p.parent().filter(|d| d.exists()) else {
        return;
    };
    write_atomically(
        &p,
        &format!("gone {} {} {}\n", std::process::id(), c.id.ip, log::host()),
    );
    // The last rank to leave removes the communicator's folder: nobody asks about a
    // communicator every rank has left. (A job that crashed or hung leaves it for
    // `clean_old_folders`.)
    let all_gone = std::fs::read_dir(dir).is_ok_and(|d| {
        d.flatten()
            .all(|e| std::fs::read_to_string(e.path()).is_ok_and(|t| t.starts_with("gone ")))
    });
    if all_gone && (0..c.id.nranks).all(|r| snapshot_path(c.id.hash, r).exists()) {
        let _ = std::fs::remove_dir_all(dir);
    }
}

pub(super) fn pid_alive(pid: i64) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    pid > 0
        && (unsafe { libc::kill(pid as libc::pid_t, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH))
}

/// What the snapshot of `rank` of communicator `c` says.
pub(super) fn peer(c: &Comm, rank: usize) -> Result<Rank, Missing> {
    let ip = c.peer(rank).map(|p| p.addr.ip().to_string());
    let silent = Missing {
        rank,
        ip: ip.clone(),
        pid: -1,
        dev: c.peer(rank).map(|p| p.dev).unwrap_or(-1),
        unresponsive: true,
        dead: false,
    };
    let p = snapshot_path(c.id.hash, rank);
    let (Ok(text), Ok(meta)) = (std::fs::read_to_string(&p), std::fs::metadata(&p)) else {
        return Err(silent);
    };
    let age = meta
        .modified()
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .unwrap_or_default();
    let f: Vec<&str> = text.split_whitespace().collect();
    let host = f.last().copied().unwrap_or("");
    let pid: i64 = f
        .get(if f.first() == Some(&"gone") { 1 } else { 2 })
        .and_then(|p| p.parse().ok())
        .unwrap_or(-1);
    // Only a process of this host can be seen to be gone; elsewhere, a snapshot that stopped
    // changing is all there is.
    let dead = host == log::host() && !pid_alive(pid);
    let missing = |unresponsive| Missing {
        pid,
        unresponsive: unresponsive || dead,
        dead,
        ..silent.clone()
    };
    match f.first().copied() {
        Some("gone") => Err(missing(false)),
        Some("v1") if f.len() == 11 => {
            if dead || age > STALE {
                return Err(missing(true));
            }
            let num = |i: usize| f[i].parse::<u64>().unwrap_or(0);
            Ok(Rank {
                rank,
                ip: f[3].to_string(),
                pid,
                dev: f[4].parse().unwrap_or(-1),
                init: num(5) as u32,
                async_error: num(6) as u32,
                finalize: num(7) != 0,
                abort: num(8) != 0,
                allreduce: num(9),
            })
        }
        _ => Err(silent),
    }
}

/// Every communicator this process holds, with every rank: its own from memory, the others
/// from their snapshots.
pub(super) fn gather() -> Vec<View> {
    let mut by_hash: BTreeMap<u64, Vec<Arc<Comm>>> = BTreeMap::new();
    for c in comm::all() {
        by_hash.entry(c.id.hash).or_default().push(c);
    }
    by_hash
        .into_iter()
        .map(|(hash, comms)| {
            let first = &comms[0];
            let mut view = View {
                hash,
                size: first.id.nranks,
                ranks: Vec::new(),
                missing: Vec::new(),
            };
            for r in 0..first.id.nranks {
                if let Some(c) = comms.iter().find(|c| c.id.rank == r) {
                    view.ranks.push(me(c));
                    continue;
                }
                match peer(first, r) {
                    Ok(rank) => view.ranks.push(rank),
                    Err(m) => view.missing.push(m),
                }
            }
            view
        })
        .collect()
}
