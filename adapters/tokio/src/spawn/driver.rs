//! The driver task of a shared connection: it owns the socket and does
//! the I/O, the timers and the shutdown, a poll at a time under the lock.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::conn::Shutdown;
use cleave_proto::{Conn, Protocol};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::time::{Instant, Sleep};

use crate::drain::{poll_drain, ConnOutbox};
use crate::error::ConnError;
use crate::fill::poll_fill;
use crate::reset::Reset;
use crate::timer::poll_deadline;

use super::{Shared, State, READ_BUDGET};

/// The driver task: reads, writes, flushes, keeps the time and shuts the
/// socket down, all under the lock (every step is a `poll`: it never
/// blocks while holding it).
pub(super) struct Driver<S, P> {
    pub(super) io: S,
    pub(super) shared: Arc<Shared<P>>,
    /// The start of the core's clock: `now` is `base.elapsed()`.
    pub(super) base: Instant,
    pub(super) sleep: Option<Pin<Box<Sleep>>>,
    /// The deadline last handled: a protocol's own deadline is acted on at
    /// its next `poll_event`, so the driver waits for that rather than
    /// handling the same deadline again.
    pub(super) handled: Option<Duration>,
}

impl<S, P> Driver<S, P>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    /// Writes what is queued, flushes for who waits, shuts down or resets
    /// when the core asks. `Pending` on the socket is fine: it wakes us.
    fn write(&mut self, st: &mut State<P>, cx: &mut Context<'_>, now: Duration) -> io::Result<()> {
        let mut out = ConnOutbox {
            conn: &mut st.conn,
            now,
        };
        let before = out.conn.queue().marks();
        let drained = poll_drain(&mut self.io, &mut out, cx);
        let marks = st.conn.queue().marks();
        if marks != before || st.conn.queue().is_closed() {
            st.waiters.written(marks, Waker::wake);
            st.wake_room();
        }
        if let Poll::Ready(Err(e)) = drained {
            return Err(e);
        }
        let empty = drained.is_ready();
        if (empty && st.waiters.flushed() != marks) || st.waiters.flush_due(marks) {
            if let Poll::Ready(flushed) = Pin::new(&mut self.io).poll_flush(cx) {
                flushed?;
                st.waiters.did_flush(marks, Waker::wake);
            }
        }
        let end = match st.conn.poll_shutdown() {
            None => return Ok(()),
            Some(Shutdown::Write) => {
                match Pin::new(&mut self.io).poll_shutdown(cx) {
                    Poll::Ready(result) => result?,
                    // The socket wakes the driver.
                    Poll::Pending => return Ok(()),
                }
                Shutdown::Write
            }
            Some(Shutdown::Reset) => {
                // Best effort: where there is no reset, the close is clean.
                let _ = self.io.reset_on_close();
                Shutdown::Reset
            }
        };
        st.conn.handle_shutdown();
        st.write_end = Some(end);
        st.wake_all();
        Ok(())
    }

    /// Arms the timer for the core's next deadline; `Ready(deadline)` once
    /// it passed (and was not handled already).
    fn timer(&mut self, conn: &Conn<P>, cx: &mut Context<'_>) -> Poll<Duration> {
        let due = conn.poll_timeout().filter(|&due| self.handled != Some(due));
        let due = ready!(poll_deadline(&mut self.sleep, self.base, due, cx));
        self.handled = Some(due);
        Poll::Ready(due)
    }
}

/// The socket failed: nothing more is read or written, everyone learns it.
fn fail<P: Protocol>(st: &mut State<P>, e: io::Error, now: Duration) -> ConnError {
    let kind = e.kind();
    let e = Arc::new(e);
    st.failed = Some(e.clone());
    st.conn.handle_write_error(now);
    st.conn.handle_read_error(now);
    st.done = true;
    st.wake_all();
    ConnError::Io(io::Error::new(kind, e))
}

impl<S, P> Future for Driver<S, P>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    type Output = Result<(), ConnError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let shared = this.shared.clone();
        let mut guard = shared.lock();
        let st = &mut *guard;
        let mut reads = 0;
        loop {
            let now = this.base.elapsed();
            let abandoned = !st.events_alive && st.handles == 0;
            if !st.events_alive {
                // Nobody takes the events: the protocol still answers.
                while let Ok(Some(_)) = st.conn.poll_event() {}
            }
            if abandoned {
                if st.conn.error().is_some() && !st.conn.queue().is_flushed() {
                    // Failed, and nobody left to wait for a peer that may
                    // never read: drop the rest.
                    st.conn.reset();
                } else {
                    st.conn.close();
                }
            }
            if let Err(e) = this.write(st, cx, now) {
                return Poll::Ready(Err(fail(st, e, now)));
            }
            let conn = &st.conn;
            if conn.is_read_done() && conn.queue().is_closed() && conn.is_write_done() {
                let result = conn.error().map_or(Ok(()), |e| Err(e.clone().into()));
                st.done = true;
                st.wake_all();
                return Poll::Ready(result);
            }
            if st.conn.wants_read() {
                match poll_fill(&mut this.io, &mut st.conn, cx, now) {
                    Poll::Ready(Ok(())) => {
                        st.wake_events();
                        reads += 1;
                        if reads == READ_BUDGET {
                            // A peer that never stops sending (with nobody
                            // taking the events, the buffer never fills)
                            // does not keep the lock or the thread.
                            cx.waker().wake_by_ref();
                            return Poll::Pending;
                        }
                        continue;
                    }
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(fail(st, e, now))),
                    Poll::Pending => st.conn.release_idle(),
                }
            }
            match this.timer(&st.conn, cx) {
                Poll::Ready(due) => {
                    // The timer may wake a hair early: the deadline has come.
                    st.conn.handle_timeout(this.base.elapsed().max(due));
                    st.wake_events();
                    st.wake_room();
                }
                Poll::Pending => {
                    st.driver = Some(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<S, P> Drop for Driver<S, P> {
    /// A driver aborted, or dropped by a runtime shutting down: everyone
    /// waiting learns the connection failed.
    fn drop(&mut self) {
        let mut st = self.shared.lock();
        if !st.done {
            let e = io::Error::other("the connection's driver task ended before it finished");
            st.failed = Some(Arc::new(e));
            st.done = true;
            st.wake_all();
        }
    }
}
