//! Framed messages over the TCP connection to one peer.
//!
//! A message is `[channel u32][length u64][bytes]`. Collectives and point-to-point traffic
//! travel on separate channels, so a group mixing both matches each kind in its own issue
//! order, as NCCL does; a message that arrives for the other channel waits in a stash.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::{Mutex, MutexGuard};

/// Channel of collective traffic.
pub const COLL: u32 = 0;
/// Channel of send/recv traffic.
pub const P2P: u32 = 1;
/// Channel of the library's own exchanges over a communicator (the split's allgather): NCCL
/// keeps them on its bootstrap sockets, apart from operation traffic.
pub const BOOT: u32 = 2;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Why a receive failed.
#[derive(Debug)]
pub enum RecvError {
    Io(io::Error),
    /// The peer sent more than the receive buffer holds.
    Truncated {
        got: u64,
        want: usize,
    },
}

impl From<io::Error> for RecvError {
    fn from(e: io::Error) -> Self {
        RecvError::Io(e)
    }
}

struct Reader {
    stream: TcpStream,
    stash: [VecDeque<Vec<u8>>; 3],
}

/// The connection to one peer: the read half and the write half are used by different threads.
pub struct Peer {
    pub host: String,
    pub addr: SocketAddrV4,
    pub dev: i32,
    reader: Mutex<Reader>,
    writer: Mutex<TcpStream>,
}

impl Peer {
    /// Wraps a connected stream to the peer on `host` whose bootstrap address is `addr` and
    /// whose device is `dev`.
    pub fn new(stream: TcpStream, host: String, addr: SocketAddrV4, dev: i32) -> io::Result<Peer> {
        let _ = stream.set_nodelay(true);
        let writer = stream.try_clone()?;
        Ok(Peer {
            host,
            addr,
            dev,
            reader: Mutex::new(Reader {
                stream,
                stash: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
            }),
            writer: Mutex::new(writer),
        })
    }

    /// Sends one message on `chan`.
    pub fn send(&self, chan: u32, data: &[u8]) -> io::Result<()> {
        let mut w = lock(&self.writer);
        let mut head = [0u8; 12];
        head[0..4].copy_from_slice(&chan.to_le_bytes());
        head[4..12].copy_from_slice(&(data.len() as u64).to_le_bytes());
        w.write_all(&head)?;
        w.write_all(data)
    }

    /// Receives the next message of `chan` into `out`; returns its length (at most
    /// `out.len()`: a shorter message fills the front, as a short NCCL send does).
    pub fn recv(&self, chan: u32, out: &mut [u8]) -> Result<usize, RecvError> {
        let mut r = lock(&self.reader);
        let slot = (chan as usize).min(2);
        if let Some(m) = r.stash[slot].pop_front() {
            return place(&m, out);
        }
        loop {
            let mut head = [0u8; 12];
            r.stream.read_exact(&mut head)?;
            let c = u32::from_le_bytes(head[0..4].try_into().unwrap_or_default());
            let len = u64::from_le_bytes(head[4..12].try_into().unwrap_or_default());
            if c == chan {
                if len > out.len() as u64 {
                    return Err(RecvError::Truncated {
                        got: len,
                        want: out.len(),
                    });
                }
                r.stream.read_exact(&mut out[..len as usize])?;
                return Ok(len as usize);
            }
            let len = usize::try_from(len)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "message too long"))?;
            let mut m = vec![0u8; len];
            r.stream.read_exact(&mut m)?;
            r.stash[(c as usize).min(2)].push_back(m);
        }
    }
}

fn place(m: &[u8], out: &mut [u8]) -> Result<usize, RecvError> {
    if m.len() > out.len() {
        return Err(RecvError::Truncated {
            got: m.len() as u64,
            want: out.len(),
        });
    }
    out[..m.len()].copy_from_slice(m);
    Ok(m.len())
}

pub fn write_u32(s: &mut impl Write, v: u32) -> io::Result<()> {
    s.write_all(&v.to_le_bytes())
}

pub fn read_u32(s: &mut impl Read) -> io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

pub fn write_u64(s: &mut impl Write, v: u64) -> io::Result<()> {
    s.write_all(&v.to_le_bytes())
}

pub fn read_u64(s: &mut impl Read) -> io::Result<u64> {
    let mut b = [0u8; 8];
    s.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

pub fn write_str(s: &mut impl Write, v: &str) -> io::Result<()> {
    write_u32(s, v.len() as u32)?;
    s.write_all(v.as_bytes())
}

pub fn read_str(s: &mut impl Read) -> io::Result<String> {
    let n = read_u32(s)? as usize;
    if n > 4096 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "bootstrap string too long",
        ));
    }
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(String::from_utf8_lossy(&b).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, TcpListener};

    fn pair() -> (Peer, Peer) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let addr = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 1);
        (
            Peer::new(a, "a".into(), addr, 0).unwrap(),
            Peer::new(b, "b".into(), addr, 0).unwrap(),
        )
    }

    #[test]
    fn channels_keep_their_own_order() {
        let (a, b) = pair();
        a.send(P2P, b"p1").unwrap();
        a.send(COLL, b"c1").unwrap();
        a.send(P2P, b"p2").unwrap();
        let mut buf = [0u8; 8];
        assert_eq!(b.recv(COLL, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"c1");
        assert_eq!(b.recv(P2P, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"p1");
        assert_eq!(b.recv(P2P, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], b"p2");
    }

    #[test]
    fn short_messages_fill_the_front_and_long_ones_are_refused() {
        let (a, b) = pair();
        a.send(P2P, b"abc").unwrap();
        a.send(P2P, b"toolong").unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(b.recv(P2P, &mut buf).unwrap(), 3);
        assert!(matches!(
            b.recv(P2P, &mut buf),
            Err(RecvError::Truncated { got: 7, want: 4 })
        ));
    }

    #[test]
    fn closed_peer_is_an_eof() {
        let (a, b) = pair();
        drop(a);
        let mut buf = [0u8; 4];
        match b.recv(COLL, &mut buf) {
            Err(RecvError::Io(e)) => assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn strings_and_integers_round_trip() {
        let mut v = Vec::new();
        write_u32(&mut v, 7).unwrap();
        write_u64(&mut v, u64::MAX).unwrap();
        write_str(&mut v, "host-1").unwrap();
        let mut r = &v[..];
        assert_eq!(read_u32(&mut r).unwrap(), 7);
        assert_eq!(read_u64(&mut r).unwrap(), u64::MAX);
        assert_eq!(read_str(&mut r).unwrap(), "host-1");
    }
}
