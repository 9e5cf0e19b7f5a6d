//! [`Timeouts`] and [`ConnConfig`]: the connection's timers and limits.

use core::time::Duration;

use crate::recv_buf::RecvBufConfig;
use crate::write::WriteQueueConfig;

/// The timeouts a [`Conn`](crate::conn::Conn) enforces, HAProxy's set. Each
/// is optional and off by default; each ends the connection with
/// [`Error::TimedOut`](crate::Error::TimedOut) and the
/// [`Timeout`](crate::Timeout) that ran out.
///
/// | timeout | runs | HAProxy |
/// |---|---|---|
/// | [`idle`](Self::idle) | while no byte goes either way (not in a tunnel) | `timeout client` |
/// | [`opening`](Self::opening) | from the start until the protocol's opening is over (PROXY header, routing, first frame) | `tcp-request inspect-delay` + reject |
/// | [`frame`](Self::frame) | while a frame or head the peer started is incomplete (before or after the opening) | `timeout http-request` |
/// | [`tunnel_idle`](Self::tunnel_idle) | while no byte goes either way in a raw tunnel, counted from when it opened (instead of `idle`) | `timeout tunnel` |
///
/// Once the connection ended (a timeout, a protocol's error) with a clean
/// close, what is still queued gets one more idle span (the tunnel idle
/// span without one) for the peer to take it, counted from the end or the
/// last byte written since; then the close becomes a reset, so a peer that
/// stops reading cannot hold the connection.
///
/// Time comes from the driver (`now` at each handler); the core reads no
/// clock. The demo proxy's choices, for comparison: opening off (a silent
/// client is routed to the fallback by the inspect delay), frame 2 s (below
/// the router's 5 s inspect delay, so a head trickled byte by byte is cut
/// before the fallback takes it), idle 60 s, tunnel idle 300 s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timeouts {
    // Nanoseconds, `NEVER` for none: 8 bytes each instead of 16, in every
    // connection.
    idle: Nanos,
    opening: Nanos,
    frame: Nanos,
    tunnel_idle: Nanos,
}

/// A time or a span on the driver's clock in nanoseconds, saturating at
/// `NEVER` (584 years): what a connection stores instead of a `Duration`.
pub(crate) type Nanos = u64;

/// No time at all: a timeout that is off, a timer that is not running.
pub(crate) const NEVER: Nanos = u64::MAX;

/// `d` in nanoseconds, saturating.
pub(crate) fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(NEVER)
}

fn to_nanos(d: Option<Duration>) -> Nanos {
    d.map_or(NEVER, nanos)
}

fn to_duration(n: Nanos) -> Option<Duration> {
    (n != NEVER).then(|| Duration::from_nanos(n))
}

impl Default for Timeouts {
    fn default() -> Self {
        Self::NONE
    }
}

impl Timeouts {
    /// No timeouts (the default).
    pub const NONE: Self = Self {
        idle: NEVER,
        opening: NEVER,
        frame: NEVER,
        tunnel_idle: NEVER,
    };

    /// How long no byte may go either way, outside a tunnel. Default: none.
    #[must_use]
    pub fn idle(mut self, after: Option<Duration>) -> Self {
        self.idle = to_nanos(after);
        self
    }

    /// How long the protocol may take to get past its opening, from the
    /// connection's start. Default: none.
    #[must_use]
    pub fn opening(mut self, after: Option<Duration>) -> Self {
        self.opening = to_nanos(after);
        self
    }

    /// How long a frame (or head) may take to complete once its first byte
    /// arrived (or since the frame before it completed). Default: none.
    #[must_use]
    pub fn frame(mut self, after: Option<Duration>) -> Self {
        self.frame = to_nanos(after);
        self
    }

    /// How long no byte may go either way in a tunnel, counted from the
    /// last byte or from when the tunnel opened (a client routed by the
    /// clock without a byte gives a backend that speaks first the whole
    /// span). Default: none, and then [`idle`](Self::idle) applies in the
    /// tunnel too.
    #[must_use]
    pub fn tunnel_idle(mut self, after: Option<Duration>) -> Self {
        self.tunnel_idle = to_nanos(after);
        self
    }

    /// The idle timeout.
    #[must_use]
    pub fn get_idle(&self) -> Option<Duration> {
        to_duration(self.idle)
    }

    /// The opening timeout.
    #[must_use]
    pub fn get_opening(&self) -> Option<Duration> {
        to_duration(self.opening)
    }

    /// The frame timeout.
    #[must_use]
    pub fn get_frame(&self) -> Option<Duration> {
        to_duration(self.frame)
    }

    /// The tunnel idle timeout (falling back to the idle timeout).
    #[must_use]
    pub fn get_tunnel_idle(&self) -> Option<Duration> {
        to_duration(self.tunnel_idle).or(self.get_idle())
    }

    /// The spans in nanoseconds (`NEVER` for none): idle, opening, frame,
    /// tunnel idle (falling back to idle).
    pub(crate) fn spans(&self) -> [Nanos; 4] {
        let tunnel = if self.tunnel_idle == NEVER {
            self.idle
        } else {
            self.tunnel_idle
        };
        [self.idle, self.opening, self.frame, tunnel]
    }
}

/// Configuration of a [`Conn`](crate::conn::Conn): its receive buffer, its
/// write queue and its timeouts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnConfig {
    recv: RecvBufConfig,
    send: WriteQueueConfig,
    timeouts: Timeouts,
    release_after: Duration,
}

impl ConnConfig {
    /// The receive buffer's configuration.
    #[must_use]
    pub fn recv_buf(mut self, config: RecvBufConfig) -> Self {
        self.recv = config;
        self
    }

    /// The write queue's configuration.
    #[must_use]
    pub fn write_queue(mut self, config: WriteQueueConfig) -> Self {
        self.send = config;
        self
    }

    /// The timeouts.
    #[must_use]
    pub fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// How long a connection stays quiet (no byte either way) before
    /// [`release_idle`](crate::Conn::release_idle) gives its buffers'
    /// memory back. Default: zero, at once, whenever the driver finds the
    /// socket empty: an idle connection holds no buffer, and a kept-alive
    /// one pays for its buffers again at each exchange (an HTTP/1.1
    /// server on cleave-tokio answering one small request a read: a 16 KiB
    /// run buffer and an 8 KiB read block allocated, and the read block
    /// zeroed, about 0.25 µs a request). With a delay, a connection that
    /// waits less than it keeps them, and one that waits longer gives
    /// them back when the delay has passed:
    /// [`poll_timeout`](crate::Conn::poll_timeout) includes that moment,
    /// and [`handle_timeout`](crate::Conn::handle_timeout) releases. (A
    /// blocking driver that arms its socket's read timeout with the
    /// deadlines, cleave-std's, falls back to a read timeout of the
    /// caller's own only after the release: that one may run out up to
    /// the delay late.)
    #[must_use]
    pub fn release_after(mut self, quiet: Duration) -> Self {
        self.release_after = quiet;
        self
    }

    /// The receive buffer's configuration.
    #[must_use]
    pub fn get_recv_buf(&self) -> &RecvBufConfig {
        &self.recv
    }

    /// The write queue's configuration.
    #[must_use]
    pub fn get_write_queue(&self) -> &WriteQueueConfig {
        &self.send
    }

    /// The timeouts.
    #[must_use]
    pub fn get_timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// See [`release_after`](Self::release_after).
    #[must_use]
    pub fn get_release_after(&self) -> Duration {
        self.release_after
    }
}
