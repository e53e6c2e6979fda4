//! The hash RAS names a communicator by, computed from the unique id the ranks shared.
//!
//! NCCL sets `comm->commHash = getHash(commId->internal, NCCL_UNIQUE_ID_BYTES)` for a
//! communicator made from a unique id (`ncclCommInitRankFunc`, `src/init.cc` v2.24.3-1 and
//! v2.28.7-1), and RAS reports `commHash` (`rasCommsCollect`-side fill in
//! `src/ras/collectives.cc` v2.28.7-1: `comm->commId.commHash = ncclComm->commHash`). The hash
//! function changed in 2.26: DJB2a over C `char`s before (`getHash`, `src/include/bitops.h`
//! v2.24.3-1 and v2.25.1-1), `eatHash`/`digestHash` from v2.26.2-1 (same file, also v2.28.7-1).

/// The communicator hash NCCL `version` (a version code) gives the unique id `id`.
pub fn comm_hash(version: i32, id: &[u8]) -> u64 {
    if version >= 22600 {
        let mut acc = [1u64, 1u64];
        eat(&mut acc, id);
        digest(&acc)
    } else {
        djb2a(id)
    }
}

/// DJB2a as NCCL 2.24–2.25 computes it: `result = result * 33 ^ char`, where `char` is C's
/// (signed on x86-64, unsigned on aarch64), sign-extended into the 64-bit result.
fn djb2a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(5381u64, |h, &b| {
        let c = b as std::ffi::c_char as i64 as u64;
        (h << 5).wrapping_add(h) ^ c
    })
}

fn eat(acc: &mut [u64; 2], bytes: &[u8]) {
    acc[0] ^= bytes.len() as u64;
    for chunk in bytes.chunks(8) {
        acc[0] = acc[0].wrapping_add(acc[1]);
        acc[1] ^= acc[0];
        acc[0] ^= acc[0] >> 31;
        acc[0] = acc[0].wrapping_mul(0x9de6_2bbc_8cef_3ce3);
        acc[1] ^= acc[1] >> 32;
        acc[1] = acc[1].wrapping_mul(0x485c_d631_1b59_9e79);
        let mut x = [0u8; 8];
        x[..chunk.len()].copy_from_slice(chunk);
        acc[0] = acc[0].wrapping_add(u64::from_le_bytes(x));
    }
}

fn digest(acc: &[u64; 2]) -> u64 {
    let mut h = acc[0];
    h ^= h >> 31;
    h = h.wrapping_mul(0xbac3_bd56_2846_de6b);
    h = h.wrapping_add(acc[1]);
    h ^= h >> 32;
    h.wrapping_mul(0x995a_187a_14e7_b445)
}
