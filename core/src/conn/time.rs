//! The connection's clock: the timeouts that are running, the deadline
//! `poll_timeout` gives, and what `handle_timeout` does when one passes.

use core::time::Duration;

use crate::conn::timeouts::{nanos, Nanos, NEVER};
use crate::conn::{Close, Conn, Phase, Protocol, ReadSide, WriteSide};
use crate::error::{Error, Timeout};

impl<P: Protocol> Conn<P> {
    // ----- handlers: time -----

    /// Time passed: ends the connection if one of its [`Timeouts`](crate::conn::Timeouts) ran out
    /// (then [`poll_event`](Self::poll_event) gives
    /// [`Error::TimedOut`]), and lets the protocol decide by the clock (a
    /// router's inspect delay) at the next `poll_event`.
    ///
    /// A deadline of the protocol's fires once: after it was handled,
    /// [`poll_timeout`](Self::poll_timeout) leaves it out while it stays in
    /// the past, so a driver whose events another task takes, or a
    /// protocol that does not move it, does not spin.
    pub fn handle_timeout(&mut self, now: Duration) {
        self.tick(now);
        if self.release_due().is_some_and(|at| self.clock.now >= at) {
            self.release_now();
        }
        // Whether the protocol's deadline passed before this call already
        // and it had its `poll_event` since: then it does not hold a
        // connection timeout back again.
        let had_its_turn = self.spent && !self.turn_owed;
        self.spent = self
            .protocol_deadline()
            .is_some_and(|at| nanos(at) <= self.clock.now);
        if self.error.is_some() {
            // A clean close after the end waits for a peer that reads no
            // more only so long: then it is a reset.
            if self
                .linger_deadline()
                .is_some_and(|at| self.clock.now >= at)
            {
                self.reset();
            }
            return;
        }
        if self.is_finished() {
            return;
        }
        if let Some((at, which)) = self.conn_deadline() {
            // A timer that fires late, past two deadlines, acts on them in
            // their order: the protocol's earlier one first (a router's
            // inspect delay routes a silent client before the opening
            // timeout would cut it), at the next `poll_event`; the
            // connection's comes at the next call if it still runs.
            let protocol_first = self.spent
                && !had_its_turn
                && self.protocol_deadline().is_some_and(|p| nanos(p) < at);
            if self.clock.now >= at {
                if protocol_first {
                    // Held until a `poll_event` gave the protocol its turn,
                    // however soon the driver calls again.
                    self.turn_owed = true;
                } else {
                    self.time_out(which);
                }
            }
        }
    }

    pub(super) fn time_out(&mut self, which: Timeout) {
        let close = self.with_wire(&mut false, |protocol, wire| {
            protocol.on_timeout(wire, which)
        });
        self.fail(Error::TimedOut(which));
        match close {
            Close::Clean => self.close(),
            Close::Reset => self.reset(),
        }
    }

    pub(super) fn tick(&mut self, now: Duration) {
        if self.spent
            && self
                .protocol_deadline()
                .is_none_or(|at| nanos(at) > self.clock.now)
        {
            // The protocol moved its deadline on: it may fire again.
            self.spent = false;
        }
        self.clock.now = self.clock.now.max(nanos(now));
    }

    /// The protocol's own deadline, while it reads.
    fn protocol_deadline(&self) -> Option<Duration> {
        match self.read {
            ReadSide::Open | ReadSide::Ended => self.protocol.poll_timeout(),
            ReadSide::Failed | ReadSide::Stopped | ReadSide::Over => None,
        }
    }

    /// When to call [`handle_timeout`](Self::handle_timeout) even if
    /// nothing happens, on the driver's clock: the earliest of the
    /// connection's running timeouts and the protocol's own deadline (once
    /// it was handled, not again while it stays in the past). `None` once
    /// it ended.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Duration> {
        if self.error.is_some() {
            return self.linger_deadline().map(Duration::from_nanos);
        }
        if self.is_finished() {
            return None;
        }
        // A connection timeout held for the protocol's turn comes back once
        // it had it (`poll_event`).
        let conn = self
            .conn_deadline()
            .filter(|_| !self.turn_owed)
            .map(|(at, _)| Duration::from_nanos(at));
        let protocol = self
            .protocol_deadline()
            .filter(|&at| !self.spent || nanos(at) > self.clock.now);
        let release = self.release_due().map(Duration::from_nanos);
        [conn, protocol, release].into_iter().flatten().min()
    }

    /// When a quiet connection's idle memory goes back, with a
    /// [`release_after`](crate::ConnConfig::release_after) delay: once a
    /// quiet spell, while it reads or writes.
    fn release_due(&self) -> Option<Nanos> {
        let c = &self.clock;
        (c.release_after != 0 && c.released != c.active && !self.is_finished())
            .then(|| c.active.saturating_add(c.release_after))
            .filter(|&at| at != NEVER)
    }

    /// When a connection that failed or timed out, and closes cleanly or
    /// is left open, gives up on a peer that does not take what is queued
    /// (the last reply, the rest of a response): the idle span (else the
    /// tunnel's, the frame's or the opening's) after the end or the last
    /// byte written since, then a reset. Without it a peer that stops
    /// reading would hold the connection for ever.
    pub(super) fn linger_deadline(&self) -> Option<Nanos> {
        // Closing, or still open after a protocol error (the application
        // may never close): either way, bytes a peer may never take.
        let writing = matches!(self.write, WriteSide::Open | WriteSide::Closing);
        if !writing || self.send.is_flushed() {
            return None;
        }
        // The idle span, else the tunnel's, else the frame's or the
        // opening's: any span given bounds a peer that stops reading.
        let [idle, opening, frame, tunnel_idle] = self.timeouts.spans();
        let span = [idle, tunnel_idle, frame, opening]
            .into_iter()
            .find(|&span| span != NEVER)?;
        self.clock
            .active
            .checked_add(span)
            .filter(|&at| at != NEVER)
    }

    /// The earliest of the connection's running timeouts.
    pub(super) fn conn_deadline(&self) -> Option<(Nanos, Timeout)> {
        let [idle, opening, frame, tunnel_idle] = self.timeouts.spans();
        let c = &self.clock;
        // A timer that is not running, or a timeout that is off, or a
        // deadline past the clock's range: no deadline.
        let after = |from: Nanos, span: Nanos| {
            (from != NEVER && span != NEVER)
                .then(|| from.checked_add(span))
                .flatten()
                .filter(|&at| at != NEVER)
        };
        let mut best: Option<(Nanos, Timeout)> = None;
        let mut consider = |at: Option<Nanos>, which| {
            if let Some(at) = at {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, which));
                }
            }
        };
        let phase = self.protocol.phase();
        match phase {
            Phase::Opening | Phase::Framing => {
                if phase == Phase::Opening {
                    consider(after(c.started, opening), Timeout::Opening);
                }
                consider(after(c.partial_since, frame), Timeout::Frame);
                consider(after(c.active, idle), Timeout::Idle);
            }
            Phase::Tunnel => consider(after(c.active, tunnel_idle), Timeout::TunnelIdle),
            // Only the write side is left: a peer that stops reading, by
            // the idle span, else the tunnel's (a tunnel the peer
            // half-closed).
            Phase::Done if idle == NEVER => {
                consider(after(c.active, tunnel_idle), Timeout::TunnelIdle);
            }
            Phase::Done => consider(after(c.active, idle), Timeout::Idle),
        }
        best
    }
}
