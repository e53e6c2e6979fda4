//! Environment of the simulated driver, as pure functions of the values read (so that tests,
//! which share one process environment, never have to set variables).

pub const GPUS_ENV: &str = "NCCL_SMOKE_SIM_GPUS";
pub const MEM_ENV: &str = "NCCL_SMOKE_SIM_MEM_GIB";
pub const VERSION_ENV: &str = "NCCL_SMOKE_SIM_DRIVER_VERSION";
pub const VISIBLE_ENV: &str = "CUDA_VISIBLE_DEVICES";
/// The compute capability every device reports, `MAJOR.MINOR` (default 9.0, an H100's).
pub const COMPUTE_CAP_ENV: &str = "NCCL_SMOKE_SIM_COMPUTE_CAP";
/// Export tables to answer as if this driver lacked them (by name, comma-separated): how the
/// tests act out a CUDA runtime newer than the simulation.
pub const HIDE_TABLES_ENV: &str = "NCCL_SMOKE_SIM_CUDA_HIDE_TABLES";

pub const DEFAULT_GPUS: u32 = 8;
pub const DEFAULT_MEM_GIB: f64 = 80.0;
pub const DEFAULT_DRIVER_VERSION: i32 = 12080;
/// More than any real node holds; keeps PCI bus ids and thread counts sane.
pub const MAX_GPUS: u32 = 256;

/// Reads a variable; a value that is not UTF-8 is kept (lossily) so that it fails to parse.
pub fn var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// `NCCL_SMOKE_SIM_GPUS`: physical devices on this host.
pub fn parse_gpus(v: Option<&str>) -> Result<u32, String> {
    let Some(v) = v else { return Ok(DEFAULT_GPUS) };
    match v.trim().parse::<u32>() {
        Ok(n) if n <= MAX_GPUS => Ok(n),
        _ => Err(format!(
            "{GPUS_ENV}='{v}': expected a device count from 0 to {MAX_GPUS}"
        )),
    }
}

/// `NCCL_SMOKE_SIM_MEM_GIB`: memory per device, in bytes.
pub fn parse_mem_bytes(v: Option<&str>) -> Result<u64, String> {
    let gib = match v {
        None => DEFAULT_MEM_GIB,
        Some(s) => match s.trim().parse::<f64>() {
            Ok(g) if g.is_finite() && g > 0.0 && g <= 1024.0 * 1024.0 => g,
            _ => {
                return Err(format!(
                    "{MEM_ENV}='{s}': expected a positive number of GiB"
                ));
            }
        },
    };
    Ok((gib * (1u64 << 30) as f64) as u64)
}

/// `NCCL_SMOKE_SIM_COMPUTE_CAP`: `MAJOR.MINOR` as `cuDeviceGetAttribute` reports it.
pub fn parse_compute_cap(v: Option<&str>) -> Result<(i32, i32), String> {
    let Some(v) = v else { return Ok((9, 0)) };
    v.trim()
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<i32>().ok()?, b.parse::<i32>().ok()?)))
        .filter(|&(a, b)| (1..=99).contains(&a) && (0..=9).contains(&b))
        .ok_or_else(|| format!("{COMPUTE_CAP_ENV}='{v}': expected MAJOR.MINOR such as 8.0"))
}

/// `NCCL_SMOKE_SIM_DRIVER_VERSION`: what `cuDriverGetVersion` reports (e.g. 12080).
pub fn parse_driver_version(v: Option<&str>) -> Result<i32, String> {
    let Some(v) = v else {
        return Ok(DEFAULT_DRIVER_VERSION);
    };
    match v.trim().parse::<i32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!(
            "{VERSION_ENV}='{v}': expected a version code such as 12080"
        )),
    }
}

/// This host's name, which seeds the device UUIDs.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer and its length are valid; gethostname NUL-terminates on success
    // (the last byte is kept zero in case it truncates).
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len() - 1) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn fnv1a(seed: u64, data: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Final avalanche (splitmix64) so that neighbouring indices differ in every byte.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// The UUID of physical device `index` on `host`: the same in every process of the host.
pub fn uuid_for(host: &str, index: u32) -> [u8; 16] {
    let mut data = host.as_bytes().to_vec();
    data.push(0);
    data.extend_from_slice(&index.to_le_bytes());
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&fnv1a(1, &data).to_be_bytes());
    out[8..].copy_from_slice(&fnv1a(2, &data).to_be_bytes());
    out
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi and CUDA_VISIBLE_DEVICES spell it.
pub fn format_uuid(b: &[u8; 16]) -> String {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// PCI location (domain, bus, device) of physical device `index`: the bus numbers of an
/// 8-GPU HGX board, repeated in the next PCI domain for every further eight.
pub fn pci_location(index: u32) -> (u32, u32, u32) {
    const BUSES: [u32; 8] = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb];
    (index / 8, BUSES[(index % 8) as usize], 0)
}

/// The string `cuDeviceGetPCIBusId` gives: `dddd:bb:dd.f`, upper-case hex.
pub fn bus_id_string(index: u32) -> String {
    let (domain, bus, dev) = pci_location(index);
    format!("{domain:04X}:{bus:02X}:{dev:02X}.0")
}

/// Applies `CUDA_VISIBLE_DEVICES` as the driver does: `None` (unset) shows every device; else a
/// comma list of ordinals or `GPU-<uuid prefix>` entries selects and orders physical devices.
/// The list ends at the first entry that is invalid, unknown, ambiguous or repeated; an empty
/// value shows none.
pub fn visible_devices(spec: Option<&str>, uuids: &[[u8; 16]]) -> Vec<u32> {
    let all = || (0..uuids.len() as u32).collect();
    let Some(spec) = spec else { return all() };
    let names: Vec<String> = uuids.iter().map(format_uuid).collect();
    let mut out: Vec<u32> = Vec::new();
    for entry in spec.split(',').map(str::trim) {
        let found = if !entry.is_empty() && entry.bytes().all(|b| b.is_ascii_digit()) {
            entry
                .parse::<u32>()
                .ok()
                .filter(|&i| (i as usize) < uuids.len())
        } else if entry.len() > 4 && entry[..4].eq_ignore_ascii_case("GPU-") {
            let want = entry.to_ascii_lowercase();
            let mut hits = names
                .iter()
                .enumerate()
                .filter(|(_, n)| n.to_ascii_lowercase().starts_with(&want));
            match (hits.next(), hits.next()) {
                (Some((i, _)), None) => Some(i as u32),
                _ => None,
            }
        } else {
            None
        };
        match found {
            Some(i) if !out.contains(&i) => out.push(i),
            _ => break,
        }
    }
    out
}

/// Everything the platform is built from.
#[derive(Debug, Clone)]
pub struct Config {
    pub gpus: Result<u32, String>,
    pub mem_bytes: Result<u64, String>,
    pub visible: Option<String>,
    pub hostname: String,
    pub compute_cap: Result<(i32, i32), String>,
}

impl Config {
    pub fn from_env() -> Config {
        Config {
            gpus: parse_gpus(var(GPUS_ENV).as_deref()),
            mem_bytes: parse_mem_bytes(var(MEM_ENV).as_deref()),
            visible: var(VISIBLE_ENV),
            hostname: hostname(),
            compute_cap: parse_compute_cap(var(COMPUTE_CAP_ENV).as_deref()),
        }
    }
}

/// `NCCL_SMOKE_SIM_CUDA_HIDE_TABLES`: the table names listed (empty entries ignored).
pub fn parse_hidden_tables(v: Option<&str>) -> Vec<String> {
    v.unwrap_or_default()
        .split(',')
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuids(n: u32) -> Vec<[u8; 16]> {
        (0..n).map(|i| uuid_for("node-a", i)).collect()
    }

    #[test]
    fn visible_devices_ordinals() {
        let u = uuids(8);
        assert_eq!(visible_devices(None, &u), (0..8).collect::<Vec<_>>());
        assert_eq!(visible_devices(Some(""), &u), Vec::<u32>::new());
        assert_eq!(visible_devices(Some("2,0"), &u), vec![2, 0]);
        assert_eq!(visible_devices(Some(" 3 , 1 "), &u), vec![3, 1]);
        assert_eq!(visible_devices(Some("7"), &u), vec![7]);
    }

    #[test]
    fn visible_devices_truncate_at_invalid_entry() {
        let u = uuids(4);
        assert_eq!(visible_devices(Some("0,9,1"), &u), vec![0]);
        assert_eq!(visible_devices(Some("1,abc,2"), &u), vec![1]);
        assert_eq!(visible_devices(Some("-1"), &u), Vec::<u32>::new());
        assert_eq!(visible_devices(Some("2,2,3"), &u), vec![2]);
        assert_eq!(visible_devices(Some("1,,2"), &u), vec![1]);
        assert_eq!(visible_devices(Some("1x"), &u), Vec::<u32>::new());
    }

    #[test]
    fn visible_devices_by_uuid_prefix() {
        let u = uuids(4);
        let full = format_uuid(&u[2]);
        assert_eq!(visible_devices(Some(&full), &u), vec![2]);
        let prefix = &full[..12];
        assert_eq!(
            visible_devices(Some(&format!("{prefix},0")), &u),
            vec![2, 0]
        );
        assert_eq!(
            visible_devices(
                Some(&full.to_ascii_uppercase().replacen("GPU-", "gpu-", 1)),
                &u
            ),
            vec![2]
        );
        // "GPU-" alone matches every device: ambiguous, so the list ends there.
        assert_eq!(visible_devices(Some("1,GPU-"), &u), vec![1]);
        assert_eq!(visible_devices(Some("GPU-zzzz"), &u), Vec::<u32>::new());
    }

    #[test]
    fn uuids_are_deterministic_and_distinct() {
        assert_eq!(uuid_for("h", 3), uuid_for("h", 3));
        assert_ne!(uuid_for("h", 3), uuid_for("h", 4));
        assert_ne!(uuid_for("h", 3), uuid_for("g", 3));
        let s = format_uuid(&uuid_for("h", 0));
        assert_eq!(s.len(), 40);
        assert!(s.starts_with("GPU-"));
    }

    #[test]
    fn bus_ids_look_real_and_differ() {
        assert_eq!(bus_id_string(0), "0000:18:00.0");
        assert_eq!(bus_id_string(1), "0000:2A:00.0");
        assert_eq!(bus_id_string(9), "0001:2A:00.0");
        let ids: std::collections::HashSet<_> = (0..MAX_GPUS).map(bus_id_string).collect();
        assert_eq!(ids.len(), MAX_GPUS as usize);
    }

    #[test]
    fn compute_capability_parses_as_major_dot_minor() {
        assert_eq!(parse_compute_cap(None), Ok((9, 0)));
        assert_eq!(parse_compute_cap(Some("8.0")), Ok((8, 0)));
        assert_eq!(parse_compute_cap(Some(" 10.3 ")), Ok((10, 3)));
        for bad in ["8", "8.x", "0.0", "9.10", ""] {
            assert!(parse_compute_cap(Some(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_values_parse() {
        assert_eq!(parse_gpus(None), Ok(8));
        assert_eq!(parse_gpus(Some("2")), Ok(2));
        assert_eq!(parse_gpus(Some("0")), Ok(0));
        assert!(parse_gpus(Some("two")).is_err());
        assert!(parse_gpus(Some("-1")).is_err());
        assert!(parse_gpus(Some("100000")).is_err());
        assert_eq!(parse_mem_bytes(None), Ok(80 << 30));
        assert_eq!(parse_mem_bytes(Some("0.5")), Ok(1 << 29));
        assert!(parse_mem_bytes(Some("0")).is_err());
        assert!(parse_mem_bytes(Some("lots")).is_err());
        assert_eq!(parse_driver_version(None), Ok(12080));
        assert_eq!(parse_driver_version(Some("12020")), Ok(12020));
        assert!(parse_driver_version(Some("x")).is_err());
    }
}
