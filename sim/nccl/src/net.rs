//! Interfaces (NCCL_SOCKET_IFNAME rules), the unique id, and framed transfers.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};

/// An interface's name and IPv4 address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    pub name: String,
    pub addr: Ipv4Addr,
}

/// Every IPv4 interface of this machine (getifaddrs).
pub fn interfaces() -> Vec<Iface> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: valid out-pointer; freed with freeifaddrs below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr is a valid sockaddr; family checked before the cast.
            let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: AF_INET means sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                // SAFETY: ifa_name is a NUL-terminated string.
                let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned();
                out.push(Iface {
                    name,
                    addr: Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)),
                });
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// Chooses the interface as NCCL does: `NCCL_SOCKET_IFNAME` is a comma list of prefixes,
/// `^` excludes, `=` wants exact names. Unset: the first interface that is neither docker nor
/// loopback, else loopback.
pub fn choose(ifaces: &[Iface], spec: Option<&str>) -> Option<Iface> {
    match spec.map(str::trim).filter(|s| !s.is_empty()) {
        Some(spec) => {
            let (exclude, rest) = match spec.strip_prefix('^') {
                Some(r) => (true, r),
                None => (false, spec),
            };
            let (exact, rest) = match rest.strip_prefix('=') {
                Some(r) => (true, r),
                None => (false, rest),
            };
            let list: Vec<&str> = rest
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            ifaces
                .iter()
                .find(|i| {
                    list.iter().any(|w| {
                        if exact {
                            i.name == *w
                        } else {
                            i.name.starts_with(w)
                        }
                    }) != exclude
                })
                .cloned()
        }
        None => ifaces
            .iter()
            .find(|i| !i.name.starts_with("docker") && !i.name.starts_with("lo"))
            .or_else(|| ifaces.iter().find(|i| i.name.starts_with("lo")))
            .cloned(),
    }
}

const MAGIC: &[u8; 4] = b"NSIM";

/// Packs the root's address and a nonce into NCCL's 128-byte id.
pub fn encode_id(addr: SocketAddrV4, nonce: u64) -> [u8; 128] {
    let mut id = [0u8; 128];
    id[0..4].copy_from_slice(MAGIC);
    id[4..8].copy_from_slice(&addr.ip().octets());
    id[8..10].copy_from_slice(&addr.port().to_be_bytes());
    id[10..18].copy_from_slice(&nonce.to_le_bytes());
    id
}

/// The root's address and nonce, or `None` when the bytes are not a simulation id.
pub fn decode_id(id: &[u8; 128]) -> Option<(SocketAddrV4, u64)> {
    if &id[0..4] != MAGIC {
        return None;
    }
    let ip = Ipv4Addr::new(id[4], id[5], id[6], id[7]);
    let port = u16::from_be_bytes([id[8], id[9]]);
    let nonce = u64::from_le_bytes(id[10..18].try_into().ok()?);
    Some((SocketAddrV4::new(ip, port), nonce))
}

pub fn write_u32(s: &mut impl Write, v: u32) -> std::io::Result<()> {
    s.write_all(&v.to_le_bytes())
}

pub fn read_u32(s: &mut impl Read) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

pub fn write_str(s: &mut impl Write, v: &str) -> std::io::Result<()> {
    write_u32(s, v.len() as u32)?;
    s.write_all(v.as_bytes())
}

pub fn read_str(s: &mut impl Read) -> std::io::Result<String> {
    let n = read_u32(s)? as usize;
    if n > 4096 {
        return Err(std::io::Error::other("bootstrap string too long"));
    }
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(String::from_utf8_lossy(&b).into_owned())
}

/// Sends one message: length, then bytes.
pub fn send_msg(s: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    s.write_all(&(data.len() as u64).to_le_bytes())?;
    s.write_all(data)
}

/// Receives one message of exactly `out.len()` bytes.
pub fn recv_msg(s: &mut TcpStream, out: &mut [u8]) -> std::io::Result<()> {
    let mut len = [0u8; 8];
    s.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len) as usize;
    if len != out.len() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "Message truncated : received {len} bytes instead of {}",
                out.len()
            ),
        ));
    }
    s.read_exact(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifs() -> Vec<Iface> {
        ["lo", "docker0", "eth0", "ib0"]
            .iter()
            .enumerate()
            .map(|(i, n)| Iface {
                name: n.to_string(),
                addr: Ipv4Addr::new(10, 0, 0, i as u8),
            })
            .collect()
    }

    #[test]
    fn ifname_rules_match_nccl() {
        assert_eq!(choose(&ifs(), None).unwrap().name, "eth0");
        assert_eq!(choose(&ifs(), Some("ib")).unwrap().name, "ib0");
        assert_eq!(choose(&ifs(), Some("=eth")), None);
        assert_eq!(choose(&ifs(), Some("=eth0")).unwrap().name, "eth0");
        assert_eq!(choose(&ifs(), Some("^lo,docker")).unwrap().name, "eth0");
        assert_eq!(choose(&ifs(), Some("nope")), None);
        let only_lo = vec![Iface {
            name: "lo".into(),
            addr: Ipv4Addr::LOCALHOST,
        }];
        assert_eq!(choose(&only_lo, None).unwrap().name, "lo");
    }

    #[test]
    fn unique_id_round_trips() {
        let a = SocketAddrV4::new(Ipv4Addr::new(192, 168, 7, 9), 43211);
        let id = encode_id(a, 0xdead_beef_1234);
        assert_eq!(decode_id(&id), Some((a, 0xdead_beef_1234)));
        assert_eq!(decode_id(&[0u8; 128]), None);
    }
}
