//! Writing the files a user names (`run --json`, `compare --plot`) without ever replacing
//! something that is not a regular file: a device, a FIFO, a folder, or a symbolic link (whose
//! target would be replaced). Each write goes to a new file beside the target and is renamed
//! over it, so a reader sees the old document or the new one, never half of one.

use std::fs::{self, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// What kind of thing `path` is, in words, when it is not a regular file.
fn kind(m: &fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("a folder")
    } else if t.is_symlink() {
        Some("a symbolic link")
    } else if t.is_fifo() {
        Some("a FIFO (named pipe)")
    } else if t.is_char_device() {
        Some("a character device")
    } else if t.is_block_device() {
        Some("a block device")
    } else if t.is_socket() {
        Some("a socket")
    } else {
        Some("not a regular file")
    }
}

/// Whether `path` is absent or a regular file (not following a symbolic link); else what it
/// is, in words.
fn refusal(path: &Path) -> io::Result<Option<&'static str>> {
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(kind(&m)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Checks, before any work, that `flag`'s `path` may be written: a new path or a regular file,
/// in a folder where a file can be created. Never opens what is there (a FIFO would block).
pub fn check_target(path: &Path, flag: &str) -> Result<(), String> {
    let shown = path.display();
    match refusal(path) {
        Ok(Some(what)) => {
            return Err(format!(
                "{flag} {shown}: that is {what}; nccl-smoke writes only a regular file or a new \
                 path, and leaves this one alone"
            ));
        }
        Ok(None) => {}
        Err(e) => return Err(format!("{flag} {shown}: cannot look at it: {e}")),
    }
    if path.file_name().is_none() {
        return Err(format!("{flag} {shown}: not a file name"));
    }
    // The write goes through a new file beside the target: that must be possible.
    let (tmp, file) = create_beside(path).map_err(|e| {
        format!(
            "{flag} {shown}: cannot create a file in {}: {e}",
            folder(path).display()
        )
    })?;
    drop(file);
    let _ = fs::remove_file(tmp);
    Ok(())
}

fn folder(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A new file beside `path` (same folder, so the rename is atomic), created exclusively.
fn create_beside(path: &Path) -> io::Result<(PathBuf, fs::File)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let tmp = folder(path).join(format!(".{name}.{}.{nanos}.tmp", std::process::id()));
    let file = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    Ok((tmp, file))
}

/// Writes `bytes` to `path` atomically: a new file beside it, then a rename over it — only if
/// `path` is still absent or a regular file. Nothing is left beside it when the write fails.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |tmp| {
        let mut f = OpenOptions::new().write(true).open(tmp)?;
        // No fsync: the rename makes it whole for every reader; waiting for the disk would
        // hold up a rank that the launcher gives a second to finish.
        f.write_all(bytes)
    })
}

/// As [`write_atomic`], with `fill` writing the new file (given its path).
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&Path) -> io::Result<()>,
) -> io::Result<()> {
    let (tmp, file) = create_beside(path)?;
    drop(file);
    let result = fill(&tmp).and_then(|()| match refusal(path)? {
        Some(what) => Err(io::Error::other(format!(
            "{} is now {what}; not replaced",
            path.display()
        ))),
        None => fs::rename(&tmp, path),
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// The largest results file read: a sweep of 100000 sizes (the most `run` makes) is far
/// smaller.
pub const MAX_READ: u64 = 256 << 20;
/// How long reading one results file may take (a pipe whose writer stalls).
pub const READ_TIME: std::time::Duration = std::time::Duration::from_secs(10);

/// Reads `path` whole, bounded in size and time: a regular file up to [`MAX_READ`] bytes, or a
/// pipe (`<(…)`) read without blocking until it ends, within [`READ_TIME`]. Devices, folders
/// and sockets are refused without reading; a FIFO with no writer reads as empty.
pub fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let m = std::fs::metadata(path)?;
    let t = m.file_type();
    if !(t.is_file() || t.is_fifo()) {
        let what = if t.is_dir() {
            "a folder"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        return Err(std::io::Error::other(format!("it is {what}")));
    }
    if t.is_file() && m.len() > MAX_READ {
        return Err(std::io::Error::other(format!(
            "it is {} bytes, more than the {} MiB a results file can be",
            m.len(),
            MAX_READ >> 20
        )));
    }
    // Non-blocking, so that neither opening a FIFO nor reading a stalled pipe can hang.
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)?;
    let start = std::time::Instant::now();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => {
                out.extend_from_slice(&buf[..n]);
                if out.len() as u64 > MAX_READ {
                    return Err(std::io::Error::other(format!(
                        "more than the {} MiB a results file can be",
                        MAX_READ >> 20
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if start.elapsed() > READ_TIME {
            return Err(std::io::Error::other(format!(
                "still not at its end after {} s",
                READ_TIME.as_secs()
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leftovers(dir: &Path) -> Vec<String> {
        fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".tmp"))
            .collect()
    }

    #[test]
    fn new_paths_and_regular_files_are_written_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        check_target(&p, "--json").unwrap();
        assert!(!p.exists(), "the check leaves nothing behind");
        write_atomic(&p, b"one").unwrap();
        check_target(&p, "--json").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn devices_fifos_links_and_folders_are_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        assert!(
            Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let target = dir.path().join("target");
        fs::write(&target, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let sub = dir.path().join("sub");
        fs::create_dir(&sub).unwrap();
        let mut cases = vec![
            (fifo.clone(), "a FIFO"),
            (link.clone(), "a symbolic link"),
            (sub.clone(), "a folder"),
        ];
        // A character device of our own (the null device's numbers), never one under /dev.
        let dev = dir.path().join("null");
        let made = Command::new("mknod")
            .arg(&dev)
            .args(["c", "1", "3"])
            .status()
            .is_ok_and(|s| s.success());
        if made {
            cases.push((dev.clone(), "a character device"));
        }
        for (p, what) in &cases {
            let e = check_target(p, "--json").unwrap_err();
            assert!(e.contains(what) && e.contains("--json"), "{e}");
            let e = write_atomic(p, b"x").unwrap_err().to_string();
            assert!(e.contains(what), "{e}");
        }
        assert_eq!(fs::read(&target).unwrap(), b"keep");
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert!(leftovers(dir.path()).is_empty());
    }

    #[test]
    fn a_missing_folder_is_named() {
        let e = check_target(Path::new("/nonexistent-dir/r.json"), "--json").unwrap_err();
        assert!(
            e.contains("cannot create a file in /nonexistent-dir"),
            "{e}"
        );
    }

    use std::os::unix::fs::FileTypeExt;
    use std::process::Command;
}
