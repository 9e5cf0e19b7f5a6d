//! A model of what a `WriteQueue` must do, checked against the real one:
//! pushes are self-describing records, so the written stream can be parsed
//! back to prove conservation, order, whole frames and ticket completion.
//!
//! Shared by the integration tests and the fuzz target (`#[path]`).

#![allow(dead_code)]

use cleave::{Bytes, Error, Frame, Lane, Limit, Ticket, WriteQueue, WriteQueueConfig};

#[derive(Clone, Debug)]
pub enum Op {
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

/// Runs `ops` against a queue made with `config`, checking every step, then
/// drains it and checks that everything accepted came out, in order, once.
pub fn run(config: WriteQueueConfig, ops: &[Op]) {
    let mut h = Harness {
        queue: WriteQueue::with_config(config),
        config,
        out: Vec::new(),
        accepted: Vec::new(),
        next_id: 0,
    };
    for op in ops {
        match *op {
            Op::Push {
                urgent,
                len,
                cuts,
                frame,
            } => {
                let lane = if urgent { Lane::Urgent } else { Lane::Bulk };
                h.push(lane, len, cuts, frame)
            }
            Op::Empty { urgent } => h.empty(if urgent { Lane::Urgent } else { Lane::Bulk }),
            Op::Write { room, share } => {
                h.write(room, share);
            }
            Op::Close => h.queue.close(),
        }
        h.check_limits();
        h.check_tickets();
    }
    let mut rounds = 0;
    while !h.queue.is_flushed() {
        h.write(8, 255);
        rounds += 1;
        assert!(rounds < 1_000_000, "no progress");
    }
    h.check_tickets();
    let (records, partial) = parse(&h.out);
    assert_eq!(partial, None);
    for lane in [Lane::Bulk, Lane::Urgent] {
        let got: Vec<u32> = records
            .iter()
            .filter(|r| r.0 == lane_byte(lane))
            .map(|r| r.1)
            .collect();
        let want: Vec<u32> = h
            .accepted
            .iter()
            .filter(|a| a.ticket.lane() == lane)
            .filter_map(|a| a.id)
            .collect();
        assert_eq!(got, want, "lane {lane:?} out of order or lost");
    }
    assert_eq!(
        records.len(),
        h.accepted.iter().filter_map(|a| a.id).count()
    );
    assert!(h.accepted.iter().all(|a| a.done));
}
