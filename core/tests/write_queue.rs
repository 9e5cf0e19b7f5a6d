//! `WriteQueue`: conservation, order, frames kept whole, tickets and
//! limits, under any sequence of pushes, partial writes and drains.

use cleave::{Bytes, Error, Frame, Lane, Limit, Ticket, WriteQueue, WriteQueueConfig};
use proptest::prelude::*;

/// A push that describes itself, so the written stream can be parsed back:
/// `[0xAB, lane, id (u32 LE), len (u32 LE), filler...]`, `len` in all.
fn record(lane: Lane, id: u32, len: usize) -> Vec<u8> {
    let len = len.max(10);
    let mut r = vec![0xAB, lane_byte(lane)];
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.resize(len, (id % 251) as u8);
    r
}

fn lane_byte(lane: Lane) -> u8 {
    match lane {
        Lane::Bulk => 0,
        Lane::Urgent => 1,
    }
}

/// Parses the written stream into whole records: (lane byte, id). A record
/// that is cut short must be the last thing written (a frame is never
/// interrupted by another); returns it as `partial`.
/// A record's lane byte and id.
type RecordId = (u8, u32);

fn parse(out: &[u8]) -> (Vec<RecordId>, Option<RecordId>) {
    let mut records = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let rest = &out[at..];
        assert_eq!(rest[0], 0xAB, "a record starts inside another at {at}");
        if rest.len() < 10 {
            return (records, Some((rest.get(1).copied().unwrap_or(9), u32::MAX)));
        }
        let lane = rest[1];
        let id = u32::from_le_bytes(rest[2..6].try_into().unwrap());
        let len = u32::from_le_bytes(rest[6..10].try_into().unwrap()) as usize;
        let have = rest.len().min(len);
        assert!(
            rest[10..have].iter().all(|&b| b == (id % 251) as u8),
            "record {id} corrupted"
        );
        if rest.len() < len {
            return (records, Some((lane, id)));
        }
        records.push((lane, id));
        at += len;
    }
    (records, None)
}

#[derive(Clone, Debug)]
enum Op {
    /// A record of this length, cut into parts at these fractions, pushed
    /// as a frame (parts) or as one `Bytes`.
    Push {
        urgent: bool,
        len: usize,
        cuts: (u8, u8),
        frame: bool,
    },
    /// A zero-length push.
    Empty {
        urgent: bool,
    },
    /// Drain into this many slices; the writer takes this share of them.
    Write {
        room: usize,
        share: u8,
    },
    Close,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), prop_oneof![10usize..40, 10usize..700, 600usize..3000], any::<(u8, u8)>(), any::<bool>())
            .prop_map(|(urgent, len, cuts, frame)| Op::Push { urgent: urgent && len < 200, len, cuts, frame }),
        1 => any::<bool>().prop_map(|urgent| Op::Empty { urgent }),
        4 => (0usize..10, any::<u8>()).prop_map(|(room, share)| Op::Write { room, share }),
        1 => Just(Op::Close),
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

/// One accepted push: its ticket, and the record id it carries (none for
/// an empty push).
struct Accepted {
    ticket: Ticket,
    id: Option<u32>,
    done: bool,
}

struct Harness {
    queue: WriteQueue,
    config: WriteQueueConfig,
    out: Vec<u8>,
    accepted: Vec<Accepted>,
    next_id: u32,
}

impl Harness {
    fn push(&mut self, lane: Lane, len: usize, cuts: (u8, u8), as_frame: bool) {
        let id = self.next_id;
        self.next_id += 1;
        let r = record(lane, id, len);
        let (a, b) = (
            r.len() * cuts.0 as usize / 256,
            r.len() * cuts.1 as usize / 256,
        );
        let (a, b) = (a.min(b), a.max(b));
        let before = (self.queue.len(), self.queue.items());
        let result = if as_frame {
            let frame = Frame::new(
                Bytes::copy_from_slice(&r[..a]),
                Bytes::copy_from_slice(&r[a..b]),
                Bytes::copy_from_slice(&r[b..]),
            );
            let pushed = match lane {
                Lane::Bulk => self.queue.push_frame(frame.clone()),
                Lane::Urgent => self.queue.push_urgent_frame(frame.clone()),
            };
            pushed.map_err(|rejected| {
                assert_eq!(
                    rejected.clone().into_value(),
                    frame,
                    "a refused frame comes back whole"
                );
                rejected.error().clone()
            })
        } else {
            let bytes = Bytes::from(r.clone());
            let pushed = match lane {
                Lane::Bulk => self.queue.push(bytes.clone()),
                Lane::Urgent => self.queue.push_urgent(bytes.clone()),
            };
            pushed.map_err(|rejected| {
                assert_eq!(
                    rejected.clone().into_value(),
                    bytes,
                    "refused bytes come back whole"
                );
                rejected.error().clone()
            })
        };
        match result {
            Ok(ticket) => {
                assert_eq!(ticket.lane(), lane);
                self.accepted.push(Accepted {
                    ticket,
                    id: Some(id),
                    done: false,
                });
            }
            Err(e) => {
                assert_eq!(
                    (self.queue.len(), self.queue.items()),
                    before,
                    "a refusal changed the queue"
                );
                let (max_items, max_bytes) = self.limits(lane);
                match e {
                    Error::Closed => assert!(self.queue.is_closed()),
                    Error::LimitExceeded {
                        limit: Limit::QueueItems,
                        ..
                    } => {
                        assert_eq!(self.queue.pending_items(lane), max_items)
                    }
                    Error::LimitExceeded {
                        limit: Limit::QueueBytes,
                        ..
                    } => {
                        let pending = self.queue.pending_bytes(lane);
                        assert!(pending > 0 && pending + r.len() > max_bytes);
                    }
                    other => panic!("unexpected refusal {other:?}"),
                }
            }
        }
    }

    fn limits(&self, lane: Lane) -> (usize, usize) {
        match lane {
            Lane::Bulk => (self.config.max_items_len(), self.config.max_bytes_len()),
            Lane::Urgent => (
                self.config.urgent_max_items_len(),
                self.config.urgent_max_bytes_len(),
            ),
        }
    }

    fn empty(&mut self, lane: Lane) {
        let pushed = match lane {
            Lane::Bulk => self.queue.push(Bytes::new()),
            Lane::Urgent => self.queue.push_urgent(Bytes::new()),
        };
        if let Ok(ticket) = pushed {
            self.accepted.push(Accepted {
                ticket,
                id: None,
                done: false,
            });
        }
    }

    /// Drains into `room` slices and writes `share`/255 of what came out.
    /// Returns the bytes presented.
    fn write(&mut self, room: usize, share: u8) -> usize {
        let mut presented = Vec::new();
        let (max_slices, piece) = (self.config_max_slices(), self.config_piece());
        {
            let mut slices = vec![&b""[..]; room];
            let n = self.queue.chunks(&mut slices);
            assert!(n <= room && n <= max_slices);
            for slice in &slices[..n] {
                assert!(!slice.is_empty() && slice.len() <= piece);
                presented.extend_from_slice(slice);
            }
        }
        assert!(presented.len() <= self.config_max_drain());
        let n = presented.len() * share as usize / 255;
        let progress = self.queue.advance(n).expect("within what was handed out");
        assert!(
            self.queue.advance(1).is_err(),
            "a second advance without a drain"
        );
        self.out.extend_from_slice(&presented[..n]);
        assert_eq!(
            progress.watermark(Lane::Bulk),
            self.queue.watermark(Lane::Bulk)
        );
        assert_eq!(
            progress.watermark(Lane::Urgent),
            self.queue.watermark(Lane::Urgent)
        );
        let before = self.accepted.iter().filter(|a| a.done).count();
        self.check_tickets();
        let after = self.accepted.iter().filter(|a| a.done).count();
        assert_eq!(
            progress.completed(),
            after - before,
            "completed pushes miscounted"
        );
        presented.len()
    }

    fn config_max_slices(&self) -> usize {
        self.config.max_slices_len()
    }
    fn config_piece(&self) -> usize {
        self.config.piece_size_len()
    }
    fn config_max_drain(&self) -> usize {
        self.config.max_drain_bytes_len()
    }

    /// Tickets complete exactly when their record is fully written, in
    /// order within a lane, each once.
    fn check_tickets(&mut self) {
        let (records, _) = parse(&self.out);
        for lane in [Lane::Bulk, Lane::Urgent] {
            let mut all_before_done = true;
            for a in self.accepted.iter_mut().filter(|a| a.ticket.lane() == lane) {
                let written = match a.id {
                    Some(id) => records.contains(&(lane_byte(lane), id)),
                    None => all_before_done,
                };
                assert_eq!(
                    self.queue.is_written(a.ticket),
                    written,
                    "ticket {:?} (record {:?})",
                    a.ticket,
                    a.id
                );
                assert!(!a.done || written, "a ticket un-completed");
                a.done = written;
                all_before_done &= written;
            }
        }
    }

    fn check_limits(&self) {
        for lane in [Lane::Bulk, Lane::Urgent] {
            let (max_items, max_bytes) = self.limits(lane);
            let (items, bytes) = (
                self.queue.pending_items(lane),
                self.queue.pending_bytes(lane),
            );
            assert!(items <= max_items);
            assert!(
                bytes <= max_bytes || items == 1,
                "{bytes} bytes in {items} pushes over {max_bytes}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn conserves_orders_and_keeps_frames_whole(config in config(), ops in prop::collection::vec(op(), 1..80)) {
        let mut h = Harness { queue: WriteQueue::with_config(config), config, out: Vec::new(), accepted: Vec::new(), next_id: 0 };
        for op in ops {
            match op {
                Op::Push { urgent, len, cuts, frame } => {
                    let lane = if urgent { Lane::Urgent } else { Lane::Bulk };
                    h.push(lane, len, cuts, frame)
                }
                Op::Empty { urgent } => h.empty(if urgent { Lane::Urgent } else { Lane::Bulk }),
                Op::Write { room, share } => { h.write(room, share); }
                Op::Close => h.queue.close(),
            }
            h.check_limits();
            h.check_tickets();
        }
        // Drain everything: the whole of what was accepted comes out.
        let mut rounds = 0;
        while !h.queue.is_flushed() {
            h.write(8, 255);
            rounds += 1;
            prop_assert!(rounds < 100_000, "no progress");
        }
        h.check_tickets();
        let (records, partial) = parse(&h.out);
        prop_assert_eq!(partial, None);
        for lane in [Lane::Bulk, Lane::Urgent] {
            let got: Vec<u32> = records.iter().filter(|r| r.0 == lane_byte(lane)).map(|r| r.1).collect();
            let want: Vec<u32> = h.accepted.iter().filter(|a| a.ticket.lane() == lane).filter_map(|a| a.id).collect();
            prop_assert_eq!(got, want, "lane {:?} out of order or lost", lane);
        }
        let pushed: usize = h.accepted.iter().filter_map(|a| a.id).count();
        prop_assert_eq!(records.len(), pushed);
        prop_assert!(h.accepted.iter().all(|a| a.done));
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
    assert!(matches!(
        refused.error(),
        Error::LimitExceeded {
            limit: Limit::QueueBytes,
            ..
        }
    ));
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
    assert_eq!(
        refused.error(),
        &Error::LimitExceeded {
            limit: Limit::QueueItems,
            max: 1,
            attempted: 2,
            offset: 3
        }
    );
    assert_eq!(&refused.into_value()[..], b"two");
    queue.close();
    let refused = queue.push(Bytes::from_static(b"three")).unwrap_err();
    assert_eq!(refused.error(), &Error::Closed);
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
    assert_eq!(err.fault(), cleave::Fault::Caller);
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
        &Error::Closed
    );
}
