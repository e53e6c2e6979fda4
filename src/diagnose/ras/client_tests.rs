//! RAS client tests: when and where the client asks, its bound, the hash it asks about, and
//! the protocol against a fake RAS service.
use super::*;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Instant;

use super::tests::{HASH, TEXT_2287, json_rank, json_report};
#[test]
fn enable_and_address_follow_ncclloadparam() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    };
    assert_eq!(
        target(22807, env(&[])),
        Ok(Target {
            addr: "localhost:28028".into(),
            json: true
        })
    );
    assert_eq!(
        target(22803, env(&[("NCCL_RAS_ADDR", "127.0.0.1:39000")])),
        Ok(Target {
            addr: "127.0.0.1:39000".into(),
            json: false
        })
    );
    assert_eq!(target(22303, env(&[])), Err(Unavailable::TooOld(22303)));
    assert_eq!(
        target(22400, env(&[("NCCL_RAS_ENABLE", "0")])),
        Err(Unavailable::Disabled)
    );
    for (v, on) in [
        (None, true),
        (Some(""), true),
        (Some("1"), true),
        (Some(" 1"), true),
        (Some("0x1"), true),
        (Some("1abc"), true),
        (Some("0"), false),
        (Some("2"), false),
        (Some("yes"), false),
        (Some("-1"), false),
        (Some("99999999999999999999"), true),
    ] {
        assert_eq!(enabled(v), on, "{v:?}");
    }
}

#[test]
fn the_bound_is_a_quarter_of_the_deadline_within_half_a_second_and_ten() {
    assert_eq!(bound(Duration::from_secs(1)), Duration::from_millis(500));
    assert_eq!(bound(Duration::from_secs(4)), Duration::from_secs(1));
    assert_eq!(bound(Duration::from_secs(600)), Duration::from_secs(10));
}

#[test]
fn hashes_follow_each_release() {
    // DJB2a (2.24, 2.25) over C chars: 0xff is -1 on x86-64 and flips every bit there.
    assert_eq!(comm_hash(22403, &[]), 5381);
    assert_eq!(comm_hash(22403, b"a"), (5381u64 * 33) ^ 97);
    let ff = comm_hash(22403, &[0xff]);
    if std::ffi::c_char::MIN != 0 {
        assert_eq!(ff, !(5381u64 * 33));
    } else {
        assert_eq!(ff, (5381u64 * 33) ^ 0xff);
    }
    // From 2.26 another function: different, stable, and sensitive to every byte.
    let id = [7u8; 128];
    let h = comm_hash(22807, &id);
    assert_ne!(h, comm_hash(22503, &id));
    assert_eq!(h, comm_hash(22600, &id));
    let mut other = id;
    other[127] = 8;
    assert_ne!(h, comm_hash(22807, &other));
    // Values from NCCL's own `getHash` (v2.28.7-1 and v2.24.3-1 `src/include/bitops.h`),
    // compiled with gcc on x86-64, for id[i] = i*37+11 and for 7 bytes with high bits set.
    let id: Vec<u8> = (0..128u32).map(|i| (i * 37 + 11) as u8).collect();
    let s = [0xffu8, 1, 2, 3, 0x80, 5, 6];
    assert_eq!(comm_hash(22807, &id), 0x3002_dcd1_bbe6_653d);
    assert_eq!(comm_hash(22807, &s), 0x1d94_69ab_889b_8ef9);
    if std::ffi::c_char::MIN != 0 {
        assert_eq!(comm_hash(22403, &id), 0x65bb_3b0c_ba52_7185);
        assert_eq!(comm_hash(22403, &s), 0xd093_4e89_33f9);
    }
}

/// A RAS service on a free port that answers one connection with `script` (None: accept and
/// say nothing).
fn fake(script: Option<(&'static str, String)>) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let mut got = Vec::new();
        let Some((greeting, body)) = script else {
            std::thread::sleep(Duration::from_millis(1500));
            return got;
        };
        let mut w = s.try_clone().unwrap();
        for line in BufReader::new(s).lines() {
            let Ok(line) = line else { break };
            got.push(line.clone());
            let up = line.to_ascii_uppercase();
            if up.starts_with("CLIENT PROTOCOL") {
                w.write_all(greeting.as_bytes()).unwrap();
            } else if up.starts_with("TIMEOUT") || up.starts_with("SET FORMAT") {
                w.write_all(b"OK\n").unwrap();
            } else if up == "STATUS" {
                w.write_all(body.as_bytes()).unwrap();
                break;
            }
        }
        got
    });
    (addr, t)
}

#[test]
fn the_client_speaks_the_protocol_and_reads_to_the_close() {
    let body = json_report(2, &[json_rank(0, "h0", 1, 0, false, 3)], &[], 0);
    let (addr, t) = fake(Some(("SERVER PROTOCOL 2\n", body)));
    let r = query(&Target { addr, json: true }, Duration::from_secs(5), None).unwrap();
    assert!(r.comm(HASH).is_some());
    let said = t.join().unwrap();
    assert_eq!(said[0], "CLIENT PROTOCOL 2");
    assert!(said[1].starts_with("TIMEOUT "), "{said:?}");
    assert_eq!(&said[2..], ["SET FORMAT json", "STATUS"]);

    let (addr, t) = fake(Some(("SERVER PROTOCOL 3\n", TEXT_2287.to_string())));
    let r = query(&Target { addr, json: false }, Duration::from_secs(5), None).unwrap();
    assert_eq!(r.comm(HASH).unwrap().findings.len(), 4);
    assert_eq!(t.join().unwrap().len(), 3);
}

#[test]
fn absent_silent_and_foreign_services_are_quiet_and_bounded() {
    // Nobody listens: refused at once.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let t0 = Instant::now();
    let r = query(
        &Target {
            addr: format!("127.0.0.1:{port}"),
            json: true,
        },
        Duration::from_secs(5),
        None,
    );
    assert!(matches!(r, Err(Unavailable::NoService(_))), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(1));
    // Accepts, never answers: the bound holds.
    let (addr, t) = fake(None);
    let t0 = Instant::now();
    let r = query(
        &Target { addr, json: true },
        Duration::from_millis(600),
        None,
    );
    assert!(r.is_err(), "{r:?}");
    assert!(
        t0.elapsed() < Duration::from_millis(1200),
        "{:?}",
        t0.elapsed()
    );
    t.join().unwrap();
    // Something else on the port.
    let (addr, t) = fake(Some(("HTTP/1.1 400 Bad Request\n", String::new())));
    let r = query(&Target { addr, json: true }, Duration::from_secs(2), None);
    assert!(matches!(r, Err(Unavailable::Garbled(_))), "{r:?}");
    t.join().unwrap();
    // Another job's process answers: its report does not know the communicator asked about.
    let body = json_report(2, &[json_rank(0, "h0", 1, 0, false, 3)], &[], 0);
    let (addr, t) = fake(Some(("SERVER PROTOCOL 2\n", body)));
    let r = query(
        &Target { addr, json: true },
        Duration::from_millis(400),
        Some(HASH + 1),
    );
    assert!(r.is_err(), "{r:?}");
    t.join().unwrap();
    // A name that resolves to nothing.
    let r = query(
        &Target {
            addr: "no-such-host.invalid:1".into(),
            json: true,
        },
        Duration::from_secs(2),
        None,
    );
    assert!(matches!(r, Err(Unavailable::BadAddress(_))), "{r:?}");
}
