//! [`Push`]: what a [`WriteQueue`] takes, so that drivers and handles are
//! written once for bytes and frames alike.

use bytes::Bytes;

use crate::encoder::Frame;
use crate::error::{Refusal, Rejected};
use crate::write::queue::{Lane, Ticket, WriteQueue};

/// Something a [`WriteQueue`] takes: plain [`Bytes`], an encoded
/// [`Frame`] (whose parts are kept together), or a `&[u8]`, copied.
///
/// An adapter's `send` is written once over `I: Push`: push, and when the
/// queue refuses with [`Refusal::Full`], take the value back, write, and
/// push again.
///
/// ```
/// use cleave_proto::write::{Lane, Push};
/// use cleave_proto::{Bytes, Frame, WriteQueue};
///
/// fn queue_all<I: Push>(queue: &mut WriteQueue, items: Vec<I>) -> usize {
///     items
///         .into_iter()
///         .map(|item| item.push_into(queue, Lane::Bulk))
///         .filter(Result::is_ok)
///         .count()
/// }
/// let mut queue = WriteQueue::new();
/// assert_eq!(queue_all(&mut queue, vec![Bytes::from_static(b"a")]), 1);
/// assert_eq!(queue_all(&mut queue, vec![Frame::with_framing(b"[", "b".into(), b"]")]), 1);
/// assert_eq!(queue.len(), 4);
/// ```
pub trait Push: Sized {
    /// Queues `self` in `lane`.
    ///
    /// # Errors
    ///
    /// `self` comes back with the reason when the lane is full or the
    /// queue closed; nothing changes then.
    fn push_into(
        self,
        queue: &mut WriteQueue,
        lane: Lane,
    ) -> Result<Ticket, Rejected<Self, Refusal>>;

    /// The bytes it puts on the wire.
    fn wire_len(&self) -> usize;
}

impl Push for Bytes {
    // Always: the lane is a constant at most call sites, and a push of
    // 16 KiB items measured 10% more instructions when it was not inlined.
    #[inline(always)]
    fn push_into(
        self,
        queue: &mut WriteQueue,
        lane: Lane,
    ) -> Result<Ticket, Rejected<Self, Refusal>> {
        match lane {
            Lane::Bulk => queue.push(self),
            Lane::Urgent => queue.push_urgent(self),
        }
    }

    fn wire_len(&self) -> usize {
        self.len()
    }
}

impl Push for Frame {
    #[inline(always)]
    fn push_into(
        self,
        queue: &mut WriteQueue,
        lane: Lane,
    ) -> Result<Ticket, Rejected<Self, Refusal>> {
        match lane {
            Lane::Bulk => queue.push_frame(self),
            Lane::Urgent => queue.push_urgent_frame(self),
        }
    }

    fn wire_len(&self) -> usize {
        self.len()
    }
}

/// A slice is copied into the lane's run buffer (whatever its length and
/// [`coalesce_below`](crate::WriteQueueConfig::coalesce_below)): the one
/// copy a small write gets anyway, without a [`Bytes`] made only to be
/// copied and dropped (two atomic reference-count updates). For bytes
/// built in a scratch buffer kept by the caller, such as a response head
/// ([`response_into`](crate::http1::response_into)).
///
/// ```
/// use cleave_proto::write::Lane;
/// use cleave_proto::WriteQueue;
///
/// let mut queue = WriteQueue::new();
/// let mut head = Vec::new();
/// head.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
/// queue.push_to(Lane::Bulk, &head[..]).expect("room");
/// head.clear(); // the scratch buffer is the caller's again
/// let mut out = [&[][..]; 4];
/// let n = queue.chunks(&mut out);
/// assert_eq!(out[..n].concat(), b"HTTP/1.1 204 No Content\r\n\r\n");
/// ```
impl Push for &[u8] {
    #[inline(always)]
    fn push_into(
        self,
        queue: &mut WriteQueue,
        lane: Lane,
    ) -> Result<Ticket, Rejected<Self, Refusal>> {
        queue.push_copy_in(lane, self)
    }

    fn wire_len(&self) -> usize {
        self.len()
    }
}
