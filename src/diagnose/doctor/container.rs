//! The `container` check, and whether this node is a container at all.

use super::{Check, Node, Status, verdict};

/// The initial (host) IPC namespace, as `/proc/self/ns/ipc` names it (`PROC_IPC_INIT_INO`).
const HOST_IPC_NS: &str = "ipc:[4026531839]";

impl Node {
    pub(super) fn in_container(&self) -> bool {
        self.path("/.dockerenv").exists()
            || self.path("/run/.containerenv").exists()
            || (self.env)("KUBERNETES_SERVICE_HOST").is_some()
            || self.read("/proc/1/cgroup").is_some_and(|c| {
                c.contains("kubepods") || c.contains("docker") || c.contains("containerd")
            })
    }

    /// "host", "private (ipc:[…])" or "unknown", from `<root>/proc/self/ns/ipc`.
    fn ipc_namespace(&self) -> String {
        match std::fs::read_link(self.path("/proc/self/ns/ipc")) {
            Ok(t) if t.as_os_str() == HOST_IPC_NS => "host".into(),
            Ok(t) => format!("private ({})", t.display()),
            Err(_) => "unknown".into(),
        }
    }

    pub(super) fn container(&self, out: &mut Vec<Check>) {
        let inside = self.in_container();
        let kube = (self.env)("KUBERNETES_SERVICE_HOST").is_some();
        let cap_ipc_lock = self.cap_ipc_lock();
        let evidence = format!(
            "container: {}{}; IPC namespace: {}; IPC_LOCK capability: {}",
            if inside { "yes" } else { "no" },
            if kube { " (Kubernetes)" } else { "" },
            self.ipc_namespace(),
            match cap_ipc_lock {
                Some(true) => "yes",
                Some(false) => "no",
                None => "unknown",
            }
        );
        let rdma_wanted = (self.env)("NCCL_IB_HCA").is_some() || self.has_ib();
        let warn = inside && rdma_wanted && cap_ipc_lock == Some(false);
        out.push(verdict(
            "container",
            if warn { Status::Warn } else { Status::Ok },
            evidence,
            "RDMA in a container needs the IPC_LOCK capability",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{
        CAPS_ALL, CAPS_NO_IPC_LOCK, IB_ACTIVE, fixture, one, symlink,
    };
    use crate::diagnose::doctor::node_for_tests;

    #[test]
    fn container_ipc_namespace_and_ipc_lock() {
        let root = fixture(&[
            (".dockerenv", ""),
            IB_ACTIVE,
            ("proc/self/status", CAPS_NO_IPC_LOCK),
        ]);
        symlink(&root, "proc/self/ns/ipc", "ipc:[4026532290]");
        let c = one(&node_for_tests(&root, vec![]), Node::container);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(
            c.evidence
                .contains("IPC namespace: private (ipc:[4026532290])"),
            "{c:?}"
        );
        assert!(c.hint.contains("IPC_LOCK"));
        let root = fixture(&[
            (".dockerenv", ""),
            IB_ACTIVE,
            ("proc/self/status", CAPS_ALL),
        ]);
        symlink(&root, "proc/self/ns/ipc", HOST_IPC_NS);
        let c = one(&node_for_tests(&root, vec![]), Node::container);
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert!(c.evidence.contains("IPC namespace: host"), "{c:?}");
        let host = fixture(&[IB_ACTIVE, ("proc/self/status", CAPS_NO_IPC_LOCK)]);
        let c = one(&node_for_tests(&host, vec![]), Node::container);
        assert_eq!(c.status, Status::Ok, "not a container: {c:?}");
    }
}
