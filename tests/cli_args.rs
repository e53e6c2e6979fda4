//! The command line of `run`: nccl-tests' flags, their ranges, and the plan they make (moved
//! here from `src/cli/mod.rs`'s unit tests).

use clap::Parser;
use nccl_smoke::cli::{Cli, Command, RunArgs};
use nccl_smoke::console::{sanitize, terminal_safe};
use nccl_smoke::elements::{DataType, RedOp};
use nccl_smoke::stage::Stage;
use proptest::strategy::Strategy;
use std::time::Duration;

fn parse(args: &[&str]) -> Result<RunArgs, clap::Error> {
    let mut v = vec!["nccl-smoke", "run"];
    v.extend_from_slice(args);
    Cli::try_parse_from(v).map(|c| match c.command {
        Command::Run(a) => a,
        _ => unreachable!("parsed `run`"),
    })
}

#[test]
fn nccl_tests_flags_parse() {
    let a = parse(&[
        "-b", "1K", "-e", "1M", "-f", "4", "-n", "7", "-w", "2", "-c", "0", "-d", "half", "-o",
        "max",
    ])
    .unwrap();
    assert_eq!(
        (
            a.minbytes,
            a.settings().maxbytes(),
            a.iters,
            a.warmup_iters,
            a.check
        ),
        (1024, 1 << 20, 7, 2, 0)
    );
    assert_eq!((a.datatype, a.op), (DataType::Half, RedOp::Max));
    assert_eq!(
        a.plan().unwrap().sizes,
        [1024, 4096, 16384, 65536, 262144, 1048576]
    );
}

#[test]
fn bad_input_is_refused_with_the_reason() {
    assert!(parse(&["-d", "float17"]).is_err());
    assert!(parse(&["-b", "lots"]).is_err());
    assert!(parse(&["-c", "2"]).is_err());
    assert!(parse(&["-n", "0"]).is_err());
    assert!(
        parse(&["--stage-timeout", "nope=3"])
            .unwrap_err()
            .to_string()
            .contains("unknown stage 'nope'")
    );
    let a = parse(&["-b", "1M", "-e", "1K"]).unwrap();
    assert!(a.plan().unwrap_err().contains("-b/--minbytes"));
    let a = parse(&["--patterns", "all_reduce,bogus"]).unwrap();
    assert!(a.plan().unwrap_err().contains("unknown pattern 'bogus'"));
}

#[test]
fn deadlines_default_then_global_then_per_stage() {
    let a = parse(&[]).unwrap();
    assert_eq!(a.settings().deadline(Stage::Init), Duration::from_secs(300));
    let a = parse(&["--timeout", "5", "--stage-timeout", "init=9"]).unwrap();
    assert_eq!(a.settings().deadline(Stage::Init), Duration::from_secs(9));
    assert_eq!(a.settings().deadline(Stage::Run), Duration::from_secs(5));
}

#[test]
fn deadlines_and_sizes_have_ranges() {
    for bad in [
        vec!["--timeout", "1e30"],
        vec!["--timeout", "0"],
        vec!["--timeout", "NaN"],
        vec!["--timeout", "-3"],
        vec!["--stage-timeout", "init=1e30"],
        vec!["--stage-timeout", "init=inf"],
        vec!["--device", "-1"],
        vec!["--device", "99999"],
    ] {
        assert!(parse(&bad).is_err(), "{bad:?}");
    }
    let e = parse(&["--timeout", "1e30"]).unwrap_err().to_string();
    assert!(e.contains("from 0.1 to 86400"), "{e}");
    for bad in [vec!["-e", "2048G"], vec!["-f", "1e300"], vec!["-f", "inf"]] {
        let a = parse(&bad).unwrap();
        assert!(a.plan().is_err(), "{bad:?}");
    }
    let a = parse(&["--timeout", "86400"]).unwrap();
    assert_eq!(
        a.settings().deadline(Stage::Run),
        Duration::from_secs(86_400)
    );
}

#[test]
fn messages_escape_control_characters() {
    let e = parse(&["--stage-timeout", "\x1b[2Jinit=3"])
        .unwrap_err()
        .to_string();
    assert!(!terminal_safe(&e).contains('\x1b'), "{e:?}");
    assert!(sanitize("a\x07b").contains("\\u{7}"));
    assert_eq!(terminal_safe("two\nlines\x1b"), "two\nlines\\u{1b}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]
    /// Any argument list is parsed and validated, or refused, without a panic; a deadline
    /// that got through always converts.
    #[test]
    fn any_run_arguments_give_an_answer_not_a_panic(
        args in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(vec![
                    "-b", "-e", "-f", "-i", "-n", "-w", "-c", "-d", "-o", "--timeout",
                    "--stage-timeout", "--device", "--patterns", "--json",
                ]).prop_map(String::from),
                "[-+]?[0-9]{0,25}(\\.[0-9]{0,5})?(e[-+]?[0-9]{1,4})?[KMGkmg]?",
                "(init|run|bogus)=[0-9e.+-]{0,12}",
                "\\PC{0,12}",
            ],
            0..10,
        )
    ) {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        if let Ok(a) = parse(&refs) {
            let _ = a.plan();
            for s in Stage::ALL {
                let d = a.settings().deadline(s);
                proptest::prop_assert!(d >= Duration::from_millis(100));
            }
        }
    }
}

#[test]
fn sim_backend_defaults_to_a_smaller_sweep() {
    assert_eq!(
        parse(&["--backend", "sim"]).unwrap().settings().maxbytes(),
        1 << 20
    );
    assert_eq!(parse(&[]).unwrap().settings().maxbytes(), 128 << 20);
}

/// `--preset nccl-tests` is nccl-tests' own defaults (one 32 MiB message, 20 iterations,
/// 1 warm-up), and refuses sweep flags beside it rather than mixing the two silently.
#[test]
fn the_nccl_tests_preset_is_its_defaults_and_excludes_sweep_flags() {
    let plan = parse(&["--preset", "nccl-tests"]).unwrap().plan().unwrap();
    assert_eq!(plan.sizes, [32 << 20]);
    assert_eq!((plan.iters, plan.warmup_iters), (20, 1));
    for flag in [
        ["-b", "8"],
        ["-e", "1M"],
        ["-n", "5"],
        ["-w", "2"],
        ["-f", "4"],
    ] {
        let e = parse(&["--preset", "nccl-tests", flag[0], flag[1]]).unwrap_err();
        assert!(e.to_string().contains("cannot be used with"), "{e}");
    }
}
