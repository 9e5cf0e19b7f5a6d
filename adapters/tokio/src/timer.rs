//! The one timer: a tokio `Sleep` armed at a [`Conn`](cleave_proto::Conn)'s
//! `poll_timeout`, used by [`Connection`](crate::Connection) and the shared
//! connection's driver task.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// Arms `sleep` for `due` (on the clock that starts at `base`) and polls
/// it: `Ready(due)` once it passed. No deadline, or one past what
/// `Instant` can hold, drops the timer and stays `Pending`.
pub(crate) fn poll_deadline(
    sleep: &mut Option<Pin<Box<Sleep>>>,
    base: Instant,
    due: Option<Duration>,
    cx: &mut Context<'_>,
) -> Poll<Duration> {
    let Some((due, at)) = due.and_then(|due| Some((due, base.checked_add(due)?))) else {
        *sleep = None;
        return Poll::Pending;
    };
    let sleep = sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
    if sleep.deadline() != at {
        sleep.as_mut().reset(at);
    }
    ready!(sleep.as_mut().poll(cx));
    Poll::Ready(due)
}
