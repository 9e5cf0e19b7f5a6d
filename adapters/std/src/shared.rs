//! What the write handles and the writer thread share: the queue and the
//! core's flush bookkeeping behind one lock, two condition variables, and
//! the lanes' marks outside the lock.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use cleave_proto::{Marks, Waiters, WriteQueue, WriteQueueConfig};

use crate::error::WriteError;

/// The state the handles and the writer thread share, behind one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) queue: WriteQueue,
    /// The flushes handles wait for, and how far the writer flushed. The
    /// handles wait on a condition variable, so a waiter is nothing.
    pub(crate) flushes: Waiters<()>,
    /// The writer thread waits for work.
    pub(crate) idle: bool,
    /// Handles waiting for progress (room, a ticket, a flush, the end).
    pub(crate) waiting: usize,
    /// Live handles; the last one to go closes the queue.
    pub(crate) handles: usize,
    pub(crate) failed: Option<WriteError>,
    /// The failure dropped bytes before they were written and flushed.
    pub(crate) lost: bool,
    /// The writer thread has ended.
    pub(crate) done: bool,
}

/// The shared state, the two condition variables, and the lanes' marks
/// outside the lock, so that a ticket already written completes without
/// taking it.
#[derive(Debug)]
pub(crate) struct Inner {
    state: Mutex<Shared>,
    /// The writer thread waits here for pushes, flushes and the close.
    pub(crate) work: Condvar,
    /// Handles wait here for the writer's progress.
    pub(crate) progress: Condvar,
    /// The lanes' marks (bulk, urgent), published after each write.
    written: [AtomicU64; 2],
}

impl Inner {
    /// The state of a new writer with one handle.
    pub(crate) fn new(config: WriteQueueConfig) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Shared {
                queue: WriteQueue::with_config(config),
                flushes: Waiters::new(),
                idle: false,
                waiting: 0,
                handles: 1,
                failed: None,
                lost: false,
                done: false,
            }),
            work: Condvar::new(),
            progress: Condvar::new(),
            written: Default::default(),
        })
    }

    /// The shared state.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while the lock was held leaves the queue as it was
        // between two operations; carry on.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the writer thread if it waits for work.
    pub(crate) fn wake_writer(&self, shared: &mut Shared) {
        if shared.idle {
            shared.idle = false;
            self.work.notify_one();
        }
    }

    /// Wakes the handles that wait, if any.
    pub(crate) fn wake_waiters(&self, shared: &Shared) {
        if shared.waiting > 0 {
            self.progress.notify_all();
        }
    }

    /// Publishes how far the writer got; called under the lock after
    /// every write.
    pub(crate) fn publish(&self, marks: Marks) {
        self.written[0].store(marks.bulk, Ordering::Release);
        self.written[1].store(marks.urgent, Ordering::Release);
    }

    /// How far the writer got, without the lock.
    pub(crate) fn written(&self) -> Marks {
        Marks {
            bulk: self.written[0].load(Ordering::Acquire),
            urgent: self.written[1].load(Ordering::Acquire),
        }
    }

    /// Waits for the writer's progress, until `deadline` if there is one.
    /// `Err` gives the guard back when the deadline passed.
    pub(crate) fn wait<'a>(
        &'a self,
        mut shared: MutexGuard<'a, Shared>,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'a, Shared>, MutexGuard<'a, Shared>> {
        let wait = match deadline {
            None => None,
            Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
                Some(wait) if !wait.is_zero() => Some(wait),
                _ => return Err(shared),
            },
        };
        shared.waiting += 1;
        let mut shared = match wait {
            None => self
                .progress
                .wait(shared)
                .unwrap_or_else(PoisonError::into_inner),
            Some(wait) => {
                self.progress
                    .wait_timeout(shared, wait)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        };
        shared.waiting -= 1;
        Ok(shared)
    }

    /// The writer thread has ended: every waiter is woken.
    pub(crate) fn end(&self, shared: &mut Shared) {
        shared.done = true;
        shared.flushes.wake_all(drop);
        self.progress.notify_all();
    }

    /// Records the writer's failure: the queue is aborted and every waiter
    /// gets the error. Returns the error for the thread's result.
    pub(crate) fn fail(&self, shared: &mut Shared, e: io::Error) -> io::Error {
        let kind = e.kind();
        let e = Arc::new(e);
        shared.failed = Some(WriteError::Failed(e.clone()));
        shared.lost |= !shared.flushes.flushed().covers(shared.queue.end_marks());
        shared.queue.abort();
        self.end(shared);
        io::Error::new(kind, e)
    }
}
