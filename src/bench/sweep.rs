//! The message sizes of a sweep, as nccl-tests walks them.

/// How sizes grow from `-b` to `-e`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// `-f`: multiply by this factor.
    Factor(f64),
    /// `-i`: add this many bytes.
    Bytes(usize),
}

/// Sizes from `min` to `max` inclusive. A zero size steps to 1 byte under a factor so the
/// sweep always advances. Errors name the bad flag.
pub fn sizes(min: usize, max: usize, step: Step) -> Result<Vec<usize>, String> {
    if min > max {
        return Err(format!(
            "-b/--minbytes ({min}) is larger than -e/--maxbytes ({max})"
        ));
    }
    match step {
        Step::Factor(f) if !(f.is_finite() && f >= 1.0) => {
            return Err(format!("-f/--stepfactor must be a number >= 1, got {f}"));
        }
        Step::Bytes(0) if min != max => {
            return Err("-i/--stepbytes must be > 0".into());
        }
        _ => {}
    }
    let mut out = vec![min];
    let mut size = min;
    while size < max {
        let next = match step {
            Step::Factor(1.0) => break,
            Step::Factor(f) => ((size as f64 * f) as usize).max(size + 1),
            Step::Bytes(b) => size.saturating_add(b),
        };
        if next > max {
            break;
        }
        out.push(next);
        size = next;
        if out.len() > 100_000 {
            return Err("the sweep has more than 100000 sizes; raise -f or -i".into());
        }
    }
    Ok(out)
}

/// Parses a size like nccl-tests: a number with an optional K, M, G suffix (powers of 1024).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size (use e.g. 8, 64K, 128M, 1G)"))?;
    n.checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubling_sweep_is_inclusive() {
        assert_eq!(sizes(8, 64, Step::Factor(2.0)).unwrap(), [8, 16, 32, 64]);
    }

    #[test]
    fn non_power_of_two_ends_below_max() {
        assert_eq!(sizes(3, 100, Step::Factor(4.0)).unwrap(), [3, 12, 48]);
        assert_eq!(sizes(10, 35, Step::Bytes(10)).unwrap(), [10, 20, 30]);
    }

    #[test]
    fn zero_advances() {
        assert_eq!(sizes(0, 4, Step::Factor(2.0)).unwrap(), [0, 1, 2, 4]);
        assert_eq!(sizes(0, 0, Step::Factor(2.0)).unwrap(), [0]);
    }

    #[test]
    fn single_size_and_factor_one() {
        assert_eq!(sizes(32, 32, Step::Factor(2.0)).unwrap(), [32]);
        assert_eq!(sizes(32, 64, Step::Factor(1.0)).unwrap(), [32]);
    }

    #[test]
    fn bad_sweeps_name_the_flag() {
        assert!(
            sizes(64, 8, Step::Factor(2.0))
                .unwrap_err()
                .contains("-b/--minbytes (64)")
        );
        assert!(
            sizes(8, 64, Step::Factor(0.5))
                .unwrap_err()
                .contains("-f/--stepfactor")
        );
        assert!(
            sizes(8, 64, Step::Bytes(0))
                .unwrap_err()
                .contains("-i/--stepbytes")
        );
    }

    #[test]
    fn sizes_parse_like_nccl_tests() {
        assert_eq!(parse_size("8").unwrap(), 8);
        assert_eq!(parse_size("64K").unwrap(), 65536);
        assert_eq!(parse_size("128M").unwrap(), 128 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("-5").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }
}
