//! The one clock: the core's time as tokio's, and a `Sleep` armed at a
//! [`Conn`](cleave_proto::Conn)'s `poll_timeout`, for every driver here.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A connection's clock: the core's `now` is the time since `base`.
#[derive(Debug)]
pub(crate) struct Clock {
    base: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl Clock {
    /// A clock that reads `now` at this instant.
    pub(crate) fn starting_at(now: Duration) -> Self {
        let at = Instant::now();
        Self {
            base: at.checked_sub(now).unwrap_or(at),
            sleep: None,
        }
    }

    /// The core's time now.
    pub(crate) fn now(&self) -> Duration {
        self.base.elapsed()
    }

    /// Arms the timer for `due` and polls it: `Ready` with the time to
    /// hand to `handle_timeout` once it passed (the timer may wake a hair
    /// early: the deadline has come), `Pending` (the timer wakes the task)
    /// before, or for ever when there is no deadline.
    pub(crate) fn poll(&mut self, due: Option<Duration>, cx: &mut Context<'_>) -> Poll<Duration> {
        let Some((due, at)) = due.and_then(|due| Some((due, self.base.checked_add(due)?))) else {
            self.sleep = None;
            return Poll::Pending;
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        ready!(sleep.as_mut().poll(cx));
        Poll::Ready(self.now().max(due))
    }
}
