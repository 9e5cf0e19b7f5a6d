//! [`WriteQueue`]: the bounded outbound queue of owned `Bytes`.

use alloc::boxed::Box;
use alloc::collections::VecDeque;
use bytes::{Bytes, BytesMut};

use crate::encoder::{Frame, Part};
use crate::error::{Refusal, Rejected};
use crate::write::config::WriteQueueConfig;

mod drain;
mod lane;

use drain::Plan;
use lane::LaneQueue;

/// The two lanes of a [`WriteQueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Lane {
    /// Ordinary data, written in push order.
    Bulk,
    /// Control messages (a ping, a close, a routing reply): written before
    /// queued bulk data, but only between frames, never inside one.
    Urgent,
}

/// Names a push: the offset in its lane's byte stream where the push ends.
///
/// A ticket is complete once everything up to that offset has been handed
/// to the writer ([`WriteQueue::is_written`]). Tickets of a lane complete
/// in order, each exactly once; a ticket costs no memory in the queue, so a
/// push whose ticket is ignored (fire and forget) costs nothing extra. An
/// empty push ends where the push before it ends, and so shares its
/// ticket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    lane: Lane,
    end: u64,
}

impl Ticket {
    /// The lane of the push.
    #[must_use]
    pub fn lane(&self) -> Lane {
        self.lane
    }

    /// Where the push ends in its lane's byte stream.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.end
    }
}

/// What one [`WriteQueue::advance`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    completed: usize,
    bulk: u64,
    urgent: u64,
}

impl Progress {
    /// Pushes whose last byte this advance handed to the writer.
    #[must_use]
    pub fn completed(&self) -> usize {
        self.completed
    }

    /// The lane's watermark after the advance: every ticket of that lane
    /// with an offset at or below it is complete.
    #[must_use]
    pub fn watermark(&self, lane: Lane) -> u64 {
        match lane {
            Lane::Bulk => self.bulk,
            Lane::Urgent => self.urgent,
        }
    }
}

/// A bounded queue of owned `Bytes` on their way to a writer, with tickets,
/// vectored drain, partial-write accounting, large writes handed out in
/// pieces and small ones coalesced. It does no I/O: an adapter drives it.
///
/// # How to drive it
///
/// ```text
///   producers:  push(bytes) / push_frame(frame)   -> Ticket, or the bytes back
///               push_urgent(..)                    -> jumps ahead, between frames
///   writer:     loop {
///                   let mut slices = [IoSlice::new(&[]); 64];   // afresh each time
///                   n = queue.io_slices(&mut slices)   // or chunks() without std
///                   if n == 0 { break }                // nothing pending
///                   written = socket.write_vectored(&slices[..n])?
///                   queue.advance(written)?            // any size, even mid-slice
///               }
///   waiters:    queue.is_written(ticket)               // after every advance
///   shutdown:   queue.close(); drain until is_flushed(); shut the socket
/// ```
///
/// # Guarantees
///
/// - Bytes come out in push order within a lane, exactly once, across any
///   sequence of partial writes. The parts of a frame are never separated:
///   an urgent push waits for the frame in progress to finish, and for
///   the bulk bytes queued before a [`fence`](Self::fence).
/// - Each lane's item and byte limits hold at every step. A push that does
///   not fit is refused whole and its `Bytes` come back in the
///   [`Rejected`]. One push larger than the byte limit is accepted when its
///   lane is empty and then holds it alone, so no push is refused for ever.
/// - Nothing is copied, except writes under
///   [`coalesce_below`](WriteQueueConfig::coalesce_below) and a frame's
///   inline framing, which are copied into a reusable run buffer on purpose
///   (one `iovec` for many small pieces).
/// - No allocation per push in steady state, for payloads at or above the
///   coalescing threshold, and none per ticket.
///
/// ```
/// use cleave_proto::{Bytes, WriteQueue};
///
/// let mut queue = WriteQueue::new();
/// let ticket = queue.push(Bytes::from(vec![1u8; 4096])).expect("room");
/// queue.push(Bytes::from_static(b"fire and forget")).expect("room");
///
/// // The slices borrow the queue: make them afresh for each write.
/// let presented = {
///     let mut slices = [&b""[..]; 8];
///     let n = queue.chunks(&mut slices);
///     slices[..n].iter().map(|s| s.len()).sum::<usize>()
/// };
/// assert_eq!(presented, 4096 + 15);
///
/// queue.advance(1000)?; // a partial write, inside the first slice
/// assert!(!queue.is_written(ticket));
/// let first = {
///     let mut slices = [&b""[..]; 8];
///     queue.chunks(&mut slices);
///     slices[0].len()
/// };
/// assert_eq!(first, 3096);
/// queue.advance(3096 + 15)?;
/// assert!(queue.is_written(ticket) && queue.is_flushed());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Debug)]
pub struct WriteQueue {
    bulk: LaneQueue,
    /// Made on the first urgent push (pings and closes are rare: a queue
    /// that never has one keeps 8 bytes for the lane, not 128), and kept
    /// from then on for its counters, which name its tickets.
    urgent: Option<Box<LaneQueue>>,
    plan: Plan,
    /// The bulk lane's next pending pushes that go out before any urgent
    /// data ([`fence`](WriteQueue::fence)): a count, not an offset, so
    /// that it fits beside the flags (no byte more per connection).
    fence: u32,
    closed: bool,
    /// A push was refused for room since [`take_refused`](WriteQueue::take_refused).
    refused: bool,
    config: WriteQueueConfig,
}

impl Default for WriteQueue {
    fn default() -> Self {
        Self::new()
    }
}

impl WriteQueue {
    /// An empty queue with the default configuration.
    #[must_use]
    pub fn new() -> Self {
        Self::with_config(WriteQueueConfig::default())
    }

    /// An empty queue with the given configuration.
    #[must_use]
    pub fn with_config(config: WriteQueueConfig) -> Self {
        Self {
            bulk: LaneQueue::default(),
            urgent: None,
            plan: Plan::EMPTY,
            fence: 0,
            closed: false,
            refused: false,
            config,
        }
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &WriteQueueConfig {
        &self.config
    }

    /// Bytes pending in both lanes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.bulk.pending + self.urgent.as_ref().map_or(0, |q| q.pending)
    }

    /// Whether nothing is pending.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Pushes pending in both lanes.
    #[must_use]
    pub fn items(&self) -> usize {
        self.bulk.ends.len() + self.urgent.as_ref().map_or(0, |q| q.ends.len())
    }

    /// Bytes pending in one lane.
    #[must_use]
    pub fn pending_bytes(&self, lane: Lane) -> usize {
        self.lane(lane).map_or(0, |q| q.pending)
    }

    /// Pushes pending in one lane.
    #[must_use]
    pub fn pending_items(&self, lane: Lane) -> usize {
        self.lane(lane).map_or(0, |q| q.ends.len())
    }

    /// Whether nothing is pending: everything pushed was handed to the
    /// writer (or dropped by [`abort`](Self::abort)).
    #[must_use]
    pub fn is_flushed(&self) -> bool {
        self.is_empty()
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Whether a push of `len` bytes into `lane` would be accepted now.
    #[must_use]
    pub fn fits(&self, lane: Lane, len: usize) -> bool {
        self.admit(lane, len).is_ok()
    }

    /// Whether the push named by `ticket` has been handed to the writer.
    #[must_use]
    pub fn is_written(&self, ticket: Ticket) -> bool {
        self.watermark(ticket.lane) >= ticket.end
    }

    /// The lane's watermark: every ticket of the lane at or below it is
    /// complete.
    #[must_use]
    pub fn watermark(&self, lane: Lane) -> u64 {
        self.lane(lane).map_or(0, |q| q.written)
    }

    /// How far the writer got in each lane: every ticket at or below is
    /// complete.
    #[must_use]
    pub fn marks(&self) -> crate::write::Marks {
        crate::write::Marks {
            bulk: self.watermark(Lane::Bulk),
            urgent: self.watermark(Lane::Urgent),
        }
    }

    /// Where each lane ends now: the marks a flush of everything pushed so
    /// far waits for.
    #[must_use]
    pub fn end_marks(&self) -> crate::write::Marks {
        let marks = self.marks();
        crate::write::Marks {
            bulk: marks.bulk + self.pending_bytes(Lane::Bulk) as u64,
            urgent: marks.urgent + self.pending_bytes(Lane::Urgent) as u64,
        }
    }

    /// Queues `item` (bytes or a frame) in `lane`; see [`Push`](crate::write::Push).
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push).
    #[allow(clippy::result_large_err)] // a frame comes back by value
    #[inline]
    pub fn push_to<I: crate::write::Push>(
        &mut self,
        lane: Lane,
        item: I,
    ) -> Result<Ticket, Rejected<I, Refusal>> {
        item.push_into(self, lane)
    }

    /// Queues `bytes` in the bulk lane.
    ///
    /// # Errors
    ///
    /// The bytes come back in a [`Rejected`] with [`Refusal::Closed`] after
    /// [`close`](Self::close), or [`Refusal::Full`] when the lane is at its
    /// item or byte limit; nothing changes then.
    #[inline]
    pub fn push(&mut self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes, Refusal>> {
        self.push_in(Lane::Bulk, bytes)
    }

    /// Queues the parts of `frame` in the bulk lane, kept together.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push); the frame comes back whole.
    // A refused frame comes back by value: boxing it would allocate on
    // every refusal, and refusals are how backpressure works.
    #[allow(clippy::result_large_err)]
    #[inline]
    pub fn push_frame(&mut self, frame: Frame) -> Result<Ticket, Rejected<Frame, Refusal>> {
        self.push_frame_in(Lane::Bulk, frame)
    }

    /// Queues `bytes` in the urgent lane: written before queued bulk data,
    /// as soon as no frame is in progress.
    ///
    /// # Errors
    ///
    /// As [`push`](Self::push), against the urgent lane's own limits.
    pub fn push_urgent(&mut self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes, Refusal>> {
        self.push_in(Lane::Urgent, bytes)
    }

    /// Queues the parts of `frame` in the urgent lane, kept together.
    ///
    /// # Errors
    ///
    /// As [`push_urgent`](Self::push_urgent); the frame comes back whole.
    // A refused frame comes back by value: boxing it would allocate on
    // every refusal, and refusals are how backpressure works.
    #[allow(clippy::result_large_err)]
    pub fn push_urgent_frame(&mut self, frame: Frame) -> Result<Ticket, Rejected<Frame, Refusal>> {
        self.push_frame_in(Lane::Urgent, frame)
    }

    /// Makes everything queued in the bulk lane so far go out before any
    /// urgent data, from now on: for a protocol switch, whose new
    /// protocol may answer at once on the urgent lane (a WebSocket's pong
    /// for a ping that came with the upgrade request) while the old one's
    /// last bytes (the `101 Switching Protocols`) still wait in the bulk
    /// lane. [`Conn::switch`](crate::Conn::switch) calls it.
    pub fn fence(&mut self) {
        self.fence = u32::try_from(self.bulk.ends.len()).unwrap_or(u32::MAX);
    }

    /// Whether a push was refused for room ([`Refusal::Full`]) since the
    /// last call, which forgets it. A protocol that could not queue a
    /// reply of its own (a pong) waits for room and reads nothing more
    /// until then: a driver whose write made room asks it again
    /// (`poll_event`) when this says so, even if no read comes.
    pub fn take_refused(&mut self) -> bool {
        core::mem::take(&mut self.refused)
    }

    /// Stops accepting pushes; what is queued stays and is drained as usual.
    /// Once [`is_flushed`](Self::is_flushed), the writer can shut down.
    pub fn close(&mut self) {
        self.closed = true;
    }

    /// Drops everything pending and closes the queue, for a writer that
    /// failed; returns how many pushes were dropped. Their tickets never
    /// complete.
    pub fn abort(&mut self) -> usize {
        let dropped = self.items();
        for lane in self.lanes_mut() {
            lane.entries.clear();
            lane.ends.clear();
            lane.staging.clear();
            lane.pending = 0;
        }
        self.plan = Plan::EMPTY;
        self.fence = 0;
        self.closed = true;
        dropped
    }

    /// Gives back the memory a flushed queue keeps for its next writes:
    /// the run buffer small writes are copied into (a 16 KiB block once a
    /// small write came) and the room of its lists of pending writes
    /// (which grow to the item limit in a burst). Returns whether it gave
    /// any back; a queue with bytes pending keeps everything.
    ///
    /// For a connection about to wait: the adapters call it when the queue
    /// is flushed and their reads found nothing, so an idle connection
    /// holds no write memory. The next small write allocates a run buffer
    /// again.
    pub fn shrink_to_fit(&mut self) -> bool {
        if !self.is_flushed() {
            return false;
        }
        let mut released = false;
        for lane in self.lanes_mut() {
            released |= lane.staging.capacity() > 0
                || lane.entries.capacity() > 0
                || lane.ends.capacity() > 0;
            lane.staging = BytesMut::new();
            lane.entries = VecDeque::new();
            lane.ends = VecDeque::new();
        }
        self.plan = Plan::EMPTY;
        released
    }

    /// What an adapter calls when the queue is flushed and the connection
    /// is about to wait: [`shrink_to_fit`](Self::shrink_to_fit), unless
    /// [`WriteQueueConfig::release_when_idle`] is off.
    pub fn release_idle(&mut self) -> bool {
        self.config.release_when_idle && self.shrink_to_fit()
    }

    /// A lane, if it exists (the urgent one is made on its first push).
    #[inline]
    fn lane(&self, lane: Lane) -> Option<&LaneQueue> {
        match lane {
            Lane::Bulk => Some(&self.bulk),
            Lane::Urgent => self.urgent.as_deref(),
        }
    }

    /// A lane, made if it does not exist yet.
    #[inline]
    fn lane_mut(&mut self, lane: Lane) -> &mut LaneQueue {
        match lane {
            Lane::Bulk => &mut self.bulk,
            Lane::Urgent => self.urgent.get_or_insert_with(Box::default),
        }
    }

    /// The lanes that exist.
    fn lanes_mut(&mut self) -> impl Iterator<Item = &mut LaneQueue> {
        core::iter::once(&mut self.bulk).chain(self.urgent.as_deref_mut())
    }

    /// A lane's entries (none for a lane not made yet).
    fn entries(&self, lane: Lane) -> &VecDeque<Bytes> {
        static NONE: VecDeque<Bytes> = VecDeque::new();
        self.lane(lane).map_or(&NONE, |q| &q.entries)
    }

    /// The limits of a lane: (items, bytes).
    #[inline(always)]
    fn limits(&self, lane: Lane) -> (usize, usize) {
        match lane {
            Lane::Bulk => (self.config.max_items, self.config.max_bytes),
            Lane::Urgent => (self.config.urgent_max_items, self.config.urgent_max_bytes),
        }
    }

    /// Whether `lane` takes a push of `len` bytes now; a refusal for room
    /// is remembered for [`take_refused`](Self::take_refused). Every push
    /// starts here, and gives its value back with the reason if refused.
    #[inline(always)]
    fn check(&mut self, lane: Lane, len: usize) -> Result<(), Refusal> {
        let admitted = self.admit(lane, len);
        self.refused |= matches!(admitted, Err(Refusal::Full(_)));
        admitted
    }

    #[inline(always)]
    fn admit(&self, lane: Lane, len: usize) -> Result<(), Refusal> {
        if self.closed {
            return Err(Refusal::Closed);
        }
        let (max_items, max_bytes) = self.limits(lane);
        let (items, pending) = self
            .lane(lane)
            .map_or((0, 0), |q| (q.ends.len(), q.pending));
        // A push larger than the byte limit still goes into an empty lane:
        // a frame is never refused for ever.
        if items >= max_items || (pending > 0 && pending.saturating_add(len) > max_bytes) {
            return Err(Refusal::Full(lane));
        }
        Ok(())
    }

    #[inline(always)]
    fn push_in(&mut self, lane: Lane, bytes: Bytes) -> Result<Ticket, Rejected<Bytes, Refusal>> {
        if let Err(e) = self.check(lane, bytes.len()) {
            return Err(Rejected::new(e, bytes));
        }
        let ticket = self.account(lane, bytes.len());
        if !bytes.is_empty() {
            self.append(lane, bytes);
        }
        Ok(ticket)
    }

    /// Queues a copy of `bytes`: into the lane's run buffer, whatever
    /// their length and [`coalesce_below`](WriteQueueConfig::coalesce_below).
    #[inline(always)]
    pub(crate) fn push_copy_in<'a>(
        &mut self,
        lane: Lane,
        bytes: &'a [u8],
    ) -> Result<Ticket, Rejected<&'a [u8], Refusal>> {
        if let Err(e) = self.check(lane, bytes.len()) {
            return Err(Rejected::new(e, bytes));
        }
        let ticket = self.account(lane, bytes.len());
        if !bytes.is_empty() {
            self.stage(lane, bytes);
        }
        Ok(ticket)
    }

    /// Queues `len` bytes that `fill` writes into the lane's run buffer
    /// (appending exactly `len` bytes to it): a push built in place, such
    /// as a WebSocket frame whose header and payload (masked by a client)
    /// are written straight into the run buffer. `value` is what `fill`
    /// writes from, and what comes back if the push is refused.
    #[inline(always)]
    pub(crate) fn push_filled<T>(
        &mut self,
        lane: Lane,
        value: T,
        len: usize,
        fill: impl FnOnce(T, &mut BytesMut),
    ) -> Result<Ticket, Rejected<T, Refusal>> {
        if let Err(e) = self.check(lane, len) {
            return Err(Rejected::new(e, value));
        }
        let ticket = self.account(lane, len);
        if len > 0 {
            let run = self.run_buffer(lane, len);
            let before = run.len();
            fill(value, run);
            debug_assert_eq!(
                run.len() - before,
                len,
                "a fill wrote other than its length"
            );
        }
        Ok(ticket)
    }

    // A refused frame comes back by value: boxing it would allocate on
    // every refusal, and refusals are how backpressure works.
    #[allow(clippy::result_large_err)]
    #[inline(always)]
    fn push_frame_in(
        &mut self,
        lane: Lane,
        frame: Frame,
    ) -> Result<Ticket, Rejected<Frame, Refusal>> {
        if let Err(e) = self.check(lane, frame.len()) {
            return Err(Rejected::new(e, frame));
        }
        Ok(self.append_frame(lane, frame))
    }

    /// Queues a connection's last frame (a WebSocket close) in the bulk
    /// lane, after everything queued, whatever the lane's limits: it must
    /// not overtake the data before it, and waiting for room could wait
    /// for ever on a peer that stopped reading (the connection's linger
    /// deadline ends that). A protocol's farewell is small (a close frame
    /// is at most 131 bytes), and there is one per connection, so the
    /// lane goes over its limits by that much at most. A closed queue takes
    /// it too: the application's [`close`](Self::close) ends the
    /// application's pushes, not the protocol's last frame (the connection
    /// stops offering it once its write side ended).
    pub(crate) fn push_last_frame(&mut self, frame: Frame) -> Ticket {
        self.append_frame(Lane::Bulk, frame)
    }

    /// Counts and appends an admitted frame.
    #[inline(always)]
    fn append_frame(&mut self, lane: Lane, frame: Frame) -> Ticket {
        let ticket = self.account(lane, frame.len());
        let (head, body, tail) = frame.into_raw();
        self.append_part(lane, head);
        if !body.is_empty() {
            self.append(lane, body);
        }
        self.append_part(lane, tail);
        ticket
    }

    /// Counts an admitted push of `len` bytes and names it.
    #[inline]
    fn account(&mut self, lane: Lane, len: usize) -> Ticket {
        let q = self.lane_mut(lane);
        q.pushed += len as u64;
        let ticket = Ticket {
            lane,
            end: q.pushed,
        };
        // A push with nothing before it and nothing in it is complete
        // already; any other ends where its last byte (or the last pending
        // byte) ends.
        if q.pending > 0 || len > 0 {
            q.pending += len;
            q.ends.push_back(ticket.end);
        }
        ticket
    }

    /// Queues one non-empty payload: copied into the lane's run buffer when
    /// it is small, else kept as it is.
    #[inline(always)]
    fn append(&mut self, lane: Lane, bytes: Bytes) {
        if bytes.len() < self.config.coalesce_below {
            self.stage(lane, &bytes);
        } else {
            let q = self.lane_mut(lane);
            q.seal();
            q.entries.push_back(bytes);
        }
    }

    /// Queues a part of framing: inline framing is always copied into the
    /// run buffer (an `iovec` of its own would cost more than its bytes).
    #[inline(always)]
    fn append_part(&mut self, lane: Lane, part: Part) {
        match part {
            Part::Inline { .. } if part.as_slice().is_empty() => {}
            Part::Inline { .. } => self.stage(lane, part.as_slice()),
            Part::Shared(bytes) if bytes.is_empty() => {}
            Part::Shared(bytes) => self.append(lane, bytes),
        }
    }

    /// Copies bytes into the lane's run buffer. The bulk lane's buffer grows
    /// in blocks of 16 KiB (one block serves hundreds of small writes); the
    /// urgent lane's in blocks of 1 KiB, its writes being pings and closes.
    #[inline(always)]
    fn stage(&mut self, lane: Lane, bytes: &[u8]) {
        self.run_buffer(lane, bytes.len()).extend_from_slice(bytes);
    }

    /// The lane's run buffer, with room for `len` more bytes of one push.
    #[inline(always)]
    fn run_buffer(&mut self, lane: Lane, len: usize) -> &mut BytesMut {
        let limit = self.config.coalesce_limit;
        let block = match lane {
            Lane::Bulk => 16 * 1024,
            Lane::Urgent => 1024,
        };
        self.lane_mut(lane).room(len, limit, block)
    }
}
