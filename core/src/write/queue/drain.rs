//! Draining a [`WriteQueue`]: what the next write is offered (the plan),
//! the slices or chunks that offer it, and what a write took.

use alloc::vec::Vec;
use bytes::{Buf, Bytes};

use super::lane::walk;
#[cfg(feature = "std")]
use super::lane::LaneQueue;
use super::{Lane, Progress, WriteQueue};
use crate::error::{Error, Misuse};

/// What the last drain handed out: up to three runs, each from one lane.
#[derive(Clone, Copy, Debug)]
pub(super) struct Plan {
    runs: [(Lane, usize); 3],
    len: usize,
    total: usize,
}

impl Plan {
    pub(super) const EMPTY: Self = Self {
        runs: [(Lane::Bulk, 0); 3],
        len: 0,
        total: 0,
    };
}

impl WriteQueue {
    /// Whether `n` slices are enough for the next drain to offer all it
    /// would offer with any number: the entries of both lanes and their
    /// run buffers number at most `n` (two fewer when a push is half
    /// written or a fence holds bulk bytes back: the plan then cuts the
    /// bulk lane, or the urgent one, at a push boundary, and an entry
    /// cut there takes two slices), and all pending bytes fit in one
    /// piece (so no entry is cut into pieces). A writer that sets up its
    /// slices afresh for each write sets up that many then: a burst of
    /// small pushes coalesced into one run needs one, and
    /// [`SLICES`](crate::conn::SLICES) of them is a kilobyte zeroed. Too
    /// few slices would only make a write offer less.
    #[cfg(feature = "std")]
    pub(crate) fn needs_at_most(&self, n: usize) -> bool {
        let lane = |q: &LaneQueue| q.entries.len() + usize::from(!q.staging.is_empty());
        let urgent = self.urgent.as_deref();
        let cut =
            self.bulk.mid_frame() || self.fence > 0 || urgent.is_some_and(LaneQueue::mid_frame);
        let count = lane(&self.bulk) + urgent.map_or(0, lane) + 2 * usize::from(cut);
        count <= n && self.len() <= self.config.piece_size
    }

    /// Fills `out` with the next slices to write and returns how many it
    /// filled: at most `max_slices` of them, `max_drain_bytes` in all, each
    /// at most `piece_size`. Call [`advance`](Self::advance) with what the
    /// writer took before draining again.
    pub fn chunks<'a>(&'a mut self, out: &mut [&'a [u8]]) -> usize {
        self.make_plan(out.len());
        let mut n = 0;
        self.each_piece(|entry, start, len| {
            out[n] = &entry[start..start + len];
            n += 1;
        });
        n
    }

    /// [`chunks`](Self::chunks) as `IoSlice`s, for `write_vectored`.
    #[cfg(feature = "std")]
    pub fn io_slices<'a>(&'a mut self, out: &mut [std::io::IoSlice<'a>]) -> usize {
        self.make_plan(out.len());
        let mut n = 0;
        self.each_piece(|entry, start, len| {
            out[n] = std::io::IoSlice::new(&entry[start..start + len]);
            n += 1;
        });
        n
    }

    /// [`chunks`](Self::chunks) as owned `Bytes` (views of the queued
    /// bytes, not copies), appended to `out`: at most `max` of them.
    ///
    /// For a writer that must not borrow the queue while it writes: one
    /// that blocks, outside the lock that guards the queue. Pushes made in
    /// the meantime do not disturb what was handed out; call
    /// [`advance`](Self::advance) with what was written before draining
    /// again. Each piece costs a reference count, where `chunks` costs
    /// nothing.
    ///
    /// ```
    /// use cleave_proto::{Bytes, WriteQueue};
    ///
    /// let mut queue = WriteQueue::new();
    /// queue.push(Bytes::from(vec![1u8; 4096])).expect("room");
    /// let mut out = Vec::new();
    /// queue.chunks_owned(&mut out, 64);
    /// queue.push(Bytes::from_static(b"meanwhile")).expect("room"); // no borrow held
    /// let written: usize = out.iter().map(|b| b.len()).sum();
    /// queue.advance(written)?;
    /// assert_eq!(queue.len(), 9);
    /// # Ok::<(), cleave_proto::Error>(())
    /// ```
    pub fn chunks_owned(&mut self, out: &mut Vec<Bytes>, max: usize) -> usize {
        self.make_plan(max);
        let before = out.len();
        self.each_piece(|entry, start, len| out.push(entry.slice(start..start + len)));
        out.len() - before
    }

    /// Records that the writer took the first `n` bytes of what the last
    /// drain handed out, whatever their slice boundaries.
    ///
    /// # Errors
    ///
    /// [`Misuse::AdvanceTooFar`] if `n` is more than the last drain handed
    /// out; nothing changes then.
    pub fn advance(&mut self, n: usize) -> Result<Progress, Error> {
        if n > self.plan.total {
            return Err(Misuse::AdvanceTooFar {
                advanced: n,
                presented: self.plan.total,
            }
            .into());
        }
        let plan = core::mem::replace(&mut self.plan, Plan::EMPTY);
        let mut left = n;
        let mut completed = 0;
        for &(lane, run) in &plan.runs[..plan.len] {
            let take = left.min(run);
            completed += self.consume(lane, take);
            left -= take;
        }
        Ok(Progress {
            completed,
            bulk: self.bulk.written,
            urgent: self.watermark(Lane::Urgent),
        })
    }

    /// Decides what the next drain hands out, in which order, within the
    /// limits: the rest of a bulk frame in progress, then urgent data, then
    /// bulk data. Urgent data so goes out at the first push boundary, even
    /// inside a coalesced run.
    fn make_plan(&mut self, room: usize) {
        self.bulk.seal();
        if let Some(urgent) = &mut self.urgent {
            urgent.seal();
        }
        let piece = self.config.piece_size;
        let mut slices = room.min(self.config.max_slices);
        let mut bytes = self.config.max_drain_bytes;
        // Built where it is kept: a plan built aside and then moved is
        // read back whole right after its fields were written one by one,
        // which the processor cannot forward from its stores.
        self.plan = Plan::EMPTY;
        let mut cursors = [(0, 0); 2];
        // Bulk bytes that must go before urgent data: the rest of a push
        // in progress, and what a fence holds ahead.
        let fenced = match self.fence.checked_sub(1) {
            Some(last) => self.bulk.ends.get(last as usize).map_or(0, |&end| {
                usize::try_from(end - self.bulk.written).unwrap_or(usize::MAX)
            }),
            None => 0,
        };
        let ahead = if self.bulk.mid_frame() {
            self.bulk.frame_rest().max(fenced)
        } else {
            fenced
        };
        // An urgent push half written when a fence came (a switch while
        // an interim reply was going out): its rest goes first, the parts
        // of a push are never separated. Only then what the fence holds.
        let urgent_rest = self
            .urgent
            .as_ref()
            .filter(|urgent| urgent.mid_frame())
            .map_or(0, |urgent| urgent.frame_rest());
        let runs = if ahead > 0 && urgent_rest > 0 {
            [
                (Lane::Urgent, urgent_rest),
                (Lane::Bulk, ahead),
                (Lane::Urgent, usize::MAX),
            ]
        } else if ahead > 0 {
            [
                (Lane::Bulk, ahead),
                (Lane::Urgent, usize::MAX),
                (Lane::Bulk, usize::MAX),
            ]
        } else {
            [
                (Lane::Urgent, usize::MAX),
                (Lane::Bulk, usize::MAX),
                (Lane::Bulk, 0),
            ]
        };
        for (lane, limit) in runs {
            let cursor = &mut cursors[lane as usize];
            let run = walk(
                self.entries(lane),
                cursor,
                limit.min(bytes),
                piece,
                &mut slices,
                |_, _, _| {},
            );
            bytes -= run;
            self.plan.push(lane, run);
            if run < limit && (slices == 0 || bytes == 0) {
                break;
            }
        }
    }

    /// Calls `put` with each piece of the current plan, in order, as
    /// (entry, start, length).
    fn each_piece<'a>(&'a self, mut put: impl FnMut(&'a Bytes, usize, usize)) {
        let piece = self.config.piece_size;
        let mut cursors = [(0, 0); 2];
        let mut slices = usize::MAX;
        for &(lane, run) in &self.plan.runs[..self.plan.len] {
            walk(
                self.entries(lane),
                &mut cursors[lane as usize],
                run,
                piece,
                &mut slices,
                &mut put,
            );
        }
    }

    /// Takes `n` written bytes off the front of `lane`; returns how many
    /// pushes that completed.
    fn consume(&mut self, lane: Lane, mut n: usize) -> usize {
        let q = self.lane_mut(lane);
        q.pending -= n;
        q.written += n as u64;
        while n > 0 {
            let Some(front) = q.entries.front_mut() else {
                break;
            };
            if n < front.len() {
                front.advance(n);
                break;
            }
            n -= front.len();
            q.entries.pop_front();
        }
        let mut completed = 0;
        match q.ends.back() {
            // Everything pushed went out (a drain that kept up): all
            // complete at once.
            Some(&last) if last <= q.written => {
                completed = q.ends.len();
                q.done = last;
                q.ends.clear();
            }
            _ => {
                while let Some(&end) = q.ends.front() {
                    if end > q.written {
                        break;
                    }
                    q.ends.pop_front();
                    q.done = end;
                    completed += 1;
                }
            }
        }
        if lane == Lane::Bulk {
            let done = u32::try_from(completed).unwrap_or(u32::MAX);
            self.fence = self.fence.saturating_sub(done);
        }
        completed
    }
}

impl Plan {
    /// Adds a run; one that follows a run of the same lane extends it, so
    /// a coalesced entry is not handed out in two slices for nothing.
    fn push(&mut self, lane: Lane, run: usize) {
        if run == 0 {
            return;
        }
        self.total += run;
        match self.len.checked_sub(1).map(|last| &mut self.runs[last]) {
            Some((last_lane, last_run)) if *last_lane == lane => *last_run += run,
            _ => {
                self.runs[self.len] = (lane, run);
                self.len += 1;
            }
        }
    }
}
