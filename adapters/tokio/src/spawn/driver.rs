//! The driver task of a shared connection: it owns the socket and does
//! the I/O, the timers and the shutdown, a poll at a time under the lock.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::conn::Shutdown;
use cleave_proto::write::Marks;
use cleave_proto::Protocol;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::drive::{poll_turn, Clock, Turn};
use crate::error::ConnError;
use crate::reset::Reset;

use super::{Shared, State, READ_BUDGET};

/// The driver task: it turns the one driver ([`poll_turn`]) under the
/// lock (every step is a `poll`: it never blocks while holding it), and
/// tells the events, the senders and the waiters what changed.
pub(super) struct Driver<S, P> {
    pub(super) shared: Arc<Shared<P>>,
    pub(super) io: S,
    pub(super) clock: Clock,
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
        let Driver { shared, io, clock } = self.get_mut();
        let mut guard = shared.lock();
        let st = &mut *guard;
        let mut reads = 0;
        loop {
            if !st.events_alive {
                // Nobody takes the events: the protocol still answers.
                while let Ok(Some(_)) = st.conn.poll_event() {}
                if st.handles == 0 {
                    if st.conn.error().is_some() && !st.conn.queue().is_flushed() {
                        // Failed, and nobody left to wait for a peer that
                        // may never read: drop the rest.
                        st.conn.reset();
                    } else {
                        st.conn.close();
                    }
                }
            }
            let before = (st.conn.queue().marks(), st.conn.queue().is_closed());
            let end = st.conn.write_end();
            let turn = poll_turn(io, &mut st.conn, clock, cx);
            let now = clock.now();
            if let Err(e) = st.tell(io, cx, before, end) {
                return Poll::Ready(Err(fail(st, e, now)));
            }
            match turn {
                Poll::Ready(Ok(Turn::Wrote)) => {}
                Poll::Ready(Ok(Turn::Read)) => {
                    st.wake_events();
                    reads += 1;
                    if reads == READ_BUDGET {
                        // A peer that never stops sending (with nobody
                        // taking the events, the buffer never fills) does
                        // not keep the lock or the thread.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Poll::Ready(Ok(Turn::Timer)) => {
                    st.wake_events();
                    st.wake_room();
                }
                Poll::Ready(Ok(Turn::Finished)) if st.conn.queue().is_closed() => {
                    let result = st.conn.error().map_or(Ok(()), |e| Err(e.clone().into()));
                    st.done = true;
                    st.wake_all();
                    return Poll::Ready(result);
                }
                Poll::Ready(Ok(Turn::Finished)) => {
                    // Over, but the queue is open: the handles may push.
                    st.conn.release_idle();
                    st.driver = Some(cx.waker().clone());
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(fail(st, e, now))),
                Poll::Pending => {
                    st.driver = Some(cx.waker().clone());
                    return Poll::Pending;
                }
            }
        }
    }
}

impl<P: Protocol> State<P> {
    /// After a turn: wakes who waits for what changed (tickets, room, a
    /// protocol holding an answer back, the queue's close, the write
    /// side's end), and flushes
    /// the socket for who waits for a flush.
    fn tell<W: AsyncWrite + Unpin>(
        &mut self,
        io: &mut W,
        cx: &mut Context<'_>,
        (before, closed): (Marks, bool),
        end: Option<Shutdown>,
    ) -> io::Result<()> {
        let marks = self.conn.queue().marks();
        // Only news: a closed queue that still waits for the socket is not.
        if marks != before || self.conn.queue().is_closed() != closed {
            self.waiters.written(marks, Waker::wake);
            self.wake_room();
            // A protocol waiting to queue an answer goes on at the next
            // poll of the events.
            self.wake_events();
        }
        if self.conn.write_end() != end {
            // A shutdown flushed first.
            if self.conn.write_end() == Some(Shutdown::Write) {
                self.waiters.did_flush(marks, Waker::wake);
            }
            self.wake_all();
        } else if (self.conn.queue().is_flushed() && self.waiters.flushed() != marks)
            || self.waiters.flush_due(marks)
        {
            // `Pending` is fine: the socket wakes the driver.
            if let Poll::Ready(flushed) = Pin::new(io).poll_flush(cx) {
                flushed?;
                self.waiters.did_flush(marks, Waker::wake);
            }
        }
        Ok(())
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
