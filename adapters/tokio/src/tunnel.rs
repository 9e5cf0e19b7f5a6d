//! The raw tunnel after a hand-off: both directions copied in one future,
//! a clean end passed on as a half-close, a failure passed on as a reset,
//! and an optional idle timeout.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use cleave_proto::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::reset::Reset;

/// Each direction's copy buffer. tokio's default (8 KiB) made twice the
/// system calls of this on bulk tunnels (see the stream harness).
const BUF_SIZE: usize = 16 * 1024;

/// Configuration of a [`tunnel_with`].
///
/// ```
/// use std::time::Duration;
/// use cleave_tokio::TunnelConfig;
///
/// // HAProxy's `timeout tunnel`, as the demo proxy sets it.
/// let config = TunnelConfig::default().idle(Some(Duration::from_secs(300)));
/// assert_eq!(config.get_idle(), Some(Duration::from_secs(300)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TunnelConfig {
    idle: Option<Duration>,
}

impl TunnelConfig {
    /// How long no byte may move either way before the tunnel ends with a
    /// `TimedOut` error (both streams left to reset). Default: none, a
    /// tunnel waits as long as its peers do. A connection's
    /// [`Timeouts::get_tunnel_idle`](cleave_proto::Timeouts::get_tunnel_idle)
    /// is the value to pass on.
    #[must_use]
    pub fn idle(mut self, after: Option<Duration>) -> Self {
        self.idle = after;
        self
    }

    /// The idle timeout.
    #[must_use]
    pub fn get_idle(&self) -> Option<Duration> {
        self.idle
    }
}

/// Writes `tail` (the bytes the session had read past its last frame) to
/// `backend` first, then copies both ways until both directions are done.
///
/// ```text
///   tail ──────────────────────────────> backend   (written and flushed first)
///   client ──read──> 16 KiB ──write────> backend   } both polled in this
///   client <──write── 16 KiB <──read──── backend   } one future
/// ```
///
/// - **Nothing is lost.** The tail goes out before anything read later,
///   and what one direction has read is written, in order, before it
///   reports a read error (tokio's `copy_bidirectional` drops it).
/// - **A clean end stays a half-close.** When one side ends its stream,
///   the other side's writer is flushed and its write half shut down
///   (a FIN); the other direction goes on until it ends too.
/// - **A failure stays a failure.** On any error, on either side, reading
///   or writing, what the other direction can still move at once (until
///   its reader or writer would block: a backend's answer sent just
///   before the reset that failed the upload) goes first, with no FIN
///   after it; then both streams are set to [reset on close](Reset) (its
///   own errors are ignored) and the first error is returned. A
///   `splice` tunnel's pipe moves nothing more then. Signals
///   (`Interrupted`) are retried, not failures. When the caller
///   then drops the streams, each peer sees a reset, not a clean end: a
///   backend that resets after half a response gives the client a reset
///   after that half, and a client that resets mid-upload gives the
///   backend a reset after what arrived, so neither mistakes a cut-off
///   stream for a complete one.
///
/// A reset discards what is still in the kernel's send buffer, as any RST
/// does: after an error, a peer gets a prefix of what was written to its
/// socket, then the reset. On a read error, the bytes already read are
/// written first on a best-effort basis: if the peer does not read them,
/// the tunnel waits for it, as it would without the error. Bound that, and
/// silent peers, with [`tunnel_with`]'s idle timeout. A tunnel future
/// dropped before it ends resets nothing: call [`Reset::reset_on_close`]
/// on the streams before dropping them if the peers must see a reset then
/// too.
///
/// Returns the bytes written each way: (to the backend, tail included; to
/// the client).
///
/// # Errors
///
/// The first error either stream gave. Both streams are then set to reset
/// on close: **drop them, do not shut them down** (a shutdown would send
/// the FIN that the reset is there to prevent).
pub async fn tunnel<A, B>(client: &mut A, backend: &mut B, tail: Bytes) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Reset + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Reset + Unpin + ?Sized,
{
    tunnel_with(client, backend, tail, TunnelConfig::default()).await
}

/// [`tunnel`], with its configuration: an idle timeout ends a tunnel in
/// which no byte moved either way for that long (the tail's write
/// included), as a failure: both streams are left to reset on close and
/// the error is `TimedOut`.
///
/// ```no_run
/// # async fn splice(mut client: tokio::net::TcpStream, mut backend: tokio::net::TcpStream) -> std::io::Result<()> {
/// use std::time::Duration;
/// use cleave_proto::Bytes;
/// use cleave_tokio::{tunnel_with, TunnelConfig};
///
/// let config = TunnelConfig::default().idle(Some(Duration::from_secs(300)));
/// match tunnel_with(&mut client, &mut backend, Bytes::new(), config).await {
///     Ok((up, down)) => println!("{up} bytes up, {down} down"),
///     Err(e) if e.kind() == std::io::ErrorKind::TimedOut => println!("idle: both reset"),
///     Err(e) => println!("failed: {e}"),
/// }
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// As [`tunnel`]; `TimedOut` when the idle timeout ran out.
pub async fn tunnel_with<A, B>(
    client: &mut A,
    backend: &mut B,
    tail: Bytes,
    config: TunnelConfig,
) -> io::Result<(u64, u64)>
where
    A: AsyncRead + AsyncWrite + Reset + Unpin + ?Sized,
    B: AsyncRead + AsyncWrite + Reset + Unpin + ?Sized,
{
    // The tail is the first bytes up, then flushed: a buffering backend (a
    // `BufWriter`, a TLS stream) must pass it on now, as the client may
    // wait for the answer to it.
    let (up, down) = (Direction::with_tail(tail), Direction::new());
    let result = both_ways(client, backend, up, down, config.idle.map(Idle::new)).await;
    reset_both_on_error(result, client, backend)
}

/// After a failed tunnel, both streams are set to reset on close.
pub(crate) fn reset_both_on_error<A, B>(
    result: io::Result<(u64, u64)>,
    client: &A,
    backend: &B,
) -> io::Result<(u64, u64)>
where
    A: Reset + ?Sized,
    B: Reset + ?Sized,
{
    if result.is_err() {
        // Best effort: the error that matters is the one that got us here.
        let _ = client.reset_on_close();
        let _ = backend.reset_on_close();
    }
    result
}

/// The idle timer: fires once no byte moved for `after`.
pub(crate) struct Idle {
    after: Duration,
    /// When a byte last moved.
    active: Instant,
    sleep: Pin<Box<Sleep>>,
}

impl Idle {
    pub(crate) fn new(after: Duration) -> Self {
        let active = Instant::now();
        Self {
            after,
            active,
            sleep: Box::pin(tokio::time::sleep_until(Self::due(active, after))),
        }
    }

    /// A timeout past what `Instant` holds is a very long one.
    fn due(active: Instant, after: Duration) -> Instant {
        active
            .checked_add(after)
            .unwrap_or_else(|| active + Duration::from_secs(86_400 * 365 * 30))
    }

    /// `Ready` once the tunnel has been idle for the timeout; `moved` says
    /// whether bytes moved since the last call.
    fn poll(&mut self, cx: &mut Context<'_>, moved: bool) -> Poll<()> {
        if moved {
            // The timer is pushed back only when it fires: no timer work
            // per read.
            self.active = Instant::now();
        }
        loop {
            ready!(self.sleep.as_mut().poll(cx));
            let due = Self::due(self.active, self.after);
            if due <= self.sleep.deadline() {
                return Poll::Ready(());
            }
            self.sleep.as_mut().reset(due);
        }
    }
}

/// One direction of a tunnel: moves bytes from a reader to a writer.
pub(crate) trait Move<R: ?Sized, W: ?Sized> {
    /// Moves until the reader ends (`Ok(bytes written)`, the writer shut
    /// down) or either side fails.
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
    ) -> Poll<io::Result<u64>>;

    /// After the other direction failed: moves what can be moved now
    /// (until the reader or the writer would block), without ending the
    /// writer, since the end a read finds then is no clean one. What it
    /// moves goes before the reset; its own result adds nothing to the
    /// failure.
    fn poll_last(&mut self, cx: &mut Context<'_>, reader: &mut R, writer: &mut W);

    /// Whether bytes moved since the last call.
    fn take_moved(&mut self) -> bool;
}

/// Both directions, polled in one future, until both end or one fails (or
/// the tunnel idles out).
pub(crate) async fn both_ways<A, B, U, D>(
    client: &mut A,
    backend: &mut B,
    mut up: U,
    mut down: D,
    mut idle: Option<Idle>,
) -> io::Result<(u64, u64)>
where
    A: ?Sized,
    B: ?Sized,
    U: Move<A, B>,
    D: Move<B, A>,
{
    let (mut up_done, mut down_done) = (None, None);
    poll_fn(|cx| {
        // A failure on one way ends the tunnel, but what the other way can
        // still move goes first: a backend's answer sent just before the
        // reset that failed the upload, say.
        if up_done.is_none() {
            match up.poll_move(cx, &mut *client, &mut *backend) {
                Poll::Ready(Ok(n)) => up_done = Some(n),
                Poll::Ready(Err(e)) => {
                    if down_done.is_none() {
                        down.poll_last(cx, &mut *backend, &mut *client);
                    }
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {}
            }
        }
        if down_done.is_none() {
            match down.poll_move(cx, &mut *backend, &mut *client) {
                Poll::Ready(Ok(n)) => down_done = Some(n),
                Poll::Ready(Err(e)) => {
                    if up_done.is_none() {
                        up.poll_last(cx, &mut *client, &mut *backend);
                    }
                    return Poll::Ready(Err(e));
                }
                Poll::Pending => {}
            }
        }
        if let (Some(up), Some(down)) = (up_done, down_done) {
            return Poll::Ready(Ok((up, down)));
        }
        if let Some(idle) = &mut idle {
            let moved = up.take_moved() | down.take_moved();
            if idle.poll(cx, moved).is_ready() {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "tunnel idle timeout",
                )));
            }
        }
        Poll::Pending
    })
    .await
}

/// One direction's copy: read into the buffer, write all of it, and at
/// the end of the stream flush and shut the writer down.
pub(crate) struct Direction {
    /// Bytes to write before anything read (the hand-off's tail).
    tail: Bytes,
    buf: Box<[u8]>,
    /// Read and not yet written: `buf[start..end]`.
    start: usize,
    end: usize,
    /// The reader ended its stream.
    eof: bool,
    /// The reader failed; returned once what was read before is written.
    read_error: Option<io::Error>,
    /// Written since the writer was last flushed.
    unflushed: bool,
    /// Bytes were read or written since [`take_moved`](Self::take_moved).
    moved: bool,
    written: u64,
    /// The other way failed: the reader's end is no clean one, and the
    /// writer is not shut down.
    last: bool,
}

impl<R, W> Move<R, W> for Direction
where
    R: AsyncRead + Unpin + ?Sized,
    W: AsyncWrite + Unpin + ?Sized,
{
    fn poll_move(
        &mut self,
        cx: &mut Context<'_>,
        reader: &mut R,
        writer: &mut W,
    ) -> Poll<io::Result<u64>> {
        self.poll_copy(cx, Pin::new(reader), Pin::new(writer))
    }

    fn poll_last(&mut self, cx: &mut Context<'_>, reader: &mut R, writer: &mut W) {
        self.last = true;
        let _ = self.poll_copy(cx, Pin::new(reader), Pin::new(writer));
    }

    fn take_moved(&mut self) -> bool {
        std::mem::take(&mut self.moved)
    }
}

impl Direction {
    pub(crate) fn new() -> Self {
        Self::with_tail(Bytes::new())
    }

    /// A copy that goes on where another way of moving (a splice that
    /// turned out to be unsupported) left off, `written` bytes in; `moved`
    /// says that way moved bytes the idle timer has not seen yet.
    pub(crate) fn resuming(written: u64, moved: bool) -> Self {
        Self {
            written,
            moved,
            ..Self::new()
        }
    }

    pub(crate) fn with_tail(tail: Bytes) -> Self {
        Self {
            tail,
            buf: vec![0; BUF_SIZE].into_boxed_slice(),
            start: 0,
            end: 0,
            eof: false,
            read_error: None,
            unflushed: false,
            moved: false,
            written: 0,
            last: false,
        }
    }

    /// Copies until the reader ends (`Ok(bytes written)`, the writer shut
    /// down) or either side fails (the read error comes after the bytes
    /// read before it are written).
    fn poll_copy<R, W>(
        &mut self,
        cx: &mut Context<'_>,
        mut reader: Pin<&mut R>,
        mut writer: Pin<&mut W>,
    ) -> Poll<io::Result<u64>>
    where
        R: AsyncRead + ?Sized,
        W: AsyncWrite + ?Sized,
    {
        loop {
            // Read while there is room, even with bytes waiting for the
            // writer: the next write then takes more at once.
            let mut read_pending = false;
            if !self.eof && self.read_error.is_none() && self.end < self.buf.len() {
                let mut room = ReadBuf::new(&mut self.buf[self.end..]);
                match reader.as_mut().poll_read(cx, &mut room) {
                    Poll::Ready(Ok(())) if room.filled().is_empty() => self.eof = true,
                    Poll::Ready(Ok(())) => {
                        self.end += room.filled().len();
                        self.moved = true;
                    }
                    // A signal: read again.
                    Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Poll::Ready(Err(e)) => self.read_error = Some(e),
                    Poll::Pending => read_pending = true,
                }
            }

            // The tail first, then what was read.
            let from_tail = !self.tail.is_empty();
            let pending = if from_tail {
                &self.tail[..]
            } else {
                &self.buf[self.start..self.end]
            };
            if !pending.is_empty() {
                match writer.as_mut().poll_write(cx, pending) {
                    Poll::Ready(Ok(0)) => return self.fail(io::ErrorKind::WriteZero.into()),
                    Poll::Ready(Ok(n)) => {
                        if from_tail {
                            self.tail = self.tail.slice(n.min(self.tail.len())..);
                        } else {
                            self.start = (self.start + n).min(self.end);
                            if self.start == self.end {
                                (self.start, self.end) = (0, 0);
                            }
                        }
                        self.written += n as u64;
                        self.unflushed = true;
                        self.moved = true;
                        continue;
                    }
                    Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Poll::Ready(Err(e)) => return self.fail(e),
                    // Woken by the writer (and by the reader, if it is
                    // pending too).
                    Poll::Pending => return Poll::Pending,
                }
            }

            // Everything read is written.
            if self.read_error.is_some() {
                // Best effort, as the writes before it: the error is the
                // reader's either way. It is taken only once the flush is
                // done: a flush that waits must not lose it.
                let _ = ready!(writer.as_mut().poll_flush(cx));
                if let Some(e) = self.read_error.take() {
                    return Poll::Ready(Err(e));
                }
            }
            if self.eof && self.last {
                // No FIN after a failure: the reset follows.
                if self.unflushed {
                    let _ = ready!(writer.as_mut().poll_flush(cx));
                    self.unflushed = false;
                }
                return Poll::Ready(Ok(self.written));
            }
            if self.eof {
                if self.unflushed {
                    ready!(writer.as_mut().poll_flush(cx))?;
                    self.unflushed = false;
                }
                ready!(writer.as_mut().poll_shutdown(cx))?;
                // Done: the buffer goes now, not when the other way ends.
                self.buf = Box::default();
                return Poll::Ready(Ok(self.written));
            }
            if read_pending {
                // The reader waits: pass on what a buffering writer holds.
                if self.unflushed {
                    ready!(writer.as_mut().poll_flush(cx))?;
                    self.unflushed = false;
                }
                return Poll::Pending;
            }
        }
    }

    /// A write failed: the reader's earlier error, if any, comes first.
    fn fail(&mut self, write_error: io::Error) -> Poll<io::Result<u64>> {
        Poll::Ready(Err(self.read_error.take().unwrap_or(write_error)))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;

    use super::*;

    /// A stream that reads what it is given (then waits forever), refuses
    /// its first write once, and records what it is told.
    #[derive(Default)]
    struct Mock {
        reads: VecDeque<io::Result<&'static [u8]>>,
        written: Vec<u8>,
        refused_once: bool,
        /// Every write fails: the peer reset the connection.
        resets_writes: bool,
        shut: bool,
        reset: Cell<bool>,
    }

    impl AsyncRead for Mock {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            match self.reads.pop_front() {
                Some(Ok(bytes)) => {
                    buf.put_slice(bytes);
                    Poll::Ready(Ok(()))
                }
                Some(Err(e)) => Poll::Ready(Err(e)),
                None => Poll::Pending,
            }
        }
    }

    impl AsyncWrite for Mock {
        fn poll_write(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            if self.resets_writes {
                return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
            }
            if !self.refused_once {
                self.refused_once = true;
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            self.written.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.shut = true;
            Poll::Ready(Ok(()))
        }
    }

    impl Reset for Mock {
        fn reset_on_close(&self) -> io::Result<()> {
            self.reset.set(true);
            Ok(())
        }
    }

    #[tokio::test]
    async fn bytes_read_before_a_read_error_are_written_then_both_sides_reset() {
        let mut client = Mock {
            reads: [
                Ok(&b"hello"[..]),
                Err(io::ErrorKind::ConnectionReset.into()),
            ]
            .into(),
            ..Mock::default()
        };
        let mut backend = Mock::default();
        let result = tunnel(&mut client, &mut backend, Bytes::new()).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(backend.written, b"hello", "read while the writer waited");
        assert!(client.reset.get() && backend.reset.get());
        assert!(!backend.shut, "a failure is no clean end");
    }

    /// The backend answers and resets while the client still uploads: the
    /// write up fails first, and the answer it sent before its reset
    /// still reaches the client, with no FIN after it (the reset follows).
    #[tokio::test]
    async fn what_the_other_way_can_still_move_goes_before_the_failure() {
        let mut client = Mock {
            reads: [Ok(&b"upload"[..])].into(),
            refused_once: true,
            ..Mock::default()
        };
        let mut backend = Mock {
            reads: [
                Ok(&b"HTTP/1.1 413 Content Too Large\r\n\r\n"[..]),
                Ok(&b""[..]),
            ]
            .into(),
            resets_writes: true,
            ..Mock::default()
        };
        let result = tunnel(&mut client, &mut backend, Bytes::new()).await;
        assert_eq!(result.unwrap_err().kind(), io::ErrorKind::ConnectionReset);
        assert_eq!(client.written, b"HTTP/1.1 413 Content Too Large\r\n\r\n");
        assert!(!client.shut, "the end after a failure is no clean one");
        assert!(client.reset.get() && backend.reset.get());
    }

    /// A read a signal interrupted is tried again: no failure, no reset.
    #[tokio::test]
    async fn an_interrupted_read_is_tried_again() {
        let mut client = Mock {
            reads: [
                Err(io::ErrorKind::Interrupted.into()),
                Ok(&b"up"[..]),
                Ok(&b""[..]),
            ]
            .into(),
            ..Mock::default()
        };
        let mut backend = Mock {
            reads: [Ok(&b""[..])].into(),
            ..Mock::default()
        };
        let result = tunnel(&mut client, &mut backend, Bytes::new()).await;
        assert_eq!(result.unwrap(), (2, 0));
        assert_eq!(backend.written, b"up");
        assert!(!client.reset.get() && !backend.reset.get());
    }

    #[tokio::test]
    async fn a_clean_end_shuts_the_other_writer_down_and_resets_nothing() {
        let mut client = Mock {
            reads: [Ok(&b"up"[..]), Ok(&b""[..])].into(),
            ..Mock::default()
        };
        let mut backend = Mock {
            reads: [Ok(&b"down"[..]), Ok(&b""[..])].into(),
            ..Mock::default()
        };
        let result = tunnel(&mut client, &mut backend, Bytes::from_static(b"tail:")).await;
        assert_eq!(result.unwrap(), (7, 4));
        assert_eq!(
            (&backend.written[..], &client.written[..]),
            (&b"tail:up"[..], &b"down"[..])
        );
        assert!(client.shut && backend.shut);
        assert!(!client.reset.get() && !backend.reset.get());
    }
}
