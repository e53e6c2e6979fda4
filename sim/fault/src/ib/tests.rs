use super::*;

#[test]
fn hcas_parse_with_their_options_and_default() {
    let h = parse_hcas("mlx5_0, mlx5_1:roce:down:speed=hdr:dmabuf").unwrap();
    assert_eq!(h.len(), 2);
    assert_eq!(
        (h[0].link, h[0].up, h[0].speed, h[0].dmabuf),
        (Link::Infiniband, true, Speed::Ndr, false)
    );
    assert_eq!(
        (h[1].link, h[1].up, h[1].speed, h[1].dmabuf),
        (Link::Ethernet, false, Speed::Hdr, true)
    );
    assert!(parse_hcas("").unwrap().is_empty());
}

#[test]
fn bad_hca_specs_name_the_bad_part() {
    for (spec, says) in [
        ("mlx5_0:fast", "unknown option 'fast'"),
        ("mlx5_0,mlx5_0", "named twice"),
        ("ml x", "bad device name"),
        ("mlx5_0:speed=qdr", "unknown option 'speed=qdr'"),
    ] {
        let e = parse_hcas(spec).unwrap_err().to_string();
        assert!(e.contains(says) && e.starts_with(HCAS_ENV), "{spec}: {e}");
    }
}

#[test]
fn faults_parse_ranks_ranges_and_kinds() {
    let f = parse_ib_faults("ibv_modify_qp@1#2..2:ETIMEDOUT,completion@0:12,async#3").unwrap();
    assert_eq!(f[0].kind, IbKind::Errno(110));
    let on = Some("mlx5_0");
    assert!(f[0].strikes("ibv_modify_qp", Some(1), on, 2));
    assert!(!f[0].strikes("ibv_modify_qp", Some(1), on, 3));
    assert!(!f[0].strikes("ibv_modify_qp", Some(0), on, 2));
    assert_eq!(f[1].kind, IbKind::Status(12));
    assert_eq!(f[2].kind, IbKind::Event(AsyncEvent::QpFatal));
    assert!(f[2].strikes("async", None, on, 7) && !f[2].strikes("async", None, on, 2));
    // Aimed at one HCA: its calls only.
    let h = parse_ib_faults("async/mlx5_1@1#2:port-error").unwrap();
    assert_eq!(h[0].hca.as_deref(), Some("mlx5_1"));
    assert_eq!(h[0].kind, IbKind::Event(AsyncEvent::PortError));
    assert!(h[0].strikes("async", Some(1), Some("mlx5_1"), 2));
    assert!(!h[0].strikes("async", Some(1), Some("mlx5_0"), 2));
    assert!(!h[0].strikes("async", Some(1), None, 2));
    let two = parse_hcas("mlx5_0,mlx5_1").unwrap();
    assert!(check(&two, &h).is_ok());
    let e = check(&two[..1], &h).unwrap_err().to_string();
    assert!(
        e.contains("names HCA 'mlx5_1'") && e.contains("(mlx5_0)"),
        "{e}"
    );
    let g = parse_ib_faults("completion:IBV_WC_WR_FLUSH_ERR,ibv_reg_mr:hang").unwrap();
    assert_eq!((g[0].kind, g[1].kind), (IbKind::Status(5), IbKind::Hang));
}

#[test]
fn bad_faults_name_the_bad_part() {
    for (spec, says) in [
        ("ibv_frobnicate", "unknown fault 'ibv_frobnicate'"),
        ("ibv_modify_qp:EWHAT", "bad errno 'EWHAT'"),
        ("completion:0", "bad completion status '0'"),
        ("ibv_modify_qp#0", "bad call range '#0'"),
        ("ibv_modify_qp#3..2", "bad call range"),
        ("async:link-flap", "bad event 'link-flap'"),
        ("ibv_reg_mr@x", "bad rank 'x'"),
        ("ibv_reg_mr/mlx5 0", "bad HCA 'mlx5 0'"),
        ("ibv_reg_mr/@1", "bad HCA ''"),
    ] {
        let e = parse_ib_faults(spec).unwrap_err().to_string();
        assert!(
            e.contains(says) && e.starts_with(IB_FAULT_ENV),
            "{spec}: {e}"
        );
    }
}
