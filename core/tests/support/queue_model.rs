//! A model of what a `WriteQueue` must do, checked against the real one:
//! pushes are self-describing records, so the written stream can be parsed
//! back to prove conservation, order, whole frames, urgent priority and
//! ticket completion.
//!
//! Shared by the integration tests and the fuzz target (`#[path]`).

#![allow(dead_code)]

use std::io::IoSlice;

use cleave_proto::{Bytes, Frame, Lane, Refusal, Ticket, WriteQueue, WriteQueueConfig};

#[derive(Clone, Debug)]
pub enum Op {
    /// A record of this length, cut into parts at these fractions, pushed
    /// as one `Bytes`, as a frame of shared parts, or as a frame with inline
    /// framing (when the cut head and tail fit).
    Push {
        urgent: bool,
        len: usize,
        cuts: (u8, u8),
        shape: u8,
    },
    /// A zero-length push.
    Empty {
        urgent: bool,
    },
    /// Drain into this many slices; the writer takes this share of them.
    /// With `between`, a small record is pushed after the drain and before
    /// the advance.
    Write {
        room: usize,
        share: u8,
        between: bool,
    },
    /// Drain and write nothing (no advance): the next drain starts over.
    Peek {
        room: usize,
    },
    Close,
    /// The writer failed: everything pending is dropped.
    Abort,
}

/// A push that describes itself, so the written stream can be parsed back:
/// `[0xAB, lane, id (u32 LE), len (u32 LE), filler...]`, `len` in all. The
/// filler is below 0xAB, so a record boundary is never mistaken.
fn record(lane: Lane, id: u32, len: usize) -> Vec<u8> {
    let len = len.max(10);
    let mut r = vec![0xAB, lane_byte(lane)];
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.resize(len, filler(id));
    r
}

fn filler(id: u32) -> u8 {
    (id % 170) as u8
}

fn lane_byte(lane: Lane) -> u8 {
    match lane {
        Lane::Bulk => 0,
        Lane::Urgent => 1,
    }
}

/// A record's lane byte and id.
type RecordId = (u8, u32);

/// Parses the written stream into whole records. A record that is cut
/// short must be the last thing written (a frame is never interrupted by
/// another); it comes back as `partial`.
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
            rest[10..have].iter().all(|&b| b == filler(id)),
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

/// One accepted push: its ticket, the record id it carries (none for an
/// empty push), whether it completed, and whether an abort dropped it.
struct Accepted {
    ticket: Ticket,
    id: Option<u32>,
    done: bool,
    dropped: bool,
}

struct Harness {
    queue: WriteQueue,
    config: WriteQueueConfig,
    out: Vec<u8>,
    accepted: Vec<Accepted>,
    next_id: u32,
    writes: usize,
}

impl Harness {
    fn push(&mut self, lane: Lane, len: usize, cuts: (u8, u8), shape: u8) {
        let id = self.next_id;
        self.next_id += 1;
        let r = record(lane, id, len);
        let (a, b) = (
            r.len() * cuts.0 as usize / 256,
            r.len() * cuts.1 as usize / 256,
        );
        let (a, b) = (a.min(b), a.max(b));
        let before = (self.queue.len(), self.queue.items());
        if shape % 4 == 3 {
            // A slice, copied in: the record's bytes are the model's, and
            // the queue keeps no reference to them.
            let pushed = self.queue.push_to(lane, &r[..]).map_err(|rejected| {
                assert_eq!(
                    rejected.clone().into_value(),
                    &r[..],
                    "a refused slice comes back"
                );
                *rejected.error()
            });
            return self.pushed(lane, id, &r, before, pushed);
        }
        let frame = match shape % 4 {
            0 => None,
            1 => Some(Frame::new(
                Bytes::copy_from_slice(&r[..a]),
                Bytes::copy_from_slice(&r[a..b]),
                Bytes::copy_from_slice(&r[b..]),
            )),
            _ => Some(Frame::with_framing(
                &r[..a],
                Bytes::copy_from_slice(&r[a..b]),
                &r[b..],
            )),
        };
        let result = match frame {
            Some(frame) => {
                assert_eq!(frame.to_bytes(), r);
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
                    *rejected.error()
                })
            }
            None => {
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
                    *rejected.error()
                })
            }
        };
        self.pushed(lane, id, &r, before, result);
    }

    /// Checks a push's answer and records an accepted one.
    fn pushed(
        &mut self,
        lane: Lane,
        id: u32,
        r: &[u8],
        before: (usize, usize),
        result: Result<Ticket, Refusal>,
    ) {
        match result {
            Ok(ticket) => {
                assert_eq!(ticket.lane(), lane);
                self.accepted.push(Accepted {
                    ticket,
                    id: Some(id),
                    done: false,
                    dropped: false,
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
                    Refusal::Closed => assert!(self.queue.is_closed()),
                    Refusal::Full(full) => {
                        assert_eq!(full, lane, "refused for another lane");
                        assert!(!self.queue.is_closed(), "full, yet closed");
                        // At the item limit, or over the byte limit with
                        // something pending (an empty lane takes anything).
                        let items = self.queue.pending_items(lane);
                        let pending = self.queue.pending_bytes(lane);
                        assert!(
                            items == max_items || (pending > 0 && pending + r.len() > max_bytes),
                            "refused with {items} pushes and {pending} bytes pending"
                        );
                    }
                    other => panic!("unexpected refusal {other:?}"),
                }
            }
        }
    }

    fn limits(&self, lane: Lane) -> (usize, usize) {
        match lane {
            Lane::Bulk => (self.config.get_max_items(), self.config.get_max_bytes()),
            Lane::Urgent => (
                self.config.get_urgent_max_items(),
                self.config.get_urgent_max_bytes(),
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
                dropped: false,
            });
        }
    }

    /// Drains into `room` slices (through `chunks`, `io_slices` or
    /// `chunks_owned`, in turn) and checks what was handed out.
    fn drain(&mut self, room: usize) -> Vec<u8> {
        let (max_slices, piece) = (self.config.get_max_slices(), self.config.get_piece_size());
        let mut presented = Vec::new();
        self.writes += 1;
        if self.writes % 3 == 2 {
            let mut owned = vec![Bytes::from_static(b"kept")];
            let n = self.queue.chunks_owned(&mut owned, room);
            assert_eq!(owned.len(), n + 1, "appends, keeps what was there");
            assert!(n <= room && n <= max_slices);
            for piece_bytes in &owned[1..] {
                assert!(!piece_bytes.is_empty() && piece_bytes.len() <= piece);
                presented.extend_from_slice(piece_bytes);
            }
        } else if self.writes % 3 == 0 {
            let mut slices = vec![&b""[..]; room];
            let n = self.queue.chunks(&mut slices);
            assert!(n <= room && n <= max_slices);
            for slice in &slices[..n] {
                assert!(!slice.is_empty() && slice.len() <= piece);
                presented.extend_from_slice(slice);
            }
        } else {
            let mut slices = vec![IoSlice::new(&[]); room];
            let n = self.queue.io_slices(&mut slices);
            assert!(n <= room && n <= max_slices);
            for slice in &slices[..n] {
                assert!(!slice.is_empty() && slice.len() <= piece);
                presented.extend_from_slice(slice);
            }
        }
        assert!(presented.len() <= self.config.get_max_drain_bytes());
        // Between pushes, urgent data goes first.
        let at_boundary = parse(&self.out).1.is_none();
        if at_boundary && self.queue.pending_bytes(Lane::Urgent) > 0 && presented.len() >= 2 {
            assert_eq!(
                presented[1],
                lane_byte(Lane::Urgent),
                "bulk data went ahead of urgent data"
            );
        }
        presented
    }

    /// Drains into `room` slices and writes `share`/255 of what came out.
    fn write(&mut self, room: usize, share: u8, between: bool) {
        let presented = self.drain(room);
        if between {
            // Pushing between a drain and its advance changes nothing
            // already handed out.
            self.push(Lane::Bulk, 20, (64, 192), 2);
        }
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
    }

    fn abort(&mut self) {
        let pending = self
            .accepted
            .iter()
            .filter(|a| !a.done && !a.dropped)
            .count();
        assert_eq!(
            self.queue.abort(),
            pending,
            "abort miscounted what it dropped"
        );
        for a in self.accepted.iter_mut().filter(|a| !a.done) {
            a.dropped = true;
        }
        assert!(self.queue.is_closed() && self.queue.is_flushed());
    }

    /// Tickets complete exactly when their record is fully written, in
    /// order within a lane, each once; dropped ones never.
    fn check_tickets(&mut self) {
        let (records, _) = parse(&self.out);
        for lane in [Lane::Bulk, Lane::Urgent] {
            let mut all_before_done = true;
            for a in self.accepted.iter_mut().filter(|a| a.ticket.lane() == lane) {
                let written = match a.id {
                    Some(id) => records.contains(&(lane_byte(lane), id)),
                    None => all_before_done,
                } && !a.dropped;
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
/// drains it and checks that everything accepted (and not dropped) came
/// out, in order, once.
pub fn run(config: WriteQueueConfig, ops: &[Op]) {
    let mut h = Harness {
        queue: WriteQueue::with_config(config),
        config,
        out: Vec::new(),
        accepted: Vec::new(),
        next_id: 0,
        writes: 0,
    };
    for op in ops {
        match *op {
            Op::Push {
                urgent,
                len,
                cuts,
                shape,
            } => {
                let lane = if urgent { Lane::Urgent } else { Lane::Bulk };
                h.push(lane, len, cuts, shape)
            }
            Op::Empty { urgent } => h.empty(if urgent { Lane::Urgent } else { Lane::Bulk }),
            Op::Write {
                room,
                share,
                between,
            } => h.write(room, share, between),
            Op::Peek { room } => {
                h.drain(room);
            }
            Op::Close => h.queue.close(),
            Op::Abort => h.abort(),
        }
        h.check_limits();
        h.check_tickets();
    }
    let mut rounds = 0;
    while !h.queue.is_flushed() {
        h.write(8, 255, false);
        rounds += 1;
        assert!(rounds < 1_000_000, "no progress");
    }
    h.check_tickets();
    let (records, partial) = parse(&h.out);
    // A record cut short is acceptable only if an abort dropped its rest
    // (one cut inside its header has no id to check).
    if let Some((_, id)) = partial {
        let dropped = |a: &Accepted| a.dropped && (id == u32::MAX || a.id == Some(id));
        assert!(h.accepted.iter().any(dropped), "record {id} cut short");
    }
    for lane in [Lane::Bulk, Lane::Urgent] {
        let got: Vec<u32> = records
            .iter()
            .filter(|r| r.0 == lane_byte(lane))
            .map(|r| r.1)
            .collect();
        let want: Vec<u32> = h
            .accepted
            .iter()
            .filter(|a| a.ticket.lane() == lane && !a.dropped)
            .filter_map(|a| a.id)
            .collect();
        assert_eq!(got, want, "lane {lane:?} out of order or lost");
    }
    assert!(h.accepted.iter().all(|a| a.done != a.dropped));
}
