//! Rank 0's side of the rendezvous: every rank placed in its slot, or the job refused with
//! the reason on every rank that got that far; and the processes that come late.

use super::*;

/// Rank 0's side of the rendezvous.
pub(super) struct Rank0 {
    /// One slot per rank; slot 0 is rank 0 itself.
    slots: Vec<Option<(Hello, Option<TcpStream>)>>,
    /// Connected processes refused or not yet placed, to be told why the job ended.
    others: Vec<TcpStream>,
}

impl Rank0 {
    pub(super) fn assemble(
        world: &EnvWorld,
        me: &Hello,
        deadline: Duration,
    ) -> Result<(Vec<TcpStream>, u32), String> {
        let mut r = Rank0 {
            slots: (0..world.size).map(|_| None).collect(),
            others: Vec::new(),
        };
        r.slots[0] = Some((me.clone(), None));
        if world.size == 1 {
            return Ok((Vec::new(), 1));
        }
        let listener = listen(world)?;
        let start = Instant::now();
        while r.slots.iter().any(Option::is_none) {
            match listener.accept() {
                Ok((s, from)) => {
                    if let Err(why) = r.admit(s, from, me) {
                        return Err(r.refuse_all(why));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if start.elapsed() > deadline {
                        let missing = r.missing();
                        let (s, they, were) = match missing.len() {
                            1 => ("", "it", "was"),
                            _ => ("s", "they", "were"),
                        };
                        let why = format!(
                            "rank{s} {} never connected to rank 0 at {} ({}) within {}: {they} \
                             did not start, or {were} given a different address",
                            missing.join(", "),
                            world.address,
                            world.address_from,
                            secs(deadline),
                        );
                        return Err(r.refuse_all(why));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => return Err(r.refuse_all(format!("rendezvous accept: {e}"))),
            }
        }
        // Every slot is filled. Local ranks: a rank's index among the ranks on its host, in
        // rank order.
        let hellos: Vec<Hello> = r.slots.iter().flatten().map(|(h, _)| h.clone()).collect();
        let local_size = |host: &str| hellos.iter().filter(|h| h.host == host).count() as u32;
        let mut peers = Vec::new();
        for (rank, slot) in r.slots.iter_mut().enumerate() {
            let host = &hellos[rank].host;
            let local_rank = hellos[..rank].iter().filter(|h| h.host == *host).count() as u32;
            let local_size = local_size(host);
            if let Some((_, Some(mut s))) = slot.take() {
                let answer = Answer::Welcome {
                    local_rank,
                    local_size,
                };
                s.write_all(&answer.encode())
                    .map_err(|e| format!("rendezvous: rank {rank} went away: {e}"))?;
                let _ = s.set_read_timeout(None);
                let _ = s.set_nodelay(true);
                peers.push(s);
            }
        }
        let mine = local_size(&me.host);
        let taken: Vec<String> = hellos.iter().map(Hello::who).collect();
        std::thread::spawn(move || late_arrivals(listener, taken));
        Ok((peers, mine))
    }

    /// Reads a connected process's hello and places it, or says why the job cannot go on.
    fn admit(
        &mut self,
        mut s: TcpStream,
        from: std::net::SocketAddr,
        me: &Hello,
    ) -> Result<(), String> {
        let _ = s.set_nonblocking(false);
        let _ = s.set_read_timeout(Some(HELLO_WAIT));
        let hello = match Hello::read(&mut s) {
            Ok(h) => h,
            Err(e) => {
                // A port scan or a health check is no rank: note it and go on waiting.
                eprintln!(
                    "nccl-smoke: rendezvous: ignored a connection from {from} that is not an \
                     nccl-smoke rank ({e})"
                );
                return Ok(());
            }
        };
        if hello.size != me.size {
            self.others.push(s);
            return Err(format!(
                "rank {} ({}) was started with a world of {} ranks, rank 0 ({}) with {}: \
                 the ranks do not belong to one launch",
                hello.rank,
                hello.who(),
                hello.size,
                me.who(),
                me.size
            ));
        }
        match self.slots.get_mut(hello.rank as usize) {
            Some(slot @ None) => {
                *slot = Some((hello, Some(s)));
                Ok(())
            }
            Some(Some((first, _))) => {
                let why = format!(
                    "two processes claim rank {}: {} and {}",
                    hello.rank,
                    first.who(),
                    hello.who()
                );
                self.others.push(s);
                Err(why)
            }
            None => {
                self.others.push(s);
                Err(format!(
                    "{} claims rank {} of a world of {}",
                    hello.who(),
                    hello.rank,
                    me.size
                ))
            }
        }
    }

    fn missing(&self) -> Vec<String> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_none())
            .map(|(i, _)| i.to_string())
            .collect()
    }

    /// Tells every connected process why the job ends; returns the reason.
    fn refuse_all(&mut self, why: String) -> String {
        let answer = Answer::Refused(why.clone()).encode();
        let placed = self
            .slots
            .iter_mut()
            .filter_map(|s| s.as_mut().and_then(|(_, s)| s.take()));
        for mut s in placed.chain(self.others.drain(..)) {
            let _ = s.write_all(&answer);
        }
        why
    }
}

/// Rank 0 keeps its port for the whole job: a process that arrives after the job assembled (a
/// second process claiming a rank, a copy started twice) is refused with the holder named, and
/// rank 0 says so; a second job given the same port is refused when it tries to listen.
pub(super) fn late_arrivals(listener: TcpListener, taken: Vec<String>) {
    let _ = listener.set_nonblocking(false);
    for conn in listener.incoming() {
        let Ok(mut s) = conn else { continue };
        let _ = s.set_read_timeout(Some(HELLO_WAIT));
        let Ok(hello) = Hello::read(&mut s) else {
            continue;
        };
        let why = match taken.get(hello.rank as usize) {
            Some(holder) => format!(
                "two processes claim rank {}: {holder} (in the job, which had assembled) and {}",
                hello.rank,
                hello.who()
            ),
            None => format!(
                "{} claims rank {} of a world of {}",
                hello.who(),
                hello.rank,
                taken.len()
            ),
        };
        eprintln!("nccl-smoke: rendezvous: refused a late process: {why}");
        let why = format!("this process came after the job had assembled: {why}");
        let _ = s.write_all(&Answer::Refused(why).encode());
    }
}
