//! [`Stream`]: a framed stream over a blocking reader and writer.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use cleave_proto::{Bytes, Frame, Inbound, Rejected, Ticket, WriteQueue, WriteQueueConfig};

use crate::error::RecvError;
use crate::write::{write_once, Item};

/// The shortest wait [`Stream::until_deadline`] gives: a zero read timeout
/// is refused by `set_read_timeout`.
const MIN_WAIT: Duration = Duration::from_millis(1);

/// A framed stream over any blocking `Read` and `Write` (a `TcpStream`, a
/// `UnixStream`, a file, a pipe), driving an [`Inbound`] state machine on
/// the read side and a [`WriteQueue`] on the write side, on the caller's
/// thread.
///
/// `P` is a [`Framed`](cleave_proto::Framed) decoder (the events are its frames)
/// or a [`Session`](cleave_proto::Session) (the events are
/// [`cleave_proto::Event`]s: routing, frames, tunnel bytes, the end).
///
/// # Call order
///
/// ```text
///   recv() ──> poll_event(now) ── Some(event) ──────────────> Ok(Some(event))
///                 │ None
///                 ├── closed, or the reader ended ──────────> Ok(None)
///                 └── read into the RecvBuf (no second copy)
///                        n > 0 ─> poll again
///                        0     ─> handle_eof(), poll again
///                        timed out ─> poll_event(now) ─> an event, or Err(TimedOut)
///
///   push() / push_frame()   queue only, no I/O; the bytes come back when full
///   send() / send_frame()   queue; when full, write first (write_vectored) to make room
///   flush()                 write everything queued, then flush the writer
/// ```
///
/// Reading needs only `S: Read` and writing only `S: Write`, so a read-only
/// source (a `&[u8]`, a child's stdout) works too.
///
/// # Errors and timeouts
///
/// [`recv`](Self::recv) fails with [`RecvError::Protocol`] when the peer's
/// bytes break the protocol, and with [`RecvError::Io`] when the reader
/// fails; both are final. A read timeout (set by the caller, as with
/// [`TcpStream::set_read_timeout`](std::net::TcpStream::set_read_timeout))
/// or `WouldBlock` is [`RecvError::TimedOut`]: nothing is lost, and the
/// next `recv` goes on where this one stopped.
///
/// A [`Session`](cleave_proto::Session) that sniffs with an inspect delay has a
/// [`deadline`](Inbound::deadline), counted from its first poll (the first
/// `recv`). A blocking read cannot be woken generically, so the deadline
/// is honoured when a read returns: give the reader a read timeout (at
/// most the inspect delay) before the first `recv`, and when a read times
/// out, `recv` asks the session first, so a decision by the clock comes
/// out as an event rather than as `TimedOut`. A decision by the clock so
/// comes at most one read timeout late;
/// [`until_deadline`](Self::until_deadline) gives the exact wait to set
/// after each `recv`.
///
/// ```
/// use std::io::{Read, Write};
/// use std::net::{Shutdown, TcpListener, TcpStream};
///
/// use cleave_proto::{Encoder, Framed, Lines};
/// use cleave_std::Stream;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let mut client = TcpStream::connect(listener.local_addr()?)?;
/// client.write_all(b"one\ntwo\n")?;
/// client.shutdown(Shutdown::Write)?;
///
/// let (socket, _) = listener.accept()?;
/// let mut lines = Stream::new(socket, Framed::new(Lines::new()));
/// let mut encoder = Lines::new();
/// while let Some(line) = lines.recv()? {
///     let answer = [&b"> "[..], &line].concat();
///     lines.send_frame(encoder.encode(answer.into())?)?; // queued; written when full
/// }
/// lines.flush()?; // one write_vectored for both answers
/// lines.get_ref().shutdown(Shutdown::Write)?;
///
/// let mut answers = String::new();
/// client.read_to_string(&mut answers)?;
/// assert_eq!(answers, "> one\n> two\n");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Stream<S, P> {
    io: S,
    inbound: P,
    queue: WriteQueue,
    start: Instant,
    /// The reader returned end of stream.
    eof: bool,
    /// The reader failed with this kind: final.
    failed: Option<io::ErrorKind>,
}

impl<S, P> Stream<S, P> {
    /// Drives `inbound` with what `io` reads, and writes through a queue
    /// with the default limits. The clock `inbound` sees starts now.
    pub fn new(io: S, inbound: P) -> Self {
        Self::with_queue(io, inbound, WriteQueueConfig::default())
    }

    /// As [`new`](Self::new), with the given write queue limits.
    pub fn with_queue(io: S, inbound: P, config: WriteQueueConfig) -> Self {
        Self {
            io,
            inbound,
            queue: WriteQueue::with_config(config),
            start: Instant::now(),
            eof: false,
            failed: None,
        }
    }

    /// The reader and writer.
    pub fn get_ref(&self) -> &S {
        &self.io
    }

    /// The reader and writer, to set a timeout, say. Reading from it
    /// directly takes bytes the inbound would not see.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.io
    }

    /// The inbound state machine.
    pub fn inbound(&self) -> &P {
        &self.inbound
    }

    /// The inbound state machine, to reconfigure its decoder, say.
    pub fn inbound_mut(&mut self) -> &mut P {
        &mut self.inbound
    }

    /// The write queue.
    pub fn queue(&self) -> &WriteQueue {
        &self.queue
    }

    /// The write queue, to push urgent writes, close or inspect it.
    pub fn queue_mut(&mut self) -> &mut WriteQueue {
        &mut self.queue
    }

    /// The time since the stream was made: the `now` the inbound sees.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }

    /// The reader and writer, the inbound (its buffer holds what was read
    /// and not handed out) and the queue (with what was not written yet).
    pub fn into_parts(self) -> (S, P, WriteQueue) {
        (self.io, self.inbound, self.queue)
    }
}

impl<S, P: Inbound> Stream<S, P> {
    /// How long a read may block before the inbound's deadline: `None`
    /// when it has none (a [`Session`](cleave_proto::Session) has one while it
    /// sniffs, from its first poll on). Never zero (at least a
    /// millisecond), so it can go straight into `set_read_timeout`.
    ///
    /// ```no_run
    /// # use std::net::TcpStream;
    /// # use std::time::Duration;
    /// # use cleave_proto::{route::Router, Session, SessionConfig};
    /// # fn run(socket: TcpStream, router: Router<&'static str>) -> std::io::Result<()> {
    /// use cleave_proto::Event;
    /// use cleave_std::{RecvError, Stream};
    ///
    /// // The session's clock starts with the first recv: wait at most the
    /// // inspect delay for the first read.
    /// socket.set_read_timeout(Some(router.config().inspect_delay_duration()))?;
    /// let mut events = Stream::new(socket, Session::tunnel(router, SessionConfig::default()));
    /// loop {
    ///     let event = events.recv();
    ///     // What is left until the deadline; none once routed.
    ///     let wait = events.until_deadline();
    ///     events.get_ref().set_read_timeout(wait)?;
    ///     match event {
    ///         Ok(Some(Event::Routed(decision))) => println!("to {}", decision.target),
    ///         Ok(Some(event)) => println!("{event:?}"),
    ///         Ok(None) => return Ok(()),
    ///         Err(RecvError::TimedOut) => {} // the deadline is not there yet
    ///         Err(e) => return Err(e.into()),
    ///     }
    /// }
    /// # }
    /// ```
    pub fn until_deadline(&self) -> Option<Duration> {
        let deadline = self.inbound.deadline()?;
        Some(deadline.saturating_sub(self.elapsed()).max(MIN_WAIT))
    }
}

impl<S: Read, P: Inbound> Stream<S, P> {
    /// The next event, reading as needed; `Ok(None)` once the stream is
    /// over (after the reader's end, the inbound's last event).
    ///
    /// # Errors
    ///
    /// - [`RecvError::TimedOut`] when the read timed out (or would block):
    ///   not final, call again;
    /// - [`RecvError::Protocol`] with the inbound's typed error: final. At
    ///   the end of the stream a [`Framed`](cleave_proto::Framed) gives an
    ///   incomplete last frame back in [`cleave_proto::Error::Truncated`] (a
    ///   [`Session`](cleave_proto::Session) gives it in
    ///   [`Event::Closed`](cleave_proto::Event::Closed) instead);
    /// - [`RecvError::Io`] when the reader fails: final.
    pub fn recv(&mut self) -> Result<Option<P::Event>, RecvError> {
        if let Some(kind) = self.failed {
            return Err(RecvError::Io(kind.into()));
        }
        loop {
            if let Some(event) = self.inbound.poll_event(self.elapsed())? {
                return Ok(Some(event));
            }
            if self.eof || self.inbound.is_closed() {
                return Ok(None);
            }
            match self.fill() {
                Ok(0) => {
                    self.eof = true;
                    self.inbound.handle_eof();
                }
                Ok(_) => {}
                Err(FillError::Protocol(e)) => return Err(RecvError::Protocol(e)),
                Err(FillError::Io(e)) if is_timeout(&e) => {
                    // Time passed: the inbound may decide by the clock.
                    return match self.inbound.poll_event(self.elapsed())? {
                        Some(event) => Ok(Some(event)),
                        None => Err(RecvError::TimedOut),
                    };
                }
                Err(FillError::Io(e)) => {
                    self.failed = Some(e.kind());
                    return Err(RecvError::Io(e));
                }
            }
        }
    }

    /// The next event from the bytes already read, without reading:
    /// `Ok(None)` when they hold no more.
    ///
    /// A server answers every request that arrived in one read, then
    /// [`flush`](Self::flush)es all the answers with one write.
    ///
    /// # Errors
    ///
    /// [`RecvError::Protocol`], as [`recv`](Self::recv).
    pub fn recv_buffered(&mut self) -> Result<Option<P::Event>, RecvError> {
        if let Some(kind) = self.failed {
            return Err(RecvError::Io(kind.into()));
        }
        Ok(self.inbound.poll_event(self.elapsed())?)
    }

    /// Reads once into the inbound's buffer, straight into its spare room;
    /// retries when a signal interrupts the read. `Ok(0)` is the end.
    fn fill(&mut self) -> Result<usize, FillError> {
        let buf = self.inbound.recv_buf();
        loop {
            let spare = buf.spare_mut().map_err(FillError::Protocol)?;
            match self.io.read(spare) {
                Ok(n) => {
                    buf.commit(n).map_err(FillError::Protocol)?;
                    return Ok(n);
                }
                Err(e) => {
                    buf.commit(0).map_err(FillError::Protocol)?;
                    if is_timeout(&e) {
                        // Nothing came within the read timeout: the
                        // connection waits, so the buffer gives back what
                        // it does not need.
                        buf.release_idle();
                    }
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(FillError::Io(e));
                    }
                }
            }
        }
    }
}

/// Why a read into the buffer did not happen.
enum FillError {
    /// The buffer is full (a limit), or the reader claimed more than it
    /// was given.
    Protocol(cleave_proto::Error),
    Io(io::Error),
}

/// A read timeout: `TimedOut` on most systems, `WouldBlock` on Unix.
fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl<S: Write, P> Stream<S, P> {
    /// Queues `bytes` without writing; see [`WriteQueue::push`].
    ///
    /// # Errors
    ///
    /// The bytes come back when the queue is full or closed.
    pub fn push(&mut self, bytes: Bytes) -> Result<Ticket, Rejected<Bytes>> {
        self.queue.push(bytes)
    }

    /// Queues an encoded frame without writing; see
    /// [`WriteQueue::push_frame`].
    ///
    /// # Errors
    ///
    /// The frame comes back when the queue is full or closed.
    #[allow(clippy::result_large_err)] // the frame comes back by value, as in the core
    pub fn push_frame(&mut self, frame: Frame) -> Result<Ticket, Rejected<Frame>> {
        self.queue.push_frame(frame)
    }

    /// Queues `bytes`; when the queue is full, writes first (blocking) to
    /// make room. Bytes reach the writer when the queue fills or on
    /// [`flush`](Self::flush).
    ///
    /// # Errors
    ///
    /// What the writer says (a write timeout too); `BrokenPipe` if the
    /// queue is closed. The bytes are dropped then: [`push`](Self::push)
    /// and [`flush`](Self::flush) keep them.
    pub fn send(&mut self, bytes: Bytes) -> io::Result<Ticket> {
        self.send_item(bytes)
    }

    /// Queues an encoded frame; when the queue is full, writes first to
    /// make room.
    ///
    /// # Errors
    ///
    /// As [`send`](Self::send).
    pub fn send_frame(&mut self, frame: Frame) -> io::Result<Ticket> {
        self.send_item(frame)
    }

    fn send_item<I: Item>(&mut self, item: I) -> io::Result<Ticket> {
        let mut item = item;
        loop {
            match item.push_into(&mut self.queue) {
                Ok(ticket) => return Ok(ticket),
                Err(rejected) if rejected.error() == &cleave_proto::Error::Closed => {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                Err(rejected) => {
                    item = rejected.into_value();
                    write_once(&mut self.queue, &mut self.io)?;
                }
            }
        }
    }

    /// Writes everything queued, with vectored writes; does not flush the
    /// writer.
    ///
    /// # Errors
    ///
    /// What the writer says. What it did not take stays queued, so calling
    /// again after a write timeout goes on where it stopped.
    pub fn drain(&mut self) -> io::Result<()> {
        while write_once(&mut self.queue, &mut self.io)? > 0 {}
        Ok(())
    }

    /// Writes everything queued and flushes the writer.
    ///
    /// # Errors
    ///
    /// As [`drain`](Self::drain), and what the writer's `flush` says.
    pub fn flush(&mut self) -> io::Result<()> {
        self.drain()?;
        self.io.flush()
    }

    /// Closes the queue (later sends fail with `BrokenPipe`), then writes
    /// and flushes what it holds.
    ///
    /// It does not shut the connection down, which `Write` cannot say: for
    /// a `TcpStream`, call `get_ref().shutdown(Shutdown::Write)` after, or
    /// drop the stream.
    ///
    /// # Errors
    ///
    /// As [`flush`](Self::flush).
    pub fn close(&mut self) -> io::Result<()> {
        self.queue.close();
        self.flush()
    }
}
