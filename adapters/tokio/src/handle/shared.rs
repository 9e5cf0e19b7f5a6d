//! What the handles and the writer task share: the queue and who waits
//! for it, behind one lock, and how far the writer got, outside it.

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use cleave_proto::write::{Marks, Waiters};
use cleave_proto::{Lane, Ticket, WriteQueue};

use crate::error::WriteError;

/// The state behind the lock.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) queue: WriteQueue,
    /// Ticket and flush waiters, and how far the writer flushed.
    pub(super) waiters: Waiters<Waker>,
    /// The writer task, when it waits for bytes.
    pub(super) writer: Option<Waker>,
    /// Producers waiting for room.
    pub(super) room: Vec<Waker>,
    pub(super) failed: Option<WriteError>,
    /// The writer shut the socket down and stopped.
    pub(super) done: bool,
}

impl Shared {
    /// After a push or a close: wakes the writer if it sleeps.
    pub(super) fn pushed(&mut self) {
        if let Some(writer) = self.writer.take() {
            writer.wake();
        }
    }

    /// After a drain: wakes the ticket waiters whose bytes are out, and
    /// producers waiting for room.
    pub(super) fn wrote(&mut self) {
        self.waiters.written(self.queue.marks(), Waker::wake);
        self.room.drain(..).for_each(Waker::wake);
    }

    /// The writer is gone: everyone waiting learns it.
    pub(super) fn wake_all(&mut self) {
        self.waiters.wake_all(Waker::wake);
        self.room.drain(..).for_each(Waker::wake);
    }

    /// The writer failed with `e`: every handle sees it from now on, what
    /// is queued is dropped. Returns the error for the writer task.
    pub(super) fn fail(&mut self, e: io::Error) -> io::Error {
        let kind = e.kind();
        let e = Arc::new(e);
        self.failed = Some(WriteError::Failed(e.clone()));
        self.queue.abort();
        self.wake_all();
        io::Error::new(kind, e)
    }

    /// `Ready` once the writer flushed everything up to `target`.
    pub(super) fn poll_flushed(
        &mut self,
        cx: &mut Context<'_>,
        target: Marks,
    ) -> Poll<Result<(), WriteError>> {
        if let Some(e) = &self.failed {
            return Poll::Ready(Err(e.clone()));
        }
        if self.waiters.flushed().covers(target) {
            return Poll::Ready(Ok(()));
        }
        if self.done {
            // The writer ended and these bytes are past what it wrote.
            return Poll::Ready(Err(WriteError::Closed));
        }
        self.waiters
            .wait_flush(target, cx.waker().clone(), Waker::will_wake);
        self.pushed(); // make sure the writer looks
        Poll::Pending
    }

    /// `Ready` once the writer wrote everything, flushed and shut the
    /// socket down.
    pub(super) fn poll_done(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), WriteError>> {
        if let Some(e) = &self.failed {
            return Poll::Ready(Err(e.clone()));
        }
        if self.done {
            return Poll::Ready(Ok(()));
        }
        self.waiters
            .wait_flush(Marks::END, cx.waker().clone(), Waker::will_wake);
        self.pushed();
        Poll::Pending
    }
}

/// The shared state, and the lanes' marks outside the lock, so that a
/// ticket already written completes without taking it.
#[derive(Debug)]
pub(super) struct Inner {
    state: Mutex<Shared>,
    /// The queue's marks (bulk, urgent) after the writer's last drain.
    written: [AtomicU64; 2],
    /// Live handles: the last one to go closes the queue.
    pub(super) handles: AtomicUsize,
}

impl Inner {
    pub(super) fn new(queue: WriteQueue) -> Self {
        Self {
            state: Mutex::new(Shared {
                queue,
                waiters: Waiters::new(),
                writer: None,
                room: Vec::new(),
                failed: None,
                done: false,
            }),
            written: Default::default(),
            handles: AtomicUsize::new(0),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while the lock was held leaves the queue as it was
        // between two operations; carry on.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Publishes the writer's marks; called under the lock after every
    /// drain.
    pub(super) fn publish(&self, marks: Marks) {
        self.written[0].store(marks.bulk, Ordering::Release);
        self.written[1].store(marks.urgent, Ordering::Release);
    }

    /// Whether `ticket` is written, by the published marks (no lock).
    pub(super) fn is_written(&self, ticket: Ticket) -> bool {
        let lane = match ticket.lane() {
            Lane::Bulk => 0,
            Lane::Urgent => 1,
        };
        self.written[lane].load(Ordering::Acquire) >= ticket.offset()
    }
}
