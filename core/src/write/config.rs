//! [`WriteQueueConfig`]: the queue's limits and policies.

use crate::error::Error;

/// Default [`WriteQueueConfig::max_items`]: 1024 pending writes.
///
/// bytes-handoff's measured default (`DEFAULT_WRITE_MAX_ITEMS`): enough for
/// a burst of small responses, small enough that a stalled peer is noticed.
pub const DEFAULT_MAX_ITEMS: usize = 1024;

/// Default [`WriteQueueConfig::max_bytes`]: 128 KiB pending.
///
/// bytes-handoff's measured default (8 chunks of 16 KiB): keeps a socket's
/// send buffer fed across a scheduling delay, and caps ten thousand stalled
/// connections at 1.25 GiB.
pub const DEFAULT_MAX_BYTES: usize = 128 * 1024;

/// Default [`WriteQueueConfig::coalesce_below`]: writes under 512 bytes are
/// copied into a shared buffer.
///
/// Measured in `benches/write.rs` (see BENCHMARKS.md): below this size one
/// `iovec` per write costs more than copying the bytes; above it, copying
/// costs more than the `iovec`.
pub const DEFAULT_COALESCE_BELOW: usize = 512;

/// Default [`WriteQueueConfig::coalesce_limit`]: 16 KiB per coalesced run.
///
/// bytes-handoff's coalescing threshold, tuned there to TCP segment sizes;
/// one run is one `iovec` of at most this size.
pub const DEFAULT_COALESCE_LIMIT: usize = 16 * 1024;

/// Default [`WriteQueueConfig::piece_size`]: 64 KiB.
///
/// The largest TCP segment offload; one `iovec` never carries more, so a
/// huge write is handed out, written and released in pieces.
pub const DEFAULT_PIECE_SIZE: usize = 64 * 1024;

/// The largest [`WriteQueueConfig::piece_size`]: 4 GiB - 1, what one
/// `IoSlice` may hold on every platform (Windows' is a `u32` length).
pub const MAX_PIECE_SIZE: usize = u32::MAX as usize;

/// Default [`WriteQueueConfig::max_slices`]: 64 `iovec`s per drain.
///
/// Well under Linux's `IOV_MAX` (1024), and enough to carry the coalesced
/// runs and large writes of one send buffer's worth.
pub const DEFAULT_MAX_SLICES: usize = 64;

/// Default [`WriteQueueConfig::max_drain_bytes`]: 1 MiB per drain.
///
/// More than any socket takes in one write; it bounds what one call hands
/// out when the queue holds a lot.
pub const DEFAULT_MAX_DRAIN_BYTES: usize = 1024 * 1024;

/// Default [`WriteQueueConfig::urgent_max_items`]: 64 urgent writes.
///
/// Control messages are few; a peer that lets 64 pile up is not reading.
pub const DEFAULT_URGENT_MAX_ITEMS: usize = 64;

/// Default [`WriteQueueConfig::urgent_max_bytes`]: 16 KiB of urgent writes.
///
/// Room for pings, pongs and a close frame with a reason (a WebSocket
/// control frame carries at most 125 bytes), kept apart from the bulk
/// budget so a full bulk lane never blocks them.
pub const DEFAULT_URGENT_MAX_BYTES: usize = 16 * 1024;

/// Limits and policies of a [`WriteQueue`](crate::WriteQueue).
///
/// ```
/// use cleave_proto::WriteQueueConfig;
///
/// let config = WriteQueueConfig::default()
///     .max_items(256)?
///     .max_bytes(1 << 20)?
///     .coalesce_below(0); // never copy
/// # let _ = config;
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteQueueConfig {
    pub(crate) max_items: usize,
    pub(crate) max_bytes: usize,
    pub(crate) urgent_max_items: usize,
    pub(crate) urgent_max_bytes: usize,
    pub(crate) coalesce_below: usize,
    pub(crate) coalesce_limit: usize,
    pub(crate) piece_size: usize,
    pub(crate) max_slices: usize,
    pub(crate) max_drain_bytes: usize,
    pub(crate) release_when_idle: bool,
}

impl Default for WriteQueueConfig {
    fn default() -> Self {
        Self {
            max_items: DEFAULT_MAX_ITEMS,
            max_bytes: DEFAULT_MAX_BYTES,
            urgent_max_items: DEFAULT_URGENT_MAX_ITEMS,
            urgent_max_bytes: DEFAULT_URGENT_MAX_BYTES,
            coalesce_below: DEFAULT_COALESCE_BELOW,
            coalesce_limit: DEFAULT_COALESCE_LIMIT,
            piece_size: DEFAULT_PIECE_SIZE,
            max_slices: DEFAULT_MAX_SLICES,
            max_drain_bytes: DEFAULT_MAX_DRAIN_BYTES,
            release_when_idle: true,
        }
    }
}

/// Checks that a setting is at least 1.
fn at_least_one(setting: &'static str, value: usize) -> Result<usize, Error> {
    if value == 0 {
        Err(Error::invalid_config(setting, 0, "at least 1"))
    } else {
        Ok(value)
    }
}

impl WriteQueueConfig {
    /// Whether [`WriteQueue::release_idle`](crate::WriteQueue::release_idle)
    /// gives memory back (what the adapters call when the queue is flushed
    /// and the connection waits). On by default: an idle connection then
    /// holds no run buffer (16 KiB once a small write came); the price is
    /// one allocation for the next burst's small writes.
    #[must_use]
    pub fn release_when_idle(mut self, release: bool) -> Self {
        self.release_when_idle = release;
        self
    }

    /// See [`release_when_idle`](Self::release_when_idle).
    #[must_use]
    pub fn get_release_when_idle(&self) -> bool {
        self.release_when_idle
    }

    /// The most writes (pushes) pending at once.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn max_items(mut self, max: usize) -> Result<Self, Error> {
        self.max_items = at_least_one("max_items", max)?;
        Ok(self)
    }

    /// The most bytes pending at once. A single write larger than this is
    /// still accepted when the queue is empty, and then holds it alone, so
    /// no write is refused for ever.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn max_bytes(mut self, max: usize) -> Result<Self, Error> {
        self.max_bytes = at_least_one("max_bytes", max)?;
        Ok(self)
    }

    /// The most urgent writes pending at once (their own budget, apart from
    /// the bulk lane's).
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn urgent_max_items(mut self, max: usize) -> Result<Self, Error> {
        self.urgent_max_items = at_least_one("urgent_max_items", max)?;
        Ok(self)
    }

    /// The most urgent bytes pending at once.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn urgent_max_bytes(mut self, max: usize) -> Result<Self, Error> {
        self.urgent_max_bytes = at_least_one("urgent_max_bytes", max)?;
        Ok(self)
    }

    /// Writes shorter than this are copied into a shared buffer, so that one
    /// system call does not carry hundreds of tiny `iovec`s. `0` never
    /// copies a payload (a [`Frame`](crate::Frame)'s inline framing, at most
    /// 16 bytes a part, is still copied).
    #[must_use]
    pub fn coalesce_below(mut self, len: usize) -> Self {
        self.coalesce_below = len;
        self
    }

    /// The most bytes one coalesced run holds before a new one starts.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn coalesce_limit(mut self, len: usize) -> Result<Self, Error> {
        self.coalesce_limit = at_least_one("coalesce_limit", len)?;
        Ok(self)
    }

    /// The most bytes one handed-out slice carries: larger writes are handed
    /// out in pieces of this size.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    /// Above [`MAX_PIECE_SIZE`] (what one `IoSlice` holds on every
    /// platform: Windows' takes at most 4 GiB - 1) it is taken as that.
    pub fn piece_size(mut self, len: usize) -> Result<Self, Error> {
        self.piece_size = at_least_one("piece_size", len)?.min(MAX_PIECE_SIZE);
        Ok(self)
    }

    /// The most slices one drain hands out.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn max_slices(mut self, max: usize) -> Result<Self, Error> {
        self.max_slices = at_least_one("max_slices", max)?;
        Ok(self)
    }

    /// The most bytes one drain hands out.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if zero.
    pub fn max_drain_bytes(mut self, max: usize) -> Result<Self, Error> {
        self.max_drain_bytes = at_least_one("max_drain_bytes", max)?;
        Ok(self)
    }

    /// See [`max_items`](Self::max_items).
    #[must_use]
    pub fn get_max_items(&self) -> usize {
        self.max_items
    }

    /// See [`max_bytes`](Self::max_bytes).
    #[must_use]
    pub fn get_max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// See [`urgent_max_items`](Self::urgent_max_items).
    #[must_use]
    pub fn get_urgent_max_items(&self) -> usize {
        self.urgent_max_items
    }

    /// See [`urgent_max_bytes`](Self::urgent_max_bytes).
    #[must_use]
    pub fn get_urgent_max_bytes(&self) -> usize {
        self.urgent_max_bytes
    }

    /// See [`coalesce_below`](Self::coalesce_below).
    #[must_use]
    pub fn get_coalesce_below(&self) -> usize {
        self.coalesce_below
    }

    /// See [`piece_size`](Self::piece_size).
    #[must_use]
    pub fn get_piece_size(&self) -> usize {
        self.piece_size
    }

    /// See [`max_slices`](Self::max_slices).
    #[must_use]
    pub fn get_max_slices(&self) -> usize {
        self.max_slices
    }

    /// See [`max_drain_bytes`](Self::max_drain_bytes).
    #[must_use]
    pub fn get_max_drain_bytes(&self) -> usize {
        self.max_drain_bytes
    }
}
