//! [`Conn`]: one connection in both directions — the receive buffer, the
//! write queue, the lifecycle and the timers — driven by a [`Protocol`].
//!
//! ```text
//!   adapter                          core: Conn<P: Protocol>  (RecvBuf + WriteQueue + lifecycle)
//!   ───────                          ─────────────────────────────────────────────────────────
//!   read into conn.spare_mut() ───>  handle_read(n, now) / handle_eof(now)   (or read_with, read_io)
//!   timer fired ──────────────────>  handle_timeout(now)
//!                                    poll_event()     -> the protocol's next event, or None
//!   writev(conn.poll_transmit()) ─>  handle_written(n, now)                  (or write_with, write_io)
//!   shutdown / reset the socket <──  poll_shutdown()  -> handle_shutdown()
//!                                    poll_timeout()   -> when to call handle_timeout
//!                                    wants_read() / wants_write() / is_finished()
//! ```

mod app;
#[cfg(feature = "std")]
mod io;
mod protocol;
mod read;
#[cfg(feature = "std")]
mod shared;
mod time;
mod timeouts;
mod write;

use alloc::boxed::Box;
use core::time::Duration;

use crate::encoder::Frame;
use crate::error::Error;
use crate::recv_buf::RecvBuf;
use crate::write::WriteQueue;

#[cfg(feature = "std")]
pub use io::write_chunks;
pub use protocol::{Close, Phase, Protocol, Wire};
#[cfg(feature = "std")]
pub use shared::{Shared, TurnStart};
use timeouts::{nanos, Nanos, NEVER};
pub use timeouts::{ConnConfig, Timeouts};
#[cfg(feature = "std")]
pub use write::SLICES;

/// What the adapter must do to the socket, from [`Conn::poll_shutdown`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Shutdown {
    /// Shut the write half down (a FIN): everything queued is out.
    Write,
    /// Make the socket's close a reset (for TCP, `SO_LINGER` 0) and close
    /// it: what was queued was dropped.
    Reset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReadSide {
    Open,
    /// The peer ended its side.
    Ended,
    /// Reading failed (an I/O error the adapter reported).
    Failed,
    /// Nothing more is read: the protocol failed, a timeout ran out, or
    /// the connection was reset.
    Stopped,
    /// Reading failed or stopped, and the protocol has made what the
    /// buffered bytes made (`poll_event` said `Ok(None)`): no event comes
    /// any more.
    Over,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WriteSide {
    Open,
    /// Closed: what is queued goes out, then the write half is shut.
    Closing,
    Shut,
    /// A reset was asked for and not done yet.
    Resetting,
    Reset,
    /// Writing failed: the queue was aborted.
    Failed,
}

/// The connection's clock readings, on the driver's clock, in nanoseconds
/// (48 bytes, not 96, in every connection).
#[derive(Clone, Copy, Debug)]
struct Clock {
    /// The latest `now` a handler was given.
    now: Nanos,
    /// When the connection (or its current protocol) started.
    started: Nanos,
    /// When the last byte went either way.
    active: Nanos,
    /// Since when an incomplete frame has been waiting (`NEVER`: none is).
    partial_since: Nanos,
    /// How long the connection stays quiet before its idle memory goes
    /// back (`ConnConfig::release_after`; 0: whenever the driver asks).
    release_after: Nanos,
    /// The `active` of the quiet spell whose memory went back (`NEVER`:
    /// none yet): one release a spell, and no deadline after it.
    released: Nanos,
}

/// One connection in both directions: a [`RecvBuf`], a [`WriteQueue`], the
/// lifecycle of both sides, the [`Timeouts`], and the [`Protocol`] that
/// makes events of the bytes. It does no I/O and reads no clock.
///
/// # How to drive it
///
/// Methods come in three kinds, quinn-proto style, and the driver calls
/// them in this order, again and again:
///
/// 1. **Handlers** take what happened, with the time `now` on any clock
///    the driver likes (only differences matter; the start is given to
///    [`new`](Self::new), so the deadlines are known before the first byte):
///    bytes read into [`spare_mut`](Self::spare_mut) then
///    [`handle_read`](Self::handle_read) (or [`read_with`](Self::read_with),
///    which does both and always commits), [`handle_eof`](Self::handle_eof),
///    [`handle_written`](Self::handle_written) (or
///    [`write_with`](Self::write_with)), [`handle_shutdown`](Self::handle_shutdown),
///    [`handle_timeout`](Self::handle_timeout), and the I/O failures
///    [`handle_read_error`](Self::handle_read_error) and
///    [`handle_write_error`](Self::handle_write_error). A driver over
///    `std::io` results reads and writes with `read_io` and `write_io`
///    (feature `std`), which also decide which outcomes are final, so
///    that every adapter treats a socket's errors alike.
/// 2. **Polls** give what to do: [`poll_event`](Self::poll_event) until
///    `Ok(None)` (the application's events; the protocol's own replies are
///    queued meanwhile), [`poll_transmit`](Self::poll_transmit) (the next
///    slices to write), [`poll_shutdown`](Self::poll_shutdown) (a FIN or a
///    reset is due) and [`poll_timeout`](Self::poll_timeout) (when to call
///    `handle_timeout`).
/// 3. **Questions** say what to wait for: [`wants_read`](Self::wants_read),
///    [`wants_write`](Self::wants_write), and
///    [`is_finished`](Self::is_finished) (drop it).
///
/// The application writes with [`push`](Self::push) (bulk lane) and ends
/// its side with [`close`](Self::close) or [`reset`](Self::reset).
///
/// # Lifecycle
///
/// ```text
///   read:  open ── handle_eof ──> ended ── protocol's last event ──> done
///            ├── handle_read_error ──> failed
///            └── protocol error / timeout ──> stopped
///   write: open ── close() ──> closing ── queue flushed: Shutdown::Write ──> shut
///            ├── reset() / timeout with Close::Reset ──> resetting ── Shutdown::Reset ──> reset
///            └── handle_write_error ──> failed (queue aborted)
/// ```
///
/// Errors are final: after a protocol error or a timeout,
/// [`poll_event`](Self::poll_event) returns the same error on every call,
/// and the bytes the protocol did not consume stay in the buffer
/// ([`recv_buf`](Self::recv_buf)).
///
/// ```
/// use cleave_proto::conn::{Conn, Framed};
/// use cleave_proto::{Bytes, Lines};
/// use core::time::Duration;
///
/// let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
/// conn.feed(b"ping\nhel", Duration::from_millis(1))?;
/// assert_eq!(conn.poll_event()?, Some(Bytes::from("ping")));
/// assert_eq!(conn.poll_event()?, None); // need more
/// conn.push(Bytes::from_static(b"pong\n")).unwrap();
/// let mut out = Vec::new();
/// while let Some(chunk) = conn.poll_transmit_chunk() {
///     out.extend_from_slice(&chunk);
///     conn.handle_written(chunk.len(), Duration::from_millis(2))?;
/// }
/// assert_eq!(out, b"pong\n");
/// conn.handle_eof(Duration::from_millis(3));
/// assert!(matches!(conn.poll_event(), Err(cleave_proto::Error::Truncated { .. })));
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug)]
pub struct Conn<P> {
    recv: RecvBuf,
    send: WriteQueue,
    protocol: P,
    /// The final error (a protocol's, or a timeout), boxed: rare, and an
    /// idle connection keeps 8 bytes for it.
    error: Option<Box<Error>>,
    timeouts: Timeouts,
    clock: Clock,
    read: ReadSide,
    write: WriteSide,
    paused: bool,
    /// The protocol's deadline passed and was handled: `poll_timeout`
    /// leaves it out while it stays in the past (the protocol acts on it at
    /// its next `poll_event`, or does not: either way it fired once).
    spent: bool,
    /// A late timer passed the protocol's deadline and a connection
    /// timeout after it, and the protocol's goes first: until the next
    /// `poll_event` gives the protocol its turn, the connection's timeout
    /// is held back (and left out of `poll_timeout`).
    turn_owed: bool,
    /// The reset came after the write side was shut cleanly: everything
    /// queued had gone out, so nothing was dropped.
    reset_after_shut: bool,
    /// The protocol's last frame, queued at the next write, then the
    /// write side closes ([`Wire::farewell`]).
    farewell: Option<Box<Frame>>,
}

impl<P: Protocol> Conn<P> {
    /// `protocol` over a default buffer and queue, no timeouts, started at
    /// `now`.
    pub fn new(protocol: P, now: Duration) -> Self {
        Self::with_config(protocol, ConnConfig::default(), now)
    }

    /// `protocol` with the given buffer, queue and timeouts, started at
    /// `now`.
    pub fn with_config(protocol: P, config: ConnConfig, now: Duration) -> Self {
        let mut conn = Self::from_parts(
            protocol,
            RecvBuf::with_config(*config.get_recv_buf()),
            WriteQueue::with_config(*config.get_write_queue()),
            *config.get_timeouts(),
            now,
        );
        conn.clock.release_after = nanos(config.get_release_after());
        conn
    }

    /// `protocol` over an existing buffer (bytes read before, by another
    /// protocol or another connection) and queue, started at `now`.
    pub fn from_parts(
        mut protocol: P,
        recv: RecvBuf,
        send: WriteQueue,
        timeouts: Timeouts,
        now: Duration,
    ) -> Self {
        protocol.start(now);
        let now = nanos(now);
        Self {
            recv,
            send,
            protocol,
            error: None,
            timeouts,
            clock: Clock {
                now,
                started: now,
                active: now,
                partial_since: NEVER,
                release_after: 0,
                released: NEVER,
            },
            read: ReadSide::Open,
            write: WriteSide::Open,
            paused: false,
            spent: false,
            turn_owed: false,
            reset_after_shut: false,
            farewell: None,
        }
    }
}

mod framed;
pub use framed::{Framed, Raw, WriteOnly};
