mod main {
    use super::super::*;
    use crate::diagnose::explain::read::explain_reader;

    #[test]
    fn ranks_versions_and_watchdog_across_files() {
        let a = "a:10:10 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n\
                 a:10:20 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n\
                 [rank0]:[E1 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n";
        let b = "b:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.3\n\
                 b:11:21 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n\
                 [rank1]:[E1 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out.\n";
        let c = "c:12:12 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n\
                 c:12:22 [0] NCCL INFO ncclCommInitRank comm 0x3 rank 2 nranks 3 cudaDev 0 nvmlDev 0 busId 1000 commId 0x5 - Init COMPLETE\n";
        let s: Vec<LogSummary> = [("a", a), ("b", b), ("c", c)]
            .iter()
            .map(|(n, l)| explain_reader(n, l.as_bytes()).unwrap())
            .collect();
        let v = job_verdict(&s);
        assert!(v.version_mismatch);
        // A version mismatch is a failure and outranks the hang it may cause.
        assert_eq!(v.status, "fail");
        assert_eq!(
            v.root_cause.as_ref().unwrap().category,
            Category::VersionMismatch
        );
        let h = v.hang.as_ref().unwrap();
        assert_eq!(h.silent_first.len(), 1, "{h:?}");
        assert_eq!(h.silent_first[0].rank, Some(2));

        // Same versions: the hang is the verdict and rank 2, silent, is the culprit.
        let c2 = c.replace("2.18.1+cuda12.1", "2.19.3+cuda12.3");
        let s2 = vec![
            s[0].clone(),
            s[1].clone(),
            explain_reader("c", c2.as_bytes()).unwrap(),
        ];
        let v2 = job_verdict(&s2);
        assert_eq!(v2.status, "hang");
        assert_eq!(v2.culprits.len(), 1);
        assert_eq!(v2.culprits[0].rank, Some(2));
    }

    #[test]
    fn the_culprit_not_the_victims() {
        let a = "a:1:1 [0] NCCL INFO ncclCommInitRank comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1 - Init START\n\
                 a:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer b<4242>\n";
        let b = "b:2:2 [0] NCCL INFO ncclCommInitRank comm 0x2 rank 1 nranks 2 cudaDev 0 busId 1 - Init START\n\
                 b:2:3 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes, error: No space left on device (28)\n";
        let s: Vec<LogSummary> = [("a", a), ("b", b)]
            .iter()
            .map(|(n, l)| explain_reader(n, l.as_bytes()).unwrap())
            .collect();
        let v = job_verdict(&s);
        assert_eq!(v.status, "fail");
        assert_eq!(v.root_cause.as_ref().unwrap().category, Category::Shm);
        assert_eq!(v.culprits.len(), 1);
        assert_eq!(v.culprits[0].rank, Some(1));
        assert_eq!(v.consequences_only.len(), 1);
        assert_eq!(v.consequences_only[0].rank, Some(0));
    }

    /// An NCCL error no line explains, after the RDMA provider failed to load: the provider is
    /// the likely cause. With a failure that names its cause, the provider stays advice.
    #[test]
    fn a_provider_that_did_not_load_explains_a_bare_nccl_error() {
        let missing = "libibverbs: Warning: no userspace device-specific driver found for /sys/class/infiniband_verbs/uverbs0\n";
        let bare = format!("{missing}node1: Test NCCL failure common.cu:775 'internal error'\n");
        let v = job_verdict(&[explain_reader("a", bare.as_bytes()).unwrap()]);
        let root = v.root_cause.unwrap();
        assert_eq!(
            (root.signature.as_str(), root.category, root.severity),
            ("ibverbs-no-provider", Category::NetIb, Severity::Fail)
        );
        let named = format!(
            "{missing}h:1:1 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-x to 9637892 bytes\n\
             node1: Test NCCL failure common.cu:775 'internal error'\n"
        );
        let v = job_verdict(&[explain_reader("a", named.as_bytes()).unwrap()]);
        assert_eq!(v.root_cause.unwrap().category, Category::Shm);
        // Alone it is advice: a slower network, not a failure.
        let v = job_verdict(&[explain_reader("a", missing.as_bytes()).unwrap()]);
        assert_eq!(v.status, "advice");
    }
}

mod peer {
    use super::super::peer_in;

    #[test]
    fn consequences_name_their_peer() {
        assert_eq!(
            peer_in("h:1:2 [0] misc/socket.cc:49 NCCL WARN socketProgress: Connection closed by remote peer node2<52366>").as_deref(),
            Some("node2")
        );
        assert_eq!(
            peer_in("proxy.cc:1521 NCCL WARN [Proxy Service 2] Failed to execute operation Connect from rank 3, retcode 3").as_deref(),
            Some("rank 3")
        );
        assert_eq!(peer_in("ncclRemoteError: remote process exited"), None);
    }
}
