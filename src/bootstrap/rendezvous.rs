//! Where rank 0 listens for the TCP rendezvous: `NCCL_SMOKE_BOOTSTRAP=host:port` when set,
//! else `MASTER_ADDR` and `MASTER_PORT`, else what the launcher's own variables imply.

/// `host:port` where rank 0 listens (set by `nccl-smoke launch`, or by hand).
pub const ADDR_ENV: &str = "NCCL_SMOKE_BOOTSTRAP";

/// What a family's variables imply about the address when nothing explicit is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Default {
    /// Nothing: the address must be given.
    Explicit,
    /// Every rank on one host (`local_size` equals the world's size): loopback, on a port
    /// derived from the first job id variable set.
    LocalJob {
        local_size: &'static str,
        job_ids: &'static [&'static str],
    },
    /// The step's first node (`SLURM_STEP_NODELIST`), on the first port Slurm reserved for the
    /// step (`SLURM_STEP_RESV_PORTS`, with `srun --resv-ports`) or one derived from
    /// `SLURM_JOB_ID` and `SLURM_STEP_ID`.
    SlurmStep,
}

/// The first port a derived rendezvous port may take; derived ports stay below 30000, under
/// Linux's default ephemeral range (32768 and up), so they do not meet outgoing connections'.
pub const DERIVED_PORT_BASE: u16 = 20000;
const DERIVED_PORT_SPAN: u32 = 10000;

/// A port derived from a job's identity, the same on every rank of that job (FNV-1a).
pub fn derived_port(job: &str) -> u16 {
    let h = job.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    });
    DERIVED_PORT_BASE + (h % DERIVED_PORT_SPAN) as u16
}

/// The first host of a Slurm host list (`gpu[01-04,09],login1` → `gpu01`): the first entry,
/// each bracket replaced by its first number, zero padding kept.
pub fn first_host(list: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = list.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            ',' => break,
            '[' => {
                let inner: String = chars.by_ref().take_while(|&c| c != ']').collect();
                let first = inner.split([',', '-']).next()?.trim();
                if first.is_empty() {
                    return None;
                }
                out.push_str(first);
            }
            c => out.push(c),
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The launcher family asking for the address: its label, its size variable and what its
/// variables imply.
#[derive(Debug, Clone, Copy)]
pub struct Asking<'a> {
    pub label: &'a str,
    pub size: &'a str,
    pub default: Default,
}

/// `host:port` for a family, and the variables it came from.
pub fn address(
    f: Asking<'_>,
    get: &impl Fn(&str) -> Option<String>,
) -> Result<(String, String), String> {
    let explicit = ADDR_ENV;
    if let Some(a) = get(explicit) {
        return Ok((a, explicit.to_string()));
    }
    match (get("MASTER_ADDR"), get("MASTER_PORT")) {
        (Some(a), Some(p)) => {
            let port: u16 = p
                .trim()
                .parse()
                .map_err(|_| format!("MASTER_PORT='{p}' is not a port number"))?;
            return Ok((
                format!("{}:{port}", a.trim()),
                "MASTER_ADDR, MASTER_PORT".into(),
            ));
        }
        (Some(_), None) => return Err("MASTER_ADDR is set but MASTER_PORT is not".into()),
        (None, Some(_)) => return Err("MASTER_PORT is set but MASTER_ADDR is not".into()),
        (None, None) => {}
    }
    let missing = || {
        format!(
            "{}: no rendezvous address: set MASTER_ADDR and MASTER_PORT (rank 0's host and a \
             free port), or {explicit}=host:port",
            f.label
        )
    };
    match f.default {
        Default::Explicit => Err(missing()),
        Default::LocalJob {
            local_size,
            job_ids,
        } => {
            let one_host = get(local_size).is_some() && get(local_size) == get(f.size);
            let job = job_ids.iter().find_map(|k| get(k).map(|v| (k, v)));
            match (one_host, job) {
                (true, Some((k, v))) => Ok((
                    format!("127.0.0.1:{}", derived_port(&v)),
                    format!("every rank on this host ({local_size}); port from {k}"),
                )),
                _ => Err(format!(
                    "{} (ranks on several hosts, or no job id)",
                    missing()
                )),
            }
        }
        Default::SlurmStep => {
            let nodes = get("SLURM_STEP_NODELIST").or_else(|| get("SLURM_JOB_NODELIST"));
            let host = nodes.as_deref().and_then(first_host).ok_or_else(|| {
                format!(
                    "{} (SLURM_STEP_NODELIST is not set or not a host list)",
                    missing()
                )
            })?;
            let reserved = get("SLURM_STEP_RESV_PORTS").and_then(|r| {
                r.split([',', '-'])
                    .next()
                    .and_then(|p| p.trim().parse::<u16>().ok())
            });
            if let Some(port) = reserved {
                return Ok((
                    format!("{host}:{port}"),
                    "SLURM_STEP_NODELIST, SLURM_STEP_RESV_PORTS".into(),
                ));
            }
            let job = get("SLURM_JOB_ID")
                .ok_or_else(|| format!("{} (SLURM_JOB_ID is not set)", missing()))?;
            let step = get("SLURM_STEP_ID").unwrap_or_default();
            Ok((
                format!("{host}:{}", derived_port(&format!("{job}.{step}"))),
                "SLURM_STEP_NODELIST; port from SLURM_JOB_ID, SLURM_STEP_ID".into(),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::launcher::tests::env;
    use crate::bootstrap::launcher::{FAMILIES, Family};

    fn family(prefix: &str) -> &'static Family {
        FAMILIES
            .iter()
            .find(|f| f.label.starts_with(prefix))
            .unwrap()
    }

    #[test]
    fn slurm_host_lists_give_their_first_host() {
        assert_eq!(first_host("gpu[01-04,09],login1").as_deref(), Some("gpu01"));
        assert_eq!(first_host("node7").as_deref(), Some("node7"));
        assert_eq!(first_host("a,b").as_deref(), Some("a"));
        assert_eq!(
            first_host("rack[2-3]-n[008-010]").as_deref(),
            Some("rack2-n008")
        );
        assert_eq!(first_host(""), None);
        assert_eq!(first_host("n[]"), None);
    }

    #[test]
    fn slurm_rendezvous_is_the_steps_first_node() {
        let slurm = family("Slurm");
        let get = env(&[
            ("SLURM_STEP_NODELIST", "gpu[03-04]"),
            ("SLURM_JOB_ID", "41"),
            ("SLURM_STEP_ID", "0"),
        ]);
        let (a, from) = address(slurm.asking(), &get).unwrap();
        assert_eq!(a, format!("gpu03:{}", derived_port("41.0")));
        assert!(from.contains("SLURM_JOB_ID"), "{from}");
        let get = env(&[
            ("SLURM_STEP_NODELIST", "gpu[03-04]"),
            ("SLURM_STEP_RESV_PORTS", "12000-12003"),
        ]);
        assert_eq!(address(slurm.asking(), &get).unwrap().0, "gpu03:12000");
        // The explicit variables win over what Slurm implies.
        let get = env(&[
            ("SLURM_STEP_NODELIST", "gpu[03-04]"),
            ("MASTER_ADDR", "10.1.1.1"),
            ("MASTER_PORT", "29500"),
        ]);
        assert_eq!(address(slurm.asking(), &get).unwrap().0, "10.1.1.1:29500");
    }

    #[test]
    fn derived_ports_are_stable_and_below_the_ephemeral_range() {
        assert_eq!(derived_port("41.0"), derived_port("41.0"));
        assert_ne!(derived_port("41.0"), derived_port("41.1"));
        for j in 0..1000 {
            let p = derived_port(&j.to_string());
            assert!((20000..30000).contains(&p), "{p}");
        }
    }

    #[test]
    fn mpirun_ranks_on_one_host_meet_on_loopback() {
        let ompi = family("Open MPI");
        let get = env(&[
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("OMPI_MCA_ess_base_jobid", "123"),
        ]);
        assert_eq!(
            address(ompi.asking(), &get).unwrap().0,
            format!("127.0.0.1:{}", derived_port("123"))
        );
        let get = env(&[
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
            ("OMPI_MCA_ess_base_jobid", "123"),
        ]);
        let e = address(ompi.asking(), &get).unwrap_err();
        assert!(e.contains("MASTER_ADDR and MASTER_PORT"), "{e}");
    }
}
