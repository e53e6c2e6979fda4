//! NCCL's INFO lines and the traces of its error returns: version and communicator
//! membership, operation counters, the socket layer's retries and the callers of a failure
//! that printed no WARN of its own.

use super::*;

impl State {
    /// INFO lines: version, communicator membership, NCCL's own operation counter.
    pub(super) fn info(&mut self, line: &str) {
        if has!(line, " -> ") || has!(line, "retrying") || !self.retrying.is_empty() {
            self.trace_or_retry(line);
        }
        if has!(line, "Using network ") {
            self.network = network_of(line).or(self.network);
        }
        if has!(line, " via NET/Socket") {
            let (host, pid, _) = parse_prefix(line);
            self.socket_transport.insert((host, pid));
        }
        if has!(line, "NCCL version ") {
            self.version(line);
        } else if has!(line, " nranks ")
            && (has!(line, "Init COMPLETE") || has!(line, "Init START"))
        {
            let (host, pid, _) = parse_prefix(line);
            if let Some(pid) = pid
                && has!(line, "Init COMPLETE")
            {
                self.init_done.insert((host.clone(), pid));
            }
            if let (Some(pid), Some(rank)) = (pid, number_after(line, " rank ")) {
                let rank = rank as u32;
                self.ranks.entry((host.clone(), pid)).or_insert(rank);
                self.proc_mut(host, Some(pid), None);
            }
            if let Some(n) = number_after(line, " nranks ") {
                let n = n as u32;
                self.summary.nranks = Some(self.summary.nranks.map_or(n, |m| m.max(n)));
            }
        } else if has!(line, ": opCount ")
            && let Some(at) = line.find(": opCount ")
        {
            let hex = line[at + 10..].split_whitespace().next().unwrap_or("");
            if let Ok(count) = u64::from_str_radix(hex, 16) {
                // The same process prints most of these lines: find it by its prefix's text
                // before parsing the prefix.
                let word = line
                    .split_whitespace()
                    .find(|w| w.matches(':').count() >= 2);
                let key = word.and_then(|w| w.rsplit_once(':')).map(|(hp, _)| hp);
                let idx = match key.and_then(|k| self.by_prefix.get(k)) {
                    Some(&i) => i,
                    None => {
                        let (host, pid, _) = parse_prefix(line);
                        self.proc_mut(host.clone(), pid, None);
                        let i = self.proc_index[&(host, pid, None)];
                        if let Some(k) = key {
                            self.by_prefix.insert(k.to_string(), i);
                        }
                        i
                    }
                };
                let p = &mut self.procs[idx];
                p.nccl_op_count = Some(count);
                let op = line[..at].rsplit(' ').next().unwrap_or("");
                if !op.is_empty() && p.op.as_deref() != Some(op) {
                    p.op = Some(op.to_string());
                }
            }
        }
    }

    /// NCCL's error-return traces and connect retries (INFO lines that show a failure in
    /// progress when no WARN line says it).
    pub(super) fn trace_or_retry(&mut self, line: &str) {
        let retry = has!(line, "connect returned") && has!(line, "retrying");
        let code = if retry {
            None
        } else {
            classify::return_trace(line).map(|(_, code)| code)
        };
        if !retry && code.is_none() && self.retrying.is_empty() {
            return;
        }
        let (host, pid, _) = parse_prefix(line);
        let key = (host, pid);
        if retry {
            self.retrying
                .insert(key, (clean(line.trim()), self.summary.lines));
            return;
        }
        self.retrying.remove(&key);
        if code.is_some()
            && let Some(&i) = self.socket_warn.get(&key)
            && let Some(caller) = trace_caller(line)
        {
            // The first frame past the socket layer says whose socket failed, and its
            // subsystem's cause replaces the socket text's guess. A peer that closed a
            // connection is a consequence on the proxy's and the transports' sockets; on the
            // bootstrap's, before any operation, the rendezvous itself failed there (a rank
            // that died in init, or a connection that was not a rank's reaching NCCL's
            // bootstrap port, which misc/socket.cc's socketFinalizeAccept ignores from v2.27.3-1 on).
            let f = &mut self.summary.findings[i];
            if f.severity == Severity::Consequence && caller.0 != Category::Bootstrap {
                self.socket_warn.remove(&key);
                return;
            }
            f.category = caller.0;
            f.stage = caller.1.name().to_string();
            f.exit_code = caller.1.exit_code();
            if f.severity == Severity::Consequence {
                f.cause = format!(
                    "a connection of NCCL's bootstrap closed before the rendezvous finished \
                     (traced back to {}): a rank died or was killed during init, or something \
                     that is not a rank (a port scanner, a health check) connected to the \
                     bootstrap port, which NCCL before 2.27.3 takes for a rank",
                    clean(line.trim())
                );
                f.hint = "read the first error of the other ranks' logs; if none failed, look for \
                          probes of the job's ports (NCCL 2.27.3+ ignores them), and pin the \
                          bootstrap to an interface they do not reach (NCCL_SOCKET_IFNAME)"
                    .to_string();
            } else if let Some(by) = classify::location_finding(line) {
                f.cause = format!(
                    "{}: the call that failed is the socket it uses (the evidence), traced back \
                     to {}",
                    by.cause,
                    clean(line.trim())
                );
                f.hint = by.hint.to_string();
            }
            self.socket_warn.remove(&key);
        }
        if code.is_none_or(|c| c == 0 || c == 7) {
            return;
        }
        // The process's first failing trace is kept; a later one may name the caller of a
        // first that is in the socket layer.
        let first_in_socket_layer = self
            .traces
            .iter()
            .find(|(k, ..)| *k == key)
            .map(|(_, first, _)| socket_layer(first));
        match first_in_socket_layer {
            None => self
                .traces
                .push((key, clean(line.trim()), self.summary.lines)),
            Some(true)
                if !self.trace_callers.contains_key(&key) && trace_caller(line).is_some() =>
            {
                self.trace_callers.insert(key, clean(line.trim()));
            }
            Some(_) => {}
        }
    }
}

/// Whether a WARN or trace line comes from NCCL's shared socket layer (`misc/socket.cc`,
/// `include/socket.h`), not the IPC socket of cuMem handles (`misc/ipcsocket.cc`).
pub(super) fn socket_layer(line: &str) -> bool {
    !has!(line, "ipcsocket")
        && (has!(line, "socket.h:") || has!(line, "/socket.cc:") || has!(line, " socket.cc:"))
}

/// The family of the network in `… NCCL INFO Using network NAME` (NCCL's own IB and Socket,
/// or a plugin's name: `IBext` (NVIDIA's SHARP plugin), `AWS Libfabric`, `gIB`, …): RDMA
/// networks are InfiniBand-like, the rest socket-like.
pub(super) fn network_of(line: &str) -> Option<Category> {
    let at = line.find("Using network ")?;
    let name = line[at + 14..].trim();
    if name.is_empty() {
        return None;
    }
    // `IB` also names IBext and gIB.
    let rdma = ["IB", "Libfabric", "OFI"].iter().any(|k| name.contains(k));
    Some(if rdma {
        Category::NetIb
    } else {
        Category::NetSocket
    })
}

/// The subsystem a return-trace frame (`transport/net_ib.cc:407 -> 2`) belongs to, when it is
/// one that calls NCCL's socket layer: the IB transport (its out-of-band exchange), the socket
/// transport, the bootstrap or the proxy (src/diagnose/classify/nccl-sources.tsv).
pub(super) fn trace_caller(line: &str) -> Option<(Category, Stage)> {
    let (printed, _) = classify::return_trace(line)?;
    let row = classify::sources::lookup(printed)?;
    let category = match row.subsystem {
        "loc-net-ib" => Category::NetIb,
        "loc-bootstrap" => Category::Bootstrap,
        "loc-proxy" => Category::Proxy,
        _ => return None,
    };
    Some((category, row.stage))
}
