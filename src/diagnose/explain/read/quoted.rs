//! NCCL's words as a layer above it quotes them in its own error text.

/// The NCCL text XLA quotes in its error status: `… NCCL operation X failed: <error string>.
/// Last NCCL warning(error) log entry (may be unrelated) '<text>'.` (openxla/xla
/// xla/backends/gpu/collectives nccl_errors / nccl_api ToStatus, quoting ncclGetLastError).
pub(super) fn xla_last_warn(line: &str) -> Option<&str> {
    const MARK: &str = "Last NCCL warning(error) log entry";
    let at = line.find(MARK)?;
    let rest = &line[at + MARK.len()..];
    let rest = rest.strip_prefix(" (may be unrelated)").unwrap_or(rest);
    let rest = rest.trim_start_matches([' ', ':']);
    let body = rest.strip_prefix('\'').unwrap_or(rest);
    let end = body.rfind('\'').unwrap_or(body.len());
    let text = body[..end].trim();
    (!text.is_empty()).then_some(text)
}
