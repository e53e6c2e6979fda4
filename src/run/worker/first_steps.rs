//! The steps before the communicator: the ranks' first meeting (launch), the device, and the
//! unique id rank 0 makes for the others.

use super::Run;
use crate::bootstrap::{self, Bootstrap};
use crate::error::{self, AtStage, Failure};
use crate::events;
use crate::ffi::cuda::{Device, Driver};
use crate::ffi::nccl::{self, Nccl};
use crate::stage::Stage;
use nccl_smoke_fault::{FaultSet, Kind, Where};

impl Run<'_> {
    /// MPI (or a world of one), the launcher cross-check, and the first MPI collective.
    pub(super) fn launch(&mut self) -> Result<Box<dyn Bootstrap>, Failure> {
        events::enter(Stage::Launch, self.who.rank);
        events::waiting("in MPI_Init (or the launcher's bootstrap)");
        let boot = bootstrap::init(self.plan.bootstrap, self.plan.deadline(Stage::Launch))
            .at(Stage::Launch, &self.who)?;
        if let Some(msg) =
            bootstrap::launcher::mismatch(boot.size(), bootstrap::launcher::from_env().as_ref())
        {
            return Err(Failure::new(Stage::Launch, &self.who, msg)
                .cause("nccl-smoke was built against one MPI and started by another's launcher")
                .hint("use the mpirun of the MPI nccl-smoke was built with (see `ldd nccl-smoke | grep mpi`), or rebuild against this one"));
        }
        self.who.rank = Some(boot.rank());
        events::enter(Stage::Launch, self.who.rank);
        events::step("before the first MPI collective: this rank never reached it");
        if self.plan.libs.sim
            && let Err(f) = self.simulated_launch_fault()
        {
            // Leave MPI initialised: finalising would wait for the ranks in the barrier, and
            // this rank's failure would read as a hang.
            std::mem::forget(boot);
            return Err(f);
        }
        events::waiting(
            "waiting in the first MPI collective (barrier) for ranks that never arrived",
        );
        boot.barrier();
        crate::run::worker_line::share_status_address(boot.as_ref());
        Ok(boot)
    }

    /// The simulation's `launch` fault: a rank that never reaches the first MPI collective.
    pub(super) fn simulated_launch_fault(&self) -> Result<(), Failure> {
        let faults = FaultSet::from_env().at(Stage::Launch, &self.who)?;
        match faults.find(Where::Launch, self.who.rank).map(|f| f.kind) {
            Some(Kind::Hang) => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Some(Kind::Crash) => std::process::abort(),
            Some(Kind::Error) => Err(Failure::new(
                Stage::Launch,
                &self.who,
                "simulated launch failure (NCCL_SMOKE_SIM_FAULT)",
            )),
            _ => Ok(()),
        }
    }

    pub(super) fn open_device(&self, driver: &Driver, local_rank: u32) -> Result<Device, Failure> {
        let count = driver.device_count().at(Stage::Device, &self.who)?;
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_else(|_| "(unset)".into());
        if count <= 0 {
            return Err(
                Failure::new(Stage::Device, &self.who, "the driver reports 0 devices")
                    .cause(format!(
                        "no GPU visible to this process (CUDA_VISIBLE_DEVICES={visible})"
                    ))
                    .hint("check CUDA_VISIBLE_DEVICES and the GPUs given to the container"),
            );
        }
        let ordinal = self
            .plan
            .device
            .unwrap_or((local_rank % count as u32) as i32);
        if ordinal < 0 || ordinal >= count {
            return Err(Failure::new(
                Stage::Device,
                &self.who,
                format!("device {ordinal} does not exist: {count} visible (CUDA_VISIBLE_DEVICES={visible})"),
            )
            .hint("--device must be below the number of visible devices"));
        }
        Device::open(ordinal).map_err(|e| {
            Failure::new(Stage::Device, &self.who, &e)
                .cause(format!("device {ordinal} of {count} could not be opened (CUDA_VISIBLE_DEVICES={visible})"))
                .hint("check nvidia-smi for a GPU in a bad state (Xid errors in dmesg) or in exclusive-process mode")
        })
    }

    /// Rank 0 makes the id and broadcasts it with a status byte, so that when it cannot, the
    /// other ranks say so instead of waiting for an id that never comes.
    pub(super) fn unique_id(
        &self,
        boot: &dyn Bootstrap,
        nccl: &Nccl,
    ) -> Result<nccl::UniqueId, Failure> {
        let mut msg = vec![0u8; 1 + nccl::NCCL_UNIQUE_ID_BYTES as usize];
        let mine = if boot.rank() == 0 {
            let r = nccl.get_unique_id();
            if let Ok(id) = &r {
                msg[0] = 1;
                msg[1..].copy_from_slice(id);
            }
            Some(r)
        } else {
            None
        };
        boot.broadcast(&mut msg);
        match mine {
            Some(Err(e)) => Err(self.unique_id_failure(&e)),
            _ if msg[0] != 1 => Err(Failure::new(
                Stage::UniqueId,
                &self.who,
                "rank 0 could not create the NCCL unique id (see rank 0's verdict)",
            )
            .kind(error::Kind::PeerGone)),
            _ => {
                let mut id = [0u8; nccl::NCCL_UNIQUE_ID_BYTES as usize];
                id.copy_from_slice(&msg[1..]);
                Ok(id)
            }
        }
    }
}
