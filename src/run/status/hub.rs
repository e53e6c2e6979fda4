//! Rank 0's status listener as one event loop (epoll through `mio`): every rank's connection is
//! one non-blocking descriptor, read when it has something, acknowledged at once when a rank's
//! end report arrives, and told `alive` every [`RANK0_SAYS_EVERY`]. A thread and three
//! descriptors per rank, as before, do not fit 16k ranks in one process (Linux's usual hard
//! limit on descriptors is in the tens of thousands).
//!
//! At 16k ranks beating every 100 ms, rank 0 hears 160k lines a second; the loop spends one
//! read per beat where it can (see [`read_from`]) and accepts new connections before reading,
//! so that a burst of ranks connecting at once does not overflow the listen queue.

use super::{JobView, RANK0_SAYS_EVERY, Report};
use crate::events::Event;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token};
use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::Instant;

const LISTENER: Token = Token(usize::MAX);

/// Longest line kept from a rank: a report is a few hundred bytes, a failure with its evidence
/// a few KiB; anything longer is not one of ours and is dropped.
const LONGEST_LINE: usize = 1 << 20;

/// One rank's connection.
struct Conn {
    stream: Arc<TcpStream>,
    /// The rank it speaks for, from its first report.
    rank: Option<u32>,
    /// Bytes of a line not yet complete.
    partial: Vec<u8>,
}

/// Serves `listener` for ever (rank 0's supervisor ends with its process).
pub(super) fn run(listener: TcpListener, view: Arc<Mutex<JobView>>) {
    let Ok(mut poll) = Poll::new() else { return };
    if listener.set_nonblocking(true).is_err()
        || poll
            .registry()
            .register(
                &mut SourceFd(&listener.as_raw_fd()),
                LISTENER,
                Interest::READABLE,
            )
            .is_err()
    {
        return;
    }
    let mut conns: HashMap<usize, Conn> = HashMap::new();
    let mut next_token = 0usize;
    let mut events = Events::with_capacity(1024);
    let mut next_alive = Instant::now() + RANK0_SAYS_EVERY;
    // Accepting stopped short (out of descriptors): try again at the next turn, since an
    // edge-triggered listener does not say so twice.
    let mut backlog = false;
    let mut chunk = vec![0u8; 64 * 1024];
    loop {
        let timeout = next_alive.saturating_duration_since(Instant::now());
        if let Err(e) = poll.poll(&mut events, Some(timeout))
            && e.kind() != ErrorKind::Interrupted
        {
            return;
        }
        // Connections first: the listen queue is bounded (`net.core.somaxconn`), and a
        // connection it drops costs its rank a second or more before its retry.
        if backlog || events.iter().any(|ev| ev.token() == LISTENER) {
            backlog = accept_all(&listener, &poll, &mut conns, &mut next_token, &view);
        }
        for ev in events.iter() {
            if ev.token() == LISTENER {
                continue;
            }
            let id = ev.token().0;
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            if read_from(c, &mut chunk, &view, ev.is_read_closed() || ev.is_error()) {
                continue;
            }
            // The line closed without an end report, or broke: the rank is lost (see
            // `JobView::lose`).
            let c = conns.remove(&id).expect("present");
            let _ = poll
                .registry()
                .deregister(&mut SourceFd(&c.stream.as_raw_fd()));
            if let Ok(mut v) = view.lock() {
                v.conns.retain(|s| !Arc::ptr_eq(s, &c.stream));
                if let Some(rank) = c.rank {
                    v.lose(rank);
                }
            }
        }
        if Instant::now() >= next_alive {
            next_alive = Instant::now() + RANK0_SAYS_EVERY;
            say_alive(&conns, &view);
        }
    }
}

/// Takes every pending connection. Returns whether some are left (out of descriptors).
fn accept_all(
    listener: &TcpListener,
    poll: &Poll,
    conns: &mut HashMap<usize, Conn>,
    next_token: &mut usize,
    view: &Arc<Mutex<JobView>>,
) -> bool {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                let id = *next_token;
                *next_token += 1;
                if poll
                    .registry()
                    .register(
                        &mut SourceFd(&stream.as_raw_fd()),
                        Token(id),
                        Interest::READABLE,
                    )
                    .is_err()
                {
                    continue;
                }
                let stream = Arc::new(stream);
                if let Ok(mut v) = view.lock() {
                    v.conns.push(stream.clone());
                }
                conns.insert(
                    id,
                    Conn {
                        stream,
                        rank: None,
                        partial: Vec::new(),
                    },
                );
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}

/// Reads what `c` has into `view`, and acknowledges an end report at once. Returns false once
/// the line has closed or broken.
///
/// A read that fills less than `chunk` has emptied the socket: new data raises a new edge, so
/// the read that would only say `WouldBlock` is skipped, unless the event said the peer closed
/// (`closing`), whose end of file must be read now or never.
fn read_from(c: &mut Conn, chunk: &mut [u8], view: &Arc<Mutex<JobView>>, closing: bool) -> bool {
    let mut open = true;
    loop {
        match (&*c.stream).read(chunk) {
            Ok(0) => {
                open = false;
                break;
            }
            Ok(n) => {
                c.partial.extend_from_slice(&chunk[..n]);
                if n < chunk.len() && !closing {
                    break;
                }
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => {
                open = false;
                break;
            }
        }
    }
    let Some(last) = memchr::memrchr(b'\n', &c.partial) else {
        if c.partial.len() > LONGEST_LINE {
            c.partial.clear();
        }
        return open;
    };
    let reports: Vec<Report> = c.partial[..last]
        .split(|b| *b == b'\n')
        // A status line is a liveness and stage report, never a measurement (those go through
        // `bootstrap::gather_json`, which drops nothing): a garbled line (a rank killed mid-write)
        // is skipped, and the rank's silence is then judged by the deadlines as any silence is.
        .filter_map(|line| serde_json::from_slice(line).ok())
        .collect();
    c.partial.drain(..=last);
    if let Some(r) = reports.last() {
        c.rank = Some(r.rank);
    }
    let ended = reports
        .iter()
        .any(|r| matches!(r.event, Event::Ended { .. }));
    if !reports.is_empty()
        && let Ok(mut v) = view.lock()
    {
        for r in reports {
            v.apply(r);
        }
    }
    if ended && open {
        let _ = (&*c.stream).write(b"ack\n");
    }
    open
}

/// Rank 0's word to every rank: `ack` once its end report is in, else `alive`; nothing once
/// rank 0 has said `bye`. A rank whose line is full (its supervisor is stopped) misses it.
fn say_alive(conns: &HashMap<usize, Conn>, view: &Arc<Mutex<JobView>>) {
    let Ok(v) = view.lock() else { return };
    if v.bye {
        return;
    }
    let acked: Vec<bool> = conns
        .values()
        .map(|c| {
            c.rank
                .and_then(|r| v.ranks.get(&r))
                .is_some_and(|rv| rv.ended.is_some())
        })
        .collect();
    drop(v);
    for (c, acked) in conns.values().zip(acked) {
        let word: &[u8] = if acked { b"ack\n" } else { b"alive\n" };
        let _ = (&*c.stream).write(word);
    }
}
