//! The driver task of a shared connection: it owns the socket and does
//! the I/O, the timers and the shutdown, a poll at a time under the lock.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::{Conn, Protocol};
use tokio::io::{AsyncRead, AsyncWrite};

use crate::drain::{poll_drain, poll_end};
use crate::error::ConnError;
use crate::fill::poll_fill;
use crate::reset::Reset;
use crate::timer::Clock;

use super::{Shared, State, READ_BUDGET};

/// The driver task: reads, writes, flushes, keeps the time and shuts the
/// socket down, all under the lock (every step is a `poll`: it never
/// blocks while holding it).
pub(super) struct Driver<S, P> {
    pub(super) shared: Arc<Shared<P>>,
    pub(super) io: Io<S>,
}

/// The driver's own part, used under the lock of the shared one.
pub(super) struct Io<S> {
    pub(super) io: S,
    pub(super) clock: Clock,
    /// The deadline last handled: a protocol's own deadline is acted on at
    /// its next `poll_event`, so the driver waits for that rather than
    /// handling the same deadline again.
    pub(super) handled: Option<Duration>,
}

impl<S: AsyncWrite + Reset + Unpin> Io<S> {
    /// Writes what is queued, flushes for who waits, shuts down or resets
    /// when the core asks. `Pending` on the socket is fine: it wakes us.
    fn write<P: Protocol>(
        &mut self,
        st: &mut State<P>,
        cx: &mut Context<'_>,
        now: Duration,
    ) -> io::Result<()> {
        let before = st.conn.queue().marks();
        let drained = poll_drain(&mut self.io, &mut st.conn, now, cx);
        let marks = st.conn.queue().marks();
        if marks != before || st.conn.queue().is_closed() {
            st.waiters.written(marks, Waker::wake);
            st.wake_room();
            // A protocol waiting to queue an answer goes on at the next
            // poll of the events.
            st.wake_events();
        }
        let empty = match drained {
            Poll::Ready(result) => result.map(|()| true)?,
            Poll::Pending => false,
        };
        if (empty && st.waiters.flushed() != marks) || st.waiters.flush_due(marks) {
            if let Poll::Ready(flushed) = Pin::new(&mut self.io).poll_flush(cx) {
                flushed?;
                st.waiters.did_flush(marks, Waker::wake);
            }
        }
        // `Pending` on the socket is fine: it wakes the driver.
        if let Poll::Ready(Some(end)) = poll_end(&mut self.io, &mut st.conn, cx)? {
            st.write_end = Some(end);
            st.wake_all();
        }
        Ok(())
    }

    /// Arms the timer for the core's next deadline; `Ready(deadline)` once
    /// it passed (and was not handled already).
    fn timer<P: Protocol>(&mut self, conn: &Conn<P>, cx: &mut Context<'_>) -> Poll<Duration> {
        let due = conn.poll_timeout().filter(|&due| self.handled != Some(due));
        let now = ready!(self.clock.poll(due, cx));
        self.handled = due;
        Poll::Ready(now)
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
        let Driver { shared, io: this } = self.get_mut();
        let mut guard = shared.lock();
        let st = &mut *guard;
        let mut reads = 0;
        loop {
            let now = this.clock.now();
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
                    Poll::Pending => {}
                }
            }
            match this.timer(&st.conn, cx) {
                Poll::Ready(now) => {
                    st.conn.handle_timeout(now);
                    st.wake_events();
                    st.wake_room();
                }
                Poll::Pending => {
                    // Idle: an empty buffer's block and a flushed queue's
                    // run go back.
                    st.conn.release_idle();
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
