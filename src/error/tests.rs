use super::*;

/// Rank 0 of the real 2.19.3 when rank 1 died inside its first import (seen in
/// tests/real_nccl_faults.rs): its proxy call's socket was reset, a peer's doing.
#[test]
fn a_connection_reset_by_the_peer_is_the_peer_going_away() {
    let evidence = vec![
            "vm:30904:30945 [0] misc/socket.cc:30 NCCL WARN socketProgressOpt: Call to recv from 192.0.2.2<37843> failed : Connection reset by peer".to_string(),
            "vm:30904:30945 [0] proxy.cc:1172 NCCL WARN Socket recv failed while polling for opId=0x7f19e4007fc0".to_string(),
        ];
    let error = "ncclCommInitRankConfig returned ncclInternalError (3): internal error";
    assert_eq!(Kind::read(error, &evidence), Kind::PeerGone);
    assert_eq!(Kind::read(error, &[]), Kind::Own);
    // 2.32.3's rank 0 in the same case: the dead rank's proxy socket has no listener.
    let uds = vec![
            "vm:624:624 [0] os/linux_ipcsocket.cc:233 (ncclIpcSocketSendMsg) NCCL WARN UDS: Sending data over socket /tmp/nccl-socket-1-a4be48020864f24a failed : Connection refused (111)".to_string(),
        ];
    let error = "ncclAllReduce returned ncclSystemError (2): unhandled system error";
    assert_eq!(Kind::read(error, &uds), Kind::PeerGone);
}

#[test]
fn verdict_line_names_stage_rank_host_cause_and_hint() {
    let who = Who {
        rank: Some(3),
        host: "node7".into(),
    };
    let f = Failure::new(Stage::ConnectShm, &who, "ncclSystemError")
        .cause("/dev/shm too small (64 MiB)")
        .hint("mount a memory-backed emptyDir at /dev/shm");
    assert_eq!(
        f.to_string(),
        "FAIL at connect:shm on rank 3 (host node7): ncclSystemError — likely cause: /dev/shm too small (64 MiB) — try: mount a memory-backed emptyDir at /dev/shm"
    );
    assert_eq!(f.exit_code(), Stage::ConnectShm.exit_code());
}

#[test]
fn alike_failures_on_several_ranks_read_as_one_line() {
    let at = |rank, host: &str, error: &str| {
        Failure::new(
            Stage::ConnectProxy,
            &Who {
                rank: Some(rank),
                host: host.into(),
            },
            error,
        )
        .hint("raise the open-file limit")
    };
    let fs = [
        at(3, "b", "ncclInternalError"),
        at(1, "a", "ncclInternalError"),
        at(2, "a", "ncclRemoteError"),
        at(1, "a", "ncclInternalError"),
        at(4, "c", "ncclInternalError on port 4711"),
        at(5, "c", "ncclInternalError on port 4712"),
    ];
    let g = group(&fs);
    assert_eq!(g.len(), 3);
    assert_eq!(g[2].ranks, vec![Some(4), Some(5)]);
    assert_eq!(g[0].ranks, vec![Some(3), Some(1)]);
    assert_eq!(
        g[0].to_string(),
        "FAIL at connect:proxy on ranks 1, 3 (hosts b, a): ncclInternalError — try: raise the open-file limit"
    );
    assert_eq!(g[1].to_string(), fs[2].to_string());
    // A communicator's address in hex is a number too; a word that differs is not.
    let comm = |rank, addr: &str| {
        at(
            rank,
            "a",
            &format!("ncclProxyStop: comm {addr} (rank = {rank}) destroys proxy resource error 2"),
        )
    };
    let fs = [
        comm(3, "0x55a550d8f430"),
        comm(1, "0x55b7033df2e0"),
        at(2, "a", "ncclProxyStop: comm 0xfe destroys nothing"),
    ];
    assert_eq!(group(&fs).len(), 2);
    assert_eq!(group(&fs)[0].ranks, vec![Some(3), Some(1)]);
    assert_eq!(without_hex("(0xdeadBEEF,0x1)face"), "(0x,0x)face");
    // One communicator error, surfaced by the collective on one rank and by the
    // asynchronous query on another; a different error is not alike.
    let fs = [
        at(
            0,
            "a",
            "ncclAllReduce returned ncclSystemError (2): unhandled system error",
        ),
        at(
            1,
            "a",
            "ncclCommGetAsyncError returned ncclSystemError (2): unhandled system error",
        ),
        at(
            2,
            "a",
            "ncclCommGetAsyncError returned ncclInternalError (3): internal error",
        ),
    ];
    let g = group(&fs);
    assert_eq!(g.len(), 2);
    assert_eq!(g[0].ranks, vec![Some(0), Some(1)]);
    assert_eq!(
        without_caller("no call returned here"),
        "no call returned here"
    );
}

#[test]
fn unknown_rank_is_said_so() {
    let who = Who {
        rank: None,
        host: "h".into(),
    };
    let f: Result<(), Failure> = Err::<(), _>("boom").at(Stage::Launch, &who);
    assert!(
        f.unwrap_err()
            .to_string()
            .starts_with("FAIL at launch on rank ? (host h): boom")
    );
}

/// A failure's kind travels with it: one read back is of the kind it was made, whatever its
/// words say; a failure written before the kind travelled gets it from its words.
#[test]
fn the_kind_travels_and_old_failures_get_it_from_their_words() {
    let who = Who {
        rank: Some(2),
        host: "h".into(),
    };
    // Words that alone read as the rank's own failure, made a wait that ran out.
    let f =
        Failure::new(Stage::Connect, &who, "first all_reduce (connect) stalled").kind(Kind::Waited);
    assert_eq!(Kind::read(&f.error, &f.evidence), Kind::Own);
    let json = serde_json::to_value(&f).unwrap();
    assert_eq!(json["kind"], "waited");
    assert!(
        json.get("severity").is_none(),
        "a failure's severity is not written"
    );
    let back: Failure = serde_json::from_value(json.clone()).unwrap();
    assert_eq!(back.kind, Kind::Waited);
    // Every kind round-trips.
    for k in [
        Kind::Own,
        Kind::Stopped,
        Kind::PeerGone,
        Kind::Waited,
        Kind::Hung,
        Kind::Crashed,
    ] {
        let mut g = f.clone();
        g.kind = k;
        let back: Failure = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back.kind, k);
    }
    // Made without a kind: written with the one its words say, where it is made.
    let stopped = Failure::new(Stage::Run, &who, format!("{STOPPED} during the run stage"));
    assert_eq!(stopped.kind, Kind::Own);
    assert_eq!(serde_json::to_value(&stopped).unwrap()["kind"], "stopped");
    // Made without a kind: written with the one its words say, where it is made.
    let stopped = Failure::new(Stage::Run, &who, format!("{STOPPED} during the run stage"));
    assert_eq!(stopped.kind, Kind::Own);
    assert_eq!(serde_json::to_value(&stopped).unwrap()["kind"], "stopped");
    // Written before the kind travelled: told from the words.
    let mut old = json;
    old.as_object_mut().unwrap().remove("kind");
    old["error"] = format!("{STOPPED} (SIGTERM)").into();
    let back: Failure = serde_json::from_value(old).unwrap();
    assert_eq!(back.kind, Kind::Stopped);
    // A warning stays a warning.
    let mut w = f;
    w.severity = Severity::Warn;
    let back: Failure = serde_json::from_str(&serde_json::to_string(&w).unwrap()).unwrap();
    assert_eq!(back.severity, Severity::Warn);
}
