//! Ranks from MPI (rsmpi).

use super::Bootstrap;
use mpi::datatype::PartitionMut;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

pub struct Mpi {
    // Dropping the universe calls MPI_Finalize; it lives as long as this value.
    _universe: mpi::environment::Universe,
    world: SimpleCommunicator,
    local_rank: u32,
    local_size: u32,
}

impl Mpi {
    /// `MPI_Init`; `None` when MPI was already initialised or cannot start.
    pub fn init() -> Option<Mpi> {
        let universe = mpi::initialize()?;
        let world = universe.world();
        let node = world.split_shared(world.rank());
        let (local_rank, local_size) = (node.rank() as u32, node.size() as u32);
        Some(Mpi {
            _universe: universe,
            world,
            local_rank,
            local_size,
        })
    }
}

impl Bootstrap for Mpi {
    fn rank(&self) -> u32 {
        self.world.rank() as u32
    }
    fn size(&self) -> u32 {
        self.world.size() as u32
    }
    fn local_rank(&self) -> u32 {
        self.local_rank
    }
    fn local_size(&self) -> u32 {
        self.local_size
    }
    fn describe(&self) -> String {
        // The library's string carries its C terminator; keep the first line, printable only.
        mpi::environment::library_version()
            .map(|v| {
                v.lines()
                    .next()
                    .unwrap_or("MPI")
                    .chars()
                    .filter(|c| !c.is_control())
                    .collect::<String>()
                    .trim()
                    .to_string()
            })
            .unwrap_or_else(|_| "MPI".into())
    }
    fn info(&self) -> super::Info {
        super::Info {
            kind: "mpi".into(),
            source: match super::launcher::from_env() {
                Some(v) => format!("{}; launcher: {}", self.describe(), v.source),
                None => self.describe(),
            },
            rendezvous: None,
        }
    }
    fn barrier(&self) {
        self.world.barrier();
    }
    fn broadcast(&self, buf: &mut [u8]) {
        self.world.process_at_rank(0).broadcast_into(buf);
    }
    fn gather(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
        let root = self.world.process_at_rank(0);
        let len = bytes.len() as i32;
        if self.world.rank() != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(bytes);
            return None;
        }
        let mut lens = vec![0i32; self.world.size() as usize];
        root.gather_into_root(&len, &mut lens[..]);
        let displs: Vec<i32> = lens
            .iter()
            .scan(0, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let mut all = vec![0u8; lens.iter().map(|&l| l as usize).sum()];
        {
            let mut part = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            root.gather_varcount_into_root(bytes, &mut part);
        }
        Some(
            displs
                .iter()
                .zip(&lens)
                .map(|(&d, &l)| all[d as usize..(d + l) as usize].to_vec())
                .collect(),
        )
    }
}
