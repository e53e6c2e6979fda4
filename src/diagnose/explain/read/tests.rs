use super::*;
use proptest::prelude::*;

fn findings_of(log: &str) -> Vec<(String, Category, String)> {
    explain_reader("t.log", log.as_bytes())
        .unwrap()
        .findings
        .into_iter()
        .map(|f| (f.signature, f.category, f.stage))
        .collect()
}

/// NCCL's own structure when no WARN names the cause: the first `file:line -> N` trace
/// places the failure; connect retries the log ends in are a failure to reach the peer; a
/// socket-layer WARN belongs to the caller the traces after it name; the net transport's
/// WARN to the network NCCL chose.
#[test]
fn traces_retries_callers_and_networks() {
    let traced =
        "h:1:2 [0] NCCL INFO transport/net_ib.cc:395 -> 2\nh:1:2 [0] NCCL INFO init.cc:300 -> 2\n";
    assert_eq!(
        findings_of(traced),
        vec![("loc-net-ib".into(), Category::NetIb, "connect:net".into())]
    );
    let remote = "h:1:2 [0] NCCL INFO misc/socket.cc:80 -> 6\n";
    assert_eq!(findings_of(remote)[0].1, Category::RemoteError);
    let retries = "h:1:2 [0] NCCL INFO Bootstrap : Using lo:127.0.0.1<0>\n\
                       h:1:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                       h:1:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n";
    assert_eq!(findings_of(retries)[0].0, "connect-retries");
    let recovered = "h:1:3 [0] NCCL INFO Call to connect returned Connection refused, retrying\n\
                         h:1:3 [0] NCCL INFO Connected all rings\n";
    assert!(findings_of(recovered).is_empty());
    let caller = "h:1:2 [0] include/socket.h:318 NCCL WARN Net : Socket creation failed : Address family not supported by protocol\n\
                      h:1:2 [0] NCCL INFO transport/net_ib.cc:407 -> 2\n";
    assert_eq!(findings_of(caller)[0].1, Category::NetIb);
    let net = "h:1:2 [0] NCCL INFO Using network IB\n\
                   h:1:2 [0] transport/net.cc:700 NCCL WARN something new in the net transport\n";
    assert_eq!(findings_of(net)[0].1, Category::NetIb);
    let net = "h:1:2 [0] NCCL INFO Using network Socket\n\
                   h:1:2 [0] transport/net.cc:700 NCCL WARN something new in the net transport\n";
    assert_eq!(findings_of(net)[0].1, Category::NetSocket);
}

/// The socket layer's failure belongs to its caller also when NCCL printed no WARN (the
/// first trace is in misc/socket.cc, a later frame in bootstrap.cc), and a peer closing a
/// bootstrap connection is the bootstrap's consequence, not a generic remote error.
#[test]
fn socket_failures_take_their_callers_subsystem() {
    let silent = "h:1:2 [4] NCCL INFO misc/socket.cc:666 -> 2\n\
                      h:1:2 [4] NCCL INFO bootstrap.cc:280 -> 2\n\
                      h:1:2 [4] NCCL INFO init.cc:1388 -> 2\n";
    assert_eq!(
        findings_of(silent),
        vec![("loc-bootstrap".into(), Category::Bootstrap, "init".into())]
    );
    let closed = "[0] misc/socket.cc:71 NCCL WARN socketProgress: Connection closed by remote peer 10.0.1.3<36138>\n\
                      [0] NCCL INFO misc/socket.cc:80 -> 6\n\
                      [0] NCCL INFO bootstrap.cc:701 -> 6\n";
    let s = explain_reader("t.log", closed.as_bytes()).unwrap();
    assert_eq!(s.findings.len(), 1, "{:?}", s.findings);
    assert_eq!(s.findings[0].category, Category::Bootstrap);
    assert_eq!(s.findings[0].severity, Severity::Consequence);
    assert!(s.findings[0].cause.contains("bootstrap.cc:701"));
    // The same close on the proxy's socket stays a consequence of a peer's failure.
    let proxy = closed.replace("bootstrap.cc:701", "proxy.cc:1200");
    assert_eq!(findings_of(&proxy)[0].1, Category::RemoteError);
}

/// A refused connect with no caller is the bootstrap's, unless the process ran channels
/// over the socket transport.
#[test]
fn a_refusal_without_caller_is_the_bootstraps() {
    let refused = "node1:63799:64163 [7] include/socket.h:387 NCCL WARN Connect to 10.0.0.1<52473> failed : Connection refused\n";
    assert_eq!(findings_of(refused)[0].1, Category::Bootstrap);
    let transport = format!(
        "node1:63799:64163 [7] NCCL INFO Channel 00/0 : 7[7] -> 0[0] [send] via NET/Socket/0\n{refused}"
    );
    assert_eq!(findings_of(&transport)[0].1, Category::NetSocket);
}

/// A crash is placed where its process was last in NCCL; one whose process said nothing
/// stays a crash at run.
#[test]
fn a_crash_is_placed_by_its_process_last_nccl_line() {
    let log = "node1:405884:407462 [0] NCCL INFO NCCL_IB_FIFO_TC set by environment to 224.\n\
                   node2:77:78 [7] NCCL INFO NET/IB: IbDev 4 Port 1 qpn 103534 set_ece={supported=1}\n\
                   node1:405884:407462 [0] NCCL INFO RAS client listening socket at ::1<28028>\n\
                   node2:77:78 [7] NCCL INFO NET/IB: IbDev 4 Port 1 qpn 103535 set_ece={supported=1}\n\
                   [node1:405884] *** Process received signal ***\n";
    let s = explain_reader("t.log", log.as_bytes()).unwrap();
    let f = &s.findings[0];
    assert_eq!((f.signature.as_str(), f.category), ("crash", Category::Ras));
    assert_eq!((f.host.as_deref(), f.pid), (Some("node1"), Some(405884)));
    assert!(f.cause.contains("line 3"), "{}", f.cause);
    let ucx = "h:5665:5801 [2] NCCL INFO Channel 00/0 : 2[2] -> 3[3] via NET/IB/0\n\
                   [h:5665 :0:5665] Caught signal 11 (Segmentation fault: address not mapped to object at address (nil))\n";
    assert_eq!(findings_of(ucx)[0].1, Category::NetIb);
    let unknown = "Segmentation fault (core dumped)\n";
    assert_eq!(
        findings_of(unknown),
        vec![("crash".into(), Category::Run, "run".into())]
    );
}

/// A crash no NCCL line placed takes the first frame of its stack in NCCL's source; a bus
/// error names /dev/shm itself, wherever its process was last.
#[test]
fn a_crash_stack_in_nccl_source_places_it_and_a_bus_error_is_shm() {
    let gdb = "[tb:78142] *** Process received signal ***\n\
                   [tb:78142] Signal: Segmentation fault (11)\n\
                   #0  0x00007f1f0ba9b33c in pathDistance (links=<optimized out>) at graph/topo.cc:618\n\
                   #1  0x00007f1f0ba9c000 in ncclTopoCompute () at graph/search.cc:10\n";
    let s = explain_reader("t.log", gdb.as_bytes()).unwrap();
    let f = &s.findings[0];
    assert_eq!(
        (f.signature.as_str(), f.category),
        ("crash", Category::Topology)
    );
    assert!(f.cause.contains("(graph/topo.cc:618)"), "{}", f.cause);
    // A frame of other code places nothing.
    let other = "Segmentation fault (core dumped)\n#0  0x1 in main () at app.cpp:12\n";
    assert_eq!(findings_of(other)[0].1, Category::Run);
    let bus = "h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/IB/0\n\
                   [h:1 :0:2] Caught signal 7 (Bus error: nonexistent physical address)\n";
    let s = explain_reader("t.log", bus.as_bytes()).unwrap();
    let f = &s.findings[0];
    assert_eq!(
        (f.signature.as_str(), f.category),
        ("bus-error", Category::Shm)
    );
    assert_eq!((f.host.as_deref(), f.pid), (Some("h"), Some(1)));
}

/// NCCL's RAS finding the ranks at different operation counts is a hang; a communicator
/// destroyed after the last row of a sweep ends the sweep (no hang for a lost footer).
#[test]
fn ras_count_mismatch_is_a_hang_and_a_destroyed_communicator_ends_a_sweep() {
    let ras = "#0-0 (fa93daea854b060b) MISMATCH\n  Communicator ranks have different AllGather operation counts\n";
    assert_eq!(findings_of(ras)[0].1, Category::Hang);
    let sweep = "#                                                              out-of-place                       in-place\n\
                     #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
                     33554432       8388608     float     sum      -1   2037.7   16.47   24.70      0   2063.9   16.26   24.39      0\n";
    let open = explain_reader("t.log", sweep.as_bytes()).unwrap();
    assert!(open.sweep_open.is_some());
    let done = format!(
        "{sweep}h:1:1 [0] NCCL INFO comm 0x5 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 - Destroy COMPLETE\n"
    );
    let s = explain_reader("t.log", done.as_bytes()).unwrap();
    assert!(s.sweep_open.is_none() && s.completed.is_some());
}

/// A wrapper's NCCL error with no cause named is at init when the log names the call that
/// creates the communicator; NCCL's own INFO line with that name is not such a caller.
#[test]
fn a_wrapper_error_under_a_communicator_creation_is_at_init() {
    let pynccl = "  File \"pynccl_wrapper.py\", line 277, in ncclCommInitRank\n\
                      RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n";
    assert_eq!(
        findings_of(pynccl),
        vec![(
            "wrapper-nccl-error".into(),
            Category::NcclError,
            "init".into()
        )]
    );
    let later = "h:1:2 [0] NCCL INFO ncclCommInitRank comm 0x5 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n\
                     RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n";
    assert_eq!(findings_of(later)[0].2, "run");
}

/// The families' own words: PyTorch failing to fetch rank 0's unique id from its store is the
/// bootstrap's (a consequence of rank 0), Open MPI's SIGKILL report names the killed rank, a
/// CUDA failure in the NVLS transport is NVLS's.
#[test]
fn unique_id_store_killed_rank_and_nvls_cuda_calls() {
    let store = "RuntimeError: [3] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by key '0', but store->get('0') got error: Connection reset by peer\n";
    let f = &explain_reader("t.log", store.as_bytes()).unwrap().findings[0];
    assert_eq!(
        (f.category, f.severity, f.stage.as_str()),
        (Category::Bootstrap, Severity::Consequence, "unique-id")
    );
    let killed =
        "mpirun noticed that process rank 6 with PID 0 on node n1 exited on signal 9 (Killed).\n";
    assert_eq!(findings_of(killed)[0].1, Category::Mpi);
    let nvls = "n:1:2 [1] transport/nvls.cc:246 NCCL WARN Cuda failure 3 'initialization error'\n";
    assert_eq!(
        findings_of(nvls),
        vec![("nvls-cuda".into(), Category::Nvls, "init".into())]
    );
    // Elsewhere the same code is CUDA that could not start.
    let init = "n:1:2 [1] init.cc:100 NCCL WARN Cuda failure 3 'initialization error'\n";
    assert_eq!(findings_of(init)[0].1, Category::Cuda);
}

/// NCCL_NET naming a network whose plugin failed to load: the plugin's failure is the
/// cause, not only advice.
#[test]
fn a_plugin_that_did_not_load_fails_the_network_asked_for() {
    let log = "n:556:556 [1] NCCL INFO NET/Plugin: Plugin load returned 2 : /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.32' not found (required by /usr/lib/libnccl-net.so) : when loading libnccl-net.so\n\
                   n:556:556 [1] net.cc:579 NCCL WARN Error: network gIB not found.\n";
    let s = explain_reader("t.log", log.as_bytes()).unwrap();
    let plugin = s
        .findings
        .iter()
        .find(|f| f.signature == "net-plugin-version")
        .unwrap();
    assert_eq!(plugin.severity, Severity::Fail);
    let v = super::super::job_verdict(std::slice::from_ref(&s));
    assert_eq!(
        v.root_cause.map(|r| r.signature).as_deref(),
        Some("net-plugin-version")
    );
    // Without NCCL_NET asking for it, the same line stays advice.
    let alone = log.lines().next().unwrap();
    let s = explain_reader("t.log", alone.as_bytes()).unwrap();
    assert_eq!(s.findings[0].severity, Severity::Advice);
}

/// An error line of the MPI family that no signature names is that family's finding; an
/// error line of no known family stays unexplained and quoted.
#[test]
fn the_mpi_family_reads_its_own_unnamed_errors() {
    let mpi = "[node1][[1234,1],0][btl_tcp_endpoint.c:803:mca_btl_tcp_endpoint_complete_connect] connect() to 10.0.0.2 failed: No route to host (113)\n";
    let s = explain_reader("t.log", mpi.as_bytes()).unwrap();
    assert_eq!(s.findings[0].signature, "mpi-family");
    assert_eq!(s.unexplained_total, 0);
    let other = "frobnicator: fatal: the widget failed\n";
    let s = explain_reader("t.log", other.as_bytes()).unwrap();
    assert!(s.findings.is_empty());
    assert_eq!(s.unexplained_total, 1);
    let srun = "srun: error: node1: task 3: Exited with exit code 1\n";
    assert_eq!(findings_of(srun)[0].1, Category::RemoteError);
}

/// XLA's status quotes NCCL's last WARN: that text is read as the WARN it was.
#[test]
fn xla_quotes_the_last_nccl_warn() {
    let line = "INTERNAL: external/xla/xla/service/gpu/nccl_utils.cc:305: NCCL operation ncclCommInitRank(&comm, nranks, id, rank) failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details). Last NCCL warning(error) log entry (may be unrelated) 'Cuda failure 2 'out of memory''.";
    assert_eq!(xla_last_warn(line), Some("Cuda failure 2 'out of memory'"));
    assert_eq!(findings_of(line)[0].1, Category::Oom);
    assert_eq!(xla_last_warn("no quote here"), None);
}

/// ncclCommEnsureReady's refusal names an earlier failure, not a misuse at init.
#[test]
fn a_communicator_with_an_earlier_error_is_not_an_init_misuse() {
    let log = "n:1:1 [2] init.cc:303 NCCL WARN Attempt to use communicator before the previous operation returned ncclSuccess\n";
    assert_eq!(
        findings_of(log),
        vec![("comm-async-error".into(), Category::NcclError, "run".into())]
    );
}

/// A repeated socket WARN of one process is one finding; the trace after the repeat still
/// places that finding (it once pointed past the end of the findings and panicked).
#[test]
fn a_repeated_socket_warn_keeps_its_caller() {
    let warn = "h:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<1> failed : Connection refused\n";
    let log = format!("{warn}{warn}h:1:2 [0] NCCL INFO transport/net_ib.cc:407 -> 2\n");
    let found = findings_of(&log);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].1, Category::NetIb);
}

#[test]
fn one_finding_per_family_and_process() {
    let log = "a:1:1 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-x (size 9637888)\n\
                   a:1:1 [0] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-y (size 9637888)\n\
                   b:2:2 [1] NCCL WARN Error while creating shared memory segment /dev/shm/nccl-z (size 9637888)\n";
    let s = explain_reader("x.log", log.as_bytes()).unwrap();
    assert_eq!(s.lines, 3);
    assert_eq!(s.nccl_lines, 3);
    assert_eq!(s.findings.len(), 2);
    assert_eq!(s.findings[0].stage, "connect:shm");
    assert_eq!(s.findings[1].host.as_deref(), Some("b"));
    assert_eq!(s.findings[1].line, 3);
}

#[test]
fn huge_lines_are_cut_not_kept() {
    let mut log = vec![b'x'; MAX_LINE * 3];
    log.extend_from_slice(
        b"\nh:1:1 [0] NCCL WARN NET/IB : Got completion from peer 1.2.3.4<5> with error 12\n",
    );
    let s = explain_reader("big.log", &log[..]).unwrap();
    assert_eq!((s.lines, s.truncated_lines), (2, 1));
    assert_eq!(s.findings[0].stage, "run");
}

#[test]
fn binary_is_refused_and_escapes_are_cleaned() {
    let e = explain_reader("bin", &[0u8, 1, 2, 3, 0, 0][..]).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidData);
    let s = explain_reader(
        "esc",
        "h:1:1 [0] NCCL WARN Bootstrap : no socket interface found \x1b[31mred\x1b[0m\x07\n"
            .as_bytes(),
    )
    .unwrap();
    assert!(
        !s.findings[0].evidence.contains('\x1b'),
        "{:?}",
        s.findings[0].evidence
    );
    assert!(!s.findings[0].evidence.contains('\x07'));
}

#[test]
fn the_size_cap_stops_reading() {
    let log = "h:1:1 [0] NCCL INFO x\n".repeat(1000);
    let s = explain_reader_limited(
        "capped",
        log.as_bytes(),
        Limits {
            max_bytes: 100,
            deadline: None,
        },
    )
    .unwrap();
    assert!(s.lines < 10 && s.stopped.is_some(), "{s:?}");
}

proptest! {
    #[test]
    fn any_bytes_give_a_result_or_a_clear_error(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        match explain_reader("fuzz", &bytes[..]) {
            Ok(s) => prop_assert!(s.lines <= bytes.len() as u64 + 1),
            Err(e) => prop_assert_eq!(e.kind(), std::io::ErrorKind::InvalidData),
        }
    }
}

/// What a log says beyond NCCL's prefixes: a quoted WARN text is placed by the NCCL file whose
/// format it fits; the proxy's relay of a failed operation leaves the cause to the process's
/// traces; a debugger's stack in a stream wait is a hang; a nccl-tests row with wrong elements
/// is wrong data, even where the run never printed its footer.
#[test]
fn quotes_relays_stacks_and_rows() {
    let quoted = "torch.distributed.DistBackendError: NCCL error in: x.cpp:1, internal error - please report this issue to the NCCL developers, NCCL version 2.19.3\n\
                  ncclInternalError: Internal check failed.\n\
                  Last error:\n\
                  Attribute busid of node nic not found\n";
    let f = findings_of(quoted);
    assert!(f.iter().any(|x| x.1 == Category::Topology), "{f:?}");
    let relay = "h:7:9 [0] proxy.cc:1040 NCCL WARN [Proxy Service 8] Failed to execute operation Connect from rank 8, retcode 2\n\
                 h:7:9 [0] NCCL INFO transport/net_ib.cc:664 -> 2\n\
                 h:7:9 [0] NCCL INFO proxy.cc:914 -> 2\n";
    let f = findings_of(relay);
    assert!(f.iter().any(|x| x.0 == "loc-net-ib"), "{f:?}");
    let alone = "h:7:9 [0] proxy.cc:1040 NCCL WARN [Proxy Service 8] Failed to execute operation Connect from rank 8, retcode 3\n";
    assert_eq!(findings_of(alone)[0].1, Category::RemoteError);
    let stack = "Thread 1 \"all_reduce_perf\" received signal SIGINT, Interrupt.\n\
                 #0  0x00007f637edaaef7 in sched_yield () at ../sysdeps/unix/syscall-template.S:78\n\
                 #1  0x000055798622648f in testStreamSynchronize (ngpus=2, streams=0x7ffd, comms=0x5579) at common.cu:478\n";
    assert_eq!(findings_of(stack)[0].1, Category::Hang);
    let row = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
               \x20     524288        131072     float     sum      -1    663.1    0.79    0.79  237858    569.4    0.92    0.92  238038\n";
    assert_eq!(findings_of(row)[0].1, Category::WrongData);
}

/// An IB port's async event is at the stage its process had reached, in each release's words.
#[test]
fn an_ib_async_event_is_where_its_process_was() {
    for event in [
        "transport/net_ib.cc:93 NCCL WARN NET/IB : Got async event : client reregistration",
        "transport/net_ib.cc:179 NCCL WARN NET/IB : mlx5_0:1 Got async error event: port error",
        "transport/net_ib/common.cc:179 NCCL WARN NET/IB : mlx5_0:1 Got non-fatal async event: port error(10)",
    ] {
        let before = format!("h:1:2 [0] {event}\n");
        assert_eq!(findings_of(&before)[0].2, "init", "{event}");
        let after = format!(
            "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE\n\
             h:1:2 [0] {event}\n"
        );
        let f = findings_of(&after);
        assert_eq!(
            (f[0].1, f[0].2.as_str()),
            (Category::NetIb, "run"),
            "{event}"
        );
    }
}
