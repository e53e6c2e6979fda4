use super::*;
use crate::patterns::select;

/// Every rank's receive buffer as a correct `pattern` builds it from the senders' buffers
/// (by the pattern's own source map).
fn received(
    p: &dyn Pattern,
    l: &Layout,
    dt: DataType,
    op: RedOp,
    me: u32,
    n: u32,
    e: u32,
) -> Vec<u8> {
    let sz = dt.size();
    let sends: Vec<Vec<u8>> = (0..n)
        .map(|r| {
            let mut b = vec![0u8; l.count * sz];
            fill_send(&mut b, l, dt, op_of(p, op), r, n, e);
            b
        })
        .collect();
    let mut recv = vec![0u8; l.recv_count * sz];
    for i in 0..l.recv_count {
        let v = match p.source(me, n, i, l) {
            Source::Rank { rank, index } => {
                recv[i * sz..(i + 1) * sz]
                    .copy_from_slice(&sends[rank as usize][index * sz..(index + 1) * sz]);
                continue;
            }
            Source::Reduced { index } => op.reduce(
                (0..n).map(|r| dt.decode(&sends[r as usize][index * sz..(index + 1) * sz])),
            ),
        };
        dt.encode(v, &mut recv[i * sz..(i + 1) * sz]);
    }
    recv
}

fn pattern(name: &str) -> &'static dyn Pattern {
    select(&[name.to_string()]).unwrap()[0]
}

#[test]
fn correct_data_passes_and_a_flipped_element_names_its_sender() {
    let (n, dt) = (4, DataType::Float);
    let p = pattern("all_to_all");
    let l = p.layout(4 * 64, dt.size(), n);
    let mut recv = received(p, &l, dt, RedOp::Sum, 2, n, 3);
    let c = check(&recv, p, &l, dt, RedOp::Sum, 2, n, 3);
    assert_eq!((c.wrong, c.elements, c.first), (0, 64, None));
    recv[4 * 40] ^= 0x10; // element 40: chunk 2 (from rank 2 itself, 16 per peer)
    let c = check(&recv, p, &l, dt, RedOp::Sum, 2, n, 3);
    assert_eq!((c.wrong, c.unwritten), (1, 0));
    let first = c.first.unwrap();
    assert_eq!(
        (first.index, first.sender, first.from_rank),
        (40, Some(2), None)
    );
    assert_eq!(c.wrong_from, [(2, 1)]);
    // Wrong data from two senders is counted by sender; unwritten elements are not.
    recv[4 * 3] ^= 0x10; // chunk 0, from rank 0
    recv[4 * 5] ^= 0x20;
    recv[4 * 60..4 * 61].copy_from_slice(&[elements::FILL_BYTE; 4]); // chunk 3, never written
    let c = check(&recv, p, &l, dt, RedOp::Sum, 2, n, 3);
    assert_eq!((c.wrong, c.unwritten), (4, 1));
    assert_eq!(c.wrong_from, [(0, 2), (2, 1)]);
}

#[test]
fn a_buffer_never_written_is_told_apart_in_every_type_and_pattern() {
    for name in [
        "all_reduce",
        "all_to_all",
        "send_recv_ring",
        "send_recv_pairwise",
    ] {
        let p = pattern(name);
        for dt in [
            DataType::Float,
            DataType::Half,
            DataType::Bfloat16,
            DataType::Double,
            DataType::Int8,
            DataType::Uint64,
        ] {
            let l = p.layout(1024, dt.size(), 4);
            let recv = vec![elements::FILL_BYTE; l.recv_count * dt.size()];
            let c = check(&recv, p, &l, dt, RedOp::Sum, 1, 4, 0);
            assert!(c.nothing_written(), "{name} {dt:?}: {c:?}");
            assert_eq!(c.unwritten_ranges, [(0, l.recv_count)]);
            assert_eq!(c.first.unwrap().got_hex, "ff".repeat(dt.size()));
        }
    }
}

#[test]
fn unwritten_ranges_are_kept_and_written_errors_come_first() {
    let (n, dt) = (2, DataType::Int32);
    let p = pattern("all_reduce");
    let l = p.layout(4 * 100, dt.size(), n);
    let mut recv = received(p, &l, dt, RedOp::Sum, 0, n, 1);
    recv[4 * 10..4 * 20].fill(elements::FILL_BYTE);
    recv[4 * 50..4 * 60].fill(elements::FILL_BYTE);
    recv[4 * 70] ^= 0x40;
    let c = check(&recv, p, &l, dt, RedOp::Sum, 0, n, 1);
    assert_eq!((c.wrong, c.unwritten), (21, 20));
    assert_eq!(c.unwritten_ranges, [(10, 20), (50, 60)]);
    assert_eq!(c.first.unwrap().index, 70);
    assert!(!check(&recv, p, &l, dt, RedOp::Sum, 0, n, 1).nothing_written());
}

#[test]
fn another_ranks_data_is_named() {
    let (n, dt) = (4, DataType::Bfloat16);
    let p = pattern("all_to_all");
    let l = p.layout(2 * 256, dt.size(), n);
    let mut recv = received(p, &l, dt, RedOp::Sum, 1, n, 6);
    // Rank 1's chunk from rank 0 holds what rank 3 sent it instead.
    let chunk = l.per_peer * 2;
    let from3 = recv[3 * chunk..4 * chunk].to_vec();
    recv[..chunk].copy_from_slice(&from3);
    // Rank 3's chunk sits at its own offset; map it to the same indices as rank 0's.
    let c = check(&recv, p, &l, dt, RedOp::Sum, 1, n, 6);
    assert!(c.wrong > 0 && c.unwritten == 0);
    let f = c.first.unwrap();
    assert_eq!((f.sender, f.from_rank), (Some(0), Some(3)), "{f:?}");
}

#[test]
fn a_ranks_own_input_instead_of_the_reduction_is_named() {
    let (n, dt) = (4, DataType::Float);
    let p = pattern("all_reduce");
    let l = p.layout(4 * 256, dt.size(), n);
    let mut recv = vec![0u8; l.recv_count * 4];
    fill_send(&mut recv, &l, dt, Some(RedOp::Sum), 2, n, 0);
    let c = check(&recv, p, &l, dt, RedOp::Sum, 2, n, 0);
    assert_eq!(c.first.unwrap().from_rank, Some(2));
}

/// A buffer checked in uneven chunks gives what one whole check gives.
#[test]
fn chunked_fill_and_check_equal_whole_ones() {
    let (n, dt) = (3, DataType::Double);
    let p = pattern("all_reduce");
    let l = p.layout(8 * 1000, dt.size(), n);
    let mut whole = vec![0u8; l.count * 8];
    fill_send(&mut whole, &l, dt, Some(RedOp::Sum), 1, n, 7);
    let mut pieces = vec![0u8; l.count * 8];
    for (k, chunk) in pieces.chunks_mut(8 * 37).enumerate() {
        fill_send_from(k * 37, chunk, dt, Some(RedOp::Sum), 1, n, 7);
    }
    assert_eq!(whole, pieces);
    let mut recv = received(p, &l, dt, RedOp::Sum, 1, n, 7);
    recv[8 * 500] ^= 1;
    recv[8 * 600..8 * 640].fill(elements::FILL_BYTE);
    let mut c = Checker::new(p, &l, dt, RedOp::Sum, 1, n, 7);
    for (k, chunk) in recv.chunks(8 * 37).enumerate() {
        c.chunk(k * 37, chunk);
    }
    let c = c.finish();
    assert_eq!(
        (c.wrong, c.first.as_ref().map(|w| w.index)),
        (41, Some(500))
    );
    assert_eq!(c.unwritten_ranges, [(600, 640)]);
    assert_eq!(c, check(&recv, p, &l, dt, RedOp::Sum, 1, n, 7));
}

#[test]
fn every_reduction_is_checked_against_all_ranks() {
    let (n, dt) = (5, DataType::Half);
    let p = pattern("all_reduce");
    let l = p.layout(2 * 100, dt.size(), n);
    for op in [RedOp::Sum, RedOp::Prod, RedOp::Max, RedOp::Min] {
        let recv = received(p, &l, dt, op, 0, n, 0);
        assert_eq!(check(&recv, p, &l, dt, op, 0, n, 0).wrong, 0, "{op:?}");
        let other = if op == RedOp::Sum {
            RedOp::Max
        } else {
            RedOp::Sum
        };
        assert!(check(&recv, p, &l, dt, other, 0, n, 0).wrong > 0, "{op:?}");
    }
}
