//! The driver task of a shared connection: it owns the socket and does
//! the I/O, the timers and the shutdown, a poll at a time under the lock;
//! the core's [`Shared`](cleave_proto::conn::Shared) says whom each turn
//! wakes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use cleave_proto::Protocol;
use tokio::io::{AsyncRead, AsyncWrite};

use crate::drive::{poll_turn, Clock, Turn};
use crate::error::ConnError;
use crate::reset::Reset;

use super::{Locked, READ_BUDGET};

/// The driver task: it turns the one driver ([`poll_turn`]) under the
/// lock (every step is a `poll`: it never blocks while holding it), and
/// flushes the socket when a waiter asks.
pub(super) struct Driver<S, P> {
    pub(super) shared: Arc<Locked<P>>,
    pub(super) io: S,
    pub(super) clock: Clock,
}

impl<S, P> Future for Driver<S, P>
where
    S: AsyncRead + AsyncWrite + Reset + Unpin,
    P: Protocol,
{
    type Output = Result<(), ConnError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Driver { shared, io, clock } = self.get_mut();
        let mut st = shared.lock();
        let mut reads = 0;
        loop {
            let start = st.start_turn();
            let turn = poll_turn(io, st.conn_mut(), clock, cx);
            let now = clock.now();
            if let Some(marks) = st.end_turn(start) {
                // `Pending` is fine: the socket wakes the driver.
                match Pin::new(&mut *io).poll_flush(cx) {
                    Poll::Ready(Ok(())) => st.did_flush(marks),
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(st.fail(e, now))),
                    Poll::Pending => {}
                }
            }
            match turn {
                Poll::Ready(Ok(Turn::Wrote)) => {}
                Poll::Ready(Ok(Turn::Read)) => {
                    st.after_read();
                    reads += 1;
                    if reads == READ_BUDGET {
                        // A peer that never stops sending (with nobody
                        // taking the events, the buffer never fills) does
                        // not keep the lock or the thread.
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Poll::Ready(Ok(Turn::Timer)) => st.after_timer(),
                Poll::Ready(Ok(Turn::Finished)) => return st.finish(cx),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(st.fail(e, now))),
                Poll::Pending => {
                    st.park(cx);
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
        self.shared.lock().abandon();
    }
}
