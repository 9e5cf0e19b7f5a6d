//! [`RecvBuf`], the owned receive state of one connection.

use alloc::vec::Vec;
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

    /// Gives the allocation back if nothing is buffered, whatever its size.
    /// Returns whether memory was released.
    ///
    /// An adapter may call this before a connection goes idle for long; the
    /// next read allocates again.
    pub fn release_if_empty(&mut self) -> bool {
        if self.filled == 0 && self.capacity() > 0 {
            self.release();
            true
        } else {
            false
        }
    }

    /// Gives back the memory the buffered bytes do not need: the whole
    /// block when nothing is buffered; when the block is at least four
    /// times what is buffered (a partial frame in a read-sized block), the
    /// bytes move into a block of their own size. Returns whether memory
    /// was given back.
    ///
    /// For a connection about to wait for its peer: the adapters call it
    /// when a read finds nothing, so an idle connection holds no read
    /// block, and one that sent 10 bytes of a line and went quiet holds 10
    /// bytes, not a read reserve. The next read allocates a block again
    /// (and copies what is buffered into it). Call it between reads, not
    /// between [`spare_mut`](Self::spare_mut) and [`commit`](Self::commit).
    pub fn shrink_to_fit(&mut self) -> bool {
        if self.filled == 0 {
            return self.release_if_empty();
        }
        if self.capacity() / 4 < self.filled {
            return false;
        }
        self.buf = BytesMut::from(&self.buf[..self.filled]);
        self.block = self.buf.capacity();
        self.spare = 0;
        true
    }

    /// What an adapter calls when a read finds nothing and the connection
    /// is about to wait: [`shrink_to_fit`](Self::shrink_to_fit), unless
    /// [`RecvBufConfig::release_when_idle`] is off. Returns whether memory
    /// was given back.
    pub fn release_idle(&mut self) -> bool {
        self.config.release_when_idle && self.shrink_to_fit()
    }

    fn release(&mut self) {
        self.buf = BytesMut::new();
        self.block = 0;
        self.spare = 0;
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

    /// An emptied buffer keeps a block it would reuse (up to twice the
    /// idle capacity, as [`make_room`](Self::make_room) does), so a peer
    /// whose reads end on frame boundaries costs no allocation per read;
    /// a larger one (what a big frame needed) goes back at once. A region
    /// handed out by [`spare_mut`](Self::spare_mut) and not committed yet
    /// keeps the block until [`commit`](Self::commit), which releases it
    /// then if it is still empty: the bytes read there are not lost.
    #[inline]
    fn release_if_idle(&mut self) {
        if self.filled == 0
            && self.spare == 0
            && self.block > self.config.idle_capacity.saturating_mul(2)
        {
            self.release();
        }
    }

    /// Makes room after the buffered bytes: nothing to do if the current
    /// block has `at_least` left; else `want` (or at least `at_least`) from
    /// the block reused, else a new block. Callers keep `want` within
    /// [`remaining`](Self::remaining).
    ///
    /// A new block holds the buffered bytes plus the larger of `want`, a
    /// read reserve and what is buffered (doubling keeps the copying of a
    /// long frame linear), clamped to the limit. A block is reused when the
    /// frames split from it are gone and it is not much larger than needed
    /// (a block a huge frame left is dropped). Small feeds so share one
    /// block instead of allocating each time.
    ///
    /// The allocation is fallible: a block the allocator cannot give (a
    /// reserve of `usize::MAX` with no buffer limit) falls back to what is
    /// needed now (`at_least`), and if even that cannot be had, `false`:
    /// nothing changed, and the caller reports it; never a panic.
    #[cold]
    fn make_room(&mut self, want: usize, at_least: usize) -> bool {
        if self.buf.capacity() - self.filled >= at_least {
            return true;
        }
        self.buf.truncate(self.filled);
        let grow = want
            .max(self.config.read_reserve)
            .max(self.filled)
            .min(self.remaining())
            .max(want);
        let need = self.filled.saturating_add(grow);
        let keep_limit = need.max(self.config.idle_capacity).saturating_mul(2);
        let reused = (self.buf.try_reclaim(want) || self.buf.try_reclaim(at_least))
            && self.buf.capacity() <= keep_limit;
        if !reused {
            let Some(mut fresh) = block(need).or_else(|| block(self.filled + at_least)) else {
                return false;
            };
            fresh.extend_from_slice(&self.buf);
            self.buf = fresh;
        }
        self.block = self.buf.capacity();
        true
    }
}

/// An empty block of `capacity` bytes, or `None` when the allocator cannot
/// give it (no panic, no abort). Blocks up to [`LARGE_BLOCK`] are taken
/// as usual (when those fail, the whole program is out of memory); a
/// larger one is asked for fallibly, since a configuration (a huge
/// reserve, no limit) can ask for more than any allocator gives. Its extra
/// step (a `Vec`, then `Bytes`, then `BytesMut` over the same memory: one
/// small allocation more) is noise beside a block that size.
fn block(capacity: usize) -> Option<BytesMut> {
    if capacity <= LARGE_BLOCK {
        return Some(BytesMut::with_capacity(capacity));
    }
    let mut vec = Vec::new();
    vec.try_reserve_exact(capacity).ok()?;
    Some(BytesMut::from(Bytes::from(vec)))
}

/// See [`block`].
const LARGE_BLOCK: usize = 1 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    /// A buffer handed in with little room left in a large block: the
    /// first feed takes the block back from the front, finds it far
    /// larger than an idle buffer keeps, and reads into a block of its own
    /// size instead, as `make_room` does.
    #[test]
    fn a_large_block_handed_in_is_not_kept_by_the_quick_reclaim() {
        let mut big = BytesMut::with_capacity(1 << 20);
        big.resize((1 << 20) - 8 * 1024, 0);
        let _ = big.split(); // the view: 8 KiB of room at the block's end
        assert_eq!(big.capacity(), 8 * 1024);
        let mut buf = RecvBuf::from_buffer(big, RecvBufConfig::default()).unwrap();
        // The view's room filled and its bytes taken and dropped: the
        // block's pieces are gone, and the view has no room left.
        buf.feed(&[0; 8 * 1024]).unwrap();
        drop(buf.split_to(8 * 1024).unwrap());
        buf.feed(&[1; 100]).unwrap();
        assert_eq!(buf.peek(), &[1; 100][..]);
        assert!(buf.capacity() <= 32 * 1024, "{} kept", buf.capacity());
    }

    #[test]
    fn a_large_block_is_asked_for_fallibly_and_keeps_its_capacity() {
        let large = block(LARGE_BLOCK + 1).unwrap();
        assert!(large.capacity() > LARGE_BLOCK);
        assert!(block(usize::MAX).is_none());
        assert!(block(isize::MAX as usize).is_none());
    }

    #[test]
    fn spare_region_is_reused_without_zeroing_twice() {
        let mut buf = RecvBuf::new();
        let spare = buf.spare_mut().unwrap();
        assert_eq!(spare.len(), DEFAULT_READ_RESERVE);
        spare[..3].copy_from_slice(b"abc");
        buf.commit(3).unwrap();
        // The rest of the region stays initialised and is handed out again
        // as it is: no resize, no zeroing.
        let spare = buf.spare_mut().unwrap();
        assert_eq!(spare.len(), DEFAULT_READ_RESERVE - 3);
        assert_eq!(buf.buf.len(), DEFAULT_READ_RESERVE);
        assert_eq!(buf.peek(), b"abc");
    }

    #[test]
    fn feed_writes_into_initialised_spare() {
        let mut buf = RecvBuf::new();
        let _ = buf.spare_mut().unwrap();
        buf.feed(b"xyz").unwrap();
        assert_eq!(buf.peek(), b"xyz");
        assert_eq!(buf.buf.len(), DEFAULT_READ_RESERVE);
        assert_eq!(
            buf.commit(1),
            Err(Error::Misuse(Misuse::CommitTooLarge {
                committed: 1,
                spare: 0
            }))
        );
    }

    #[test]
    fn reuses_the_block_once_its_frames_are_dropped() {
        let config = RecvBufConfig::default().read_reserve(40).unwrap();
        let mut buf = RecvBuf::with_config(config);
        buf.feed(&[7; 40]).unwrap();
        let block = buf.peek().as_ptr();
        let frame = buf.split_to(40).unwrap();
        buf.feed(&[8; 40]).unwrap();
        assert_ne!(buf.peek().as_ptr(), block, "the frame still uses the block");
        drop(frame);
        let block = buf.peek().as_ptr();
        drop(buf.split_to(40).unwrap());
        buf.feed(&[9; 40]).unwrap();
        assert_eq!(
            buf.peek().as_ptr(),
            block,
            "the block is free again: reused"
        );
        assert_eq!(buf.capacity(), 40);
    }

    #[test]
    fn grows_by_what_arrived_plus_at_most_one_reserve() {
        let config = RecvBufConfig::default().read_reserve(16).unwrap();
        let mut buf = RecvBuf::with_config(config);
        buf.feed(&[7; 40]).unwrap();
        assert_eq!(buf.capacity(), 40);
        let frame = buf.split_to(30).unwrap();
        buf.feed(&[8; 5]).unwrap();
        assert_eq!(buf.capacity(), 10 + 16);
        assert_eq!(&frame[..], &[7; 30][..]);
    }
}
