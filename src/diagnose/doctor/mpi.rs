//! The `mpi-hcoll` check: Open MPI's HCOLL collectives over container RDMA.

use super::{Check, Node, Status, verdict};

impl Node {
    pub(super) fn mpi(&self, out: &mut Vec<Check>) {
        let hcoll = (self.env)("OMPI_MCA_coll_hcoll_enable").or_else(|| {
            [
                "/etc/openmpi/openmpi-mca-params.conf",
                "/opt/hpcx/ompi/etc/openmpi-mca-params.conf",
            ]
            .iter()
            .filter_map(|p| self.read(p))
            .flat_map(|t| t.lines().map(str::to_string).collect::<Vec<_>>())
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "coll_hcoll_enable").then(|| v.trim().to_string())
            })
        });
        let has_hcoll_lib = self.path("/opt/mellanox/hcoll").exists();
        let evidence = format!(
            "coll_hcoll_enable={}; HCOLL installed: {}; UCX_NET_DEVICES={}",
            hcoll.as_deref().unwrap_or("unset"),
            if has_hcoll_lib { "yes" } else { "no" },
            (self.env)("UCX_NET_DEVICES").as_deref().unwrap_or("unset")
        );
        let enabled = hcoll
            .as_deref()
            .map(|v| v.trim() != "0")
            .unwrap_or(has_hcoll_lib);
        let warn = enabled && self.has_ib() && self.in_container();
        out.push(verdict(
            "mpi-hcoll",
            if warn { Status::Warn } else { Status::Ok },
            evidence,
            "HCOLL over container RDMA is known to hang at MPI start: mpirun -mca coll_hcoll_enable 0 (and -mca btl tcp,self)",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::doctor::fixtures::{IB_ACTIVE, fixture, one};
    use crate::diagnose::doctor::node_for_tests;

    #[test]
    fn seed_001_hcoll_in_a_container_with_rdma() {
        let root = fixture(&[
            (".dockerenv", ""),
            IB_ACTIVE,
            (
                "etc/openmpi/openmpi-mca-params.conf",
                "coll_hcoll_enable = 1\n",
            ),
        ]);
        let mut out = Vec::new();
        node_for_tests(&root, vec![]).mpi(&mut out);
        assert_eq!(out[0].status, Status::Warn, "{:?}", out[0]);
        assert!(out[0].hint.contains("coll_hcoll_enable 0"));
        out.clear();
        node_for_tests(&root, vec![("OMPI_MCA_coll_hcoll_enable", "0")]).mpi(&mut out);
        assert_eq!(out[0].status, Status::Ok);
    }

    #[test]
    fn hcoll_installed_is_on_unless_disabled() {
        let root = fixture(&[IB_ACTIVE, ("opt/mellanox/hcoll/lib/libhcoll.so.1", "")]);
        let kube = vec![("KUBERNETES_SERVICE_HOST", "10.0.0.1")];
        assert_eq!(
            one(&node_for_tests(&root, kube), Node::mpi).status,
            Status::Warn
        );
        let bare = one(&node_for_tests(&root, vec![]), Node::mpi);
        assert_eq!(bare.status, Status::Ok, "not in a container: {bare:?}");
    }
}
