//! `WriteQueue`: conservation, order, frames kept whole, tickets and
//! limits, under any sequence of pushes, partial writes and drains.
//!
//! The model drains through `io_slices` (`std::io::IoSlice`) as well as
//! `chunks`, so it needs the `std` feature.

#![cfg(feature = "std")]

#[path = "support/queue_model.rs"]
mod queue_model;

use cleave_proto::{Bytes, Error, Frame, Lane, Refusal, WriteQueue, WriteQueueConfig};
use proptest::prelude::*;
use queue_model::Op;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), prop_oneof![10usize..40, 10usize..700, 600usize..3000], any::<(u8, u8)>(), any::<u8>())
            .prop_map(|(urgent, len, cuts, shape)| Op::Push { urgent: urgent && len < 200, len, cuts, shape }),
        1 => any::<bool>().prop_map(|urgent| Op::Empty { urgent }),
        5 => (0usize..10, any::<u8>(), prop::bool::weighted(0.2))
            .prop_map(|(room, share, between)| Op::Write { room, share, between }),
        1 => (0usize..10).prop_map(|room| Op::Peek { room }),
        1 => Just(Op::Close),
        1 => prop::bool::weighted(0.1).prop_map(|abort| if abort { Op::Abort } else { Op::Close }),
    ]
}

fn config() -> impl Strategy<Value = WriteQueueConfig> {
    (
        1usize..12,
        1usize..6000,
        1usize..4,
        1usize..400,
        0usize..700,
        1usize..3000,
        1usize..1600,
        1usize..9,
        1usize..6000,
    )
        .prop_map(
            |(items, bytes, uitems, ubytes, below, limit, piece, slices, drain)| {
                WriteQueueConfig::default()
                    .max_items(items)
                    .unwrap()
                    .max_bytes(bytes)
                    .unwrap()
                    .urgent_max_items(uitems)
                    .unwrap()
                    .urgent_max_bytes(ubytes)
                    .unwrap()
                    .coalesce_below(below)
                    .coalesce_limit(limit)
                    .unwrap()
                    .piece_size(piece)
                    .unwrap()
                    .max_slices(slices)
                    .unwrap()
                    .max_drain_bytes(drain)
                    .unwrap()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn conserves_orders_and_keeps_frames_whole(config in config(), ops in prop::collection::vec(op(), 1..80)) {
        queue_model::run(config, &ops);
    }
}

#[test]
fn urgent_data_waits_for_the_frame_in_progress() {
    let mut queue = WriteQueue::with_config(WriteQueueConfig::default().coalesce_below(0));
    queue
        .push_frame(Frame::new(
            Bytes::from_static(b"HEAD"),
            Bytes::from_static(b"BODY"),
            Bytes::new(),
        ))
        .unwrap();
    queue.push(Bytes::from_static(b"NEXT")).unwrap();
    // Two bytes of the frame go out, then a ping arrives.
    {
        let mut slices = [&b""[..]; 8];
        queue.chunks(&mut slices);
    }
    queue.advance(2).unwrap();
    queue.push_urgent(Bytes::from_static(b"PING")).unwrap();
    let mut out = b"HE".to_vec();
    while !queue.is_flushed() {
        let first = {
            let mut slices = [&b""[..]; 8];
            queue.chunks(&mut slices);
            slices[0].to_vec()
        };
        out.extend_from_slice(&first);
        queue.advance(first.len()).unwrap();
    }
    assert_eq!(out, b"HEADBODYPINGNEXT");
}

#[test]
fn urgent_data_jumps_queued_bulk_data_at_a_frame_boundary() {
    let mut queue = WriteQueue::new();
    queue.push(Bytes::from(vec![b'a'; 1000])).unwrap();
    queue.push(Bytes::from(vec![b'b'; 1000])).unwrap();
    queue.push_urgent(Bytes::from_static(b"PING")).unwrap();
    let mut slices = [&b""[..]; 8];
    let n = queue.chunks(&mut slices);
    assert_eq!(slices[0], b"PING");
    assert_eq!(n, 3);
}

/// A fence holds urgent data behind the bulk bytes queued before it
/// (a protocol switch: the 101 before the new protocol's pong), across
/// partial writes; bulk bytes queued after it may still be jumped.
#[test]
fn urgent_data_waits_for_the_bulk_bytes_queued_before_a_fence() {
    for first_write in [0, 1, 3, 5, 6, 7] {
        let mut queue = WriteQueue::new();
        queue.push(Bytes::from_static(b"OLD")).unwrap();
        queue.push(Bytes::from_static(b"101")).unwrap();
        queue.fence();
        queue.push_urgent(Bytes::from_static(b"PONG")).unwrap();
        queue.push(Bytes::from_static(b"NEW")).unwrap();
        let mut out = Vec::new();
        let mut limit = first_write;
        while !queue.is_flushed() {
            let presented = {
                let mut slices = [&b""[..]; 8];
                let n = queue.chunks(&mut slices);
                slices[..n].concat()
            };
            let n = if limit > 0 {
                limit.min(presented.len())
            } else {
                presented.len()
            };
            limit = 0;
            out.extend_from_slice(&presented[..n]);
            queue.advance(n).unwrap();
        }
        assert_eq!(out, b"OLD101PONGNEW", "first write {first_write}");
    }
}

/// `take_refused` says once that a push was refused for room (a driver
/// whose write makes room then asks the protocol again); a refusal of a
/// closed queue is not one for room.
#[test]
fn a_refusal_for_room_is_reported_once() {
    let config = WriteQueueConfig::default().max_items(1).unwrap();
    let mut queue = WriteQueue::with_config(config);
    assert!(!queue.take_refused());
    queue.push(Bytes::from_static(b"a")).unwrap();
    assert!(queue.push(Bytes::from_static(b"b")).is_err());
    assert!(queue.take_refused());
    assert!(!queue.take_refused(), "reported once");
    {
        let mut slices = [&b""[..]; 2];
        queue.chunks(&mut slices);
    }
    queue.advance(1).unwrap();
    queue.close();
    assert!(matches!(
        queue.push(Bytes::from_static(b"c")).map_err(|r| *r.error()),
        Err(Refusal::Closed)
    ));
    assert!(!queue.take_refused(), "closed is not full");
}

#[test]
fn an_oversize_push_is_accepted_alone_and_handed_out_in_pieces() {
    let config = WriteQueueConfig::default()
        .max_bytes(1000)
        .unwrap()
        .piece_size(300)
        .unwrap();
    let mut queue = WriteQueue::with_config(config);
    let big = Bytes::from(vec![7u8; 1000 * 1000]);
    let base = big.as_ptr();
    let ticket = queue.push(big).unwrap();
    // Nothing else fits until it drains below the limit.
    let refused = queue.push(Bytes::from_static(b"x")).unwrap_err();
    assert_eq!(refused.error(), &Refusal::Full(Lane::Bulk));
    assert_eq!(
        queue.pending_bytes(Lane::Bulk),
        1000 * 1000,
        "over the byte limit"
    );
    let mut slices = [&b""[..]; 4];
    let n = queue.chunks(&mut slices);
    assert_eq!(n, 4);
    assert!(slices[..n].iter().all(|s| s.len() == 300));
    assert_eq!(slices[0].as_ptr(), base, "handed out in place, not copied");
    assert!(!queue.is_written(ticket));
}

#[test]
fn a_refused_push_gives_its_bytes_back_and_reports_why() {
    let config = WriteQueueConfig::default().max_items(1).unwrap();
    let mut queue = WriteQueue::with_config(config);
    queue.push(Bytes::from_static(b"one")).unwrap();
    let refused = queue.push(Bytes::from_static(b"two")).unwrap_err();
    assert_eq!(refused.error(), &Refusal::Full(Lane::Bulk));
    assert_eq!(queue.pending_items(Lane::Bulk), 1, "at the item limit");
    assert_eq!(&refused.into_value()[..], b"two");
    // The urgent lane has limits of its own.
    let ticket = queue.push_urgent(Bytes::from(vec![0; 17 * 1024])).unwrap();
    assert_eq!(ticket.lane(), Lane::Urgent);
    let refused = queue.push_urgent(Bytes::from_static(b"x")).unwrap_err();
    assert_eq!(refused.error(), &Refusal::Full(Lane::Urgent));
    queue.close();
    let refused = queue.push(Bytes::from_static(b"three")).unwrap_err();
    assert_eq!(refused.error(), &Refusal::Closed);
    let (why, value) = refused.into_parts();
    assert_eq!((why, &value[..]), (Refusal::Closed, &b"three"[..]));
}

#[test]
fn small_writes_are_coalesced_into_one_slice() {
    let mut queue = WriteQueue::new();
    for _ in 0..100 {
        queue.push(Bytes::from_static(b"0123456789")).unwrap();
    }
    let mut slices = [&b""[..]; 64];
    let n = queue.chunks(&mut slices);
    assert_eq!(n, 1);
    assert_eq!(slices[0].len(), 1000);
}

/// Inline framing of every length (0 to 16 bytes) is copied in exactly,
/// however little room the run buffer has left: enough frames to fill
/// several of its blocks, so that each lands at every distance from a
/// block's end.
#[test]
fn inline_framing_is_copied_exactly_up_to_the_end_of_a_run_block() {
    let config = WriteQueueConfig::default()
        .max_items(100_000)
        .unwrap()
        .max_bytes(1 << 20)
        .unwrap();
    let mut queue = WriteQueue::with_config(config);
    let mut want = Vec::new();
    for i in 0..12_000usize {
        let head: Vec<u8> = (0..i % 17).map(|j| (i + j) as u8).collect();
        let tail: Vec<u8> = (0..(i / 17) % 17).map(|j| (i * 3 + j) as u8).collect();
        let body = Bytes::from(vec![b'x'; i % 5]);
        want.extend_from_slice(&head);
        want.extend_from_slice(&body);
        want.extend_from_slice(&tail);
        queue
            .push_frame(Frame::with_framing(&head, body, &tail))
            .expect("room");
    }
    let mut got = Vec::new();
    loop {
        let mut slices = [&b""[..]; 64];
        let n = queue.chunks(&mut slices);
        if n == 0 {
            break;
        }
        let taken: usize = slices[..n].iter().map(|s| s.len()).sum();
        for slice in &slices[..n] {
            got.extend_from_slice(slice);
        }
        queue.advance(taken).unwrap();
    }
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the bytes differ");
}

/// A slice is copied in, in its place among the other pushes, whatever
/// its length and the coalescing threshold; its ticket completes when its
/// last byte is written; a refused one comes back as it was.
#[test]
fn a_slice_is_copied_in_order_and_refused_as_bytes_are() {
    let config = WriteQueueConfig::default()
        .coalesce_below(0)
        .max_items(3)
        .unwrap();
    let mut queue = WriteQueue::with_config(config);
    let big = vec![b'b'; 20 * 1024];
    let mut scratch = b"head:".to_vec();
    queue.push_to(Lane::Bulk, &scratch[..]).unwrap();
    scratch.clear(); // the queue keeps no reference to it
    let bytes = queue.push(Bytes::from_static(b"body;")).unwrap();
    let slice = queue.push_to(Lane::Bulk, &big[..]).unwrap();
    let refused = queue.push_to(Lane::Bulk, &b"tail"[..]).unwrap_err();
    assert_eq!(refused.error(), &Refusal::Full(Lane::Bulk));
    assert_eq!(refused.into_value(), &b"tail"[..]);
    let mut out = Vec::new();
    while !queue.is_empty() {
        let mut slices = [&b""[..]; 8];
        let n = queue.chunks(&mut slices);
        let taken: Vec<u8> = slices[..n].concat();
        let step = taken.len().min(7000);
        out.extend_from_slice(&taken[..step]);
        queue.advance(step).unwrap();
        if out.len() >= 10 {
            assert!(queue.is_written(bytes));
        }
        assert_eq!(queue.is_written(slice), out.len() == 10 + big.len());
    }
    assert_eq!(&out[..10], b"head:body;");
    assert_eq!(&out[10..], &big[..]);
}

#[test]
fn advancing_past_what_was_handed_out_is_refused() {
    let mut queue = WriteQueue::new();
    queue.push(Bytes::from_static(b"abc")).unwrap();
    assert!(queue.advance(1).is_err(), "nothing handed out yet");
    {
        let mut slices = [&b""[..]; 4];
        queue.chunks(&mut slices);
    }
    let err = queue.advance(4).unwrap_err();
    assert_eq!(err.fault(), cleave_proto::Fault::Caller);
    assert_eq!(queue.len(), 3, "a refused advance changes nothing");
}

#[test]
fn abort_drops_everything_closes_and_tickets_never_complete() {
    let mut queue = WriteQueue::new();
    let t = queue.push(Bytes::from(vec![1u8; 5000])).unwrap();
    queue.push(Bytes::from_static(b"small")).unwrap();
    assert_eq!(queue.abort(), 2);
    assert!(queue.is_flushed() && queue.is_closed());
    assert!(!queue.is_written(t));
    assert_eq!(
        queue.push(Bytes::from_static(b"x")).unwrap_err().error(),
        &Refusal::Closed
    );
}

#[test]
fn extreme_limits_do_not_panic_or_reserve_up_front() {
    let config = WriteQueueConfig::default()
        .coalesce_limit(usize::MAX)
        .unwrap()
        .max_bytes(usize::MAX)
        .unwrap()
        .max_drain_bytes(usize::MAX)
        .unwrap()
        .piece_size(usize::MAX)
        .unwrap();
    let mut queue = WriteQueue::with_config(config);
    queue.push(Bytes::from_static(b"x")).unwrap();
    queue.push_urgent(Bytes::from_static(b"ping")).unwrap();
    let mut slices = [&b""[..]; 4];
    let n = queue.chunks(&mut slices);
    assert_eq!(slices[..n].concat(), b"pingx");
}

#[test]
fn configuration_out_of_range_is_a_typed_error() {
    let refused = |r: Result<WriteQueueConfig, Error>, name: &str| {
        assert!(
            matches!(r, Err(Error::Misuse(cleave_proto::Misuse::InvalidConfig { setting, .. })) if setting == name),
            "{name}"
        );
    };
    refused(WriteQueueConfig::default().piece_size(0), "piece_size");
    refused(WriteQueueConfig::default().max_items(0), "max_items");
    refused(WriteQueueConfig::default().max_bytes(0), "max_bytes");
    refused(WriteQueueConfig::default().max_slices(0), "max_slices");
    // One IoSlice holds at most 4 GiB - 1 on Windows: "no limit" is that.
    let max = cleave_proto::write::MAX_PIECE_SIZE;
    let unlimited = WriteQueueConfig::default().piece_size(usize::MAX).unwrap();
    assert_eq!(unlimited.get_piece_size(), max);
}
