//! A scripted socket that drives a `Conn` and checks it, step by step,
//! against a model of its documented lifecycle: reads of any size (into
//! the spare room, through `read_with` or `read_io`, or fed), partial
//! writes (through each of the transmit calls, `write_with` and
//! `write_io`, interrupted or blocked), application pushes, the end of the stream,
//! read and write errors, resets, closes, pauses and the clock, in any
//! order.
//!
//! Checked after every step:
//!
//! - nothing lost: every byte handed to the connection is in exactly one
//!   event, in a `Truncated` error, or still in the buffer, in order; every
//!   byte pushed is written once, in order, or dropped by a reset or a
//!   write error;
//! - no event after the end (the protocol's last event, an error, or,
//!   once reading failed or was stopped, the events the buffered bytes
//!   still made), and errors are final: the same one on every call;
//! - the write side: `poll_shutdown` asks for a FIN only once the queue is
//!   flushed and until it is done, never again after; a reset drops the
//!   queue; nothing is offered for writing once the side is shut, reset or
//!   failed;
//! - the timers: `poll_timeout` is the model's deadline (known before the
//!   first byte), `handle_timeout` before it changes nothing, at it the
//!   connection ends with the `Timeout` that ran out, and with a reset or
//!   a clean close as the protocol says;
//! - the questions (`wants_read`, `wants_write`, `is_finished`, ...) agree
//!   with the model.
//!
//! The script ends the way a driver does: the rest of the input, the end
//! of the stream, the application's close, every byte written, the
//! shutdown; the connection must then be finished.
//!
//! Shared by the integration tests and the fuzz targets (`#[path]`).

#![allow(dead_code)]

use core::time::Duration;
#[cfg(feature = "std")]
use std::io::IoSlice;

#[cfg(feature = "std")]
use cleave_proto::ConnError;

use cleave_proto::conn::{Conn, ConnConfig, Framed, Phase, Protocol, Shutdown};
use cleave_proto::{
    Bytes, Decoder, Error, Event, Frame, Lane, LengthPrefixed, Lines, NoFrames, Refusal, Session,
    Switch, Timeout, Timeouts,
};

/// A decoder whose frames can be found again in the bytes they came from.
pub trait OnWire: Decoder<Item = Bytes> {
    /// The bytes `frame` took on the wire at the start of `rest`, after
    /// checking they are the frame's.
    fn on_wire(frame: &Bytes, rest: &[u8]) -> usize;
}

impl OnWire for Lines {
    /// A line and its `\n` (the model's lines keep their `\r`:
    /// `strip_cr(false)`).
    fn on_wire(frame: &Bytes, rest: &[u8]) -> usize {
        let len = frame.len();
        assert_eq!(
            rest.get(..=len).map(|wire| (&wire[..len], wire[len])),
            Some((&frame[..], b'\n')),
            "a line is not the bytes it came from"
        );
        len + 1
    }
}

impl OnWire for LengthPrefixed {
    /// A 4-byte big-endian length and the body (the default framing).
    fn on_wire(frame: &Bytes, rest: &[u8]) -> usize {
        let len = frame.len();
        assert_eq!(
            rest.get(..4 + len),
            Some(&[&(len as u32).to_be_bytes()[..], &frame[..]].concat()[..]),
            "a frame is not the bytes it came from"
        );
        4 + len
    }
}

impl OnWire for NoFrames {
    fn on_wire(_: &Bytes, _: &[u8]) -> usize {
        unreachable!("a session without frames made one")
    }
}

/// A protocol whose events can be found again in the input.
pub trait Account: Protocol<Event: PartialEq + core::fmt::Debug> + Sized {
    /// The input bytes `event` stands for, at the start of `rest` (the
    /// input from where the event starts), after checking it.
    fn account(event: &Self::Event, rest: &[u8]) -> usize;

    /// Appends `event`, joining events whose cut depends on the reads (raw
    /// tunnel bytes), so runs over different reads compare equal.
    fn join(events: &mut Vec<Self::Event>, event: Self::Event) {
        events.push(event);
    }
}

impl<D: OnWire> Account for Framed<D> {
    fn account(frame: &Bytes, rest: &[u8]) -> usize {
        D::on_wire(frame, rest)
    }
}

/// A session's events.
pub type SessionEvent = Event<&'static str, Bytes>;

impl<D: OnWire, S: Switch<Bytes>> Account for Session<&'static str, D, S> {
    fn account(event: &SessionEvent, rest: &[u8]) -> usize {
        let len = match event {
            Event::Proxy { len, .. } => *len,
            Event::Routed(decision) => decision.consume,
            Event::Frame(frame) => return D::on_wire(frame, rest),
            Event::Tunnel(bytes) | Event::Closed(bytes) => {
                assert_eq!(
                    rest.get(..bytes.len()),
                    Some(&bytes[..]),
                    "raw bytes are not the input's"
                );
                bytes.len()
            }
            other => panic!("an event the model does not know: {other:?}"),
        };
        assert!(len <= rest.len(), "an event past the input");
        len
    }

    fn join(events: &mut Vec<SessionEvent>, event: SessionEvent) {
        match (events.last_mut(), event) {
            (Some(Event::Tunnel(a)), Event::Tunnel(b)) => {
                *a = Bytes::from([&a[..], &b[..]].concat());
            }
            (_, event) => events.push(event),
        }
    }
}

/// One thing that happens to the connection.
#[derive(Clone, Debug)]
pub enum Step {
    /// The socket has the next `len` bytes of the input (or fewer, as the
    /// room and the input allow); `via` picks how the driver reads them:
    /// into `spare_mut` then `handle_read`, through `read_with`, or `feed`.
    /// With the input all read, a read that would block.
    Read { len: usize, via: u8 },
    /// The writer takes `share`/255 of what the connection offers in
    /// `room` slices; `via` picks `poll_transmit`, `poll_transmit_slices`,
    /// `poll_transmit_chunk` or `write_with`.
    Write { share: u8, room: usize, via: u8 },
    /// The application pushes `len` bytes in the bulk lane, as one `Bytes`
    /// or as a frame of three parts.
    Push { len: usize, frame: bool },
    /// Time passes, and the timer fires: `handle_timeout`.
    Tick { ms: u64 },
    /// The peer ends its side: `handle_eof`, a read of 0 into the spare
    /// room, or through `read_with`.
    Eof { via: u8 },
    /// Reading fails: `handle_read_error`, directly or after `read_with`.
    ReadError { via: u8 },
    /// Writing fails: `handle_write_error`, directly or after `write_with`.
    WriteError { via: u8 },
    /// The driver does what `poll_shutdown` asks, if anything (by hand,
    /// or through `shutdown_with`).
    Shutdown,
    /// The driver tries what `poll_shutdown` asks through `shutdown_with`,
    /// and the socket refuses: a FIN that fails fails writing, a reset
    /// that fails is recorded done (best effort).
    ShutdownFails,
    /// The application closes its side.
    Close,
    /// The application resets the connection.
    Reset,
    /// The application stops (or resumes) reading.
    Pause(bool),
}

/// What a run gave.
#[derive(Debug)]
pub struct Outcome<E> {
    /// The events, joined as the protocol says.
    pub events: Vec<E>,
    /// The final error, if any.
    pub error: Option<Error>,
    /// Input bytes handed to the connection.
    pub fed: usize,
    /// Bytes the application pushed and the writer took.
    pub pushed: usize,
    pub written: usize,
    /// What the driver did to the socket, in order.
    pub shutdowns: Vec<Shutdown>,
}

/// A reader's or a writer's own error, for `read_with` and `write_with`.
#[derive(Debug, PartialEq)]
enum Io {
    WouldBlock,
    Failed,
    Core(Error),
}

impl From<Error> for Io {
    fn from(e: Error) -> Self {
        Self::Core(e)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadSide {
    Open,
    Ended,
    Failed,
    Stopped,
    /// Failed or stopped, and the protocol made what the buffered bytes
    /// made: nothing more comes.
    Over,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteSide {
    Open,
    Closing,
    Shut,
    Resetting,
    Reset,
    Failed,
}

/// The connection, and the model it is checked against.
struct Script<'a, P: Account> {
    conn: Conn<P>,
    timeouts: Timeouts,
    input: &'a [u8],
    /// Input bytes handed to the connection, and those its events (and a
    /// `Truncated` error) account for.
    fed: usize,
    consumed: usize,
    events: Vec<P::Event>,
    error: Option<Error>,
    /// `poll_event` said `Ok(None)` with the protocol done.
    ended: bool,
    /// Bytes the application pushed and the writer took; whether a reset
    /// or a write error dropped what was queued.
    pushed: Vec<u8>,
    written: usize,
    dropped: bool,
    /// The FIN failed after every byte went out.
    fin_failed: bool,
    pushes: u32,
    shutdowns: Vec<Shutdown>,
    read: ReadSide,
    write: WriteSide,
    paused: bool,
    /// The clock: now, the start, the last byte either way, and since when
    /// an incomplete frame waits.
    now: Duration,
    started: Duration,
    active: Duration,
    partial_since: Option<Duration>,
    /// The protocol's deadline a `handle_timeout` at or after it handled:
    /// it fires once, and is left out while it stays (and stays past).
    spent: Option<Duration>,
}

/// Runs `steps` over a connection of `protocol` made with `config` at
/// time `start`, then ends it as a driver does (the rest of `input`, the
/// end of the stream, a close, every byte written, the shutdown), checking
/// the model after every step.
pub fn run<P: Account>(
    protocol: P,
    config: ConnConfig,
    start: Duration,
    input: &[u8],
    steps: &[Step],
) -> Outcome<P::Event> {
    let mut script = Script {
        conn: Conn::with_config(protocol, config, start),
        timeouts: *config.get_timeouts(),
        input,
        fed: 0,
        consumed: 0,
        events: Vec::new(),
        error: None,
        ended: false,
        pushed: Vec::new(),
        written: 0,
        dropped: false,
        fin_failed: false,
        pushes: 0,
        shutdowns: Vec::new(),
        read: ReadSide::Open,
        write: WriteSide::Open,
        paused: false,
        now: start,
        started: start,
        active: start,
        partial_since: None,
        spent: None,
    };
    // The deadline is known before the first byte.
    script.check();
    for step in steps {
        script.step(step);
        script.pump();
        script.check();
    }
    script.finish()
}

/// Feeds all of `input` at once (as much as the buffer takes, the rest in
/// reads of its reserve as it empties), then ends the stream: the events
/// and the error the runs over other reads must give.
pub fn whole<P: Account>(
    protocol: P,
    config: ConnConfig,
    input: &[u8],
) -> (Vec<P::Event>, Option<Error>) {
    let outcome = run(
        protocol,
        config,
        Duration::ZERO,
        input,
        &[Step::Read {
            len: usize::MAX,
            via: 2,
        }],
    );
    (outcome.events, outcome.error)
}

impl<P: Account> Script<'_, P> {
    fn step(&mut self, step: &Step) {
        match *step {
            Step::Read { len, via } => self.read(len, via),
            Step::Write { share, room, via } => self.write(share, room, via),
            Step::Push { len, frame } => self.push(len, frame),
            Step::Tick { ms } => self.tick(ms),
            Step::Eof { via } => self.eof(via),
            Step::ReadError { via } => self.read_error(via),
            Step::WriteError { via } => self.write_error(via),
            Step::Shutdown => self.shutdown(),
            Step::ShutdownFails => self.shutdown_fails(),
            Step::Close => {
                self.conn.close();
                self.close();
            }
            Step::Reset => {
                self.conn.reset();
                self.reset();
            }
            Step::Pause(paused) => {
                self.conn.pause_reading(paused);
                self.paused = paused;
            }
        }
    }

    // ----- the read side -----

    fn read(&mut self, len: usize, via: u8) {
        // A driver reads only when the connection wants it.
        if !self.conn.wants_read() {
            return;
        }
        let now = self.now;
        let rest = &self.input[self.fed..];
        if rest.is_empty() {
            // Nothing arrived: the read would block. `read_with` commits
            // nothing, and it is not the end of the stream.
            #[cfg(feature = "std")]
            if via % 2 == 1 {
                let got = self.conn.read_io(now, |_| Ok(None));
                assert!(matches!(got, Ok(None)), "{got:?}");
                return;
            }
            let got = self
                .conn
                .read_with(now, |_| Err::<usize, Io>(Io::WouldBlock));
            assert_eq!(got, Err(Io::WouldBlock));
            return;
        }
        let n = match via % 4 {
            0 => {
                let spare = self.conn.spare_mut().expect("it wants to read: room");
                let n = len.min(spare.len()).min(rest.len());
                spare[..n].copy_from_slice(&rest[..n]);
                self.conn
                    .handle_read(n, now)
                    .expect("within the spare room");
                n
            }
            1 => {
                let mut took = 0;
                let got = self.conn.read_with(now, |spare| {
                    took = len.min(spare.len()).min(rest.len());
                    spare[..took].copy_from_slice(&rest[..took]);
                    Ok::<usize, Io>(took)
                });
                assert_eq!(got, Ok(took));
                took
            }
            #[cfg(feature = "std")]
            3 => {
                // Interrupted by a signal first: read again.
                let (mut took, mut calls) = (0, 0);
                let got = self.conn.read_io(now, |spare| {
                    calls += 1;
                    if calls == 1 {
                        return Err(std::io::ErrorKind::Interrupted.into());
                    }
                    took = len.min(spare.len()).min(rest.len());
                    spare[..took].copy_from_slice(&rest[..took]);
                    Ok(Some(took))
                });
                assert!(matches!(got, Ok(Some(n)) if n == took), "{got:?}");
                took
            }
            _ => {
                let n = len.min(rest.len()).min(self.conn.recv_buf().remaining());
                self.conn.feed(&rest[..n], now).expect("fits");
                n
            }
        };
        assert!(n > 0, "a read that wants to read took nothing");
        self.fed += n;
        self.active = now;
    }

    fn eof(&mut self, via: u8) {
        if !self.conn.wants_read() {
            return;
        }
        let now = self.now;
        match via % 4 {
            0 => self.conn.handle_eof(now),
            1 => {
                self.conn.spare_mut().expect("it wants to read: room");
                self.conn.handle_read(0, now).expect("0 always fits");
            }
            #[cfg(feature = "std")]
            3 => {
                let got = self.conn.read_io(now, |_| Ok(Some(0)));
                assert!(matches!(got, Ok(Some(0))), "{got:?}");
            }
            _ => assert_eq!(self.conn.read_with(now, |_| Ok::<usize, Io>(0)), Ok(0)),
        }
        self.ended_by_peer();
    }

    fn ended_by_peer(&mut self) {
        if self.read == ReadSide::Open {
            self.read = ReadSide::Ended;
        }
    }

    fn read_error(&mut self, via: u8) {
        let now = self.now;
        if via % 3 == 1 && self.conn.wants_read() {
            let got = self.conn.read_with(now, |_| Err::<usize, Io>(Io::Failed));
            assert_eq!(got, Err(Io::Failed));
        }
        #[cfg(feature = "std")]
        if via % 3 == 2 && self.conn.wants_read() {
            // `read_io` records the failure itself.
            let got = self
                .conn
                .read_io(now, |_| Err(std::io::ErrorKind::ConnectionReset.into()));
            assert!(matches!(got, Err(ConnError::Io(_))), "{got:?}");
            assert!(!self.conn.wants_read(), "reading failed");
        }
        self.conn.handle_read_error(now);
        if matches!(self.read, ReadSide::Open | ReadSide::Ended) {
            self.read = ReadSide::Failed;
        }
    }

    /// Polls until the protocol needs more, checking every event against
    /// the input and the end against the model.
    fn pump(&mut self) {
        let done_before = self.conn.is_read_done();
        loop {
            let phase = self.conn.protocol().phase();
            match self.conn.poll_event() {
                Ok(Some(event)) => {
                    assert!(
                        self.error.is_none() && !self.ended,
                        "an event after the end"
                    );
                    // A tunnel's idle time counts from when it opened.
                    if phase != Phase::Tunnel && self.conn.protocol().phase() == Phase::Tunnel {
                        self.active = self.now;
                    }
                    assert!(!done_before, "an event once the read side was done");
                    let n = P::account(&event, &self.input[self.consumed..self.fed]);
                    self.consumed += n;
                    self.partial_since = None;
                    P::join(&mut self.events, event);
                }
                Ok(None) => {
                    assert!(self.error.is_none(), "the error went away");
                    if matches!(self.read, ReadSide::Failed | ReadSide::Stopped) {
                        self.read = ReadSide::Over;
                    }
                    match self.conn.protocol().phase() {
                        Phase::Done => self.ended = true,
                        Phase::Opening | Phase::Framing if !self.conn.recv_buf().is_empty() => {
                            self.partial_since.get_or_insert(self.now);
                        }
                        _ => self.partial_since = None,
                    }
                    return;
                }
                Err(e) => {
                    match &self.error {
                        Some(first) => assert_eq!(&e, first, "the error changed"),
                        None => {
                            assert!(!self.ended, "an error after the end");
                            if let Error::Truncated { partial, offset } = &e {
                                assert_eq!(*offset, self.consumed as u64);
                                let rest = &self.input[self.consumed..self.fed];
                                assert_eq!(&partial[..], rest, "truncated bytes are not the rest");
                                self.consumed = self.fed;
                            }
                            self.error = Some(e.clone());
                            self.active = self.now;
                            self.stop_reading();
                        }
                    }
                    assert_eq!(self.conn.poll_event(), Err(e), "error not final");
                    return;
                }
            }
        }
    }

    fn stop_reading(&mut self) {
        if matches!(self.read, ReadSide::Open | ReadSide::Ended) {
            self.read = ReadSide::Stopped;
        }
    }

    // ----- the write side -----

    fn push(&mut self, len: usize, frame: bool) {
        let id = self.pushes;
        self.pushes += 1;
        let record: Vec<u8> = (0..len).map(|i| (id as usize * 31 + i) as u8).collect();
        let result = if frame {
            let (a, b) = (len / 3, len - len / 4);
            let frame = Frame::new(
                Bytes::copy_from_slice(&record[..a]),
                Bytes::copy_from_slice(&record[a..b]),
                Bytes::copy_from_slice(&record[b..]),
            );
            self.conn.push(frame).map_err(|r| {
                assert_eq!(
                    r.clone().into_value().to_bytes(),
                    record,
                    "a frame comes back whole"
                );
                *r.error()
            })
        } else {
            let bytes = Bytes::from(record.clone());
            self.conn.push(bytes).map_err(|r| {
                assert_eq!(r.clone().into_value(), record, "bytes come back whole");
                *r.error()
            })
        };
        match result {
            Ok(ticket) => {
                assert_eq!(self.write, WriteSide::Open, "a closed queue took a push");
                assert_eq!(ticket.lane(), Lane::Bulk);
                self.pushed.extend_from_slice(&record);
                assert_eq!(ticket.offset(), self.pushed.len() as u64);
            }
            Err(Refusal::Closed) => {
                assert_ne!(
                    self.write,
                    WriteSide::Open,
                    "an open queue refused as closed"
                );
            }
            Err(Refusal::Full(lane)) => {
                assert_eq!(lane, Lane::Bulk);
                assert_eq!(
                    self.write,
                    WriteSide::Open,
                    "a closed queue refused as full"
                );
                assert!(!self.conn.queue().fits(Lane::Bulk, len));
            }
            Err(other) => panic!("an unknown refusal: {other:?}"),
        }
    }

    fn pending(&self) -> usize {
        if self.dropped {
            0
        } else {
            self.pushed.len() - self.written
        }
    }

    fn writing(&self) -> bool {
        matches!(self.write, WriteSide::Open | WriteSide::Closing)
    }

    /// What the connection offers now, through `via`; the writer takes
    /// `share`/255 of it.
    fn write(&mut self, share: u8, room: usize, via: u8) {
        let now = self.now;
        let room = room.clamp(1, 8);
        let take = |offered: usize| offered * usize::from(share) / 255;
        let (offered, n) = match via % 5 {
            0 => {
                let offered = self.offered_io_slices(room);
                let n = take(offered.len());
                self.conn.handle_written(n, now).expect("what was offered");
                (offered, n)
            }
            1 => {
                let offered = {
                    let mut slices = vec![&[][..]; room];
                    let k = self.conn.poll_transmit_slices(&mut slices);
                    slices[..k].concat()
                };
                let n = take(offered.len());
                self.conn.handle_written(n, now).expect("what was offered");
                (offered, n)
            }
            2 => {
                let offered = self
                    .conn
                    .poll_transmit_chunk()
                    .map_or(Vec::new(), |chunk| chunk.to_vec());
                let n = take(offered.len());
                self.conn.handle_written(n, now).expect("what was offered");
                (offered, n)
            }
            3 => self.write_with(share),
            _ => self.write_io(share),
        };
        if !self.writing() {
            assert!(
                offered.is_empty(),
                "bytes offered with the write side {:?}",
                self.write
            );
        } else if self.pending() > 0 {
            assert!(!offered.is_empty(), "bytes pending, none offered");
        }
        assert!(offered.len() <= self.pending(), "more offered than pending");
        let at = self.written;
        assert_eq!(
            &offered[..],
            &self.pushed[at..at + offered.len()],
            "offered bytes are not the next pushed ones"
        );
        self.written += n;
        if n > 0 {
            self.active = now;
        }
    }

    /// What `poll_transmit` offers in `room` slices.
    #[cfg(feature = "std")]
    fn offered_io_slices(&mut self, room: usize) -> Vec<u8> {
        let mut slices = vec![IoSlice::new(&[]); room];
        let k = self.conn.poll_transmit(&mut slices);
        slices[..k].iter().flat_map(|s| s.iter()).copied().collect()
    }

    /// Without `std` there is no `IoSlice`: `poll_transmit_slices`.
    #[cfg(not(feature = "std"))]
    fn offered_io_slices(&mut self, room: usize) -> Vec<u8> {
        let mut slices = vec![&[][..]; room];
        let k = self.conn.poll_transmit_slices(&mut slices);
        slices[..k].concat()
    }

    /// One `write_with` whose writer takes `share`/255 of what it is
    /// given: what it was given, and what it took.
    #[cfg(feature = "std")]
    fn write_with(&mut self, share: u8) -> (Vec<u8>, usize) {
        let mut offered = Vec::new();
        let got = self.conn.write_with(self.now, |slices| {
            offered = slices.iter().flat_map(|s| s.iter()).copied().collect();
            Ok::<usize, Io>(offered.len() * usize::from(share) / 255)
        });
        let n = offered.len() * usize::from(share) / 255;
        assert_eq!(got, Ok(n));
        (offered, n)
    }

    /// One `write_io` whose writer is interrupted first, then takes
    /// `share`/255 of what it is given, or nothing now (it would block)
    /// when that is 0: what it was given, and what it took.
    #[cfg(feature = "std")]
    fn write_io(&mut self, share: u8) -> (Vec<u8>, usize) {
        let (mut offered, mut calls) = (Vec::new(), 0);
        let got = self.conn.write_io(self.now, |slices| {
            calls += 1;
            if calls == 1 {
                return Err(std::io::ErrorKind::Interrupted.into());
            }
            offered = slices.iter().flat_map(|s| s.iter()).copied().collect();
            let n = offered.len() * usize::from(share) / 255;
            Ok((n > 0).then_some(n))
        });
        let n = offered.len() * usize::from(share) / 255;
        match got {
            Ok(Some(0)) => assert_eq!(calls, 0, "nothing to write: the writer is not called"),
            Ok(Some(took)) => assert_eq!(took, n),
            Ok(None) => assert_eq!(n, 0),
            Err(e) => panic!("{e:?}"),
        }
        (offered, n)
    }

    #[cfg(not(feature = "std"))]
    fn write_io(&mut self, share: u8) -> (Vec<u8>, usize) {
        self.write_with(share)
    }

    /// Without `std` there is no `write_with`: a chunk, written by hand.
    #[cfg(not(feature = "std"))]
    fn write_with(&mut self, share: u8) -> (Vec<u8>, usize) {
        let offered = self
            .conn
            .poll_transmit_chunk()
            .map_or(Vec::new(), |chunk| chunk.to_vec());
        let n = offered.len() * usize::from(share) / 255;
        self.conn
            .handle_written(n, self.now)
            .expect("what was offered");
        (offered, n)
    }

    fn write_error(&mut self, via: u8) {
        let now = self.now;
        #[cfg(feature = "std")]
        if via % 3 == 2 {
            // `write_io` records the failure itself; a writer that takes
            // nothing of a write fails it too.
            let pending = self.writing() && self.pending() > 0;
            let got = if via % 2 == 0 {
                self.conn.write_io(now, |_| Ok(Some(0)))
            } else {
                self.conn
                    .write_io(now, |_| Err(std::io::ErrorKind::BrokenPipe.into()))
            };
            if pending {
                assert!(matches!(&got, Err(ConnError::Io(_))), "{got:?}");
                assert!(self.conn.is_write_failed() || !self.writing());
            } else {
                assert!(matches!(got, Ok(Some(0))), "{got:?}");
            }
        }
        #[cfg(feature = "std")]
        if via % 3 == 1 {
            let got = self.conn.write_with(now, |_| Err::<usize, Io>(Io::Failed));
            let expected = if self.writing() && self.pending() > 0 {
                Err(Io::Failed)
            } else {
                Ok(0)
            };
            assert_eq!(
                got, expected,
                "write_with calls the writer only with bytes to write"
            );
        }
        #[cfg(not(feature = "std"))]
        let _ = via;
        self.conn.handle_write_error(now);
        self.dropped = true;
        // A write side that ended already stays as it ended, and a reset
        // asked for is still asked for.
        if !matches!(
            self.write,
            WriteSide::Reset | WriteSide::Shut | WriteSide::Resetting
        ) {
            self.write = WriteSide::Failed;
        }
    }

    fn shutdown(&mut self) {
        let Some(asked) = self.conn.poll_shutdown() else {
            return;
        };
        if self.written % 2 == 0 {
            self.conn.handle_shutdown();
        } else {
            let got = self.conn.shutdown_with(|how| {
                assert_eq!(how, asked, "shutdown_with does what poll_shutdown asks");
                Ok::<(), ()>(())
            });
            assert_eq!(got, Ok(()));
        }
        self.shutdowns.push(asked);
        self.write = match (self.write, asked) {
            (WriteSide::Closing, Shutdown::Write) => WriteSide::Shut,
            (WriteSide::Resetting, Shutdown::Reset) => WriteSide::Reset,
            (side, asked) => panic!("{asked:?} asked with the write side {side:?}"),
        };
        assert_ne!(
            self.conn.poll_shutdown(),
            Some(asked),
            "asked again once done"
        );
    }

    fn shutdown_fails(&mut self) {
        let Some(asked) = self.conn.poll_shutdown() else {
            return;
        };
        let got = self.conn.shutdown_with(|_| Err::<(), ()>(()));
        assert_eq!(got, Err(()));
        match asked {
            Shutdown::Write => {
                // Everything went out, but not the FIN: writing failed.
                assert!(self.conn.is_write_failed(), "a failed FIN fails writing");
                self.fin_failed = true;
                self.write = WriteSide::Failed;
            }
            Shutdown::Reset => {
                self.shutdowns.push(asked);
                self.write = WriteSide::Reset;
            }
        }
        assert_eq!(
            self.conn.poll_shutdown(),
            None,
            "a failed shutdown is not tried again"
        );
    }

    /// The application's (or a timeout's) clean close.
    fn close(&mut self) {
        if self.write == WriteSide::Open {
            self.write = WriteSide::Closing;
        }
    }

    /// The application's (or a timeout's) reset.
    fn reset(&mut self) {
        self.dropped = true;
        if self.write != WriteSide::Reset {
            self.write = WriteSide::Resetting;
        }
        self.stop_reading();
    }

    // ----- the clock -----

    /// The earliest of the connection's running timeouts, and every
    /// timeout that runs out then.
    fn conn_deadline(&self) -> Option<(Duration, Vec<Timeout>)> {
        let t = &self.timeouts;
        let after = |from: Duration, d: Option<Duration>| d.map(|d| from + d);
        let candidates = match self.conn.protocol().phase() {
            phase @ (Phase::Opening | Phase::Framing) => vec![
                (
                    after(self.started, t.get_opening()).filter(|_| phase == Phase::Opening),
                    Timeout::Opening,
                ),
                (
                    self.partial_since
                        .and_then(|since| after(since, t.get_frame())),
                    Timeout::Frame,
                ),
                (after(self.active, t.get_idle()), Timeout::Idle),
            ],
            Phase::Tunnel => vec![(after(self.active, t.get_tunnel_idle()), Timeout::TunnelIdle)],
            Phase::Done => match t.get_idle() {
                Some(idle) => vec![(Some(self.active + idle), Timeout::Idle)],
                None => vec![(after(self.active, t.get_tunnel_idle()), Timeout::TunnelIdle)],
            },
        };
        let at = candidates.iter().filter_map(|(at, _)| *at).min()?;
        let which = candidates
            .iter()
            .filter(|(when, _)| *when == Some(at))
            .map(|(_, which)| *which)
            .collect();
        Some((at, which))
    }

    /// No event comes any more: an error, the protocol's last event, or
    /// reading failed or stopped and what was buffered made its events.
    fn read_done(&self) -> bool {
        self.error.is_some()
            || self.read == ReadSide::Over
            || self.conn.protocol().phase() == Phase::Done
    }

    fn write_done(&self) -> bool {
        match self.write {
            WriteSide::Open => self.pending() == 0,
            WriteSide::Closing | WriteSide::Resetting => false,
            WriteSide::Shut | WriteSide::Reset | WriteSide::Failed => true,
        }
    }

    /// After an error, a clean close (or a write side left open) waits
    /// for the peer to take what is queued for the idle span (else the
    /// tunnel's, the frame's, the opening's), then resets.
    fn linger(&self) -> Option<Duration> {
        let writing = matches!(self.write, WriteSide::Open | WriteSide::Closing);
        if self.error.is_none() || !writing || self.pending() == 0 {
            return None;
        }
        let t = &self.timeouts;
        let span = t
            .get_idle()
            .or(t.get_tunnel_idle())
            .or(t.get_frame())
            .or(t.get_opening())?;
        Some(self.active + span)
    }

    fn expected_timeout(&self) -> Option<Duration> {
        if self.error.is_some() {
            return self.linger();
        }
        if self.read_done() && self.write_done() {
            return None;
        }
        let conn = self.conn_deadline().map(|(at, _)| at);
        let protocol = self
            .protocol_deadline()
            .filter(|&at| Some(at) != self.spent || at > self.now);
        [conn, protocol].into_iter().flatten().min()
    }

    fn protocol_deadline(&self) -> Option<Duration> {
        match self.read {
            ReadSide::Open | ReadSide::Ended => self.conn.protocol().poll_timeout(),
            ReadSide::Failed | ReadSide::Stopped | ReadSide::Over => None,
        }
    }

    fn tick(&mut self, ms: u64) {
        let deadline = self.conn.poll_timeout();
        let conn_deadline = self.conn_deadline();
        self.now += Duration::from_millis(ms);
        let now = self.now;
        let before = self.observe();
        let buffered = !self.conn.recv_buf().is_empty();
        let lingered = self.linger().is_some_and(|at| at <= now);
        // The protocol's deadline passed at an earlier call and it had its
        // poll since: it holds no connection timeout back again.
        let had_its_turn = self.spent.is_some()
            && self
                .protocol_deadline()
                .is_some_and(|at| at <= now - Duration::from_millis(ms));
        self.spent = self.protocol_deadline().filter(|&at| at <= now);
        self.conn.handle_timeout(now);
        if lingered {
            // The peer did not take the last bytes in time: a reset.
            self.reset();
            return;
        }
        let due = match deadline {
            Some(at) => at <= now,
            None => false,
        };
        // Past both, the protocol's earlier deadline goes first.
        let protocol_first = |at: Duration| {
            self.spent.is_some()
                && !had_its_turn
                && self.protocol_deadline().is_some_and(|p| p < at)
        };
        let timed_out = match conn_deadline {
            Some((at, which))
                if due && at <= now && self.error.is_none() && !protocol_first(at) =>
            {
                Some(which)
            }
            _ => None,
        };
        let Some(which) = timed_out else {
            // Before the deadline (or the protocol's own deadline, which
            // the next poll handles): nothing changes.
            assert_eq!(
                self.observe(),
                before,
                "handle_timeout at {now:?}, deadline {deadline:?}"
            );
            return;
        };
        let error = self.conn.error().cloned();
        assert!(
            matches!(&error, Some(Error::TimedOut(t)) if which.contains(t)),
            "at {now:?}: {error:?}, expected one of {which:?}"
        );
        self.error = error;
        self.active = now;
        self.stop_reading();
        // By default a peer that left an incomplete frame is reset.
        if buffered {
            self.reset();
        } else {
            self.close();
        }
    }

    /// What a handler may change.
    fn observe(&self) -> impl PartialEq + core::fmt::Debug {
        (
            self.conn.error().cloned(),
            self.conn.poll_shutdown(),
            self.conn.wants_read(),
            self.conn.wants_write(),
            self.conn.is_finished(),
            self.conn.queue().len(),
            self.conn.recv_buf().len(),
        )
    }

    // ----- the model against the connection -----

    fn check(&self) {
        let conn = &self.conn;
        assert_eq!(conn.now(), self.now);
        assert_eq!(conn.error(), self.error.as_ref());
        // Nothing lost: what the events did not account for is buffered.
        assert_eq!(
            conn.recv_buf().peek(),
            &self.input[self.consumed..self.fed],
            "the buffer is not the input's unread bytes"
        );
        assert_eq!(
            conn.queue().len(),
            self.pending(),
            "the queue lost or made bytes"
        );
        assert_eq!(conn.queue().is_closed(), self.write != WriteSide::Open);
        assert_eq!(conn.is_read_closed(), self.read != ReadSide::Open);
        assert_eq!(conn.is_read_done(), self.read_done(), "is_read_done");
        assert_eq!(conn.is_write_done(), self.write_done(), "is_write_done");
        assert_eq!(conn.is_finished(), self.read_done() && self.write_done());
        let wants_read = self.read == ReadSide::Open
            && !self.paused
            && self.error.is_none()
            && conn.protocol().phase() != Phase::Done
            && !conn.recv_buf().is_full();
        assert_eq!(conn.wants_read(), wants_read, "wants_read");
        let shutdown = match self.write {
            WriteSide::Closing if self.pending() == 0 => Some(Shutdown::Write),
            WriteSide::Resetting => Some(Shutdown::Reset),
            _ => None,
        };
        assert_eq!(conn.poll_shutdown(), shutdown, "poll_shutdown");
        let wants_write = (self.writing() && self.pending() > 0) || shutdown.is_some();
        assert_eq!(conn.wants_write(), wants_write, "wants_write");
        assert_eq!(conn.poll_timeout(), self.expected_timeout(), "poll_timeout");
    }

    /// Ends the connection as a driver does, and checks it is finished.
    fn finish(mut self) -> Outcome<P::Event> {
        self.conn.pause_reading(false);
        self.paused = false;
        // The rest of the input, then the end of the stream.
        while self.conn.wants_read() && self.fed < self.input.len() {
            self.read(usize::MAX, 0);
            self.pump();
            self.check();
        }
        if self.read == ReadSide::Open {
            self.conn.handle_eof(self.now);
            self.ended_by_peer();
        }
        self.pump();
        self.check();
        // The application closes; every byte goes out; the socket is shut.
        self.conn.close();
        self.close();
        let mut rounds = 0;
        while self.conn.wants_write() {
            if self.conn.poll_shutdown().is_some() {
                self.shutdown();
            } else {
                self.write(255, 8, rounds as u8);
            }
            self.pump();
            self.check();
            rounds += 1;
            assert!(rounds < 100_000, "no progress writing");
        }
        assert!(
            self.conn.is_finished(),
            "ended, written and shut, yet not finished"
        );
        assert_eq!(self.conn.poll_timeout(), None);
        assert!(!self.conn.wants_read());
        // Nothing more comes, and the same error again.
        let last = self.conn.poll_event();
        assert!(
            matches!(&last, Ok(None)) || last.as_ref().err() == self.error.as_ref(),
            "after the end: {last:?}"
        );
        let writes = self
            .shutdowns
            .iter()
            .filter(|s| **s == Shutdown::Write)
            .count();
        let resets = self
            .shutdowns
            .iter()
            .filter(|s| **s == Shutdown::Reset)
            .count();
        assert!(
            writes <= 1 && resets <= 1,
            "shut more than once: {:?}",
            self.shutdowns
        );
        if self.dropped {
            assert!(self.written <= self.pushed.len());
        } else if self.fin_failed {
            assert_eq!(self.written, self.pushed.len(), "pushed bytes not written");
            assert!(
                self.shutdowns.is_empty(),
                "the FIN failed: nothing was shut"
            );
        } else {
            assert_eq!(self.written, self.pushed.len(), "pushed bytes not written");
            assert_eq!(self.shutdowns, [Shutdown::Write], "a clean end shuts once");
        }
        Outcome {
            events: self.events,
            error: self.error,
            fed: self.fed,
            pushed: self.pushed.len(),
            written: self.written,
            shutdowns: self.shutdowns,
        }
    }
}
