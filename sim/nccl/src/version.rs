//! The NCCL release this library pretends to be (`NCCL_SMOKE_SIM_NCCL_VERSION`, default
//! 22803). Log texts and a few return codes changed between releases; the helpers here let
//! the rest of the crate speak as the release it reports.

use std::sync::OnceLock;

/// What `ncclGetVersion` reports when the environment does not say otherwise.
pub const DEFAULT: i32 = 22803;

/// The version code, read once per process.
pub fn code() -> i32 {
    static V: OnceLock<i32> = OnceLock::new();
    *V.get_or_init(|| parse(std::env::var("NCCL_SMOKE_SIM_NCCL_VERSION").ok().as_deref()))
}

/// `NCCL_SMOKE_SIM_NCCL_VERSION` as a version code; unset or unreadable means [`DEFAULT`].
pub fn parse(v: Option<&str>) -> i32 {
    v.and_then(|s| s.trim().parse::<i32>().ok())
        .filter(|c| *c > 0)
        .unwrap_or(DEFAULT)
}

/// "2.28.3" for 22803 (NCCL's code is major*10000 + minor*100 + patch since 2.9).
pub fn text(code: i32) -> String {
    format!("{}.{}.{}", code / 10000, (code % 10000) / 100, code % 100)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_read_like_nccl() {
        assert_eq!(text(22803), "2.28.3");
        assert_eq!(text(21903), "2.19.3");
        assert_eq!(parse(None), DEFAULT);
        assert_eq!(parse(Some(" 22602 ")), 22602);
        assert_eq!(parse(Some("two")), DEFAULT);
        assert_eq!(parse(Some("-1")), DEFAULT);
    }
}
