//! Where a failed rank's NCCL logs are kept, and what the temp directory may hold.
//!
//! A rank's run folder (`$TMPDIR/nccl-smoke.PID.NANOS`: its supervisor's socket, the plan handed
//! to the worker, NCCL's `NCCL_DEBUG_FILE`) lives only as long as the rank. When the rank failed
//! on its own, NCCL's logs are moved beside the results file (or into `--logs DIR`, else the
//! working directory), named by job, rank and host, where a reboot or a tmp cleaner does not
//! lose them; the results file names the pattern. At start, run folders of ranks that are gone
//! (no such pid, and nobody listening on their socket) are removed.

use crate::bootstrap::launcher;
use crate::ffi::os;
use std::path::{Path, PathBuf};

/// Prefix of a rank's run folder in the temp directory.
pub const RUN_DIR_PREFIX: &str = "nccl-smoke.";

/// Where this job's failed ranks keep their NCCL logs: the same folder and job name on every
/// rank, so that rank 0 can name them all.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KeptLogs {
    /// `--logs DIR`, else the results file's folder, else the working directory (absolute).
    pub dir: PathBuf,
    /// The launcher's job id (see [`launcher::job_key`]), else this run's start time and pid.
    pub job: String,
}

impl KeptLogs {
    /// The folder from the flags, and the job from the launcher's environment.
    pub fn new(logs: Option<&Path>, json: Option<&Path>) -> KeptLogs {
        let dir = logs
            .map(Path::to_path_buf)
            .or_else(|| {
                json.and_then(Path::parent)
                    .filter(|p| !p.as_os_str().is_empty())
                    .map(Path::to_path_buf)
            })
            .unwrap_or_else(|| PathBuf::from("."));
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        let job = launcher::job_key(|k| std::env::var(k).ok()).unwrap_or_else(|| {
            let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            format!("{}.{}", now.replace([':', '-'], ""), std::process::id())
        });
        KeptLogs {
            dir,
            job: safe(&job),
        }
    }

    /// The file a rank's NCCL log is kept in (`n` > 0: its process's further logs).
    pub fn path(&self, rank: Option<u32>, host: &str, n: usize) -> PathBuf {
        let rank = rank.map_or_else(|| "single".to_string(), |r| format!("rank{r}"));
        let more = if n == 0 {
            String::new()
        } else {
            format!(".{n}")
        };
        self.dir.join(format!(
            "nccl-smoke.{}.{rank}.{}{more}.log",
            self.job,
            safe(host)
        ))
    }

    /// The names of every rank's kept logs, as the results file gives them.
    pub fn pattern(&self) -> String {
        self.dir
            .join(format!("nccl-smoke.{}.rank<RANK>.<HOST>.log", self.job))
            .display()
            .to_string()
    }

    /// Moves the NCCL logs of a run folder to their kept names, every one it can: the paths
    /// written, and why each of the others could not be (those stay in the run folder, and the
    /// caller says where). A log moved before another failed is still among the paths.
    pub fn keep(&self, run_dir: &Path, rank: Option<u32>, host: &str) -> Kept {
        let mut out = Kept::default();
        let mut logs: Vec<PathBuf> = match std::fs::read_dir(run_dir) {
            Ok(it) => it
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "log"))
                .collect(),
            Err(e) => {
                out.errors
                    .push(format!("cannot read {}: {e}", run_dir.display()));
                return out;
            }
        };
        logs.sort();
        if let Err(e) = std::fs::create_dir_all(&self.dir) {
            out.errors
                .push(format!("cannot create {}: {e}", self.dir.display()));
            return out;
        }
        for (n, from) in logs.iter().enumerate() {
            let to = self.path(rank, host, n);
            // A rename does not cross file systems: copy, then remove.
            if std::fs::rename(from, &to).is_err() {
                if let Err(e) = std::fs::copy(from, &to) {
                    let _ = std::fs::remove_file(&to);
                    out.errors
                        .push(format!("cannot write {}: {e}", to.display()));
                    continue;
                }
                let _ = std::fs::remove_file(from);
            }
            out.kept.push(to);
        }
        out
    }
}

/// What [`KeptLogs::keep`] did.
#[derive(Debug, Default)]
pub struct Kept {
    /// The logs' kept paths.
    pub kept: Vec<PathBuf>,
    /// Why the others stayed in the run folder.
    pub errors: Vec<String>,
}

/// A name made of letters, digits and `._-+` only (a job id or host name in a file name).
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-+".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The pid in a run folder's name (`nccl-smoke.PID.NANOS`), if it is one.
fn run_dir_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(RUN_DIR_PREFIX)?;
    let (pid, nanos) = rest.split_once('.')?;
    (nanos.len() == 9 && nanos.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
    pid.parse().ok()
}

/// Removes the run folders in `temp` whose rank is gone: its supervisor's pid does not exist on
/// this host, and nothing answers on its socket (a live rank in another pid namespace that
/// shares this temp directory still answers). Returns the folders removed.
pub fn sweep_leftovers(temp: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(temp) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = run_dir_pid(&name) else {
            continue;
        };
        let path = e.path();
        if !path.is_dir() || os::pid_alive(pid) {
            continue;
        }
        let sock = path.join("supervisor.sock");
        if std::os::unix::net::UnixStream::connect(&sock).is_ok() {
            continue;
        }
        if std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_carry_job_rank_and_host() {
        let k = KeptLogs {
            dir: "/r".into(),
            job: "slurm.77.0".into(),
        };
        assert_eq!(
            k.path(Some(3), "node/7", 0),
            PathBuf::from("/r/nccl-smoke.slurm.77.0.rank3.node_7.log")
        );
        assert_eq!(
            k.path(None, "h", 1),
            PathBuf::from("/r/nccl-smoke.slurm.77.0.single.h.1.log")
        );
        assert_eq!(
            k.pattern(),
            "/r/nccl-smoke.slurm.77.0.rank<RANK>.<HOST>.log"
        );
    }

    #[test]
    fn the_folder_is_the_flag_else_the_results_file_s_else_here() {
        let k = KeptLogs::new(Some(Path::new("/logs")), Some(Path::new("/res/r.json")));
        assert_eq!(k.dir, PathBuf::from("/logs"));
        let k = KeptLogs::new(None, Some(Path::new("/res/r.json")));
        assert_eq!(k.dir, PathBuf::from("/res"));
        let k = KeptLogs::new(None, Some(Path::new("r.json")));
        assert_eq!(k.dir, std::env::current_dir().unwrap());
        assert!(!k.job.contains(':'), "{}", k.job);
    }

    #[test]
    fn logs_are_moved_out_of_the_run_folder() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("nccl-smoke.1.000000001");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("nccl.h.12.log"), "WARN x\n").unwrap();
        std::fs::write(run.join("plan.json"), "{}").unwrap();
        let k = KeptLogs {
            dir: root.path().join("kept"),
            job: "j".into(),
        };
        let out = k.keep(&run, Some(1), "h");
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        let kept = out.kept;
        assert_eq!(
            kept,
            vec![root.path().join("kept/nccl-smoke.j.rank1.h.log")]
        );
        assert_eq!(std::fs::read_to_string(&kept[0]).unwrap(), "WARN x\n");
        assert!(!run.join("nccl.h.12.log").exists());
    }

    #[test]
    fn a_log_that_cannot_be_kept_leaves_the_others_kept_and_named() {
        let root = tempfile::tempdir().unwrap();
        let run = root.path().join("nccl-smoke.1.000000001");
        std::fs::create_dir(&run).unwrap();
        std::fs::write(run.join("a.log"), "first\n").unwrap();
        std::fs::write(run.join("b.log"), "second\n").unwrap();
        let k = KeptLogs {
            dir: root.path().join("kept"),
            job: "j".into(),
        };
        // The first log's kept name is taken by a folder: it cannot be written there.
        std::fs::create_dir_all(k.path(Some(1), "h", 0).join("x")).unwrap();
        let out = k.keep(&run, Some(1), "h");
        assert_eq!(out.kept, vec![k.path(Some(1), "h", 1)]);
        assert_eq!(std::fs::read_to_string(&out.kept[0]).unwrap(), "second\n");
        assert_eq!(out.errors.len(), 1, "{:?}", out.errors);
        assert!(
            out.errors[0].contains("nccl-smoke.j.rank1.h.log"),
            "{:?}",
            out.errors
        );
        // Not lost: still in the run folder.
        assert_eq!(
            std::fs::read_to_string(run.join("a.log")).unwrap(),
            "first\n"
        );
        assert!(!run.join("b.log").exists());
    }

    #[test]
    fn only_folders_of_gone_ranks_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let mine = root
            .path()
            .join(format!("nccl-smoke.{}.000000001", std::process::id()));
        // A pid far above any pid_max (2^22) is no process.
        let gone = root.path().join("nccl-smoke.999999999.000000002");
        let other = root.path().join("nccl-smoke.999999999.notarun");
        for d in [&mine, &gone, &other] {
            std::fs::create_dir(d).unwrap();
        }
        assert_eq!(sweep_leftovers(root.path()), vec![gone.clone()]);
        assert!(mine.exists() && other.exists() && !gone.exists());
    }

    #[test]
    fn a_folder_whose_socket_answers_is_live() {
        let root = tempfile::tempdir().unwrap();
        let live = root.path().join("nccl-smoke.999999998.000000003");
        std::fs::create_dir(&live).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(live.join("supervisor.sock")).unwrap();
        assert!(sweep_leftovers(root.path()).is_empty());
        assert!(live.exists());
    }
}
