//! One lane of a [`WriteQueue`](super::WriteQueue): its entries, its run
//! buffer and its counters, and the walk that hands its bytes out.

use alloc::collections::VecDeque;
use bytes::{Bytes, BytesMut};

/// One lane's queue and counters.
#[derive(Debug, Default)]
pub(super) struct LaneQueue {
    /// The bytes, as pushed (or coalesced); each entry is non-empty.
    pub(super) entries: VecDeque<Bytes>,
    /// Where each pending push ends in the lane's byte stream, ascending.
    /// Its length is the number of pending pushes; it never allocates once
    /// grown to the item limit.
    pub(super) ends: VecDeque<u64>,
    /// Small writes and inline framing being coalesced into one run;
    /// logically after `entries`.
    pub(super) staging: BytesMut,
    /// Bytes not yet written (including the staging buffer).
    pub(super) pending: usize,
    /// Bytes pushed and bytes written since the queue was made.
    pub(super) pushed: u64,
    pub(super) written: u64,
    /// Where the last completed push ended: the start of the next one.
    pub(super) done: u64,
}

impl LaneQueue {
    /// The run buffer, with room for `len` more bytes of one push: a run
    /// holds at most `limit` bytes (or one push, if that is larger), so it
    /// is sealed first if they would take it past. The buffer grows by
    /// `block` bytes at a time (a run longer than that grows like any
    /// `BytesMut`), so a huge `limit` never reserves memory up front.
    #[inline(always)]
    pub(super) fn room(&mut self, len: usize, limit: usize, block: usize) -> &mut BytesMut {
        if !self.staging.is_empty() && self.staging.len() + len > limit {
            self.seal();
        }
        if self.staging.capacity() - self.staging.len() < len {
            self.staging.reserve(block.min(limit).max(len));
        }
        &mut self.staging
    }

    /// Turns the run buffer's bytes into an entry of their own.
    #[inline]
    pub(super) fn seal(&mut self) {
        if !self.staging.is_empty() {
            let run = self.staging.split().freeze();
            self.entries.push_back(run);
        }
    }

    /// Whether some bytes of a push are written and its last byte is not.
    pub(super) fn mid_frame(&self) -> bool {
        self.written > self.done
    }

    /// Bytes left in the push being written (the next one if none is).
    pub(super) fn frame_rest(&self) -> usize {
        self.ends.front().map_or(0, |&end| {
            usize::try_from(end - self.written).unwrap_or(usize::MAX)
        })
    }
}

/// Hands out the bytes of `entries` from `cursor` (entry index, offset in
/// it) in pieces of at most `piece`, until `run` bytes or `slices` pieces;
/// `put` gets each piece as (entry, start, length). Moves the cursor and
/// returns the bytes handed out. Planning a drain and filling it walk the
/// same way, so they always agree.
pub(super) fn walk<'a>(
    entries: &'a VecDeque<Bytes>,
    cursor: &mut (usize, usize),
    mut run: usize,
    piece: usize,
    slices: &mut usize,
    mut put: impl FnMut(&'a Bytes, usize, usize),
) -> usize {
    let mut walked = 0;
    while run > 0 && *slices > 0 {
        let Some(entry) = entries.get(cursor.0) else {
            break;
        };
        let rest = entry.len() - cursor.1;
        let take = rest.min(piece).min(run);
        put(entry, cursor.1, take);
        *slices -= 1;
        run -= take;
        walked += take;
        if take == rest {
            *cursor = (cursor.0 + 1, 0);
        } else {
            cursor.1 += take;
        }
    }
    walked
}
