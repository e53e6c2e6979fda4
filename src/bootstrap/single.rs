//! A world of one rank: no launcher, nothing to exchange.

use super::Bootstrap;

pub struct Single;

impl Bootstrap for Single {
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn local_rank(&self) -> u32 {
        0
    }
    fn local_size(&self) -> u32 {
        1
    }
    fn describe(&self) -> String {
        "single process (no launcher)".into()
    }
    fn info(&self) -> super::Info {
        super::Info {
            kind: "single".into(),
            source: "no launcher variables".into(),
            rendezvous: None,
        }
    }
    fn barrier(&self) {}
    fn broadcast(&self, _buf: &mut [u8]) {}
    fn gather(&self, bytes: &[u8]) -> Option<Vec<Vec<u8>>> {
        Some(vec![bytes.to_vec()])
    }
}
