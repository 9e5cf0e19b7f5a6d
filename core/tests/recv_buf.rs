//! `RecvBuf`: a model-checked sequence of operations, limits, memory.

use cleave_proto::{Bytes, BytesMut, Error, Limit, Misuse, RecvBuf, RecvBufConfig};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Feed(Vec<u8>),
    /// Read into spare room: write this many bytes (clamped to the room).
    Read(Vec<u8>),
    Split(usize),
    Advance(usize),
    TakeTail,
    Release,
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let data = prop::collection::vec(any::<u8>(), 0..200);
    prop_oneof![
        data.clone().prop_map(Op::Feed),
        data.prop_map(Op::Read),
        (0usize..250).prop_map(Op::Split),
        (0usize..250).prop_map(Op::Advance),
        Just(Op::TakeTail),
        Just(Op::Release),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Against a `Vec<u8>` model: the same bytes come out in the same order,
    /// the limit always holds, refused operations change nothing, and the
    /// buffer never holds more than what is buffered plus a read reserve
    /// (twice, when it reuses a block).
    #[test]
    fn behaves_like_a_vec_within_its_limits(
        ops in prop::collection::vec(op_strategy(), 0..60),
        max in 1usize..600,
        reserve in 1usize..300,
        idle in 0usize..300,
        copy_up_to in 0usize..8,
    ) {
        let config = RecvBufConfig::default()
            .max_buffered(max).unwrap()
            .read_reserve(reserve).unwrap()
            .idle_capacity(idle)
            .copy_frames_up_to(copy_up_to);
        let mut buf = RecvBuf::with_config(config);
        let mut model: Vec<u8> = Vec::new();
        let mut offset = 0u64;
        let mut peak = 0usize;
        let mut out: Vec<(Bytes, Vec<u8>)> = Vec::new();
        for op in ops {
            // Set by operations that took bytes out or committed a read.
            let mut settled = false;
            match op {
                Op::Feed(data) => match buf.feed(&data) {
                    Ok(()) => model.extend_from_slice(&data),
                    Err(e) => {
                        prop_assert!(model.len() + data.len() > max);
                        prop_assert_eq!(e, Error::LimitExceeded {
                            limit: Limit::Buffer, max: max as u64,
                            attempted: (model.len() + data.len()) as u64, offset,
                        });
                    }
                },
                Op::Read(data) => match buf.spare_mut() {
                    Ok(spare) => {
                        let full = reserve.min(max - model.len());
                        prop_assert!(spare.len() <= full && spare.len() >= full.div_ceil(2));
                        let n = data.len().min(spare.len());
                        spare[..n].copy_from_slice(&data[..n]);
                        buf.commit(n).unwrap();
                        model.extend_from_slice(&data[..n]);
                        settled = true;
                    }
                    Err(_) => prop_assert_eq!(model.len(), max),
                },
                Op::Split(n) => match buf.split_to(n) {
                    Ok(frame) => {
                        prop_assert_eq!(&frame[..], &model[..n]);
                        let copy = model.drain(..n).collect();
                        offset += n as u64;
                        out.push((frame, copy));
                        settled = true;
                    }
                    Err(e) => {
                        prop_assert!(n > model.len());
                        prop_assert_eq!(e, Error::Misuse(Misuse::OutOfBounds { requested: n, available: model.len() }));
                    }
                },
                Op::Advance(n) => match buf.advance(n) {
                    Ok(()) => {
                        model.drain(..n);
                        offset += n as u64;
                        settled = true;
                    }
                    Err(_) => prop_assert!(n > model.len()),
                },
                Op::TakeTail => {
                    let tail = buf.take_tail();
                    prop_assert_eq!(&tail[..], &model[..]);
                    offset += model.len() as u64;
                    model.clear();
                    settled = true;
                }
                Op::Release => {
                    let released = buf.release_if_empty();
                    prop_assert!(!released || model.is_empty());
                    if model.is_empty() {
                        prop_assert_eq!(buf.capacity(), 0);
                    }
                }
            }
            prop_assert_eq!(buf.peek(), &model[..]);
            prop_assert_eq!(buf.offset(), offset);
            prop_assert!(buf.len() <= max);
            // Memory: growth is bounded by what arrived (at most doubling
            // plus a read), a reused block by twice the idle capacity, and
            // no block above twice the idle capacity (the most it reuses)
            // stays once consuming empties it.
            peak = peak.max(model.len());
            let bound = 2 * (2 * peak + reserve.max(200)).max(idle);
            prop_assert!(buf.capacity() <= bound, "capacity {} > {} (peak {})", buf.capacity(), bound, peak);
            if settled && model.is_empty() {
                prop_assert!(buf.capacity() <= 2 * idle, "idle capacity {} > 2 x {}", buf.capacity(), idle);
            }
        }
        // Frames split earlier are untouched by everything that came after.
        for (frame, copy) in &out {
            prop_assert_eq!(&frame[..], &copy[..]);
        }
    }
}

#[test]
fn a_feed_that_does_not_fit_is_refused_whole() {
    let config = RecvBufConfig::default().max_buffered(8).unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"12345").unwrap();
    let err = buf.feed(b"6789").unwrap_err();
    assert_eq!(
        err,
        Error::LimitExceeded {
            limit: Limit::Buffer,
            max: 8,
            attempted: 9,
            offset: 0
        }
    );
    assert_eq!(buf.peek(), b"12345");
    buf.feed(b"678").unwrap();
    assert!(buf.is_full());
    assert!(buf.spare_mut().is_err());
}

#[test]
fn spare_room_never_exceeds_what_the_limit_allows() {
    let config = RecvBufConfig::default()
        .max_buffered(10)
        .unwrap()
        .read_reserve(64)
        .unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"abc").unwrap();
    assert_eq!(buf.spare_mut().unwrap().len(), 7);
}

#[test]
fn commit_is_checked_against_the_region_handed_out() {
    let config = RecvBufConfig::default().read_reserve(16).unwrap();
    let mut buf = RecvBuf::with_config(config);
    assert_eq!(
        buf.commit(1),
        Err(Error::Misuse(Misuse::CommitTooLarge {
            committed: 1,
            spare: 0
        }))
    );
    buf.spare_mut().unwrap()[..2].copy_from_slice(b"hi");
    assert_eq!(
        buf.commit(17),
        Err(Error::Misuse(Misuse::CommitTooLarge {
            committed: 17,
            spare: 16
        }))
    );
    buf.commit(2).unwrap();
    assert_eq!(buf.peek(), b"hi");
    // The region is spent once committed.
    assert!(buf.commit(1).is_err());
}

#[test]
fn from_tail_reuses_a_unique_tail_and_refuses_one_too_long() {
    let tail = Bytes::from(b"tail bytes".to_vec());
    let ptr = tail.as_ptr();
    let buf = RecvBuf::from_tail(tail, RecvBufConfig::default()).unwrap();
    assert_eq!(buf.peek(), b"tail bytes");
    assert_eq!(buf.peek().as_ptr(), ptr, "no copy for a unique tail");

    let small = RecvBufConfig::default().max_buffered(4).unwrap();
    let rejected = RecvBuf::from_tail(Bytes::from_static(b"too long"), small).unwrap_err();
    assert_eq!(rejected.error().fault(), cleave_proto::Fault::Limit);
    assert_eq!(&rejected.into_value()[..], b"too long");
}

#[test]
fn take_tail_hands_over_without_copying() {
    let mut buf = RecvBuf::new();
    buf.feed(b"frame|tail").unwrap();
    let _frame = buf.split_to(6).unwrap();
    let at = buf.peek().as_ptr();
    let tail = buf.take_tail();
    assert_eq!((&tail[..], tail.as_ptr()), (&b"tail"[..], at));
    assert!(buf.is_empty());
    assert_eq!(buf.offset(), 10);
}

#[test]
fn an_empty_buffer_gives_back_memory_above_the_idle_capacity() {
    let config = RecvBufConfig::default().read_reserve(1 << 20).unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.spare_mut().unwrap()[..10].fill(b'x');
    buf.commit(10).unwrap();
    assert!(buf.capacity() >= 1 << 20);
    buf.advance(10).unwrap();
    assert_eq!(
        buf.capacity(),
        0,
        "a megabyte of spare room kept while idle"
    );
}

#[test]
fn a_huge_frame_does_not_pin_memory_once_consumed() {
    let mut buf = RecvBuf::new();
    buf.feed(&vec![1u8; 4 << 20]).unwrap();
    let frame = buf.split_to(4 << 20).unwrap();
    drop(frame);
    // The block is free again and could be reused, but it is far larger
    // than the next read needs: a right-sized block replaces it.
    buf.feed(b"x").unwrap();
    assert!(
        buf.capacity() <= 2 * cleave_proto::DEFAULT_READ_RESERVE,
        "{}",
        buf.capacity()
    );
}

#[test]
fn a_long_frame_in_many_reads_is_not_copied_once_per_read() {
    let mut buf = RecvBuf::new();
    let mut moves = 0;
    let mut at = buf.peek().as_ptr();
    for _ in 0..(1 << 20) / 1024 {
        let spare = buf.spare_mut().unwrap();
        spare[..1024].fill(7);
        buf.commit(1024).unwrap();
        if buf.peek().as_ptr() != at {
            moves += 1;
            at = buf.peek().as_ptr();
        }
    }
    // 1 MiB in 1 KiB reads: the block doubles, so the bytes move about
    // log2(1 MiB / 8 KiB) times, not once per 8 KiB.
    assert!(moves <= 10, "{moves} moves");
    assert!(buf.capacity() <= 2 * (1 << 20) + cleave_proto::DEFAULT_READ_RESERVE);
}

#[test]
fn extreme_configurations_do_not_panic_or_overallocate() {
    let config = RecvBufConfig::default()
        .max_buffered(64)
        .unwrap()
        .read_reserve(usize::MAX)
        .unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"abc").unwrap();
    assert_eq!(buf.spare_mut().unwrap().len(), 61);
    assert!(buf.capacity() <= 64);
    let huge = RecvBufConfig::default().read_reserve(usize::MAX).unwrap();
    let mut buf = RecvBuf::with_config(huge);
    buf.feed(b"abc").unwrap();
    assert!(buf.capacity() <= cleave_proto::DEFAULT_MAX_BUFFERED);
}

#[test]
fn from_tail_does_not_keep_a_large_block_for_a_small_tail() {
    let mut big = Bytes::from(vec![0u8; 1 << 20]);
    let tail = big.split_off((1 << 20) - 10);
    drop(big);
    let buf = RecvBuf::from_tail(tail, RecvBufConfig::default().max_buffered(64).unwrap()).unwrap();
    assert_eq!(buf.len(), 10);
    assert!(buf.capacity() < 1 << 16, "{}", buf.capacity());
}

#[test]
fn idle_capacity_zero_releases_everything_when_empty() {
    let config = RecvBufConfig::default().idle_capacity(0);
    let mut buf = RecvBuf::with_config(config);
    let spare = buf.spare_mut().unwrap();
    spare[0] = b'x';
    buf.commit(1).unwrap();
    buf.advance(1).unwrap();
    assert_eq!(buf.capacity(), 0);
}

#[test]
fn steady_reads_reuse_one_block() {
    let mut buf = RecvBuf::new();
    let mut blocks = std::collections::HashSet::new();
    for _ in 0..100 {
        let spare = buf.spare_mut().unwrap();
        blocks.insert(spare.as_ptr() as usize / cleave_proto::DEFAULT_READ_RESERVE);
        spare[..100].fill(b'a');
        buf.commit(100).unwrap();
        drop(buf.split_to(100).unwrap());
    }
    assert!(blocks.len() <= 2, "{} blocks", blocks.len());
}

/// No limit and a reserve no allocator can give: a feed takes what came
/// (no panic, no abort), and a read asks for a reserve that cannot be had,
/// which is a typed configuration error, not a "capacity overflow" panic.
#[test]
fn an_unallocatable_reserve_with_no_limit_is_a_typed_error_not_a_panic() {
    let config = RecvBufConfig::default()
        .max_buffered(usize::MAX)
        .unwrap()
        .read_reserve(usize::MAX)
        .unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"abc").unwrap();
    assert_eq!(buf.peek(), b"abc");
    assert!(buf.capacity() >= 3);
    let e = buf.spare_mut().unwrap_err();
    assert!(
        matches!(
            e,
            Error::Misuse(Misuse::InvalidConfig {
                setting: "read_reserve",
                ..
            })
        ),
        "{e:?}"
    );
    // Nothing was lost, and the buffer still works.
    buf.feed(b"def").unwrap();
    assert_eq!(buf.peek(), b"abcdef");
    let mut fresh = RecvBuf::with_config(config);
    assert!(fresh.spare_mut().is_err());
    fresh.feed(b"x").unwrap();
    assert_eq!(fresh.peek(), b"x");
}

/// A buffer lent back at a position refuses what is over the limit with
/// the offset counted from the stream's start, as its doc says.
#[test]
fn a_lent_buffer_over_the_limit_is_refused_at_its_stream_offset() {
    let mut first = RecvBuf::new();
    first.feed(b"0123456789").unwrap();
    first.advance(10).unwrap();
    let position = first.position();
    let config = RecvBufConfig::default().max_buffered(4).unwrap();
    let rejected = RecvBuf::from_buffer_at(BytesMut::from(&b"abcdefgh"[..]), position, config)
        .expect_err("over the limit");
    assert_eq!(rejected.error().offset(), Some(10));
    assert_eq!(
        &rejected.into_parts().1[..],
        b"abcdefgh",
        "the bytes come back"
    );
}

/// The spare region stays where it is while frames are split off (as it
/// does when bytes remain): consuming everything between a read and its
/// commit does not forget it, and the bytes read there are not lost.
#[test]
fn emptying_the_buffer_between_a_read_and_its_commit_keeps_the_read() {
    let config = RecvBufConfig::default().idle_capacity(0);
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"frame").unwrap();
    let spare = buf.spare_mut().unwrap();
    spare[..4].copy_from_slice(b"next");
    assert_eq!(&buf.split_to(5).unwrap()[..], b"frame");
    buf.commit(4).unwrap();
    assert_eq!(buf.peek(), b"next");
    // Once committed, an emptied buffer gives its block back as before.
    buf.advance(4).unwrap();
    assert_eq!(buf.capacity(), 0);
    // A feed also ends the region: an empty one into an emptied buffer
    // gives the block back.
    buf.feed(b"x").unwrap();
    let _ = buf.spare_mut().unwrap();
    buf.advance(1).unwrap();
    buf.feed(b"").unwrap();
    assert_eq!(buf.capacity(), 0);
}
