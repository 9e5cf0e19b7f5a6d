//! [`RecvBuf`], the owned receive state of one connection.

use bytes::{Buf, Bytes, BytesMut};
use core::fmt;

use crate::error::{Error, Limit, Misuse, Rejected};

mod config;

/// A buffer's place in its stream: the offset of its first byte and which
/// stream it is. See [`RecvBuf::position`] and [`RecvBuf::from_buffer_at`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Position {
    offset: u64,
    stream: u32,
}

impl Position {
    /// The start of a new stream.
    #[must_use]
    pub fn start() -> Self {
        Self {
            offset: 0,
            stream: next_stream(),
        }
    }

    /// Bytes consumed before the buffer's first byte.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }
}

/// A number for a new stream. Decoders key the notes they keep between
/// calls (how far a line was searched) by it and the offset, so a decoder
/// given another stream's buffer starts over instead of trusting a note
/// about other bytes. It wraps after 2^32 streams; two live streams share
/// a number only then, and only at the same offset would a note mislead.
#[cfg(target_has_atomic = "32")]
fn next_stream() -> u32 {
    use core::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Without 32-bit atomics every stream has the same number: decoders key
/// their notes by offset alone (use one decoder per stream).
#[cfg(not(target_has_atomic = "32"))]
fn next_stream() -> u32 {
    0
}

pub use config::{
    RecvBufConfig, DEFAULT_IDLE_CAPACITY, DEFAULT_MAX_BUFFERED, DEFAULT_READ_RESERVE,
};

/// The owned receive state of one connection: bytes that arrived and were not
/// consumed yet.
///
/// Input goes in two ways, both without a second copy:
///
/// - [`feed`](Self::feed) copies from a slice the caller owns (an event
///   loop's read buffer, a test vector);
/// - [`spare_mut`](Self::spare_mut) hands out room to read into, and
///   [`commit`](Self::commit) says how much the read filled. The core stays
///   free of I/O traits; an adapter passes the slice to its own `read`.
///
/// Output comes out from the front: [`peek`](Self::peek) looks without
/// consuming, [`split_to`](Self::split_to) cuts a complete prefix off as
/// `Bytes` (a view of the same memory, no copy), [`advance`](Self::advance)
/// drops bytes, and [`take_tail`](Self::take_tail) hands everything buffered
/// over when the protocol switches to raw bytes.
///
/// # Limits and memory
///
/// - The buffer never holds more than
///   [`max_buffered`](RecvBufConfig::max_buffered) bytes: a feed that would
///   go past it is refused whole, and `spare_mut` never offers more room than
///   is left.
/// - It grows only with what arrives, never past `max_buffered`: by one
///   [`read_reserve`](RecvBufConfig::read_reserve), or by as much as it
///   already holds once that is more, so a frame that arrives in many reads
///   is copied a bounded number of times per byte, not once per read. Its
///   block is at most twice the larger of the `idle_capacity` and twice the
///   most it has held plus one read reserve (the proptests check this after
///   every operation): a block stays while part of it is in use, so it can
///   be larger than what is buffered now. Nothing a peer declares makes it
///   reserve anything.
/// - When it empties it gives back a block above twice the
///   [`idle_capacity`](RecvBufConfig::idle_capacity) (the largest it would
///   reuse), so one huge frame does not pin its memory for ever; the
///   adapters call [`release_idle`](RecvBuf::release_idle) when a read
///   finds nothing, so an idle connection holds no block at all.
///
/// # Example
///
/// ```
/// use cleave_proto::RecvBuf;
///
/// let mut buf = RecvBuf::new();
/// buf.feed(b"hello world")?;
/// assert_eq!(buf.peek(), b"hello world");
///
/// let hello = buf.split_to(5)?; // a `Bytes` view, not a copy
/// buf.advance(1)?;
/// assert_eq!(&hello[..], b"hello");
/// assert_eq!(buf.offset(), 6);
/// assert_eq!(&buf.take_tail()[..], b"world");
/// assert!(buf.is_empty());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
pub struct RecvBuf {
    /// `buf[..filled]` is buffered input; `buf[filled..]` is spare room that
    /// is already initialised, kept so reads need not zero it again.
    buf: BytesMut,
    filled: usize,
    /// Size of the block `buf` lives in. `buf.capacity()` only counts the
    /// room from the view's start, which splitting moves forward; the view
    /// keeps the whole block alive all the same.
    block: usize,
    /// Length of the region the last `spare_mut` handed out (0: none).
    spare: usize,
    /// Stream offset of `buf[0]`: bytes consumed so far.
    offset: u64,
    /// Which stream this is, for the notes decoders keep between calls.
    stream: u32,
    config: RecvBufConfig,
}

impl Default for RecvBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for RecvBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecvBuf")
            .field("len", &self.filled)
            .field("capacity", &self.capacity())
            .field("offset", &self.offset)
            .field("config", &self.config)
            .finish()
    }
}

impl RecvBuf {
    /// An empty buffer with the default configuration. Allocates nothing.
    #[must_use]
    pub fn new() -> Self {
        Self::with_config(RecvBufConfig::default())
    }

    /// An empty buffer with the given configuration. Allocates nothing.
    #[must_use]
    pub fn with_config(config: RecvBufConfig) -> Self {
        Self {
            buf: BytesMut::new(),
            filled: 0,
            block: 0,
            spare: 0,
            offset: 0,
            stream: next_stream(),
            config,
        }
    }

    /// A buffer that starts with bytes already read elsewhere, for example
    /// the tail another parser handed off.
    ///
    /// No copy is made when `tail` is the only handle to its memory and that
    /// memory is not much larger than the tail; otherwise it is copied once,
    /// so a small tail never keeps a large block alive (one at the end of a
    /// large block included). A tail longer than the bytes before it in its
    /// block is kept where it is, with them: at most twice its length.
    ///
    /// # Errors
    ///
    /// If `tail` is longer than `config`'s `max_buffered`, it comes back
    /// unchanged inside the [`Rejected`], with an [`Error::LimitExceeded`].
    pub fn from_tail(tail: Bytes, config: RecvBufConfig) -> Result<Self, Rejected<Bytes>> {
        if tail.len() > config.max_buffered {
            let error = Error::LimitExceeded {
                limit: Limit::Buffer,
                max: config.max_buffered as u64,
                attempted: tail.len() as u64,
                offset: 0,
            };
            return Err(Rejected::new(error, tail));
        }
        let mut buf = BytesMut::from(tail);
        let fits = buf.len().saturating_add(config.read_reserve);
        let most = fits.max(config.idle_capacity).saturating_mul(2);
        // A view's capacity counts from its start: a tail at the end of a
        // large block says nothing of the memory before it. Moved to the
        // front of its block (when that is cheap: the tail is no longer
        // than what precedes it), it shows the whole block.
        let room = most.saturating_sub(buf.len()).saturating_add(1);
        if buf.capacity() > most || buf.try_reclaim(room) {
            buf = BytesMut::from(&buf[..]);
        }
        Ok(Self {
            filled: buf.len(),
            block: buf.capacity(),
            buf,
            ..Self::with_config(config)
        })
    }

    /// A buffer that takes over `buffer`'s bytes and memory, no copy: for
    /// adapters that bridge to APIs built on `BytesMut`.
    ///
    /// # Errors
    ///
    /// If `buffer` holds more than `config`'s `max_buffered`, it comes back
    /// in the [`Rejected`].
    pub fn from_buffer(
        buffer: BytesMut,
        config: RecvBufConfig,
    ) -> Result<Self, Rejected<BytesMut>> {
        if buffer.len() > config.max_buffered {
            let error = Error::LimitExceeded {
                limit: Limit::Buffer,
                max: config.max_buffered as u64,
                attempted: buffer.len() as u64,
                offset: 0,
            };
            return Err(Rejected::new(error, buffer));
        }
        Ok(Self {
            filled: buffer.len(),
            block: buffer.capacity(),
            buf: buffer,
            ..Self::with_config(config)
        })
    }

    /// As [`from_buffer`](Self::from_buffer), for a buffer lent to the
    /// core one call at a time and given back (a `tokio_util` codec's
    /// `BytesMut`): `position` is what [`position`](Self::position) said
    /// when the buffer was last given back. Offsets in errors then count
    /// from the stream's start, and decoders that remember how far they
    /// searched the front of the stream resume there instead of searching
    /// it again.
    ///
    /// # Errors
    ///
    /// As [`from_buffer`](Self::from_buffer).
    pub fn from_buffer_at(
        buffer: BytesMut,
        position: Position,
        config: RecvBufConfig,
    ) -> Result<Self, Rejected<BytesMut>> {
        let mut buf = Self::from_buffer(buffer, config).map_err(|rejected| {
            let (error, buffer) = rejected.into_parts();
            Rejected::new(error.shifted(position.offset), buffer)
        })?;
        buf.offset = position.offset;
        buf.stream = position.stream;
        Ok(buf)
    }

    /// Where the buffer stands in its stream: what
    /// [`from_buffer_at`](Self::from_buffer_at) takes to go on from here.
    #[must_use]
    pub fn position(&self) -> Position {
        Position {
            offset: self.offset,
            stream: self.stream,
        }
    }

    /// Which stream the buffer holds: buffers made apart hold different
    /// streams, as far as decoders' notes are concerned.
    #[inline]
    pub(crate) fn stream(&self) -> u32 {
        self.stream
    }

    /// The buffered bytes as a `BytesMut`, with the memory behind them, no
    /// copy: the inverse of [`from_buffer`](Self::from_buffer).
    #[must_use]
    pub fn into_buffer(mut self) -> BytesMut {
        self.buf.truncate(self.filled);
        self.buf
    }

    /// The configuration.
    #[inline]
    #[must_use]
    pub fn config(&self) -> &RecvBufConfig {
        &self.config
    }

    /// Bytes buffered and not consumed.
    #[inline]
    #[must_use]
    pub fn len(&self) -> usize {
        self.filled
    }

    /// Whether nothing is buffered.
    #[inline]
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.filled == 0
    }

    /// Whether the buffer holds `max_buffered` bytes and can take no more.
    #[inline]
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.filled >= self.config.max_buffered
    }

    /// How many more bytes the buffer may take before it is full.
    #[inline]
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.config.max_buffered.saturating_sub(self.filled)
    }

    /// Bytes of memory this buffer keeps alive: the block its bytes and
    /// spare room live in (frames split off earlier may share it), 0 once
    /// it gave its memory back.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.block.max(self.buf.capacity())
    }

    /// Stream offset of the first buffered byte: how many bytes were consumed
    /// (split, advanced or taken) since the buffer was made.
    #[inline]
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Appends `data`.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] with [`Limit::Buffer`] if `data` does not fit
    /// under `max_buffered`. Nothing is appended then: consume some frames
    /// and feed again, or feed a shorter slice.
    #[inline]
    pub fn feed(&mut self, data: &[u8]) -> Result<(), Error> {
        // Cannot overflow: both count bytes in memory.
        let end = self.filled + data.len();
        if self.buf.len() == self.filled
            && end <= self.buf.capacity()
            && end <= self.config.max_buffered
        {
            // The common case: no spare region (so none handed out, and
            // nothing to forget), room in the block, under the limit.
            self.buf.extend_from_slice(data);
            self.filled = end;
            return Ok(());
        }
        self.feed_reclaiming(data)
    }

    /// `feed` when the block has no room left: out of line, so that the
    /// common case stays small enough to inline into a caller's loop.
    #[inline(never)]
    fn feed_reclaiming(&mut self, data: &[u8]) -> Result<(), Error> {
        // An emptied buffer whose block its pieces no longer hold: the
        // block taken back from the front, as `make_room` would (a block
        // within twice the idle capacity is one it keeps whatever the
        // feed), without its sums. A block still shared, or larger, takes
        // the slow way.
        if self.filled == 0
            && self.buf.is_empty()
            && self.spare == 0
            && data.len() <= self.block
            && data.len() <= self.config.max_buffered
            && self.block <= self.config.idle_capacity.saturating_mul(2)
            && self.buf.try_reclaim(data.len())
        {
            // `block` can be the view's room alone (a buffer handed in by
            // `from_buffer`): what came back is the whole block, and one
            // larger than `make_room` keeps goes, as it would go there.
            if self.buf.capacity() > self.config.idle_capacity.saturating_mul(2) {
                self.release();
                return self.feed_slow(data);
            }
            self.block = self.buf.capacity();
            self.buf.extend_from_slice(data);
            self.filled = data.len();
            return Ok(());
        }
        self.feed_slow(data)
    }

    /// `feed` when the block must grow, the spare region is in the way, or
    /// the data may not fit.
    #[cold]
    fn feed_slow(&mut self, data: &[u8]) -> Result<(), Error> {
        if data.len() > self.remaining() {
            return Err(self.over_limit(self.filled as u64 + data.len() as u64));
        }
        self.spare = 0;
        let end = self.filled + data.len();
        if self.buf.len() == self.filled {
            // No spare region: the common case.
            if self.buf.capacity() < end && !self.make_room(data.len(), data.len()) {
                return Err(self.over_limit(end as u64));
            }
            self.buf.extend_from_slice(data);
        } else if end <= self.buf.len() {
            self.buf[self.filled..end].copy_from_slice(data);
        } else {
            if self.buf.capacity() < end && !self.make_room(data.len(), data.len()) {
                return Err(self.over_limit(end as u64));
            }
            self.buf.truncate(self.filled);
            self.buf.extend_from_slice(data);
        }
        self.filled = end;
        // An empty feed into an emptied buffer forgot the region that kept
        // its block.
        self.release_if_idle();
        Ok(())
    }

    /// Room to read into: at most one `read_reserve`, and never more than
    /// the buffer may still take. Call [`commit`](Self::commit) with the
    /// number of bytes the read wrote at the front of it.
    ///
    /// When the buffer reuses a block that still holds a partial frame, the
    /// region may be smaller than a full reserve (never below half of one),
    /// rather than allocate a new block for the difference.
    ///
    /// The region is initialised memory (zeroed once when first allocated,
    /// then reused), so any `Read::read` can take it.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] with [`Limit::Buffer`] when the buffer is full.
    pub fn spare_mut(&mut self) -> Result<&mut [u8], Error> {
        let want = self.config.read_reserve.min(self.remaining());
        if want == 0 {
            return Err(self.over_limit(self.filled as u64 + 1));
        }
        if self.buf.len() - self.filled < want {
            if !self.make_room(want, want.div_ceil(2)) {
                let reserve = self.config.read_reserve as u64;
                return Err(Error::invalid_config(
                    "read_reserve",
                    reserve,
                    "a block the allocator can give (set max_buffered, or a smaller reserve)",
                ));
            }
            let end = self.filled + want.min(self.buf.capacity() - self.filled);
            if self.buf.len() < end {
                self.buf.resize(end, 0);
            }
        }
        let end = self.buf.len().min(self.filled + want);
        self.spare = end - self.filled;
        Ok(&mut self.buf[self.filled..end])
    }

    /// Marks the first `n` bytes of the region from the last
    /// [`spare_mut`](Self::spare_mut) as received.
    ///
    /// # Errors
    ///
    /// [`Misuse::CommitTooLarge`] if `n` is larger than that region (or no
    /// region is outstanding and `n > 0`); nothing changes then.
    ///
    /// Committing 0 bytes (the read would block) into an empty buffer gives
    /// back memory above the idle capacity, like any other emptying.
    pub fn commit(&mut self, n: usize) -> Result<(), Error> {
        if n > self.spare {
            return Err(Misuse::CommitTooLarge {
                committed: n,
                spare: self.spare,
            }
            .into());
        }
        self.filled += n;
        self.spare = 0;
        self.release_if_idle();
        Ok(())
    }

    /// The buffered bytes, without consuming them.
    #[inline]
    #[must_use]
    pub fn peek(&self) -> &[u8] {
        &self.buf[..self.filled]
    }

    /// The buffered bytes, to change in place before they are split off
    /// (a WebSocket payload unmasked where it arrived: still zero copy).
    #[inline]
    pub(crate) fn peek_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.filled]
    }

    /// Splits the first `n` bytes off as `Bytes`.
    ///
    /// The frame is a view of the buffer's memory, not a copy (unless
    /// [`copy_frames_up_to`](RecvBufConfig::copy_frames_up_to) says so).
    ///
    /// # Errors
    ///
    /// [`Misuse::OutOfBounds`] if fewer than `n` bytes are buffered; nothing
    /// changes then.
    #[inline]
    pub fn split_to(&mut self, n: usize) -> Result<Bytes, Error> {
        if n > self.filled {
            return Err(Error::out_of_bounds(n, self.filled));
        }
        Ok(self.split_frame(0, n, 0))
    }

    /// Consumes `skip + len + trail` bytes and returns the middle `len` as
    /// the frame: the decoders' hot path, for lengths they have checked
    /// against [`len`](Self::len). The framing around the frame is dropped
    /// from the buffer, so the `Bytes` is built once and never changed.
    #[inline(always)]
    pub(crate) fn split_frame(&mut self, skip: usize, len: usize, trail: usize) -> Bytes {
        let n = skip + len + trail;
        debug_assert!(n <= self.filled);
        // The spare region (after the buffered bytes) stays where it is.
        self.filled -= n;
        self.offset += n as u64;
        let frame = if len <= self.config.copy_frames_up_to {
            let frame = Bytes::copy_from_slice(&self.buf[skip..skip + len]);
            self.buf.advance(n);
            frame
        } else {
            if skip > 0 {
                self.buf.advance(skip);
            }
            let frame = self.buf.split_to(len).freeze();
            if trail > 0 {
                self.buf.advance(trail);
            }
            frame
        };
        self.release_if_idle();
        frame
    }

    /// Drops the first `n` bytes (a delimiter, a header).
    ///
    /// # Errors
    ///
    /// [`Misuse::OutOfBounds`] if fewer than `n` bytes are buffered; nothing
    /// changes then.
    #[inline]
    pub fn advance(&mut self, n: usize) -> Result<(), Error> {
        if n > self.filled {
            return Err(Error::out_of_bounds(n, self.filled));
        }
        self.filled -= n;
        self.offset += n as u64;
        self.buf.advance(n);
        self.release_if_idle();
        Ok(())
    }

    /// Takes everything buffered as one `Bytes`, without copying: the
    /// hand-off when the protocol switches to raw bytes. The buffer is left
    /// empty and usable.
    #[must_use = "the tail is the unread bytes: dropping it loses them"]
    pub fn take_tail(&mut self) -> Bytes {
        let n = self.filled;
        self.filled = 0;
        self.offset += n as u64;
        let tail = self.buf.split_to(n).freeze();
        self.release_if_idle();
        tail
    }

    /// The error for input that would make the buffer hold `attempted` bytes.
    pub(crate) fn over_limit(&self, attempted: u64) -> Error {
        Error::LimitExceeded {
            limit: Limit::Buffer,
            max: self.config.max_buffered as u64,
            attempted,
            offset: self.offset,
        }
    }
}

mod memory;

#[cfg(test)]
mod tests;
