//! [`Protocol`]: the logic a [`Conn`](crate::conn::Conn) drives, and
//! [`Wire`], what a protocol sees of its connection.

use core::time::Duration;

use alloc::boxed::Box;

use crate::encoder::Frame;
use crate::error::{Error, Refusal, Rejected, Timeout};
use crate::recv_buf::RecvBuf;
use crate::write::{Lane, Push, Ticket, WriteQueue};

/// Where a protocol is in its life, for the connection's timeouts and its
/// read side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Before its first decision: a PROXY header, sniffing and routing,
    /// the first frame. [`Timeouts::opening`](crate::conn::Timeouts::opening)
    /// runs.
    Opening,
    /// Cutting frames (or heads). [`Timeouts::frame`](crate::conn::Timeouts::frame)
    /// runs while a frame is incomplete.
    Framing,
    /// Passing raw bytes. [`Timeouts::tunnel_idle`](crate::conn::Timeouts::tunnel_idle)
    /// replaces the idle timeout.
    Tunnel,
    /// It made its last event: the connection reads nothing more.
    Done,
}

/// How a connection ends its write side when a timeout runs out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Close {
    /// What is queued goes out, then the write half is shut down (a FIN).
    Clean,
    /// What is queued is dropped and the connection is reset (a RST): the
    /// peer must not take the end for a clean one.
    Reset,
}

/// What a [`Protocol`] sees of its connection while it makes an event: the
/// receive buffer, the write queue's urgent lane, whether the peer ended
/// its side, and the time.
#[derive(Debug)]
pub struct Wire<'a> {
    pub(crate) recv: &'a mut RecvBuf,
    pub(crate) send: &'a mut WriteQueue,
    pub(crate) eof: bool,
    /// Nanoseconds on the driver's clock: made into a `Duration` only when
    /// a protocol asks (most polls never do).
    pub(crate) now: u64,
    pub(crate) close: &'a mut bool,
    pub(crate) farewell: &'a mut Option<Box<Frame>>,
}

impl<'a> Wire<'a> {
    /// A wire over a buffer and a queue, for a protocol driven without a
    /// [`Conn`](crate::conn::Conn) (a test, a protocol inside another).
    ///
    /// `now` is kept in nanoseconds, as a `Conn` keeps its clock: a time
    /// past `u64::MAX` nanoseconds (about 584 years) reads back as that.
    #[must_use]
    pub fn new(
        recv: &'a mut RecvBuf,
        send: &'a mut WriteQueue,
        eof: bool,
        now: Duration,
        close: &'a mut bool,
        farewell: &'a mut Option<Box<Frame>>,
    ) -> Self {
        Self {
            recv,
            send,
            eof,
            now: crate::conn::timeouts::nanos(now),
            close,
            farewell,
        }
    }

    /// The received bytes not consumed yet.
    pub fn recv(&mut self) -> &mut RecvBuf {
        self.recv
    }

    /// Whether the peer ended its side: no more bytes will come.
    #[must_use]
    pub fn is_eof(&self) -> bool {
        self.eof
    }

    /// The time of the latest handler call, on the driver's clock.
    #[must_use]
    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.now)
    }

    /// Queues a reply of the protocol's own (a pong, a close, an interim
    /// response) on the urgent lane: it goes out before queued bulk data,
    /// but never inside a frame.
    ///
    /// # Errors
    ///
    /// The reply comes back when the urgent lane is full or the queue is
    /// closed.
    #[allow(clippy::result_large_err)] // a frame comes back by value
    pub fn reply<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        item.push_into(self.send, Lane::Urgent)
    }

    /// Queues a frame of the protocol's own on the bulk lane: after
    /// everything queued so far, in order (a WebSocket close must not
    /// overtake the messages the application queued before it).
    ///
    /// # Errors
    ///
    /// The item comes back when the bulk lane is full or the queue is
    /// closed.
    #[allow(clippy::result_large_err)] // a frame comes back by value
    pub fn push<I: Push>(&mut self, item: I) -> Result<Ticket, Rejected<I, Refusal>> {
        item.push_into(self.send, Lane::Bulk)
    }

    /// Bytes queued and not yet written, in both lanes: a reply on the
    /// urgent lane would overtake them (a protocol whose replies must
    /// keep their place among the application's, an HTTP response, waits
    /// for 0).
    #[must_use]
    pub fn queued(&self) -> usize {
        self.send.len()
    }

    /// Asks the connection to shut its write side once what is queued is
    /// out (a close handshake that is complete).
    pub fn close_write(&mut self) {
        *self.close = true;
    }

    /// The protocol's last frame (a WebSocket close): queued at the
    /// connection's next write, after what the application queues in
    /// answer to the events before it (an adapter that hands events out
    /// in batches lets the application answer them all first), then the
    /// write side shuts. It waits for room rather than being dropped; a
    /// second farewell replaces the first.
    pub fn farewell(&mut self, frame: impl Into<Frame>) {
        *self.farewell = Some(Box::new(frame.into()));
    }
}

/// The logic of one connection: lines, a routing
/// [`Session`](crate::Session), HTTP/1.1, WebSocket.
///
/// A protocol reads from the receive buffer it is given in a [`Wire`] and
/// turns bytes into events; it may queue replies of its own on the urgent
/// lane ([`Wire::reply`]). It owns no buffer and does no I/O: a
/// [`Conn`](crate::conn::Conn) holds the buffer, the queue, the lifecycle
/// and the timers, and an adapter moves the bytes.
///
/// The contracts of a [`Decoder`](crate::Decoder) hold for a protocol too:
/// chunking invariance, nothing lost, bounded memory, final errors.
pub trait Protocol {
    /// What comes out.
    type Event;

    /// The next event the bytes so far make, or `Ok(None)` when more bytes
    /// (or the end of the stream, or time) are needed.
    ///
    /// At the end of the stream ([`Wire::is_eof`]) a protocol gives what is
    /// still complete, then its last event (or error) and moves to
    /// [`Phase::Done`].
    ///
    /// # Errors
    ///
    /// A typed error; final: the connection gives it again from then on.
    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Self::Event>, Error>;

    /// The commonest event, when it can be had at once: a fast path that
    /// [`Conn::poll_event`](crate::conn::Conn::poll_event) inlines into
    /// the caller's loop (so that the event is not returned through memory
    /// by a function of its own), trying [`poll_event`](Self::poll_event)
    /// when it gives `None`. The default has none.
    ///
    /// Give `Some` only for the event `poll_event` would give now, and
    /// only when nothing else comes with it: no close asked
    /// ([`Wire::close_write`]), no farewell ([`Wire::farewell`]), no
    /// change of [`phase`](Self::phase), no error. `None` says nothing: it
    /// must leave the protocol and the buffer as they were, or as
    /// `poll_event` would find them. Keep it small: it is copied into
    /// every loop that polls.
    #[inline(always)]
    fn poll_fast(&mut self, wire: &mut Wire<'_>) -> Option<Self::Event> {
        let _ = wire;
        None
    }

    /// Whether [`poll_event`](Self::poll_event) would give `Ok(None)` now
    /// and change nothing, asked only when the buffer is empty and the
    /// stream open (no end, no failure): then
    /// [`Conn::poll_event`](crate::conn::Conn::poll_event) answers so
    /// itself, after a [`poll_fast`](Self::poll_fast) that gave nothing,
    /// without the full poll. Say `true` only when sure (a protocol with a
    /// deadline of its own that may have passed acts on it in
    /// `poll_event`: it says `false` then); the default says `false`, and
    /// the full poll runs.
    #[inline(always)]
    fn waits_when_empty(&self) -> bool {
        false
    }

    /// Where the protocol is.
    fn phase(&self) -> Phase;

    /// The connection started (or the protocol took it over, after a
    /// switch) at `now`: a protocol with its own clock (a router's inspect
    /// delay) starts it here, so the deadline is known before the first
    /// byte arrives.
    fn start(&mut self, now: Duration) {
        let _ = now;
    }

    /// When the protocol wants [`poll_event`](Self::poll_event) called
    /// even if no byte arrives (a router's inspect delay), on the driver's
    /// clock.
    fn poll_timeout(&self) -> Option<Duration> {
        None
    }

    /// One of the connection's [`Timeouts`](crate::conn::Timeouts) ran out:
    /// the protocol may queue a last reply (an HTTP 408, a WebSocket close)
    /// and says how the write side ends. By default a reset when the peer
    /// left an incomplete frame in the buffer (it must not take the end for
    /// an answer), a clean close otherwise.
    fn on_timeout(&mut self, wire: &mut Wire<'_>, timeout: Timeout) -> Close {
        let _ = timeout;
        if wire.recv().is_empty() {
            Close::Clean
        } else {
            Close::Reset
        }
    }

    /// Whether the protocol's last `None` from
    /// [`poll_event`](Self::poll_event) waits for room in the queue (a
    /// reply of its own it could not queue yet, a WebSocket's pong) rather
    /// than for bytes. After a read error the connection then keeps asking
    /// it, so complete events behind the reply still come once room is
    /// made. `false` by default.
    fn waits_for_room(&self) -> bool {
        false
    }

    /// The connection is about to wait for its peer
    /// ([`Conn::release_idle`](crate::Conn::release_idle)): give back
    /// memory the protocol does not need between messages (a WebSocket's
    /// compressor without context takeover). Nothing by default.
    fn release_idle(&mut self) {}

    /// The connection is taken apart ([`Conn::switch`](crate::Conn::switch),
    /// [`Conn::into_parts`](crate::Conn::into_parts)): leave the bytes in
    /// `recv` as they arrived, for whoever reads them next, and be ready
    /// to read them again. A protocol that changes bytes in place before
    /// it consumes them (a WebSocket server unmasks a frame as it
    /// arrives) changes them back. Nothing by default.
    fn hand_back(&mut self, recv: &mut RecvBuf) {
        let _ = recv;
    }
}
