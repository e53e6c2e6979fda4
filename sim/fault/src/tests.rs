use super::*;

#[test]
fn data_faults_parse_with_an_optional_size_and_only_at_verify() {
    let set = FaultSet::parse("verify@1:nothing,verify:peer=4096").unwrap();
    assert_eq!(
        set.0[0].kind,
        Kind::Data {
            fault: DataFault::Nothing,
            bytes: None,
            every: None
        }
    );
    assert_eq!(
        set.0[1].kind,
        Kind::Data {
            fault: DataFault::Peer,
            bytes: Some(4096),
            every: None
        }
    );
    assert_eq!(set.0[1].to_string(), "verify:peer=4096");
    for d in DataFault::ALL {
        let f = FaultSet::parse(&format!("verify@0:{}", d.name())).unwrap();
        assert_eq!(FaultSet::parse(&f.0[0].to_string()).unwrap(), f);
    }
    assert!(
        FaultSet::parse("net:nothing")
            .unwrap_err()
            .0
            .contains("at 'verify' only")
    );
    let f = FaultSet::parse("verify@1:flip=1024/10").unwrap();
    assert_eq!(
        f.0[0].kind,
        Kind::Data {
            fault: DataFault::Flip,
            bytes: Some(1024),
            every: Some(10)
        }
    );
    assert_eq!(f.0[0].to_string(), "verify@1:flip=1024/10");
    assert_eq!(
        FaultSet::parse("verify:nan/3").unwrap().0[0].to_string(),
        "verify:nan/3"
    );
    for bad in ["verify:flip/0", "verify:flip=8/x"] {
        let e = FaultSet::parse(bad).unwrap_err().0;
        assert!(e.contains("bad period"), "{bad}: {e}");
    }
    assert!(
        FaultSet::parse("verify:flip=lots")
            .unwrap_err()
            .0
            .contains("bad size 'lots'")
    );
}

#[test]
fn parses_full_and_short_forms() {
    let set = FaultSet::parse("import@1:error, run:slow=4,verify@0:corrupt,shm").unwrap();
    assert_eq!(
        set.0,
        vec![
            Fault {
                at: Where::Import,
                rank: Some(1),
                kind: Kind::Error
            },
            Fault {
                at: Where::Run,
                rank: None,
                kind: Kind::Slow(4.0)
            },
            Fault {
                at: Where::Verify,
                rank: Some(0),
                kind: Kind::Corrupt
            },
            Fault {
                at: Where::Shm,
                rank: None,
                kind: Kind::Error
            },
        ]
    );
    assert_eq!(
        set.find(Where::Import, Some(1)).map(|f| f.kind),
        Some(Kind::Error)
    );
    assert_eq!(set.find(Where::Import, Some(0)), None);
    assert!(set.find(Where::Run, Some(7)).is_some());
}

#[test]
fn empty_means_no_fault() {
    assert!(FaultSet::parse("").unwrap().is_empty());
    assert!(FaultSet::parse(" , ").unwrap().is_empty());
}

#[test]
fn every_location_round_trips() {
    for w in Where::ALL {
        let f = FaultSet::parse(&format!("{}@3:hang", w.name())).unwrap().0[0];
        assert_eq!(f.to_string(), format!("{}@3:hang", w.name()));
    }
}

#[test]
fn bad_specs_name_the_bad_part() {
    let e = FaultSet::parse("init,imprt@1").unwrap_err().to_string();
    assert!(e.contains("'imprt'"), "{e}");
    let e = FaultSet::parse("init@x").unwrap_err().to_string();
    assert!(e.contains("bad rank 'x'"), "{e}");
    let e = FaultSet::parse("run:slow=0.5").unwrap_err().to_string();
    assert!(e.contains("bad slow factor '0.5'"), "{e}");
    let e = FaultSet::parse("run:explode").unwrap_err().to_string();
    assert!(e.contains("unknown fault kind 'explode'"), "{e}");
    let e = FaultSet::parse("run@-1").unwrap_err().to_string();
    assert!(e.contains("bad rank '-1'"), "{e}");
}

#[test]
fn numbers_have_ranges_and_messages_no_control_characters() {
    for spec in [
        "net:slow=1e308",
        "net:slow=inf",
        "net:slow=1001",
        "run@99999999",
    ] {
        assert!(FaultSet::parse(spec).is_err(), "{spec}");
    }
    assert!(FaultSet::parse("net:slow=1000").is_ok());
    let e = FaultSet::parse("run:\x1b[31mred").unwrap_err().to_string();
    assert!(!e.chars().any(|c| c.is_control()), "{e:?}");
    assert!(FaultSet::parse(&"run,".repeat(65)).is_err());
    assert!(FaultSet::parse(&"x".repeat(5000)).is_err());
}

#[test]
fn any_text_parses_or_is_refused_without_a_panic() {
    // A bounded, deterministic sweep over short strings from the grammar's alphabet and
    // control characters (this crate has no dev-dependencies).
    let alphabet: Vec<char> = "run@:=slow,1e3.-\x1b\n\u{7f}éx".chars().collect();
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let len = (seed % 24) as usize;
        let text: String = (0..len)
            .map(|i| alphabet[((seed >> (i % 8 * 8)) as usize + i) % alphabet.len()])
            .collect();
        if let Err(e) = FaultSet::parse(&text) {
            assert!(!e.to_string().chars().any(|c| c.is_control()), "{e:?}");
        }
    }
}
