//! `--backend control-plane`: the real libnccl on nccl-smoke's stand-in CUDA driver and NVML.
//! The walk is the ordinary one up to the end of connect; then, instead of the sweep, every
//! rank reads the connections its NCCL logged, rank 0 gathers them, every rank aborts its
//! communicator (nothing to finalize: no kernel ran), and
//! rank 0 says `CONTROL PLANE OK` with what was not done. Never a pass.

use super::Run;
use crate::bootstrap::{self, Bootstrap};
use crate::comm::Communicator;
use crate::comm::Poll;
use crate::error::Failure;
use crate::ffi::nccl::Nccl;
use crate::patterns::Pattern;
use crate::report::control_plane::{self, ControlPlane, Link};
use crate::report::fingerprint::NcclInfo;
use crate::report::results::Status;
use crate::stage::{Stage, exit};

/// The oldest NCCL this backend serves: the stand-in driver was shown to host the
/// `nvidia-nccl-cu12` wheels 2.19.3 to 2.32.3 (CUDA runtimes 12.2 to 12.9).
pub const OLDEST: (i32, &str) = (21900, "2.19");

/// Why a libnccl of `version_code` is refused by this backend, naming the versions it serves;
/// `None` when it is served.
fn too_old(version_code: i32, version: &str, path: &str) -> Option<String> {
    (version_code < OLDEST.0).then(|| {
        format!(
            "--backend control-plane supports NCCL {} and later (shown with 2.19.3, 2.23.4, \
             2.28.9 and 2.32.3); {path} is NCCL {version}",
            OLDEST.1
        )
    })
}

impl Run<'_> {
    /// At nccl-load: the library must be the real libnccl, 2.19 or later.
    pub(super) fn control_plane_nccl(&self, nccl: &Nccl) -> Result<(), Failure> {
        let path = NcclInfo::from(nccl).path;
        if let Some(marker) = &nccl.simulated {
            return Err(Failure::new(
                Stage::NcclLoad,
                &self.who,
                format!(
                    "--backend control-plane needs the real libnccl, but {path} is nccl-smoke's \
                     simulation ({marker})"
                ),
            )
            .hint(
                "point --nccl-lib at a real libnccl.so.2 (e.g. the nvidia-nccl-cu12 wheel's \
                 nvidia/nccl/lib/libnccl.so.2), or use --backend sim",
            ));
        }
        if let Some(why) = too_old(nccl.version_code, &nccl.version(), &path) {
            return Err(Failure::new(Stage::NcclLoad, &self.who, why)
                .hint("use a newer libnccl (pip install nvidia-nccl-cu12) with --nccl-lib"));
        }
        Ok(())
    }

    /// After connect: the transports NCCL chose, ncclCommAbort, and rank 0's verdict.
    pub(super) fn control_plane_end(
        &mut self,
        comm: Communicator,
        boot: &dyn Bootstrap,
        nccl: &Nccl,
        selected: &[&dyn Pattern],
    ) -> Result<u8, Failure> {
        let rank = boot.rank();
        let mine: Vec<Link> = self
            .nccl_log_all(|l| l.contains(" NCCL INFO Channel ") && l.contains(" via "))
            .iter()
            .filter_map(|l| control_plane::parse_line(rank, l))
            .collect();
        crate::events::waiting("gathering every rank's connections (NCCL's log lines)");
        let all = bootstrap::gather_json(boot, &mine)
            .map_err(|e| self.gather_failure(Stage::Connect, e.rank, e.to_string()))?;

        // Torn down with ncclCommAbort: no kernel ran, so the network proxies' work for the
        // first collectives never drains, and ncclCommFinalize would wait for it forever.
        // No rank aborts before every rank is connected and idle: the gather above lets a
        // rank on as soon as it has sent, and its abort closes the sockets a peer on another
        // host may still be connecting through, or polling for errors on (seen across two
        // hosts with 2.19.3: 'Connection closed by remote peer' on the ranks still in connect,
        // then on those still waiting idle before their own abort).
        self.enter(Stage::Finalize);
        let deadline = self.waiting_deadline(Stage::Finalize);
        comm.wait_idle(deadline, "work queued before ncclCommAbort", Poll::Relaxed)
            .map_err(|e| self.comm_failure(Stage::Finalize, e))?;
        crate::events::waiting("waiting for every rank to be idle before ncclCommAbort");
        boot.barrier();
        crate::events::step("in ncclCommAbort (the teardown of a run whose kernels never ran)");
        comm.abort_together()
            .map_err(|e| self.comm_failure(Stage::Finalize, e))?;
        self.leave(true);

        let Some(all) = all else {
            return Ok(exit::CONTROL_PLANE_OK);
        };
        let patterns = selected.iter().map(|p| p.name().to_string()).collect();
        let cp = ControlPlane::new(&nccl.version(), self.hosts, patterns, all);
        // Gathered on rank 0 alone.
        let console = self.console();
        console.job_lines(cp.lines());
        let label = self.backing.backend();
        let line = cp.verdict_line(&label);
        console.job(&line);
        if let Some(r) = self.results.as_mut() {
            r.control_plane = Some(cp);
        }
        self.save_end(Status::ControlPlaneOk, line, exit::CONTROL_PLANE_OK);
        Ok(exit::CONTROL_PLANE_OK)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nccl_older_than_2_19_is_refused_naming_the_versions_served() {
        let why = too_old(21805, "2.18.5", "/x/libnccl.so.2").unwrap();
        assert_eq!(
            why,
            "--backend control-plane supports NCCL 2.19 and later (shown with 2.19.3, 2.23.4, \
             2.28.9 and 2.32.3); /x/libnccl.so.2 is NCCL 2.18.5"
        );
        assert!(too_old(21903, "2.19.3", "p").is_none());
        assert!(too_old(23203, "2.32.3", "p").is_none());
    }
}
