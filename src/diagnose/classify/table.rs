//! The one ordered table of signatures, assembled from the files that hold them.

use super::signature::Signature;
use std::sync::LazyLock;

/// Root causes first, consequences last: when shared memory or a socket fails, NCCL's proxy
/// reports the failure too ("[Proxy Service N] Failed to execute operation Connect"), so the
/// generic proxy phrases come after the transports they relay. A line is named by the first
/// signature that matches it; a job by its most severe finding, then the earliest signature.
pub(super) static SIGNATURES: LazyLock<Vec<&'static Signature>> = LazyLock::new(|| {
    super::causes::SIGNATURES
        .iter()
        .chain(super::network::SIGNATURES)
        .chain(super::codes::SIGNATURES)
        .chain(super::families::SIGNATURES)
        .chain(super::locations::SIGNATURES)
        .chain(super::others::SIGNATURES)
        .collect()
});

/// The signature table's ids, in priority order (for the coverage listing and tests).
pub fn signature_ids() -> impl Iterator<Item = &'static str> {
    SIGNATURES.iter().map(|s| s.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_ids_are_unique() {
        let mut ids: Vec<_> = signature_ids().collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n);
    }
}
