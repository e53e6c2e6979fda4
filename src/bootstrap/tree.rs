//! The stage barrier of the TCP bootstrap as a combining tree: arrivals climb a tree of
//! fan-out [`FANOUT`] to rank 0, the release comes back down it. The algorithm is the
//! combining-tree barrier of Yew, Tzeng and Lawrie ("Distributing Hot-Spot Addressing in
//! Large-Scale Multiprocessors", IEEE Trans. Computers C-36(4), 1987), as Mellor-Crummey and
//! Scott describe and measure it ("Algorithms for Scalable Synchronization on Shared-Memory
//! Multiprocessors", ACM TOCS 9(1), 1991); here its nodes are ranks and its edges TCP
//! connections.
//!
//! Why a tree and not the star the rendezvous builds: through the star, rank 0 reads one byte
//! from and writes one byte to every rank in turn, so a barrier costs it two system calls per
//! rank, in series. Through the tree no rank handles more than [`FANOUT`] children, and a
//! barrier's critical path is `2 × depth` hops, `depth` = ⌈log_FANOUT⌉ of the ranks below rank
//! 0 (4 at 1,024 ranks). A dissemination barrier (Hensgen, Finkel and Manber, 1988) needs one
//! hop fewer per level but `2 × ⌈log2 N⌉` connections per rank (20 at 1,024 ranks); the tree
//! needs at most `FANOUT + 1`, and descriptors are what a rank runs out of first (seed 003).
//!
//! Ranks are placed in heap order: rank `i`'s children are `FANOUT·i + 1 ..= FANOUT·i + FANOUT`.
//! Rank 0's children reach it through their star connections, so a job of at most
//! `FANOUT + 1` ranks is its own tree and opens nothing more.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::ops::Range;

/// Children per rank. 8: at 1,024 ranks the tree is 4 levels deep below rank 0; each parent
/// reads 8 one-byte arrivals, far less than one network hop costs.
pub const FANOUT: u32 = 8;

/// Rank `rank`'s parent in the tree (none for rank 0).
pub fn parent(rank: u32) -> Option<u32> {
    (rank > 0).then(|| (rank - 1) / FANOUT)
}

/// Rank `rank`'s children in a job of `size` ranks.
pub fn children(rank: u32, size: u32) -> Range<u32> {
    let first = (u64::from(rank) * u64::from(FANOUT) + 1).min(u64::from(size)) as u32;
    let end = (u64::from(first) + u64::from(FANOUT)).min(u64::from(size)) as u32;
    first..end
}

/// Hops from the deepest rank up to rank 0 in a job of `size` ranks.
pub fn depth(size: u32) -> u32 {
    let mut d = 0;
    let mut r = size.saturating_sub(1);
    while let Some(p) = parent(r) {
        d += 1;
        r = p;
    }
    d
}

/// Whether a job of `size` ranks needs connections beyond the star for its tree.
pub fn beyond_star(size: u32) -> bool {
    size > FANOUT + 1
}

/// One edge of the tree: a star connection (its index among this rank's star streams) or a
/// connection made for the tree.
pub(super) enum Edge {
    Star(usize),
    Own(TcpStream),
}

impl Edge {
    fn stream<'a>(&'a mut self, star: &'a mut [TcpStream]) -> &'a mut TcpStream {
        match self {
            Edge::Star(i) => &mut star[*i],
            Edge::Own(s) => s,
        }
    }
}

/// This rank's place in the tree.
pub(super) struct Tree {
    pub(super) parent: Option<Edge>,
    pub(super) children: Vec<Edge>,
}

impl Tree {
    /// The star as a tree of one level: rank 0 the parent of every rank, every edge a star
    /// connection. A job of at most `FANOUT + 1` ranks is its tree; a larger one runs it when
    /// its own tree could not be made.
    pub(super) fn star(rank: u32, size: u32) -> Tree {
        if rank == 0 {
            Tree {
                parent: None,
                children: (0..size.saturating_sub(1) as usize)
                    .map(Edge::Star)
                    .collect(),
            }
        } else {
            Tree {
                parent: Some(Edge::Star(0)),
                children: Vec::new(),
            }
        }
    }

    /// One barrier: every child's arrival, this rank's (and its subtree's) arrival told to the
    /// parent and its release awaited, then the release passed down.
    pub(super) fn barrier(&mut self, star: &mut [TcpStream]) -> io::Result<()> {
        let mut b = [0u8; 1];
        for c in &mut self.children {
            c.stream(star).read_exact(&mut b)?;
        }
        if let Some(p) = &mut self.parent {
            let s = p.stream(star);
            s.write_all(b"a")?;
            s.read_exact(&mut b)?;
        }
        for c in &mut self.children {
            c.stream(star).write_all(b"r")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_but_0_has_one_parent_that_lists_it() {
        for size in [1u32, 2, 9, 10, 73, 1024, 1025] {
            for r in 1..size {
                let p = parent(r).unwrap();
                assert!(p < r);
                assert!(children(p, size).contains(&r), "{r} of {size}");
            }
            let all: u32 = (0..size).map(|r| children(r, size).len() as u32).sum();
            assert_eq!(all, size.saturating_sub(1));
        }
        assert_eq!(parent(0), None);
    }

    #[test]
    fn depth_grows_as_the_log_of_the_ranks() {
        assert_eq!(depth(1), 0);
        assert_eq!(depth(9), 1);
        assert_eq!(depth(10), 2);
        assert_eq!(depth(128), 3);
        assert_eq!(depth(1024), 4);
        assert_eq!(depth(16384), 5);
        assert!(!beyond_star(9) && beyond_star(10));
        assert_eq!(children(u32::MAX, u32::MAX), u32::MAX..u32::MAX);
    }
}
