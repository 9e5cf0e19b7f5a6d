//! How a [`RecvBuf`] takes and gives back memory: room made for a read,
//! a block reused once its frames are dropped, idle memory released.

use alloc::vec::Vec;

use bytes::{Bytes, BytesMut};

use super::RecvBuf;

impl RecvBuf {
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
    /// [`RecvBufConfig::release_when_idle`](super::RecvBufConfig::release_when_idle) is off. Returns whether memory
    /// was given back.
    pub fn release_idle(&mut self) -> bool {
        self.config.release_when_idle && self.shrink_to_fit()
    }

    pub(super) fn release(&mut self) {
        self.buf = BytesMut::new();
        self.block = 0;
        self.spare = 0;
    }

    /// An emptied buffer keeps a block it would reuse (up to twice the
    /// idle capacity, as [`make_room`](Self::make_room) does), so a peer
    /// whose reads end on frame boundaries costs no allocation per read;
    /// a larger one (what a big frame needed) goes back at once. A region
    /// handed out by [`spare_mut`](Self::spare_mut) and not committed yet
    /// keeps the block until [`commit`](Self::commit), which releases it
    /// then if it is still empty: the bytes read there are not lost.
    #[inline]
    pub(super) fn release_if_idle(&mut self) {
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
    pub(super) fn make_room(&mut self, want: usize, at_least: usize) -> bool {
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
pub(super) fn block(capacity: usize) -> Option<BytesMut> {
    if capacity <= LARGE_BLOCK {
        return Some(BytesMut::with_capacity(capacity));
    }
    let mut vec = Vec::new();
    vec.try_reserve_exact(capacity).ok()?;
    Some(BytesMut::from(Bytes::from(vec)))
}

/// See [`block`].
pub(super) const LARGE_BLOCK: usize = 1 << 20;
