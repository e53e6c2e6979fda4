//! The one parameter each kernel takes, by value: a `#[repr(C)]` struct of `u64` fields, which
//! the PTX reads at fixed offsets (`ld.param.u64 [args+8*k]`). Device addresses are `u64`.

/// Entries of the encoding table: values 0..=[`crate::values::COPY_MAX`] and every reduction
/// result (1..=9).
pub const TABLE_LEN: usize = 128;

/// `ncclsmoke_fill`: writes elements `first..first + count` of what `sender` sends into `out`
/// (which points at element `first`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FillArgs {
    pub out: u64,
    pub count: u64,
    pub first: u64,
    /// [`TABLE_LEN`] `u64`s: entry `v` holds value `v` encoded in the element type, in its low
    /// `elsize` bytes (little-endian), the other bytes zero.
    pub table: u64,
    /// Bytes per element: 1, 2, 4 or 8.
    pub elsize: u64,
    /// [`crate::values::Op`] as a number.
    pub op: u64,
    pub nranks: u64,
    pub sender: u64,
    pub epoch: u64,
}

/// One run of a copying pattern's receive buffer: elements `b * per_peer ..` hold elements
/// `base ..` of rank `sender`'s send buffer, in order.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Block {
    pub sender: u64,
    pub base: u64,
}

/// `ncclsmoke_check`: compares the `count` elements at `got` with what their senders sent.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckArgs {
    pub got: u64,
    pub count: u64,
    /// See [`FillArgs::table`].
    pub table: u64,
    pub elsize: u64,
    /// [`crate::values::Op`]: `Copy` reads `blocks`, a reduction expects
    /// [`crate::values::reduced`] at every element.
    pub op: u64,
    pub nranks: u64,
    pub epoch: u64,
    /// `count / per_peer` (rounded up) [`Block`]s, for `Copy`.
    pub blocks: u64,
    /// Elements per block (at least 1).
    pub per_peer: u64,
    /// A [`CheckResult`] the host zeroed (its `first` set to `u64::MAX`) before the launch.
    pub result: u64,
}

/// What the check kernel adds up: every thread adds its own counts once, at its end.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckResult {
    /// Elements compared: equal to the count when every element was checked, which is how the
    /// host knows that the kernel ran at all.
    pub checked: u64,
    /// Elements that differ from what their senders sent.
    pub wrong: u64,
    /// The lowest index of a wrong element (`u64::MAX` when none).
    pub first: u64,
}

impl CheckResult {
    /// The value the host writes before the launch.
    pub const START: CheckResult = CheckResult {
        checked: 0,
        wrong: 0,
        first: u64::MAX,
    };

    pub fn to_bytes(self) -> [u8; 24] {
        let mut b = [0u8; 24];
        for (k, v) in [self.checked, self.wrong, self.first]
            .into_iter()
            .enumerate()
        {
            b[8 * k..8 * k + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    pub fn from_bytes(b: &[u8; 24]) -> CheckResult {
        let at = |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        CheckResult {
            checked: at(0),
            wrong: at(1),
            first: at(2),
        }
    }
}

/// The bytes of a table whose entries come from `encode(v, out)` (which writes `v` into the
/// low `elsize` bytes), as the kernels read it.
pub fn table_bytes(elsize: usize, encode: impl Fn(f64, &mut [u8])) -> Vec<u8> {
    let mut out = vec![0u8; TABLE_LEN * 8];
    for (v, entry) in out.chunks_exact_mut(8).enumerate() {
        encode(v as f64, &mut entry[..elsize]);
    }
    out
}

/// `Block`s as the kernel reads them: little-endian pairs of `u64`.
pub fn blocks_bytes(blocks: &[Block]) -> Vec<u8> {
    blocks
        .iter()
        .flat_map(|b| [b.sender.to_le_bytes(), b.base.to_le_bytes()])
        .flatten()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_structs_are_what_the_ptx_reads() {
        // kernels.ptx declares args[72] and args[80] and reads u64 fields at 8-byte steps.
        assert_eq!(std::mem::size_of::<FillArgs>(), 72);
        assert_eq!(std::mem::size_of::<CheckArgs>(), 80);
        assert_eq!(std::mem::size_of::<Block>(), 16);
        assert_eq!(std::mem::size_of::<CheckResult>(), 24);
    }

    #[test]
    fn results_round_trip_through_bytes() {
        let r = CheckResult {
            checked: 7,
            wrong: 2,
            first: 5,
        };
        assert_eq!(CheckResult::from_bytes(&r.to_bytes()), r);
        assert_eq!(
            CheckResult::from_bytes(&CheckResult::START.to_bytes()),
            CheckResult::START
        );
    }
}
