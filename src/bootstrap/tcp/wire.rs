//! The rendezvous's messages: a rank's hello, rank 0's answer, and their parts.

use super::*;

/// What a rank says when it connects.
#[derive(Debug, Clone)]
pub(super) struct Hello {
    pub(super) rank: u32,
    pub(super) size: u32,
    pub(super) pid: u32,
    pub(super) host: String,
}

impl Hello {
    pub(super) fn who(&self) -> String {
        format!("pid {} on {}", self.pid, self.host)
    }
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend(self.rank.to_le_bytes());
        b.extend(self.size.to_le_bytes());
        b.extend(self.pid.to_le_bytes());
        put_str(&mut b, &self.host);
        b
    }
    pub(super) fn read(s: &mut TcpStream) -> std::io::Result<Hello> {
        expect_magic(s)?;
        Ok(Hello {
            rank: get_u32(s)?,
            size: get_u32(s)?,
            pid: get_u32(s)?,
            host: get_str(s)?,
        })
    }
}

/// Rank 0's answer: the local rank and size, or why the job was refused.
pub(super) enum Answer {
    Welcome { local_rank: u32, local_size: u32 },
    Refused(String),
}

impl Answer {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        match self {
            Answer::Welcome {
                local_rank,
                local_size,
            } => {
                b.push(0);
                b.extend(local_rank.to_le_bytes());
                b.extend(local_size.to_le_bytes());
            }
            Answer::Refused(why) => {
                b.push(1);
                put_str(&mut b, why);
            }
        }
        b
    }
    pub(super) fn read(s: &mut TcpStream) -> std::io::Result<Answer> {
        expect_magic(s)?;
        let mut kind = [0u8; 1];
        s.read_exact(&mut kind)?;
        Ok(match kind[0] {
            0 => Answer::Welcome {
                local_rank: get_u32(s)?,
                local_size: get_u32(s)?,
            },
            _ => Answer::Refused(get_str(s)?),
        })
    }
}

pub(super) fn put_str(b: &mut Vec<u8>, s: &str) {
    let s = &s.as_bytes()[..s.len().min(u16::MAX as usize)];
    b.extend((s.len() as u16).to_le_bytes());
    b.extend(s);
}

pub(super) fn get_u32(s: &mut TcpStream) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    s.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

pub(super) fn get_str(s: &mut TcpStream) -> std::io::Result<String> {
    let mut n = [0u8; 2];
    s.read_exact(&mut n)?;
    let mut v = vec![0u8; u16::from_le_bytes(n) as usize];
    s.read_exact(&mut v)?;
    Ok(String::from_utf8_lossy(&v).into_owned())
}

pub(super) fn expect_magic(s: &mut TcpStream) -> std::io::Result<()> {
    let mut m = [0u8; 8];
    s.read_exact(&mut m)?;
    if &m != MAGIC {
        return Err(std::io::Error::new(
            ErrorKind::InvalidData,
            "not nccl-smoke's rendezvous",
        ));
    }
    Ok(())
}

pub(super) fn secs(d: Duration) -> String {
    format!("{:.0} s", d.as_secs_f64())
}
