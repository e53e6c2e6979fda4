//! The network NCCL and UCX will use: `infiniband`, `socket-ifname` and `ucx-net-devices`
//! (`gpudirect-rdma` is in `gdr`).

use super::{Check, Node, Status, check, list_or_none};

impl Node {
    pub(super) fn infiniband(&self, out: &mut Vec<Check>) {
        let mut devices = self.list("/sys/class/infiniband");
        let mut states = Vec::new();
        let mut unlisted = None;
        // The node itself: a device libibverbs lists without a sysfs entry (a stand-in library)
        // is still one NCCL uses.
        if devices.is_empty() && self.root == std::path::Path::new("/") {
            use crate::ffi::ibverbs::{IbverbsError, device_names};
            devices = match device_names() {
                Ok(d) => d,
                // No libibverbs: no RDMA stack, as NCCL finds it.
                Err(IbverbsError::NotFound(_)) => Vec::new(),
                Err(e) => {
                    unlisted = Some(format!("libibverbs could not list its devices: {e}"));
                    Vec::new()
                }
            };
            states.extend(
                devices
                    .iter()
                    .map(|d| format!("{d} (listed by libibverbs, not in sysfs)")),
            );
        }
        // Port states unknown for those: no warning about them.
        let mut any_active = !states.is_empty();
        for d in &devices {
            for port in self.list(&format!("/sys/class/infiniband/{d}/ports")) {
                let state = self
                    .read(&format!("/sys/class/infiniband/{d}/ports/{port}/state"))
                    .unwrap_or_default();
                let state = state.trim().to_string();
                any_active |= state.contains("ACTIVE");
                states.push(format!("{d}/{port} {state}"));
            }
        }
        states.extend(unlisted.clone());
        let hca = (self.env)("NCCL_IB_HCA");
        let evidence = format!(
            "{}; NCCL_IB_HCA={}",
            if states.is_empty() {
                "no InfiniBand devices".to_string()
            } else {
                states.join(", ")
            },
            hca.as_deref().unwrap_or("unset")
        );
        let c = match hca.as_deref() {
            _ if unlisted.is_some() => check(
                "infiniband",
                Status::Warn,
                evidence,
                "libibverbs is installed but could not list the RDMA devices: check the kernel modules \
                 (ib_uverbs) and, in a container, that /dev/infiniband is passed in",
            ),
            Some(h) if !hca_selects_any(h, &devices) => check(
                "infiniband",
                Status::Fail,
                evidence,
                "NCCL_IB_HCA selects no InfiniBand device on this node: fix the names (ibv_devices lists them)",
            ),
            None if !devices.is_empty() && !any_active => check(
                "infiniband",
                Status::Warn,
                evidence,
                "no InfiniBand port is ACTIVE: check cabling and the subnet manager (ibstat)",
            ),
            _ => check("infiniband", Status::Ok, evidence, ""),
        };
        out.push(c);
    }

    pub(super) fn socket_ifname(&self, out: &mut Vec<Check>) {
        let ifaces = self.list("/sys/class/net");
        let Some(spec) = (self.env)("NCCL_SOCKET_IFNAME") else {
            out.push(check(
                "socket-ifname",
                Status::Ok,
                format!(
                    "NCCL_SOCKET_IFNAME unset; interfaces: {}",
                    ifaces.join(", ")
                ),
                "",
            ));
            return;
        };
        let selected = select_ifaces(&spec, &ifaces);
        let down: Vec<String> = selected
            .iter()
            .filter(|i| {
                self.read(&format!("/sys/class/net/{i}/operstate"))
                    .is_some_and(|s| s.trim() == "down")
            })
            .cloned()
            .collect();
        let evidence = format!(
            "NCCL_SOCKET_IFNAME={spec}; interfaces: {}; selected: {}; down: {}",
            ifaces.join(", "),
            list_or_none(&selected),
            list_or_none(&down)
        );
        let c = if selected.is_empty() {
            check(
                "socket-ifname",
                Status::Fail,
                evidence,
                "NCCL_SOCKET_IFNAME matches no interface here: NCCL's bootstrap will fail ('no socket interface found')",
            )
        } else if down.len() == selected.len() {
            check(
                "socket-ifname",
                Status::Warn,
                evidence,
                "every interface NCCL_SOCKET_IFNAME selects is down (operstate): bring it up or select another",
            )
        } else {
            check("socket-ifname", Status::Ok, evidence, "")
        };
        out.push(c);
    }

    /// UCX_NET_DEVICES against the devices this node has (`mlx5_0:1` = InfiniBand port,
    /// a bare name = network interface or InfiniBand device).
    pub(super) fn ucx_net_devices(&self, out: &mut Vec<Check>) {
        let Some(spec) = (self.env)("UCX_NET_DEVICES") else {
            out.push(check(
                "ucx-net-devices",
                Status::Ok,
                "UCX_NET_DEVICES unset: UCX uses every device",
                "",
            ));
            return;
        };
        let entries: Vec<&str> = spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "all")
            .collect();
        let missing: Vec<String> = entries
            .iter()
            .filter(|e| !self.net_device_exists(e))
            .map(|e| e.to_string())
            .collect();
        let evidence = format!(
            "UCX_NET_DEVICES={spec}; not on this node: {}",
            list_or_none(&missing)
        );
        let c = if missing.is_empty() {
            check("ucx-net-devices", Status::Ok, evidence, "")
        } else if missing.len() == entries.len() {
            check(
                "ucx-net-devices",
                Status::Fail,
                evidence,
                "UCX_NET_DEVICES names no device on this node: UCX (and MPI over it) finds no transport; \
                 `ucx_info -d` lists the names (mlx5_0:1, eth0)",
            )
        } else {
            check(
                "ucx-net-devices",
                Status::Warn,
                evidence,
                "UCX skips the devices that are not here: fix the list so every node uses the devices meant",
            )
        };
        out.push(c);
    }

    fn net_device_exists(&self, entry: &str) -> bool {
        match entry.split_once(':') {
            Some((dev, port)) => self
                .path(&format!("/sys/class/infiniband/{dev}/ports/{port}"))
                .exists(),
            None => {
                self.path(&format!("/sys/class/net/{entry}")).exists()
                    || self
                        .path(&format!("/sys/class/infiniband/{entry}"))
                        .exists()
            }
        }
    }
}

/// Whether `NCCL_IB_HCA` (`mlx5`, `=mlx5_0:1`, `^mlx5_1`) selects any of `devices`.
pub fn hca_selects_any(spec: &str, devices: &[String]) -> bool {
    let exclude = spec.starts_with('^');
    let exact = spec.trim_start_matches('^').starts_with('=');
    let wanted: Vec<&str> = spec
        .trim_start_matches(['^', '='])
        .split(',')
        .map(|s| s.split(':').next().unwrap_or("").trim())
        .filter(|s| !s.is_empty())
        .collect();
    let matches = |d: &String| {
        wanted
            .iter()
            .any(|w| if exact { d == w } else { d.starts_with(w) })
    };
    devices.iter().any(|d| matches(d) != exclude)
}

/// The interfaces `NCCL_SOCKET_IFNAME` (`eth`, `=eth0`, `^docker,lo`) selects from `ifaces`.
pub fn select_ifaces(spec: &str, ifaces: &[String]) -> Vec<String> {
    let exclude = spec.starts_with('^');
    let body = spec.trim_start_matches('^');
    let exact = body.starts_with('=');
    let wanted: Vec<&str> = body
        .trim_start_matches('=')
        .split(',')
        .filter(|s| !s.is_empty())
        .collect();
    ifaces
        .iter()
        .filter(|i| i.as_str() != "lo" || !exclude)
        .filter(|i| {
            wanted.iter().any(|w| {
                if exact {
                    i.as_str() == *w
                } else {
                    i.starts_with(w)
                }
            }) != exclude
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{IB_ACTIVE, fixture, one};
    use crate::diagnose::doctor::node_for_tests;

    #[test]
    fn infiniband_ports_and_nccl_ib_hca() {
        let root = fixture(&[
            IB_ACTIVE,
            ("sys/class/infiniband/mlx5_1/ports/1/state", "1: DOWN"),
        ]);
        let status = |env| one(&node_for_tests(&root, env), Node::infiniband).status;
        assert_eq!(status(vec![]), Status::Ok);
        assert_eq!(status(vec![("NCCL_IB_HCA", "mlx5")]), Status::Ok);
        assert_eq!(status(vec![("NCCL_IB_HCA", "=mlx5_1:1")]), Status::Ok);
        assert_eq!(status(vec![("NCCL_IB_HCA", "=mlx4_0")]), Status::Fail);
        assert_eq!(status(vec![("NCCL_IB_HCA", "^mlx5")]), Status::Fail);
        let down = fixture(&[("sys/class/infiniband/mlx5_0/ports/1/state", "1: DOWN")]);
        let c = one(&node_for_tests(&down, vec![]), Node::infiniband);
        assert_eq!(c.status, Status::Warn, "{c:?}");
        assert!(c.evidence.contains("mlx5_0/1 1: DOWN") && c.hint.contains("ibstat"));
        let none = one(&node_for_tests(&fixture(&[]), vec![]), Node::infiniband);
        assert_eq!(none.status, Status::Ok);
    }

    #[test]
    fn socket_ifname_is_checked_against_what_exists_and_is_up() {
        let root = fixture(&[
            ("sys/class/net/eth0/operstate", "up\n"),
            ("sys/class/net/eth1/operstate", "down\n"),
            ("sys/class/net/lo/operstate", "unknown\n"),
        ]);
        let status = |v| {
            let env = vec![("NCCL_SOCKET_IFNAME", v)];
            one(&node_for_tests(&root, env), Node::socket_ifname).status
        };
        assert_eq!(status("eth"), Status::Ok);
        assert_eq!(status("^docker"), Status::Ok);
        assert_eq!(status("ib0"), Status::Fail);
        assert_eq!(status("=eth1"), Status::Warn);
        let c = one(&node_for_tests(&root, vec![]), Node::socket_ifname);
        assert_eq!(c.status, Status::Ok);
        assert!(
            c.evidence.contains("unset; interfaces: eth0, eth1, lo"),
            "{c:?}"
        );
    }

    #[test]
    fn ucx_net_devices_against_this_node() {
        let root = fixture(&[IB_ACTIVE, ("sys/class/net/eth0/operstate", "up")]);
        let status = |v: Option<&'static str>| {
            let env = v.map(|v| vec![("UCX_NET_DEVICES", v)]).unwrap_or_default();
            one(&node_for_tests(&root, env), Node::ucx_net_devices).status
        };
        assert_eq!(status(None), Status::Ok);
        assert_eq!(status(Some("mlx5_0:1")), Status::Ok);
        assert_eq!(status(Some("mlx5_0:1,eth0")), Status::Ok);
        assert_eq!(status(Some("all")), Status::Ok);
        assert_eq!(status(Some("mlx5_0:1,mlx5_3:1")), Status::Warn);
        assert_eq!(status(Some("mlx5_0:2,ib0")), Status::Fail);
        let env = vec![("UCX_NET_DEVICES", "mlx5_3:1")];
        let c = one(&node_for_tests(&root, env), Node::ucx_net_devices);
        assert!(c.evidence.contains("not on this node: mlx5_3:1"), "{c:?}");
    }
}
