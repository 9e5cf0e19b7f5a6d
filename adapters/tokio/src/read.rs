//! The read drivers: bytes go from an `AsyncRead` straight into the core's
//! `RecvBuf` (no second copy), and come out as frames or session events.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::{Decoder, Event, RecvBuf, RecvBufConfig, Session};
use futures_core::Stream;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::error::ReadError;

/// Reads once from `io` into the buffer's spare room. `Ready(Ok(0))` is the
/// end of the stream.
///
/// Memory follows readiness: a buffer that holds no block first asks the
/// reader with no room at all, which tokio's sockets answer `Pending`
/// until they are readable (other readers answer at once), so a silent
/// connection allocates nothing; and when a read finds nothing, the buffer
/// gives back what it does not need before the task waits.
pub(crate) fn poll_fill<R: AsyncRead + Unpin>(
    io: &mut R,
    buf: &mut RecvBuf,
    cx: &mut Context<'_>,
) -> Poll<Result<usize, ReadError>> {
    if buf.capacity() == 0 {
        let mut probe = ReadBuf::new(&mut []);
        if let Err(e) = ready!(Pin::new(&mut *io).poll_read(cx, &mut probe)) {
            return Poll::Ready(Err(e.into()));
        }
    }
    let spare = buf.spare_mut()?;
    let mut read = ReadBuf::new(spare);
    match Pin::new(io).poll_read(cx, &mut read) {
        Poll::Ready(Ok(())) => {
            let n = read.filled().len();
            buf.commit(n)?;
            Poll::Ready(Ok(n))
        }
        Poll::Ready(Err(e)) => {
            buf.commit(0)?;
            Poll::Ready(Err(e.into()))
        }
        Poll::Pending => {
            buf.commit(0)?;
            buf.release_idle();
            Poll::Pending
        }
    }
}

/// A `Stream` of a decoder's frames read from an `AsyncRead`.
///
/// Frames come out as the decoder cuts them; at the end of the stream an
/// incomplete last frame comes out as
/// [`ReadError::Protocol`]`(`[`cleave_proto::Error::Truncated`]`)` carrying its
/// bytes, then the stream ends. Errors are final.
/// [`into_parts`](Self::into_parts) hands back the reader, the buffer (with
/// any unread bytes) and the decoder, for a protocol switch.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), cleave_tokio::ReadError> {
/// use cleave_proto::Lines;
/// use cleave_tokio::FrameReader;
/// use futures_util::StreamExt;
///
/// let input: &[u8] = b"one\ntwo\n";
/// let lines: Vec<_> = FrameReader::new(input, Lines::new()).collect().await;
/// assert_eq!(lines.len(), 2);
/// assert_eq!(&lines[1].as_ref().unwrap()[..], b"two");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct FrameReader<R, D> {
    io: R,
    buf: RecvBuf,
    decoder: D,
    eof: bool,
    done: bool,
}

impl<R: AsyncRead + Unpin, D: Decoder> FrameReader<R, D> {
    /// A reader with the default receive buffer.
    pub fn new(io: R, decoder: D) -> Self {
        Self::with_config(io, decoder, RecvBufConfig::default())
    }

    /// A reader with the given receive buffer limits.
    pub fn with_config(io: R, decoder: D, config: RecvBufConfig) -> Self {
        Self {
            io,
            buf: RecvBuf::with_config(config),
            decoder,
            eof: false,
            done: false,
        }
    }

    /// The buffer.
    pub fn buf(&self) -> &RecvBuf {
        &self.buf
    }

    /// The next frame already in the buffer, without reading: `None` when
    /// the buffer holds no complete frame (or the stream is over).
    ///
    /// A same-task server answers every frame that arrived together and
    /// then writes all the answers at once:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use cleave_proto::{Encoder, Lines};
    /// use cleave_tokio::{FrameReader, Writer};
    /// use futures_util::StreamExt;
    ///
    /// let input: &[u8] = b"one\ntwo\nthree\n";
    /// let mut lines = FrameReader::new(input, Lines::new());
    /// let mut writer = Writer::new(Vec::new());
    /// let mut encoder = Lines::new();
    /// while let Some(line) = lines.next().await {
    ///     writer.send_frame(encoder.encode(line?)?).await?;
    ///     while let Some(line) = lines.next_buffered() {
    ///         writer.send_frame(encoder.encode(line?)?).await?;
    ///     }
    ///     writer.flush().await?; // one write for the three answers
    /// }
    /// assert_eq!(writer.get_ref(), b"one\ntwo\nthree\n");
    /// # Ok(())
    /// # }
    /// ```
    pub fn next_buffered(&mut self) -> Option<Result<D::Item, ReadError>> {
        if self.done {
            return None;
        }
        let decoded = if self.eof {
            self.decoder.decode_eof(&mut self.buf)
        } else {
            self.decoder.decode(&mut self.buf)
        };
        match decoded {
            Ok(Some(item)) => Some(Ok(item)),
            Ok(None) => {
                self.done = self.eof;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e.into()))
            }
        }
    }

    /// The reader, the buffer (with the bytes not yet decoded) and the
    /// decoder.
    pub fn into_parts(self) -> (R, RecvBuf, D) {
        (self.io, self.buf, self.decoder)
    }
}

impl<R: AsyncRead + Unpin, D: Decoder + Unpin> Stream for FrameReader<R, D> {
    type Item = Result<D::Item, ReadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.done {
                return Poll::Ready(None);
            }
            let decoded = if this.eof {
                this.decoder.decode_eof(&mut this.buf)
            } else {
                this.decoder.decode(&mut this.buf)
            };
            match decoded {
                Ok(Some(item)) => return Poll::Ready(Some(Ok(item))),
                Ok(None) if this.eof => {
                    this.done = true;
                    return Poll::Ready(None);
                }
                Ok(None) => {}
                Err(e) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
            }
            match poll_fill(&mut this.io, &mut this.buf, cx) {
                Poll::Ready(Ok(0)) => this.eof = true,
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    this.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// A `Stream` of a [`Session`]'s events, read from an `AsyncRead`, with
/// the session's deadline (the router's inspect delay) on tokio's clock.
///
/// After a [`Event::Tunnel`] hand-off, take the reader back with
/// [`into_parts`](Self::into_parts) and splice it (see
/// [`tunnel`](crate::tunnel)); or keep polling, and raw bytes keep coming
/// as `Tunnel` events.
#[derive(Debug)]
pub struct SessionReader<R, T, D: Decoder> {
    io: R,
    session: Session<T, D>,
    start: Instant,
    sleep: Option<Pin<Box<Sleep>>>,
    eof: bool,
    failed: bool,
}

impl<R: AsyncRead + Unpin, T: Clone, D: Decoder> SessionReader<R, T, D> {
    /// Drives `session` with the bytes `io` gives, from now.
    pub fn new(io: R, session: Session<T, D>) -> Self {
        Self {
            io,
            session,
            start: Instant::now(),
            sleep: None,
            eof: false,
            failed: false,
        }
    }

    /// The session.
    pub fn session_mut(&mut self) -> &mut Session<T, D> {
        &mut self.session
    }

    /// The reader and the session (its buffer holds what was read and not
    /// handed out).
    pub fn into_parts(self) -> (R, Session<T, D>) {
        (self.io, self.session)
    }

    fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Arms the timer for the session's deadline; `Ready` if it passed.
    fn poll_deadline(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(deadline) = self.session.deadline() else {
            self.sleep = None;
            return Poll::Pending;
        };
        // A delay past what `Instant` can hold is no deadline at all.
        let Some(at) = self.start.checked_add(deadline) else {
            self.sleep = None;
            return Poll::Pending;
        };
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(at)));
        if sleep.deadline() != at {
            sleep.as_mut().reset(at);
        }
        sleep.as_mut().poll(cx)
    }
}

impl<R, T, D> Stream for SessionReader<R, T, D>
where
    R: AsyncRead + Unpin,
    T: Clone + Unpin,
    D: Decoder + Unpin,
{
    type Item = Result<Event<T, D::Item>, ReadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if this.failed {
                return Poll::Ready(None);
            }
            match this.session.poll_event(this.now()) {
                Ok(Some(event)) => return Poll::Ready(Some(Ok(event))),
                Ok(None) if this.session.is_closed() || this.eof => return Poll::Ready(None),
                Ok(None) => {}
                Err(e) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
            }
            match poll_fill(&mut this.io, this.session.recv_buf(), cx) {
                Poll::Ready(Ok(0)) => {
                    this.eof = true;
                    this.session.handle_eof();
                }
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => {
                    this.failed = true;
                    return Poll::Ready(Some(Err(e)));
                }
                Poll::Pending => match this.poll_deadline(cx) {
                    Poll::Ready(()) => {} // the session decides by the clock
                    Poll::Pending => return Poll::Pending,
                },
            }
        }
    }
}
