use super::*;

#[test]
fn levels() {
    assert_eq!(parse_level(Some("info")), Level::Info);
    assert_eq!(parse_level(Some("WARN")), Level::Warn);
    assert_eq!(parse_level(Some("Trace")), Level::Trace);
    assert_eq!(parse_level(Some("version")), Level::Version);
    assert_eq!(parse_level(Some("loud")), Level::None);
    assert_eq!(parse_level(None), Level::None);
    assert!(Level::Trace > Level::Info && Level::Info > Level::Warn);
}

#[test]
fn subsystems() {
    let default = parse_mask(None);
    assert!(default & sys::INIT != 0 && default & sys::BOOTSTRAP != 0);
    assert_eq!(default & (sys::NET | sys::COLL), 0);
    let m = parse_mask(Some("init,NET"));
    assert_eq!(m, sys::INIT | sys::NET);
    let m = parse_mask(Some("^INIT,COLL"));
    assert_eq!(m & (sys::INIT | sys::COLL), 0);
    assert!(m & sys::SHM != 0);
    assert_eq!(parse_mask(Some("ALL")), sys::ALL);
    assert_eq!(parse_mask(Some("bogus")), 0);
    for (name, bits) in sys::NAMES {
        assert_eq!(parse_mask(Some(name)), bits, "{name}");
    }
}

#[test]
fn timestamp_levels_follow_the_release() {
    assert_eq!(parse_timestamp_levels(None, 22803), Level::Warn.bit());
    assert_eq!(parse_timestamp_levels(None, 22503), 0);
    let b = parse_timestamp_levels(Some("INFO,warn"), 21903);
    assert_eq!(b, Level::Info.bit() | Level::Warn.bit());
    let b = parse_timestamp_levels(Some("^WARN"), 22803);
    assert_eq!(b & Level::Warn.bit(), 0);
    assert!(b & Level::Info.bit() != 0);
}

#[test]
fn timestamp_formats() {
    assert_eq!(timestamp_format(Some("%T_%F")), "%T %F");
    assert_eq!(with_subseconds("[%F %T.%3f] ", 123_456_789), "[%F %T.123] ");
    assert_eq!(with_subseconds("%6f", 5_000), "000005");
    assert_eq!(with_subseconds("%%3f", 5), "%%3f");
    assert_eq!(with_subseconds("[%F] ", 5), "[%F] ");
    let ts = timestamp("[%F %T] ");
    assert!(
        ts.starts_with('[') && ts.ends_with("] ") && ts.len() == 22,
        "{ts}"
    );
    assert_eq!(timestamp(""), "");
}

#[test]
fn file_names_expand_like_nccl() {
    assert_eq!(
        expand_file_name("/tmp/nccl.%h.%p.log", "n1", 42),
        "/tmp/nccl.n1.42.log"
    );
    assert_eq!(expand_file_name("100%%h", "n1", 42), "100%h");
    assert_eq!(expand_file_name("a%xb%", "n1", 42), "a%xb%");
    assert_eq!(expand_file_name("plain", "n1", 42), "plain");
}

#[test]
fn lines_have_nccls_shape() {
    assert_eq!(
        format_line(
            "",
            "n1",
            7,
            9,
            3,
            Level::Warn,
            "transport/p2p.cc:275",
            "Cuda failure 101 'invalid device ordinal'"
        ),
        "\nn1:7:9 [3] transport/p2p.cc:275 NCCL WARN Cuda failure 101 'invalid device ordinal'\n"
    );
    assert_eq!(
        format_line(
            "[2025-01-02 03:04:05] ",
            "n1",
            7,
            9,
            0,
            Level::Warn,
            "a.cc:1",
            "x"
        ),
        "\n[2025-01-02 03:04:05] n1:7:9 [0] a.cc:1 NCCL WARN x\n"
    );
    assert_eq!(
        format_line("", "n1", 7, 9, 0, Level::Info, "", "x"),
        "n1:7:9 [0] NCCL INFO x\n"
    );
    assert_eq!(
        format_line(
            "",
            "n1",
            7,
            9,
            0,
            Level::Version,
            "",
            "NCCL version 2.28.3+sim"
        ),
        "NCCL version 2.28.3+sim\n"
    );
}

#[test]
fn last_error_is_a_c_string_cut_to_fit() {
    let mut buf = [0xffu8; 8];
    store_c(&mut buf, "abc");
    assert_eq!(&buf[..4], b"abc\0");
    store_c(&mut buf, "0123456789");
    assert_eq!(&buf, b"0123456\0");
    store_c(&mut buf, "a\0b");
    assert_eq!(&buf[..4], b"a b\0");
}

#[test]
fn host_is_short() {
    assert!(!host().is_empty() && !host().contains('.'));
}
