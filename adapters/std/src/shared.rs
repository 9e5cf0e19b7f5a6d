//! What the write handles and the writer thread share: the queue behind
//! one lock, two condition variables, and the watermarks outside the lock.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use cleave_proto::{Lane, WriteQueue, WriteQueueConfig};

use crate::error::WriteError;

/// The state the handles and the writer thread share, behind one lock.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) queue: WriteQueue,
    /// Watermarks (bulk, urgent) the writer has flushed.
    pub(crate) flushed: [u64; 2],
    /// The furthest watermarks a `flush` waits for.
    pub(crate) flush_wanted: [u64; 2],
    /// The writer thread waits for work.
    pub(crate) idle: bool,
    /// Handles waiting for progress (room, a ticket, a flush, the end).
    pub(crate) waiters: usize,
    /// Live handles; the last one to go closes the queue.
    pub(crate) handles: usize,
    pub(crate) failed: Option<WriteError>,
    /// The writer thread has ended.
    pub(crate) done: bool,
}

impl Shared {
    pub(crate) fn watermarks(&self) -> [u64; 2] {
        [
            self.queue.watermark(Lane::Bulk),
            self.queue.watermark(Lane::Urgent),
        ]
    }

    /// Where each lane's stream ends now: what a flush must reach.
    pub(crate) fn pushed(&self) -> [u64; 2] {
        let marks = self.watermarks();
        [
            marks[0] + self.queue.pending_bytes(Lane::Bulk) as u64,
            marks[1] + self.queue.pending_bytes(Lane::Urgent) as u64,
        ]
    }
}

/// Whether watermarks `a` are at or past `b` in both lanes.
pub(crate) fn covers(a: [u64; 2], b: [u64; 2]) -> bool {
    a[0] >= b[0] && a[1] >= b[1]
}

/// The shared state, the two condition variables, and the lanes'
/// watermarks outside the lock, so that a ticket already written completes
/// without taking it.
#[derive(Debug)]
pub(crate) struct Inner {
    state: Mutex<Shared>,
    /// The writer thread waits here for pushes, flushes and the close.
    pub(crate) work: Condvar,
    /// Handles wait here for the writer's progress.
    pub(crate) progress: Condvar,
    /// The lanes' watermarks (bulk, urgent), published after each write.
    pub(crate) written: [AtomicU64; 2],
}

impl Inner {
    /// The state of a new writer with one handle.
    pub(crate) fn new(config: WriteQueueConfig) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(Shared {
                queue: WriteQueue::with_config(config),
                flushed: [0; 2],
                flush_wanted: [0; 2],
                idle: false,
                waiters: 0,
                handles: 1,
                failed: None,
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
        if shared.waiters > 0 {
            self.progress.notify_all();
        }
    }

    /// Publishes the watermarks; called under the lock after every write.
    pub(crate) fn publish(&self, shared: &Shared) {
        let marks = shared.watermarks();
        self.written[0].store(marks[0], Ordering::Release);
        self.written[1].store(marks[1], Ordering::Release);
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
        shared.waiters += 1;
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
        shared.waiters -= 1;
        Ok(shared)
    }

    /// Records the writer's failure: the queue is aborted and every waiter
    /// gets the error. Returns the error for the thread's result.
    pub(crate) fn fail(&self, shared: &mut Shared, e: io::Error) -> io::Error {
        let kind = e.kind();
        let e = Arc::new(e);
        shared.failed = Some(WriteError::Failed(e.clone()));
        shared.queue.abort();
        shared.done = true;
        self.progress.notify_all();
        io::Error::new(kind, e)
    }
}
