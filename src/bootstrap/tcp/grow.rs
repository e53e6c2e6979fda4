//! The barrier tree's connections, grown over the star the rendezvous made (see
//! [`super::super::tree`]), or left for the star when any rank cannot reach its parent.

use super::*;

impl Tcp {
    /// [`Tcp::grow_tree`], with the address a rank advertises passed through `advertise` (a
    /// test makes one unreachable).
    pub(super) fn grow_tree_advertising(
        &mut self,
        wait: Duration,
        advertise: impl Fn(SocketAddr) -> SocketAddr,
    ) {
        let (rank, size) = (self.rank, self.size);
        if !tree::beyond_star(size) {
            return;
        }
        let start = Instant::now();
        let peers = self.peers.get_mut().unwrap_or_else(|p| p.into_inner());
        // This rank's listener, when it has children below rank 0.
        let mut problem = String::new();
        let (listener, mine) = if rank != 0 && !tree::children(rank, size).is_empty() {
            let bound = peers[0]
                .local_addr()
                .and_then(|a| TcpListener::bind(SocketAddr::new(a.ip(), 0)))
                .and_then(|l| {
                    l.set_nonblocking(true)?;
                    let at = l.local_addr()?;
                    Ok((l, at))
                });
            match bound {
                Ok((l, at)) => (Some(l), advertise(at).to_string()),
                Err(e) => {
                    problem = format!("rank {rank} cannot listen for its children: {e}");
                    (None, String::new())
                }
            }
        } else {
            (None, String::new())
        };
        // Rank 0 learns every address and tells each rank its parent's.
        let parent_addr = if rank == 0 {
            let mut addrs = vec![String::new()];
            for p in peers.iter_mut() {
                addrs.push(io(get_str(p)));
            }
            for (i, p) in peers.iter_mut().enumerate() {
                let child = i as u32 + 1;
                let at = tree::parent(child)
                    .map(|q| addrs[q as usize].as_str())
                    .unwrap_or("");
                let mut b = Vec::new();
                put_str(&mut b, at);
                io(p.write_all(&b));
            }
            String::new()
        } else {
            let mut b = Vec::new();
            put_str(&mut b, &mine);
            io(peers[0].write_all(&b));
            io(get_str(&mut peers[0]))
        };
        let mut t = Tree {
            parent: None,
            children: Vec::new(),
        };
        // Up first, then down: a parent's listener exists before any address is told, so
        // every connect completes in its backlog whether or not the parent accepts yet.
        match tree::parent(rank) {
            Some(0) => t.parent = Some(Edge::Star(0)),
            Some(p) if problem.is_empty() => {
                match connect_parent(rank, p, &parent_addr, start, wait) {
                    Ok(s) => t.parent = Some(Edge::Own(s)),
                    Err(e) => problem = e,
                }
            }
            _ => {}
        }
        let kids = tree::children(rank, size);
        if rank == 0 {
            t.children = kids.map(|c| Edge::Star(c as usize - 1)).collect();
        } else if let Some(l) = listener {
            match accept_children(&l, rank, kids, start, wait) {
                Ok(c) => t.children = c,
                Err(e) if problem.is_empty() => problem = e,
                Err(_) => {}
            }
        }
        // The vote: the tree only when every rank has its edges.
        let agreed = if rank == 0 {
            let mut trouble = Vec::new();
            for p in peers.iter_mut() {
                let said = io(get_str(p));
                if !said.is_empty() {
                    trouble.push(said);
                }
            }
            let go = trouble.is_empty();
            for p in peers.iter_mut() {
                io(p.write_all(&[u8::from(go)]));
            }
            if !go {
                let shown: Vec<&str> = trouble.iter().take(3).map(String::as_str).collect();
                eprintln!(
                    "nccl-smoke: bootstrap: {} rank(s) could not set up the barrier's tree ({}{}); \
                     the stage barrier goes through rank 0, one rank at a time (slower at \
                     scale, as correct)",
                    trouble.len(),
                    shown.join("; "),
                    if trouble.len() > shown.len() {
                        "; …"
                    } else {
                        ""
                    }
                );
            }
            go
        } else {
            let mut b = Vec::new();
            put_str(&mut b, &problem);
            io(peers[0].write_all(&b));
            let mut go = [0u8; 1];
            io(peers[0].read_exact(&mut go));
            go[0] == 1
        };
        if agreed {
            *self.tree.get_mut().unwrap_or_else(|p| p.into_inner()) = t;
            self.grown = true;
        }
    }
}

/// A rank's tree connection to its parent `p` (not rank 0) at `addr`.
pub(super) fn connect_parent(
    rank: u32,
    p: u32,
    addr: &str,
    start: Instant,
    wait: Duration,
) -> Result<TcpStream, String> {
    let to: SocketAddr = addr
        .parse()
        .map_err(|_| format!("rank {rank}: its parent, rank {p}, has no address ('{addr}')"))?;
    let left = wait
        .saturating_sub(start.elapsed())
        .max(Duration::from_millis(100));
    let mut s = TcpStream::connect_timeout(&to, left)
        .map_err(|e| format!("rank {rank} cannot reach its parent, rank {p}, at {to}: {e}"))?;
    let mut hello = TREE_MAGIC.to_vec();
    hello.extend(rank.to_le_bytes());
    s.write_all(&hello)
        .map_err(|e| format!("rank {rank} lost its parent, rank {p}, at {to}: {e}"))?;
    let _ = s.set_nodelay(true);
    Ok(s)
}

/// A parent's side: its children's connections, in rank order, within the wait.
pub(super) fn accept_children(
    l: &TcpListener,
    rank: u32,
    kids: std::ops::Range<u32>,
    start: Instant,
    wait: Duration,
) -> Result<Vec<Edge>, String> {
    let mut got: Vec<Option<TcpStream>> = kids.clone().map(|_| None).collect();
    while got.iter().any(Option::is_none) {
        match l.accept() {
            Ok((mut s, _)) => {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let mut m = [0u8; 8];
                let Ok(()) = s.read_exact(&mut m) else {
                    continue;
                };
                let Ok(child) = get_u32(&mut s) else { continue };
                // Anything else that connects (a port scan, a stray rank) is not placed.
                if &m == TREE_MAGIC && kids.contains(&child) {
                    let _ = s.set_read_timeout(None);
                    let _ = s.set_nodelay(true);
                    got[(child - kids.start) as usize] = Some(s);
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if start.elapsed() > wait {
                    let missing: Vec<String> = kids
                        .clone()
                        .zip(&got)
                        .filter(|(_, g)| g.is_none())
                        .map(|(c, _)| c.to_string())
                        .collect();
                    return Err(format!(
                        "rank {rank} heard nothing within {} from its children {}",
                        secs(wait),
                        missing.join(", ")
                    ));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(format!("rank {rank}: accepting its children: {e}")),
        }
    }
    Ok(got.into_iter().flatten().map(Edge::Own).collect())
}
