//! Fixture nodes for the doctor checks' unit tests.

use super::{Check, Node};
use std::path::Path;

/// A fixture node, removed when dropped.
pub(super) struct Fixture(tempfile::TempDir);

impl std::ops::Deref for Fixture {
    type Target = Path;
    fn deref(&self) -> &Path {
        self.0.path()
    }
}

/// A fixture node: `files` written under a fresh root, plus an empty `dev/shm`.
pub(super) fn fixture(files: &[(&str, &str)]) -> Fixture {
    let root = bare_fixture(files);
    std::fs::create_dir_all(root.join("dev/shm")).unwrap();
    root
}

pub(super) fn bare_fixture(files: &[(&str, &str)]) -> Fixture {
    let root = Fixture(
        tempfile::Builder::new()
            .prefix("doctor-fixture.")
            .tempdir()
            .unwrap(),
    );
    for (p, content) in files {
        let f = root.join(p);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, content).unwrap();
    }
    root
}

pub(super) fn symlink(root: &Path, link: &str, target: &str) {
    let l = root.join(link);
    std::fs::create_dir_all(l.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, l).unwrap();
}

pub(super) fn find<'a>(checks: &'a [Check], id: &str) -> &'a Check {
    checks.iter().find(|c| c.id == id).unwrap()
}

/// Runs one check method on a fixture node and returns its single result.
pub(super) fn one(node: &Node, f: fn(&Node, &mut Vec<Check>)) -> Check {
    let mut out = Vec::new();
    f(node, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    out.remove(0)
}

pub(super) fn limits(memlock: &str, nofile: &str) -> String {
    format!(
        "Limit                     Soft Limit           Hard Limit           Units     \n\
         Max processes             96365                96365                processes \n\
         Max open files            {nofile}                files     \n\
         Max locked memory         {memlock}                bytes     \n"
    )
}

pub(super) const IB_ACTIVE: (&str, &str) =
    ("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
/// CapEff of a default Docker container (no IPC_LOCK) and of root on a host.
pub(super) const CAPS_NO_IPC_LOCK: &str = "Name:\tx\nCapEff:\t00000000a80425fb\n";
pub(super) const CAPS_ALL: &str = "CapEff:\t000001ffffffffff\n";
