//! The bootstrap interface (chosen by NCCL's `NCCL_SOCKET_IFNAME` rules) and the 128-byte
//! unique id that carries the root's address.

use std::net::{Ipv4Addr, SocketAddrV4};

/// An interface's name and IPv4 address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub name: String,
    pub addr: Ipv4Addr,
    /// `IFF_RUNNING`: up and attached. NCCL only considers running interfaces.
    pub running: bool,
}

/// Every IPv4 address of this machine, in getifaddrs order.
pub fn interfaces() -> Vec<Iface> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: valid out-pointer; the list is freed with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr is a valid sockaddr.
            let family = i32::from(unsafe { (*ifa.ifa_addr).sa_family });
            if family == libc::AF_INET {
                // SAFETY: AF_INET means a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                // SAFETY: ifa_name is a NUL-terminated string.
                let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned();
                out.push(Iface {
                    name,
                    addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                    running: ifa.ifa_flags & libc::IFF_RUNNING as u32 != 0,
                });
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// NCCL's interface list syntax: `[^][=]name[:port],…`. `^` keeps the interfaces that match
/// none of the names, `=` wants exact names instead of prefixes. Only running interfaces
/// count; an interface name is taken once (its first address).
pub fn matching<'a>(ifaces: &'a [Iface], spec: &str) -> Vec<&'a Iface> {
    let (not, rest) = match spec.strip_prefix('^') {
        Some(r) => (true, r),
        None => (false, spec),
    };
    let (exact, rest) = match rest.strip_prefix('=') {
        Some(r) => (true, r),
        None => (false, rest),
    };
    let names: Vec<&str> = rest
        .split(',')
        .map(|item| item.split(':').next().unwrap_or(""))
        .filter(|n| !n.is_empty())
        .collect();
    let listed = |name: &str| {
        names.is_empty()
            || names.iter().any(|n| {
                if exact {
                    name == *n
                } else {
                    name.starts_with(n)
                }
            })
    };
    let mut out: Vec<&Iface> = Vec::new();
    for i in ifaces.iter().filter(|i| i.running) {
        if listed(&i.name) != not && !out.iter().any(|o| o.name == i.name) {
            out.push(i);
        }
    }
    out
}

/// The interface whose address goes into the unique id. With `NCCL_SOCKET_IFNAME` (when
/// longer than one character, as NCCL reads it) only what it names; otherwise InfiniBand
/// (`ib*`) first, then anything but docker, loopback and libvirt bridges, then docker,
/// loopback, libvirt, in that order.
pub fn choose(ifaces: &[Iface], spec: Option<&str>) -> Option<Iface> {
    if let Some(s) = spec.filter(|s| s.len() > 1) {
        return matching(ifaces, s).first().map(|i| (*i).clone());
    }
    ["ib", "^docker,lo,virbr", "docker", "lo", "virbr"]
        .iter()
        .find_map(|s| matching(ifaces, s).first().map(|i| (*i).clone()))
}

const MAGIC: &[u8; 4] = b"NSIM";
const FORMAT: u8 = 1;

/// Packs the root's address and a nonce into NCCL's 128-byte id.
pub fn encode_id(root: SocketAddrV4, nonce: u64) -> [u8; 128] {
    let mut id = [0u8; 128];
    id[0..4].copy_from_slice(MAGIC);
    id[4] = FORMAT;
    id[5..9].copy_from_slice(&root.ip().octets());
    id[9..11].copy_from_slice(&root.port().to_be_bytes());
    id[11..19].copy_from_slice(&nonce.to_le_bytes());
    id
}

/// The root's address and the nonce, or `None` when the bytes are not an id of this library.
pub fn decode_id(id: &[u8; 128]) -> Option<(SocketAddrV4, u64)> {
    if &id[0..4] != MAGIC || id[4] != FORMAT {
        return None;
    }
    let ip = Ipv4Addr::new(id[5], id[6], id[7], id[8]);
    let port = u16::from_be_bytes([id[9], id[10]]);
    let nonce = u64::from_le_bytes(id[11..19].try_into().ok()?);
    (port != 0).then_some((SocketAddrV4::new(ip, port), nonce))
}

/// 64 random bits (getrandom, else time, pid and a counter).
pub fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: a buffer of 8 bytes and its length.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == 8 {
        return u64::from_le_bytes(b);
    }
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    t ^ (u64::from(std::process::id()) << 32)
        ^ COUNTER
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifs(names: &[(&str, bool)]) -> Vec<Iface> {
        names
            .iter()
            .enumerate()
            .map(|(i, (n, running))| Iface {
                name: n.to_string(),
                addr: Ipv4Addr::new(10, 0, 0, i as u8),
                running: *running,
            })
            .collect()
    }

    fn pick(list: &[Iface], spec: Option<&str>) -> Option<String> {
        choose(list, spec).map(|i| i.name)
    }

    #[test]
    fn default_order_is_ib_then_others_then_docker_then_lo() {
        let all = ifs(&[
            ("lo", true),
            ("docker0", true),
            ("virbr0", true),
            ("eth0", true),
            ("ib0", true),
        ]);
        assert_eq!(pick(&all, None).as_deref(), Some("ib0"));
        assert_eq!(pick(&all[..4], None).as_deref(), Some("eth0"));
        assert_eq!(pick(&all[..3], None).as_deref(), Some("docker0"));
        assert_eq!(
            pick(&ifs(&[("virbr0", true), ("lo", true)]), None).as_deref(),
            Some("lo")
        );
        assert_eq!(
            pick(&ifs(&[("virbr0", true)]), None).as_deref(),
            Some("virbr0")
        );
        assert_eq!(pick(&[], None), None);
        // A one-character value is ignored, as NCCL ignores it.
        assert_eq!(pick(&all, Some("e")).as_deref(), Some("ib0"));
    }

    #[test]
    fn socket_ifname_rules() {
        let all = ifs(&[
            ("lo", true),
            ("docker0", true),
            ("eth0", true),
            ("eth1", true),
            ("ib0", true),
        ]);
        assert_eq!(pick(&all, Some("eth")).as_deref(), Some("eth0"));
        assert_eq!(pick(&all, Some("ib,eth")).as_deref(), Some("eth0")); // first in system order
        assert_eq!(pick(&all, Some("=eth")), None);
        assert_eq!(pick(&all, Some("=eth1")).as_deref(), Some("eth1"));
        assert_eq!(pick(&all, Some("^lo,docker")).as_deref(), Some("eth0"));
        assert_eq!(pick(&all, Some("^=eth0,lo")).as_deref(), Some("docker0"));
        assert_eq!(pick(&all, Some("^lo,docker,eth,ib")), None);
        assert_eq!(pick(&all, Some("eth1:1234")).as_deref(), Some("eth1"));
        assert_eq!(pick(&all, Some("nope")), None);
    }

    #[test]
    fn only_running_interfaces_and_each_name_once() {
        let mut list = ifs(&[("eth0", false), ("eth1", true)]);
        assert_eq!(pick(&list, Some("eth")).as_deref(), Some("eth1"));
        list.push(Iface {
            name: "eth1".into(),
            addr: Ipv4Addr::new(192, 168, 0, 1),
            running: true,
        });
        let m = matching(&list, "eth");
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].addr, Ipv4Addr::new(10, 0, 0, 1));
    }

    #[test]
    fn this_machine_has_some_interface() {
        assert!(choose(&interfaces(), None).is_some());
    }

    #[test]
    fn unique_id_round_trips() {
        for (ip, port, nonce) in [
            (Ipv4Addr::new(192, 168, 7, 9), 43211, 0xdead_beef_1234),
            (Ipv4Addr::LOCALHOST, 1, 0),
            (Ipv4Addr::new(255, 255, 255, 255), 65535, u64::MAX),
        ] {
            let a = SocketAddrV4::new(ip, port);
            let id = encode_id(a, nonce);
            assert_eq!(decode_id(&id), Some((a, nonce)));
            assert!(id[19..].iter().all(|&b| b == 0));
        }
        assert_eq!(decode_id(&[0u8; 128]), None);
        let mut id = encode_id(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5), 1);
        id[4] = 9;
        assert_eq!(decode_id(&id), None);
        assert_ne!(random_u64(), random_u64());
    }
}
