//! The decoder model every codec follows.

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

/// Makes a decoder's errors final, and turns a decoder that is stuck on a
/// full buffer into an error instead of an endless "need more".
#[derive(Clone, Debug, Default)]
pub(crate) struct Latch {
    error: Option<Error>,
}

impl Latch {
    /// The stored error, if any.
    #[inline]
    pub(crate) fn check(&self) -> Result<(), Error> {
        match &self.error {
            None => Ok(()),
            Some(e) => Err(e.clone()),
        }
    }

    /// Records the outcome of one decoding step.
    #[inline]
    pub(crate) fn settle<T>(
        &mut self,
        step: Result<Option<T>, Error>,
        buf: &RecvBuf,
    ) -> Result<Option<T>, Error> {
        match step {
            Ok(None) if buf.is_full() => self.fail(buf.over_limit(buf.len() as u64 + 1)),
            Err(e) => self.fail(e),
            ok => ok,
        }
    }

    /// Stores `e` and returns it.
    pub(crate) fn fail<T>(&mut self, e: Error) -> Result<T, Error> {
        self.error = Some(e.clone());
        Err(e)
    }

    /// End of stream with no complete item left: clean if the buffer is
    /// empty, otherwise the leftover bytes are an incomplete frame.
    pub(crate) fn finish<T>(&mut self, buf: &mut RecvBuf) -> Result<Option<T>, Error> {
        if buf.is_empty() {
            return Ok(None);
        }
        let offset = buf.offset();
        let partial = buf.take_tail();
        self.fail(Error::Truncated { partial, offset })
    }
}

/// What a length-delimited decoder learned from a header, kept so that a
/// frame arriving in pieces does not have its header parsed again.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Header {
    /// Stream offset of the frame the header belongs to.
    at: u64,
    /// Bytes from the start of the frame to the end of its header.
    head: usize,
    /// Bytes after the header (total = head + body).
    body: usize,
    valid: bool,
}

impl Header {
    /// The header remembered for the frame at the front of `buf`, if any.
    #[inline]
    pub(crate) fn get(&self, buf: &RecvBuf) -> Option<(usize, usize)> {
        (self.valid && self.at == buf.offset()).then_some((self.head, self.body))
    }

    #[inline]
    pub(crate) fn set(&mut self, buf: &RecvBuf, head: usize, body: usize) {
        *self = Self {
            at: buf.offset(),
            head,
            body,
            valid: true,
        };
    }

    /// Cuts the frame whose header is known off `buf`, leaving out its first
    /// `skip` bytes (`skip <= head`), once all of it has arrived.
    ///
    /// A frame that could never fit in the buffer is an error right away,
    /// instead of a wait that can only end in a full buffer.
    #[inline]
    pub(crate) fn take(
        &mut self,
        buf: &mut RecvBuf,
        skip: usize,
    ) -> Result<Option<bytes::Bytes>, Error> {
        let total = self.head.saturating_add(self.body);
        if total > buf.config().max_buffered_len() {
            return Err(buf.over_limit(total as u64));
        }
        if buf.len() < total {
            return Ok(None);
        }
        self.valid = false;
        buf.advance(skip)?;
        buf.split_to(total - skip).map(Some)
    }
}
