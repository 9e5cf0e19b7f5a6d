//! [`RecvBufConfig`]: the limits and memory policy of a
//! [`RecvBuf`](crate::RecvBuf).

use crate::error::Error;

/// Default [`RecvBufConfig::max_buffered`]: 8 MiB + 16 KiB, bytes.
///
/// One frame at the codecs' default maximum (8 MiB, tokio-util's precedent)
/// plus its header and the start of what follows it.
pub const DEFAULT_MAX_BUFFERED: usize = 8 * 1024 * 1024 + 16 * 1024;

/// Default [`RecvBufConfig::read_reserve`]: 8 KiB, bytes.
///
/// The size of `std::io::BufReader`'s buffer and of tokio-util `FramedRead`'s
/// first read; large enough that a read syscall carries a useful batch, small
/// enough that ten thousand connections reading at once cost 80 MiB.
pub const DEFAULT_READ_RESERVE: usize = 8 * 1024;

/// Default [`RecvBufConfig::idle_capacity`]: 8 KiB, bytes.
///
/// Equal to the read reserve, so a connection whose reads end on frame
/// boundaries reuses one block for ever instead of allocating on every read,
/// while the large block a big frame needed is given back as soon as the
/// buffer is empty.
pub const DEFAULT_IDLE_CAPACITY: usize = DEFAULT_READ_RESERVE;

/// Limits and memory policy of a [`RecvBuf`](crate::RecvBuf).
///
/// A plain value with chainable setters; the setters that can be given an
/// out-of-range value return a `Result`.
///
/// ```
/// use cleave_proto::RecvBufConfig;
///
/// let config = RecvBufConfig::default()
///     .max_buffered(64 * 1024)?
///     .read_reserve(4 * 1024)?
///     .idle_capacity(0);
/// assert_eq!(config.get_max_buffered(), 64 * 1024);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvBufConfig {
    pub(super) max_buffered: usize,
    pub(super) read_reserve: usize,
    pub(super) idle_capacity: usize,
    pub(super) copy_frames_up_to: usize,
    pub(super) release_when_idle: bool,
}

impl Default for RecvBufConfig {
    fn default() -> Self {
        Self {
            max_buffered: DEFAULT_MAX_BUFFERED,
            read_reserve: DEFAULT_READ_RESERVE,
            idle_capacity: DEFAULT_IDLE_CAPACITY,
            copy_frames_up_to: 0,
            release_when_idle: true,
        }
    }
}

impl RecvBufConfig {
    /// The most bytes the buffer may hold, unconsumed, at any time.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if `max` is zero.
    pub fn max_buffered(mut self, max: usize) -> Result<Self, Error> {
        if max == 0 {
            return Err(Error::invalid_config("max_buffered", 0, "at least 1"));
        }
        self.max_buffered = max;
        Ok(self)
    }

    /// The most bytes one [`RecvBuf::spare_mut`](crate::RecvBuf::spare_mut) hands out for a read, and so
    /// the most the buffer grows by ahead of the bytes that have arrived.
    ///
    /// # Errors
    ///
    /// [`Misuse::InvalidConfig`](crate::Misuse::InvalidConfig) if `reserve` is zero.
    pub fn read_reserve(mut self, reserve: usize) -> Result<Self, Error> {
        if reserve == 0 {
            return Err(Error::invalid_config("read_reserve", 0, "at least 1"));
        }
        self.read_reserve = reserve;
        Ok(self)
    }

    /// Capacity the buffer may keep while it is empty: a block up to twice
    /// this is kept (and reused) when the buffer empties, a larger one is
    /// given back at once. `0` releases every time, at the price of one
    /// allocation per read. [`RecvBuf::release_idle`](crate::RecvBuf::release_idle)
    /// gives back any block of an empty buffer.
    #[must_use]
    pub fn idle_capacity(mut self, capacity: usize) -> Self {
        self.idle_capacity = capacity;
        self
    }

    /// Frames of at most this many bytes are copied out instead of split off.
    ///
    /// A split frame shares (and so keeps alive) the block it was read into; a
    /// consumer that keeps a few small frames for a long time can pin many
    /// blocks that way. Copying costs one allocation per frame. Off (`0`) by
    /// default: measured in `benches/retention.rs` and explained in
    /// BENCHMARKS.md, splitting is faster and pins at most one read block per kept
    /// frame, which only matters for consumers that keep frames for long.
    #[must_use]
    pub fn copy_frames_up_to(mut self, len: usize) -> Self {
        self.copy_frames_up_to = len;
        self
    }

    /// Whether [`RecvBuf::release_idle`](crate::RecvBuf::release_idle) gives memory back (what the
    /// adapters call when a read finds nothing). On by default: an idle
    /// connection then holds no read block, where it held 8 KiB and more;
    /// the price is one allocation (and zeroing a read reserve) when the
    /// next burst arrives, about 100-160 ns a burst in `--bench read`
    /// (BENCHMARKS.md). Turn it off for a few busy connections whose
    /// every microsecond counts.
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

    /// See [`max_buffered`](Self::max_buffered).
    #[inline]
    #[must_use]
    pub fn get_max_buffered(&self) -> usize {
        self.max_buffered
    }

    /// See [`read_reserve`](Self::read_reserve).
    #[must_use]
    pub fn get_read_reserve(&self) -> usize {
        self.read_reserve
    }

    /// See [`idle_capacity`](Self::idle_capacity).
    #[must_use]
    pub fn get_idle_capacity(&self) -> usize {
        self.idle_capacity
    }

    /// See [`copy_frames_up_to`](Self::copy_frames_up_to).
    #[must_use]
    pub fn get_copy_frames_up_to(&self) -> usize {
        self.copy_frames_up_to
    }
}
