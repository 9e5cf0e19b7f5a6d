//! The decoder model every codec follows.

use alloc::boxed::Box;
use bytes::Bytes;

use crate::error::Error;
use crate::recv_buf::RecvBuf;

/// A state machine that cuts items out of a [`RecvBuf`].
///
/// # How to drive it
///
/// ```text
///   bytes arrive ──> buf.feed(..) / buf.spare_mut() + buf.commit(n)
///                      │
///                      v
///   loop { decoder.decode(&mut buf) }
///         Ok(Some(item))  ─> use it, call again
///         Ok(None)        ─> need more bytes: go back and read
///         Err(e)          ─> final: close; buf.take_tail() has the rest
///
///   end of stream ──> loop { decoder.decode_eof(&mut buf) }
///         Ok(Some(item))  ─> a frame that was complete, call again
///         Ok(None)        ─> clean end: every byte was a frame
///         Err(Truncated)  ─> the stream stopped inside a frame; the
///                            error carries those bytes
/// ```
///
/// # Contract
///
/// Every codec in this crate keeps these promises, and its tests prove them:
///
/// - **Chunking invariance.** Any split of the input into feeds, down to one
///   byte at a time, gives the same items and the same final outcome as the
///   whole input at once.
/// - **Nothing is lost.** Each consumed byte belongs to exactly one item (or
///   that item's framing overhead); what is not consumed stays in the buffer.
/// - **Bounded.** A decoder never reserves memory for what a peer declares;
///   only arriving bytes grow the buffer.
/// - **Final errors.** After an `Err`, every later call returns the same
///   error and consumes nothing.
///
/// A decoder remembers what it already learned about the bytes at the front
/// of the buffer (how far it searched, a parsed header). If the caller
/// consumes bytes behind its back, it notices (by the buffer's
/// [`offset`](RecvBuf::offset)) and starts over.
pub trait Decoder {
    /// What one call produces.
    type Item;

    /// Cuts the next item off the front of `buf`.
    ///
    /// Returns `Ok(None)` when the buffer holds no complete item yet.
    ///
    /// # Errors
    ///
    /// A typed, final [`Error`] when the bytes break the format or a limit.
    fn decode(&mut self, buf: &mut RecvBuf) -> Result<Option<Self::Item>, Error>;

    /// Like [`decode`](Self::decode), for when the stream has ended and no
    /// more bytes will come.
    ///
    /// Returns the items that are still complete one by one, then `Ok(None)`
    /// if nothing is left.
    ///
    /// # Errors
    ///
    /// As `decode`, plus [`Error::Truncated`] carrying the bytes of an
    /// incomplete last frame (a codec may document that it returns such
    /// bytes as a last item instead).
    fn decode_eof(&mut self, buf: &mut RecvBuf) -> Result<Option<Self::Item>, Error>;

    /// An iterator over the items `buf` holds now; it ends when more bytes
    /// are needed, and after yielding an error.
    ///
    /// ```
    /// use cleave_proto::{Decoder, Lines, RecvBuf};
    ///
    /// let mut buf = RecvBuf::new();
    /// buf.feed(b"one\ntwo\nthr")?;
    /// let mut lines = Lines::new();
    /// let got: Vec<_> = lines.frames(&mut buf).collect::<Result<_, _>>()?;
    /// assert_eq!(got, ["one", "two"]);
    /// assert_eq!(buf.peek(), b"thr");
    /// # Ok::<(), cleave_proto::Error>(())
    /// ```
    fn frames<'a>(&'a mut self, buf: &'a mut RecvBuf) -> Frames<'a, Self>
    where
        Self: Sized,
    {
        Frames {
            decoder: self,
            buf,
            done: false,
        }
    }
}

/// Iterator returned by [`Decoder::frames`].
#[derive(Debug)]
pub struct Frames<'a, D> {
    decoder: &'a mut D,
    buf: &'a mut RecvBuf,
    done: bool,
}

impl<D: Decoder> Iterator for Frames<'_, D> {
    type Item = Result<D::Item, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.decoder.decode(self.buf) {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

impl<D: Decoder> core::iter::FusedIterator for Frames<'_, D> {}

/// Where a complete frame lies at the front of the buffer: `skip` bytes of
/// framing, the frame's `len` bytes, `trail` bytes of framing.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cut {
    pub(crate) skip: usize,
    pub(crate) len: usize,
    pub(crate) trail: usize,
}

/// What one step of a codec found. Errors are stored in the codec's
/// [`Latch`] where they are found, and the frame is cut only in `answer`:
/// the hot path builds the `Bytes` once, in place, instead of moving it
/// through layers of `Result`s.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Step {
    Frame(Cut),
    NeedMore,
    Failed,
}

/// Makes a decoder's errors final, and turns a decoder that is stuck on a
/// full buffer into an error instead of an endless "need more".
#[derive(Clone, Debug, Default)]
pub(crate) struct Latch {
    error: Option<Error>,
}

impl Latch {
    /// The stored error, if any.
    #[inline(always)]
    pub(crate) fn check(&self) -> Result<(), Error> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(*boxed(e)),
        }
    }

    /// Turns a step into `decode`'s answer.
    #[inline(always)]
    pub(crate) fn answer(&mut self, step: Step, buf: &mut RecvBuf) -> Result<Option<Bytes>, Error> {
        match step {
            Step::Frame(cut) => Ok(Some(buf.split_frame(cut.skip, cut.len, cut.trail))),
            Step::NeedMore if buf.is_full() => {
                self.store(buf.over_limit(buf.len() as u64 + 1));
                self.check().map(|()| None)
            }
            Step::NeedMore => Ok(None),
            Step::Failed => self.check().map(|()| None),
        }
    }

    /// Turns a step into `decode_eof`'s answer: as `answer`, except that
    /// needing more means the stream ended inside a frame (a full buffer is
    /// no longer a reason to fail: nothing more is coming).
    #[inline]
    pub(crate) fn answer_eof(
        &mut self,
        step: Step,
        buf: &mut RecvBuf,
    ) -> Result<Option<Bytes>, Error> {
        match step {
            Step::NeedMore => self.finish(buf),
            step => self.answer(step, buf),
        }
    }

    /// Forgets a stored error that `forget` picks (a decoder switching to
    /// a mode in which that error is not one).
    pub(crate) fn forget(&mut self, forget: impl Fn(&Error) -> bool) {
        if self.error.as_ref().is_some_and(forget) {
            self.error = None;
        }
    }

    /// Stores `e`, for a step that found it.
    #[inline]
    pub(crate) fn failed(&mut self, e: Error) -> Step {
        self.store(e);
        Step::Failed
    }

    #[cold]
    #[inline(never)]
    fn store(&mut self, e: Error) {
        self.error = Some(e);
    }

    /// End of stream with no complete item left: clean if the buffer is
    /// empty, otherwise the leftover bytes are an incomplete frame.
    pub(crate) fn finish<T>(&mut self, buf: &mut RecvBuf) -> Result<Option<T>, Error> {
        if buf.is_empty() {
            return Ok(None);
        }
        let offset = buf.offset();
        let partial = buf.take_tail();
        self.store(Error::Truncated { partial, offset });
        self.check().map(|()| None)
    }
}

/// A copy of `e` on the heap, made out of line.
///
/// Errors are cloned by this cold call and come back as a pointer, on
/// purpose: an `Error` returned by value from a call is written through
/// memory, and once one path of `decode` does that, the frames on the hot
/// path go through memory too and the caller's reload of each stalls on
/// store forwarding (measured: +60% on 24-byte frames). Errors are final
/// and rare; one allocation each is nothing.
#[cold]
#[inline(never)]
fn boxed(e: &Error) -> Box<Error> {
    Box::new(e.clone())
}

/// The frame whose header says it is `head + body` bytes long, once all of
/// it has arrived, less its first `skip` bytes (`skip <= head`).
///
/// A frame that could never fit in the buffer is an error right away,
/// instead of a wait that can only end in a full buffer. Headers are cheap
/// to parse, so nothing is remembered between calls: a frame arriving in
/// pieces has its header read again, and no state can go stale.
#[inline(always)]
pub(crate) fn complete(
    buf: &RecvBuf,
    head: usize,
    body: u64,
    skip: usize,
    latch: &mut Latch,
) -> Step {
    let total = (head as u64).saturating_add(body);
    let Some(total) = usize::try_from(total)
        .ok()
        .filter(|&total| total <= buf.config().get_max_buffered())
    else {
        return latch.failed(buf.over_limit(total));
    };
    if buf.len() < total {
        return Step::NeedMore;
    }
    Step::Frame(Cut {
        skip,
        len: total - skip,
        trail: 0,
    })
}
