//! One line of a log as nccl-tests wrote it: its launcher's prefix and tags taken off, the
//! rank count of its command line, a device line's parts.

/// Ranks a launch command starts: its process count (`-np N`, `-n N`, `--ntasks N` or
/// `--ntasks=N`) times nccl-tests' GPUs per process (`-g N`, default 1) and threads (`-t N`).
pub(super) fn command_ranks(t: &str) -> Option<usize> {
    let w: Vec<&str> = t.split_whitespace().collect();
    let after = |flags: &[&str]| {
        w.iter().enumerate().find_map(|(i, x)| {
            flags.iter().find_map(|f| {
                if x == f {
                    w.get(i + 1).and_then(|v| v.parse::<usize>().ok())
                } else {
                    x.strip_prefix(&format!("{f}="))
                        .and_then(|v| v.parse::<usize>().ok())
                }
            })
        })
    };
    let procs = after(&["-np", "-n", "--ntasks", "--np"])?;
    let per = |f: &str| {
        // nccl-tests' own flags come after the program name.
        let at = w
            .iter()
            .position(|x| crate::report::nccl_tests::program_in(x).is_some())?;
        w[at..]
            .iter()
            .position(|x| *x == f)
            .and_then(|i| w.get(at + i + 1))
            .and_then(|v| v.parse::<usize>().ok())
    };
    Some(procs * per("-g").unwrap_or(1) * per("-t").unwrap_or(1))
}

/// The host and GPU model of a device line (`Rank 0 Group 0 Pid 1 on HOST device 0 [BUS]
/// MODEL`; no Group before nccl-tests 2.10-ish).
pub(super) fn device(c: &str) -> Option<(String, String)> {
    let (_, after_on) = c.split_once(" on ")?;
    let mut w = after_on.split_whitespace();
    let host = w.next()?.to_string();
    let rest = after_on.split_once(" device ")?.1.trim_start();
    // `0 [0x18] NVIDIA H100 80GB HBM3`: the ordinal, the bus id, then the model.
    let model = rest.split_once(']').map(|(_, m)| m.trim())?;
    (!model.is_empty()).then(|| (host, model.to_string()))
}

/// `line` less what a launcher puts before each line: Open MPI's `mpirun --tag-output`
/// (`[1,0]<stdout>:`) and Slurm's `srun --label` (`0: `, right-aligned).
pub(super) fn unprefix(line: &str) -> &str {
    let line = untag(line);
    let t = line.trim_start();
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0
        && let Some(rest) = t[digits..].strip_prefix(':')
        && (rest.is_empty() || rest.starts_with(' '))
    {
        return untag(rest.strip_prefix(' ').unwrap_or(rest));
    }
    line
}

/// `line` without the Open MPI tags (`[1,0]<stdout>:`) that `--tag-output` puts inside it,
/// before each piece a rank printed (nccl-tests prints a row in pieces); the leading one is
/// left for [`unprefix`].
pub(super) fn untag_within(line: &str) -> std::borrow::Cow<'_, str> {
    let body = untag(line);
    if !body.contains("]<std") {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    out.push_str(&line[..line.len() - body.len()]);
    let mut rest = body;
    while let Some(at) = rest.find('[') {
        let tail = untag(&rest[at..]);
        if tail.len() == rest.len() - at {
            out.push_str(&rest[..=at]);
            rest = &rest[at + 1..];
        } else {
            out.push_str(&rest[..at]);
            out.push(' ');
            rest = tail;
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// `line` less the prefix Open MPI's `mpirun --tag-output` puts before each line
/// (`[1,0]<stdout>:`).
pub(super) fn untag(line: &str) -> &str {
    let Some(rest) = line.strip_prefix('[') else {
        return line;
    };
    match rest.split_once("]<") {
        Some((ids, tail)) if ids.chars().all(|c| c.is_ascii_digit() || c == ',') => {
            tail.split_once(">:").map(|(_, l)| l).unwrap_or(line)
        }
        _ => line,
    }
}
