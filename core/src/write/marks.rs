//! The ticket and flush bookkeeping a shared queue needs: who waits for
//! what, and how far the writer got. No I/O and no locks: an adapter keeps
//! a [`Waiters`] next to its [`WriteQueue`](crate::WriteQueue), behind its
//! own lock, with its own kind of waiter.

use alloc::vec::Vec;

use crate::write::queue::{Lane, Ticket};

/// A position in each lane's byte stream: how far the writer got
/// ([`WriteQueue::marks`](crate::WriteQueue::marks)), or where the lanes
/// end ([`WriteQueue::end_marks`](crate::WriteQueue::end_marks)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Marks {
    /// The bulk lane's offset.
    pub bulk: u64,
    /// The urgent lane's offset.
    pub urgent: u64,
}

impl Marks {
    /// No position at all: every lane at its start.
    pub const ZERO: Self = Self { bulk: 0, urgent: 0 };
    /// Past every position: what a wait for the end waits for.
    pub const END: Self = Self {
        bulk: u64::MAX,
        urgent: u64::MAX,
    };

    /// The offset of `lane`.
    #[must_use]
    pub fn get(&self, lane: Lane) -> u64 {
        match lane {
            Lane::Bulk => self.bulk,
            Lane::Urgent => self.urgent,
        }
    }

    /// Whether these marks are at or past `other` in both lanes.
    #[must_use]
    pub fn covers(&self, other: Self) -> bool {
        self.bulk >= other.bulk && self.urgent >= other.urgent
    }

    /// Whether these marks are at or past `ticket`'s end.
    #[must_use]
    pub fn covers_ticket(&self, ticket: Ticket) -> bool {
        self.get(ticket.lane()) >= ticket.offset()
    }
}

/// Who waits for a queue shared by producers and a writer, and what the
/// writer flushed: tickets waiting to be written, flushes waiting for
/// their marks to reach the writer's sink.
///
/// `W` is the adapter's waiter (a `Waker`, a thread to unpark). The lists
/// grow to the number of concurrent waiters once and are reused: no
/// allocation per ticket.
///
/// ```
/// use cleave_proto::write::{Marks, Waiters};
/// use cleave_proto::{Bytes, WriteQueue};
///
/// let mut queue = WriteQueue::new();
/// let mut waiters = Waiters::new();
/// let ticket = queue.push(Bytes::from_static(b"hello")).unwrap();
/// waiters.wait_ticket(ticket, "reader", |a, b| a == b);
/// waiters.wait_flush(queue.end_marks(), "closer", |a, b| a == b);
/// let mut out = [&[][..]; 4];
/// let n = queue.chunks(&mut out);
/// assert_eq!(out[..n].concat(), b"hello"); // written somewhere...
/// queue.advance(5)?;
/// let mut woken = Vec::new();
/// waiters.written(queue.marks(), |w| woken.push(w));
/// assert_eq!(woken, ["reader"]);
/// assert!(waiters.flush_due(queue.marks()));
/// waiters.did_flush(queue.marks(), |w| woken.push(w));
/// assert_eq!(woken, ["reader", "closer"]);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug)]
pub struct Waiters<W> {
    tickets: Vec<(Ticket, W)>,
    flushes: Vec<(Marks, W)>,
    flushed: Marks,
}

impl<W> Default for Waiters<W> {
    fn default() -> Self {
        Self::new()
    }
}

impl<W> Waiters<W> {
    /// No waiters; nothing flushed.
    #[must_use]
    pub fn new() -> Self {
        Self {
            tickets: Vec::new(),
            flushes: Vec::new(),
            flushed: Marks::ZERO,
        }
    }

    /// How far the writer has flushed.
    #[must_use]
    pub fn flushed(&self) -> Marks {
        self.flushed
    }

    /// Registers `waiter` for `ticket`, unless `same` finds it registered
    /// for it already (a future polled again).
    pub fn wait_ticket(&mut self, ticket: Ticket, waiter: W, same: impl Fn(&W, &W) -> bool) {
        if !self
            .tickets
            .iter()
            .any(|(t, w)| *t == ticket && same(w, &waiter))
        {
            self.tickets.push((ticket, waiter));
        }
    }

    /// Registers `waiter` for a flush up to `target`, unless `same` finds
    /// it registered for it already.
    pub fn wait_flush(&mut self, target: Marks, waiter: W, same: impl Fn(&W, &W) -> bool) {
        if !self
            .flushes
            .iter()
            .any(|(t, w)| *t == target && same(w, &waiter))
        {
            self.flushes.push((target, waiter));
        }
    }

    /// The writer got to `marks`: hands `wake` every ticket waiter whose
    /// bytes are out, and forgets them.
    pub fn written(&mut self, marks: Marks, mut wake: impl FnMut(W)) {
        take_where(
            &mut self.tickets,
            |(t, _)| marks.covers_ticket(*t),
            |(_, w)| wake(w),
        );
    }

    /// Whether the writer should flush its sink now, with the queue not
    /// yet empty: a flush waiter's bytes are all written (to `marks`) and
    /// not flushed.
    #[must_use]
    pub fn flush_due(&self, marks: Marks) -> bool {
        self.flushed != marks && self.flushes.iter().any(|(t, _)| marks.covers(*t))
    }

    /// The writer flushed its sink with the queue at `marks`: hands `wake`
    /// every flush waiter that is satisfied, and forgets them.
    pub fn did_flush(&mut self, marks: Marks, mut wake: impl FnMut(W)) {
        self.flushed = marks;
        take_where(
            &mut self.flushes,
            |(t, _)| marks.covers(*t),
            |(_, w)| wake(w),
        );
    }

    /// The writer is gone (failed or done): hands `wake` every waiter.
    pub fn wake_all(&mut self, mut wake: impl FnMut(W)) {
        self.tickets.drain(..).for_each(|(_, w)| wake(w));
        self.flushes.drain(..).for_each(|(_, w)| wake(w));
    }

    /// Whether anyone waits.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.tickets.is_empty() && self.flushes.is_empty()
    }
}

/// Removes the entries `done` picks, in order, handing each to `take`.
fn take_where<T>(list: &mut Vec<T>, done: impl Fn(&T) -> bool, mut take: impl FnMut(T)) {
    let mut i = 0;
    while i < list.len() {
        if done(&list[i]) {
            take(list.swap_remove(i));
        } else {
            i += 1;
        }
    }
}
