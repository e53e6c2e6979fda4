//! Asking NCCL's RAS service about one communicator: from the worker, when a wait on it times
//! out, and from rank 0's supervisor, when a rank stopped answering.

use crate::diagnose::ras;

/// NCCL's RAS report on the communicator `hash` of NCCL `code`, as evidence lines, asked
/// within [`ras::bound`] of `deadline`; nothing when RAS is off, absent or silent.
pub fn ras_now(code: i32, hash: u64, deadline: std::time::Duration) -> Vec<String> {
    let Ok(target) = ras::target(code, |k| std::env::var(k).ok()) else {
        return Vec::new();
    };
    ras::query(&target, ras::bound(deadline), Some(hash))
        .map(|r| r.evidence(hash))
        .unwrap_or_default()
}

/// The hook a communicator calls when a wait on it times out after init (before it aborts):
/// NCCL's RAS report on this communicator, as evidence lines, when the loaded NCCL (version
/// `code`) serves one. The query is bounded by [`ras::bound`] of the stage's part of the
/// wait's deadline, and the worker keeps beating meanwhile so that its supervisor does not
/// take the query for a hang. Nothing when RAS is off, absent, or does not know the
/// communicator.
pub fn ras_hook<'n>(code: i32, id: &[u8]) -> crate::comm::TimeoutHook<'n> {
    let hash = ras::comm_hash(code, id);
    Box::new(move |wait| {
        let Ok(target) = ras::target(code, |k| std::env::var(k).ok()) else {
            return Vec::new();
        };
        let stage = wait.saturating_sub(crate::stage::PEER_MARGIN);
        let bound = ras::bound(stage);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let beats = s.spawn(|| {
                while !done.load(std::sync::atomic::Ordering::SeqCst) {
                    crate::events::beat();
                    std::thread::park_timeout(std::time::Duration::from_millis(100));
                }
            });
            let answer = ras::query(&target, bound, Some(hash));
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            beats.thread().unpark();
            let lines = answer.map(|r| r.evidence(hash)).unwrap_or_default();
            if !lines.is_empty() {
                crate::events::send(&crate::events::Event::Notes {
                    lines: lines.clone(),
                });
            }
            lines
        })
    })
}
