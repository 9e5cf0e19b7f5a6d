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
    /// use cleave::{Decoder, Lines, RecvBuf};
    ///
    /// let mut buf = RecvBuf::new();
    /// buf.feed(b"one\ntwo\nthr")?;
    /// let mut lines = Lines::new();
    /// let got: Vec<_> = lines.frames(&mut buf).collect::<Result<_, _>>()?;
    /// assert_eq!(got, ["one", "two"]);
    /// assert_eq!(buf.peek(), b"thr");
    /// # Ok::<(), cleave::Error>(())
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
/// Errors leave `decode` through this box on purpose: an `Error` returned
/// from a call goes through memory, and a frame merged with it into one
/// `Result` then costs a store-forwarding stall on every frame (measured:
/// +60% on 24-byte frames). Errors are final and rare; the box is not.
#[cold]
#[inline(never)]
fn boxed(e: &Error) -> Box<Error> {
    Box::new(e.clone())
}

/// What a length-delimited decoder learned from a header, kept only while
/// the frame waits for more bytes, so that a frame arriving in pieces does
/// not have its header parsed again.
///
/// A frame that is complete when its header is parsed leaves no trace here:
/// the hot path stores nothing per frame.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Header {
    /// Stream offset of the waiting frame, its header length and its body
    /// length (total = head + body).
    waiting: Option<(u64, usize, usize)>,
}

impl Header {
    /// The header remembered for the frame at the front of `buf`, if any.
    #[inline]
    pub(crate) fn get(&self, buf: &RecvBuf) -> Option<(usize, usize)> {
        match self.waiting {
            Some((at, head, body)) if at == buf.offset() => Some((head, body)),
            _ => None,
        }
    }

    /// The frame with this header, once all of it has arrived, less its
    /// first `skip` bytes; until then the header is remembered.
    ///
    /// A frame that could never fit in the buffer is an error right away,
    /// instead of a wait that can only end in a full buffer.
    #[inline]
    pub(crate) fn complete(
        &mut self,
        buf: &RecvBuf,
        (head, body): (usize, usize),
        skip: usize,
        latch: &mut Latch,
    ) -> Step {
        let total = head.saturating_add(body);
        if total > buf.config().max_buffered_len() {
            return latch.failed(buf.over_limit(total as u64));
        }
        if buf.len() < total {
            self.waiting = Some((buf.offset(), head, body));
            return Step::NeedMore;
        }
        Step::Frame(Cut {
            skip,
            len: total - skip,
            trail: 0,
        })
    }
}
