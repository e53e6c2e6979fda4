use super::*;
use std::collections::HashSet;

#[test]
fn the_table_is_in_walking_order() {
    for (i, s) in Stage::ALL.iter().enumerate() {
        assert_eq!(TABLE[i].stage, *s);
        assert_eq!(Stage::parse(s.name()), Some(*s));
    }
}

#[test]
fn help_lists_every_code() {
    assert_eq!(
        exit::help(),
        "Exit codes: 0 pass · 1 internal error · 2 bad input · 3 output file not written · 10 launch · 11 nccl-load · 12 driver · 13 device · \
14 alloc · 15 unique-id · 16 init · 17 connect · 18 connect:buffer-import · 19 connect:proxy · \
20 connect:shm · 21 connect:net · 22 run · 23 verify · 24 finalize · 25 below a floor, or a slow host · \
26 run -c 0: not verified · 27 run --backend control-plane: control plane ok · 30 compare: regressed · 31 doctor: warnings · 32 doctor: failures · \
33 compare: inconclusive · 34 compare: malformed input · 35 compare: nothing compared · 36 explain: unknown · \
37 explain: no failure seen · 38 isolate: not judged · 130 cancelled"
    );
}

#[test]
fn the_readme_table_is_the_stage_table() {
    let readme = include_str!("../../README.md");
    let section = readme
        .split("## Exit codes\n")
        .nth(1)
        .expect("README has an Exit codes section");
    let rows: Vec<&str> = section
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect();
    assert_eq!(
        rows,
        exit::markdown(),
        "regenerate the README table from exit::markdown()"
    );
}

#[test]
fn exit_codes_are_distinct_and_clear_of_the_fixed_ones() {
    let codes: HashSet<u8> = Stage::ALL.iter().map(|s| s.exit_code()).collect();
    assert_eq!(codes.len(), Stage::ALL.len());
    for fixed in [
        exit::PASS,
        exit::INTERNAL,
        exit::USAGE,
        exit::WRITE_FAILED,
        exit::CANCELLED,
        exit::REGRESSED,
        exit::DOCTOR_WARN,
        exit::DOCTOR_FAIL,
    ] {
        assert!(!codes.contains(&fixed), "{fixed}");
    }
}

#[test]
fn names_round_trip() {
    for s in Stage::ALL {
        assert_eq!(Stage::parse(s.name()), Some(s));
        let json = serde_json::to_string(&s).unwrap();
        let back: Stage = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }
}
