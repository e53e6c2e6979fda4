//! What ran underneath a run: the node's libnccl and GPUs, nccl-smoke's CPU simulation of
//! both, or the real libnccl hosted by nccl-smoke's stand-in CUDA driver and NVML (simulated
//! GPUs: NCCL's own control plane runs, no kernel does). Every label a run prints or keeps
//! comes from here, so that no line can claim a GPU measurement that was not made.

/// Which parts of a run were real.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backing {
    /// The node's libnccl and CUDA driver (or not yet known otherwise).
    #[default]
    Real,
    /// nccl-smoke's simulation of libnccl (and, with it, of the driver): CPU/TCP numbers.
    Simulated,
    /// The real libnccl (its version, once loaded) on nccl-smoke's stand-in CUDA driver and
    /// NVML: bootstrap, init, transports and proxies are NCCL's own; kernels are recorded,
    /// never run, so no data moves and no time is a GPU's.
    SimulatedGpus { nccl: Option<String> },
}

impl Backing {
    /// From what was loaded: whether libnccl and the driver are nccl-smoke's simulations.
    pub fn of(nccl_simulated: bool, driver_simulated: bool, nccl_version: Option<&str>) -> Self {
        match (nccl_simulated, driver_simulated) {
            (true, _) => Backing::Simulated,
            (false, true) => Backing::SimulatedGpus {
                nccl: nccl_version.map(str::to_string),
            },
            (false, false) => Backing::Real,
        }
    }

    /// Whether anything that ran is a simulation (the results file's `simulated`: such a run
    /// is never compared with a GPU run unless asked).
    pub fn simulated(&self) -> bool {
        *self != Backing::Real
    }

    /// The label every line of a simulated run carries; `None` for a real run.
    pub fn label(&self) -> Option<String> {
        match self {
            Backing::Real => None,
            Backing::Simulated => Some("SIMULATED".into()),
            Backing::SimulatedGpus { nccl: Some(v) } => {
                Some(format!("REAL NCCL {v} · SIMULATED GPUS"))
            }
            Backing::SimulatedGpus { nccl: None } => Some("REAL NCCL · SIMULATED GPUS".into()),
        }
    }

    /// `label` as a prefix: `"[LABEL] "`, or nothing for a real run.
    pub fn prefix(&self) -> String {
        self.label().map(|l| format!("[{l}] ")).unwrap_or_default()
    }

    /// The results file's `backend`: "nccl", "SIMULATED", or the label of the real libnccl
    /// on simulated GPUs.
    pub fn backend(&self) -> String {
        self.label().unwrap_or_else(|| "nccl".into())
    }

    /// The results file's `simulated_parts`: which libraries were nccl-smoke's stand-ins.
    pub fn parts(&self) -> Vec<String> {
        let parts: &[&str] = match self {
            Backing::Real => &[],
            Backing::Simulated => &["libnccl", "libcuda"],
            Backing::SimulatedGpus { .. } => &["libcuda", "libnvidia-ml", "gpus"],
        };
        parts.iter().map(|s| s.to_string()).collect()
    }

    /// The header line that says what the run's numbers are (none for a real run).
    pub fn header_line(&self) -> Option<String> {
        match self {
            Backing::Real => None,
            Backing::Simulated => Some(
                "# SIMULATED run: nccl-smoke's CPU stand-ins for libnccl and libcuda; bandwidth \
                 and latency below are CPU/TCP numbers, not GPU measurements"
                    .into(),
            ),
            Backing::SimulatedGpus { .. } => Some(format!(
                "# {} run: the real libnccl on nccl-smoke's stand-in CUDA driver and NVML; NCCL's \
                 bootstrap, init, transports and proxies are its own, but no kernel runs: no data \
                 moves, and no time or bandwidth below is a GPU measurement",
                self.backend()
            )),
        }
    }

    /// The note under each table of a simulated run.
    pub fn footer_note(&self) -> Option<String> {
        match self {
            Backing::Real => None,
            Backing::Simulated => {
                Some("# (SIMULATED: CPU/TCP figures, not a GPU measurement)".into())
            }
            Backing::SimulatedGpus { .. } => Some(format!(
                "# ({}: no kernel ran; these figures time the launch of nothing, not a GPU \
                 measurement)",
                self.backend()
            )),
        }
    }
}

/// A verdict line as the results file keeps it and rank 0 prints it after `VERDICT: `: on
/// simulated GPUs (a `backend` that names the real libnccl on them) with the label in front,
/// once; otherwise as it is (a SIMULATED run's failure lines carry their own label).
pub fn verdict_line(backend: &str, line: &str) -> String {
    if backend.starts_with("REAL NCCL") && !line.starts_with('[') {
        format!("[{backend}] {line}")
    } else {
        line.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_situations_three_labels() {
        let real = Backing::of(false, false, Some("2.32.3"));
        let sim = Backing::of(true, true, Some("2.21.5"));
        let gpus = Backing::of(false, true, Some("2.32.3"));
        assert_eq!(real.label(), None);
        assert_eq!(real.backend(), "nccl");
        assert!(!real.simulated() && real.header_line().is_none());
        assert_eq!(sim.backend(), "SIMULATED");
        assert_eq!(gpus.backend(), "REAL NCCL 2.32.3 · SIMULATED GPUS");
        assert_eq!(gpus.prefix(), "[REAL NCCL 2.32.3 · SIMULATED GPUS] ");
        assert!(gpus.simulated());
        assert!(gpus.parts().contains(&"libcuda".to_string()));
        assert!(!gpus.parts().contains(&"libnccl".to_string()));
        for line in [gpus.header_line().unwrap(), gpus.footer_note().unwrap()] {
            assert!(line.contains("REAL NCCL 2.32.3 · SIMULATED GPUS"), "{line}");
            assert!(line.contains("a GPU measurement"), "{line}");
        }
        let v = verdict_line(&gpus.backend(), "FAIL at init on rank 1 (host h): x");
        assert_eq!(
            v,
            "[REAL NCCL 2.32.3 · SIMULATED GPUS] FAIL at init on rank 1 (host h): x"
        );
        assert_eq!(verdict_line(&gpus.backend(), &v), v);
        assert_eq!(verdict_line("SIMULATED", "FAIL at x"), "FAIL at x");
        // A simulated libnccl makes the whole run a simulation, whatever the driver.
        assert_eq!(Backing::of(true, false, None), Backing::Simulated);
    }
}
