use super::*;

fn plan(timeout: Option<f64>, stage_timeout: Vec<(Stage, f64)>) -> Plan {
    settings(timeout, stage_timeout).plan().unwrap()
}

fn settings(timeout: Option<f64>, stage_timeout: Vec<(Stage, f64)>) -> Settings {
    Settings {
        libs: LibChoice {
            sim: true,
            ..LibChoice::default()
        },
        patterns: vec!["all_reduce".into()],
        minbytes: 8,
        maxbytes: None,
        stepfactor: 2.0,
        stepbytes: None,
        iters: 20,
        warmup_iters: 5,
        check: true,
        data_on: DataOn::Device,
        datatype: DataType::Float,
        op: RedOp::Sum,
        device: None,
        json: None,
        exports: Default::default(),
        budget: None,
        duration: None,
        logs: None,
        strict: false,
        timeout,
        stage_timeout,
        repeat: 1,
        expect: None,
        bootstrap: Mode::Auto,
        isolate: None,
    }
}

proptest::proptest! {
    /// The plan the worker runs is the plan the supervisor built: handed over as JSON
    /// (`env::hand_over`), it reads back equal, whatever the settings.
    #[test]
    fn a_plan_survives_the_hand_over(
        timeout in proptest::option::of(0.1f64..86_400.0),
        stage in 0usize..Stage::ALL.len(),
        secs in 0.1f64..1000.0,
        dtype in 0usize..16,
        op in 0usize..8,
        repeat in 1u32..5,
        step in 1.1f64..8.0,
        isolate in proptest::bool::ANY,
    ) {
        use clap::ValueEnum;
        let (types, ops) = (DataType::value_variants(), RedOp::value_variants());
        let mut p = plan(timeout, vec![(Stage::ALL[stage], secs)]);
        let settings = Settings {
            datatype: types[dtype % types.len()],
            op: ops[op % ops.len()],
            repeat,
            stepfactor: step,
            bootstrap: Mode::Env,
            ..settings(timeout, vec![(Stage::ALL[stage], secs)])
        };
        if let Ok(q) = settings.plan() {
            p = q;
        }
        if isolate {
            p.isolate = Some(crate::run::isolate::Settings {
                pairs: crate::run::isolate::Pairs::value_variants()[0],
                round_limit: Duration::from_secs_f64(secs),
                groups: crate::run::isolate::Groups::value_variants()[0],
                slow_fraction: step / 10.0,
            });
        }
        let text = serde_json::to_string(&p).unwrap();
        let back: Plan = serde_json::from_str(&text).unwrap();
        proptest::prop_assert_eq!(back, p);
    }
}

/// The header's deadlines are the ones the run uses: defaults, --timeout, a stage's own.
#[test]
fn the_deadline_line_shows_the_deadlines_used() {
    let p = plan(None, Vec::new());
    let line = p.deadline_line();
    for s in [Stage::Launch, Stage::Init, Stage::Run, Stage::Finalize] {
        let want = format!("{} {}", s.name(), s.default_deadline_s());
        assert!(line.contains(&want), "{want} in {line}");
    }
    assert!(!line.contains("connect:shm"), "{line}");
    let p = plan(Some(30.0), vec![(Stage::Run, 10.0)]);
    assert_eq!(p.deadline(Stage::Run), Duration::from_secs(10));
    let line = p.deadline_line();
    assert!(
        line.contains("init 30 ·") && line.contains("run 10 ·"),
        "{line}"
    );
    assert!(line.contains("+ 1.5 (set with"), "{line}");
}

/// Under `--budget`, no stage's default deadline exceeds half of it (a hang is named inside
/// the budget); a deadline the user set stands.
#[test]
fn a_budget_bounds_the_default_deadlines_not_the_ones_set() {
    let mut s = settings(None, vec![(Stage::Run, 50.0)]);
    s.budget = Some(20.0);
    let p = s.clone().plan().unwrap();
    assert_eq!(p.deadline(Stage::Init), Duration::from_secs(10));
    assert_eq!(p.deadline(Stage::Run), Duration::from_secs(50));
    s.timeout = Some(30.0);
    assert_eq!(
        s.plan().unwrap().deadline(Stage::Init),
        Duration::from_secs(30)
    );
}

#[test]
fn budgets_read_as_durations_or_seconds() {
    assert_eq!(parse_budget("60s"), Ok(60.0));
    assert_eq!(parse_budget("2m"), Ok(120.0));
    assert_eq!(parse_budget("90"), Ok(90.0));
    assert_eq!(parse_budget("1h30m"), Ok(5400.0));
    for bad in ["0", "0.5s", "8d", "soon", "-3", "NaN"] {
        let e = parse_budget(bad).unwrap_err();
        assert!(e.contains("is not a duration"), "{bad}: {e}");
    }
}
