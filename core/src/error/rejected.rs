//! [`Rejected`]: a refused value handed back with the reason, and
//! [`Refusal`], why a write queue refused a push.

use core::fmt;

use crate::error::Error;

/// Why a [`WriteQueue`](crate::WriteQueue) refused a push. The value comes
/// back with it in a [`Rejected`]; nothing changed.
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// The lane is at its item or byte limit: write (or wait) and push
    /// again.
    Full(crate::write::Lane),
    /// The queue was closed (or aborted after a failed write): it takes
    /// nothing more.
    Closed,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(lane) => write!(f, "the write queue's {lane:?} lane is full"),
            Self::Closed => f.write_str("the write queue is closed"),
        }
    }
}

impl core::error::Error for Refusal {}

/// A value handed back to the caller together with the reason it was refused.
///
/// Whatever cleave refuses to take comes back in one of these, so nothing is
/// lost: a tail too long for a buffer (`E` = [`Error`]), a push into a full or
/// closed queue (`E` = [`Refusal`]), a write an adapter could not queue (`E` =
/// the adapter's write error).
#[derive(Clone, PartialEq, Eq)]
pub struct Rejected<T, E = Error> {
    error: E,
    value: T,
}

impl<T, E> Rejected<T, E> {
    /// `value`, refused because of `error`.
    #[must_use]
    pub fn new(error: E, value: T) -> Self {
        Self { error, value }
    }

    /// Why the value was refused.
    #[must_use]
    pub fn error(&self) -> &E {
        &self.error
    }

    /// The refused value, given back.
    #[must_use]
    pub fn into_value(self) -> T {
        self.value
    }

    /// The reason and the value.
    #[must_use]
    pub fn into_parts(self) -> (E, T) {
        (self.error, self.value)
    }

    /// The same value with the reason turned into another type (an
    /// adapter's own error, say).
    #[must_use]
    pub fn map_err<F>(self, f: impl FnOnce(E) -> F) -> Rejected<T, F> {
        Rejected {
            error: f(self.error),
            value: self.value,
        }
    }
}

impl<T> Rejected<T, Refusal> {
    /// The value back when the push may be tried again once the lane has
    /// room (it was [`Refusal::Full`]), or `None` when the queue is
    /// closed. A driver's `send` loops on it: push, and on a full lane
    /// write, then push the value again.
    ///
    /// ```
    /// use cleave_proto::{Bytes, WriteQueue, WriteQueueConfig, Lane};
    ///
    /// let mut queue = WriteQueue::with_config(WriteQueueConfig::default().max_items(1)?);
    /// queue.push_to(Lane::Bulk, Bytes::from_static(b"one"))?;
    /// let refused = queue.push_to(Lane::Bulk, Bytes::from_static(b"two")).unwrap_err();
    /// let two = refused.when_full().expect("full, not closed");
    /// queue.close();
    /// assert!(queue.push_to(Lane::Bulk, two).unwrap_err().when_full().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn when_full(self) -> Option<T> {
        match self.error {
            Refusal::Full(_) => Some(self.value),
            Refusal::Closed => None,
        }
    }
}

/// Shows the reason, not the value (which may be megabytes of payload).
impl<T, E: fmt::Debug> fmt::Debug for Rejected<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Rejected")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T, E: fmt::Display> fmt::Display for Rejected<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rejected: {}", self.error)
    }
}

impl<T, E: core::error::Error + 'static> core::error::Error for Rejected<T, E> {
    fn source(&self) -> Option<&(dyn core::error::Error + 'static)> {
        Some(&self.error)
    }
}
