//! [`Tunnel`]: the raw tunnel between two sockets after a hand-off, on a
//! mio poll loop, moved by the kernel (splice(2) through pipes) on Linux.

use std::io;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use cleave_proto::Bytes;
use mio::event::{Event, Source};
use mio::{Interest, Registry, Token};

use crate::socket::{connect_over, Socket};
use cleave_splice::{is_unsupported, Lease, Pipes};

/// Each direction's buffer when it copies.
const BUF_SIZE: usize = 16 * 1024;

/// Default [`Tunnel::set_budget`]: 1 MiB each way a call.
pub const DEFAULT_TUNNEL_BUDGET: usize = 1024 * 1024;

/// Which socket of a [`Tunnel`] an event is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// The socket the tunnel was asked for (its tail goes to the backend).
    Client,
    /// The socket the tunnel leads to.
    Backend,
}

/// Both directions of a raw tunnel between two sockets, driven on
/// readiness: on Linux the bytes go socket -> pipe -> socket with
/// splice(2) and never enter user space; elsewhere, or when a direction
/// has no pipe, they are copied through a 16 KiB buffer.
///
/// ```text
///   tail ───────────────write────────────> backend   (first)
///   client ──splice──> pipe ──splice─────> backend
///   client <──splice── pipe <──splice───── backend
/// ```
///
/// It makes the promises of cleave-tokio's `tunnel`:
///
/// - **Nothing is lost.** The tail (the bytes the routing session read
///   past its last frame) goes to the backend before anything read later.
/// - **A clean end stays a half-close.** When one side ends its stream,
///   the other side's write half is shut down (a FIN) once everything
///   read is written; the other direction goes on until it ends too.
/// - **A failure stays a failure.** On any error, on either side, and on
///   the idle timeout (`TimedOut`), both sockets are set to
///   [reset on close](Socket::reset_on_close) and the tunnel is finished:
///   drop it (or its sockets) and each peer sees a reset, not a clean end.
///
/// Each direction leases a pipe from the [`Pipes`] it is given and gives
/// it back, empty, at its end. A direction copies instead when there is
/// no splice (not Linux), when the pool has no pipe left or the system
/// refuses one (or `SIGPIPE` is not ignored: see [`Pipes::new`]), and from
/// the moment its socket refuses a splice (a socket type splice(2) does
/// not read, or a TCP urgent mark it will not read past; the pipe is
/// empty then, so nothing is lost and the out-of-band byte is left out,
/// as a copying tunnel leaves it out).
///
/// # The drive loop
///
/// ```text
///   Tunnel::new(client, backend, tail, pipes); tunnel.register(registry, tc, tb)
///   on an event for tc or tb:
///       more = tunnel.on_event(Side::Client or Side::Backend, event)
///       while more: (serve the others) more = tunnel.on_ready()
///   at deadline():  tunnel.on_timeout(now)
///   tunnel.is_finished() ─> tunnel.result(); deregister and drop it
/// ```
///
/// Both sockets are registered for reading and writing once (mio's
/// registrations are edge-triggered); the registration never changes. A
/// socket taken from a [`Conn`](crate::Conn) must have been deregistered,
/// or [`register`](Self::register) moves its registration to the new
/// token.
///
/// The tokens are the loop's. An event still queued for a source the loop
/// removed may reach the tunnel under a token it reused; with
/// edge-triggered readiness that is harmless (the side finds nothing to
/// read or write and waits, and a side still connecting is asked whether
/// its connect is over rather than told: see [`Socket::is_connecting`]).
#[derive(Debug)]
pub struct Tunnel<C, B> {
    client: C,
    backend: B,
    up: Way,
    down: Way,
    client_ready: Ready,
    backend_ready: Ready,
    idle: Option<Duration>,
    /// When a byte last moved.
    active: Instant,
    budget: usize,
    result: Option<io::Result<(u64, u64)>>,
}

/// What the last event and operations say a socket can do.
#[derive(Clone, Copy, Debug)]
struct Ready {
    read: bool,
    write: bool,
    /// The socket showed that a connect, if it had one, is over: a
    /// writable (or error) event came and the socket agreed, or a read
    /// gave bytes or the end of its stream (a connecting socket gives
    /// neither). A FIN may go ([`Socket::is_connecting`]).
    connect_done: bool,
}

impl<C, B> Tunnel<C, B>
where
    C: Socket + AsFd,
    B: Socket + AsFd,
{
    /// A tunnel from `client` to `backend` that writes `tail` to the
    /// backend first, with pipes from `pipes` (most programs pass
    /// [`Pipes::global`]). Nothing moves until it is driven.
    #[must_use]
    pub fn new(client: C, backend: B, tail: Bytes, pipes: &Pipes) -> Self {
        // Both sockets are tried at once: an operation that would block
        // clears the flag until the next event.
        let ready = Ready {
            read: true,
            write: true,
            connect_done: false,
        };
        Self {
            client,
            backend,
            up: Way::new(tail, pipes),
            down: Way::new(Bytes::new(), pipes),
            client_ready: ready,
            backend_ready: ready,
            idle: None,
            active: Instant::now(),
            budget: DEFAULT_TUNNEL_BUDGET,
            result: None,
        }
    }

    /// Ends the tunnel as a failure (`TimedOut`, both sockets reset) when
    /// no byte moved either way for `after`. Default: none. A connection's
    /// [`Timeouts::get_tunnel_idle`](cleave_proto::Timeouts::get_tunnel_idle)
    /// is the value to pass on.
    #[must_use]
    pub fn idle(mut self, after: Option<Duration>) -> Self {
        self.idle = after;
        self
    }

    /// The bytes after which a direction stops moving in one call of
    /// [`on_event`](Self::on_event) or [`on_ready`](Self::on_ready), so
    /// that a busy tunnel does not starve the loop's other connections;
    /// when it is spent, the call returns `true`. A write under way when
    /// the budget runs out is finished, not split: a direction moves less
    /// than `bytes` plus one write (a pipe's contents, at most its size:
    /// 64 KiB at the kernel's default with 4 KiB pages; or a copy
    /// buffer's 16 KiB). Default:
    /// [`DEFAULT_TUNNEL_BUDGET`]; at least 1.
    pub fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes.max(1);
    }

    /// Handles one of mio's events for `side`'s socket, then moves what
    /// can be moved. Returns `true` when a direction spent its
    /// [budget](Self::set_budget): call [`on_ready`](Self::on_ready)
    /// again (after serving the others), as no event will say so.
    ///
    /// A writable (or error) event for a socket that was still connecting
    /// does not tell it that its connect is over: the socket is asked
    /// ([`Socket::is_connecting`], then [`Socket::take_error`]), as an
    /// event still queued for a source removed from the loop may come
    /// under the token it reused. A connect that failed fails the tunnel
    /// with its error.
    pub fn on_event(&mut self, side: Side, event: &Event) -> bool {
        let writable = event.is_writable() || event.is_write_closed() || event.is_error();
        let ready = self.ready_mut(side);
        ready.read |= event.is_readable() || event.is_read_closed() || event.is_error();
        ready.write |= writable;
        if writable && !ready.connect_done && self.result.is_none() {
            let over = match side {
                Side::Client => connect_over(&self.client),
                Side::Backend => connect_over(&self.backend),
            };
            match over {
                Ok(over) => self.ready_mut(side).connect_done = over,
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        self.on_ready()
    }

    fn ready_mut(&mut self, side: Side) -> &mut Ready {
        match side {
            Side::Client => &mut self.client_ready,
            Side::Backend => &mut self.backend_ready,
        }
    }

    /// Moves what can be moved without a new event. Returns `true` when a
    /// direction spent its budget, as [`on_event`](Self::on_event).
    pub fn on_ready(&mut self) -> bool {
        if self.result.is_some() {
            return false;
        }
        let Self {
            client,
            backend,
            up,
            down,
            client_ready,
            backend_ready,
            budget,
            ..
        } = self;
        let mut more = false;
        let backend_done = backend_ready.connect_done;
        let mut up_step = up.step(client, client_ready, backend, backend_ready, *budget, true);
        // A failed write to the backend (a reset) took the socket's error:
        // what the backend sent before it still goes to the client, but the
        // end of stream a read finds now is no clean end, and must not
        // become the client's FIN (the failure resets it instead).
        let down_step = down.step(
            backend,
            backend_ready,
            client,
            client_ready,
            *budget,
            up_step.is_ok(),
        );
        // The backend's read showed that its connect is over: a FIN that
        // waited for it goes now, with no event to say so.
        if !backend_done
            && backend_ready.connect_done
            && matches!((&up_step, &down_step), (Ok(Step::Blocked), Ok(_)))
        {
            up_step = up.step(client, client_ready, backend, backend_ready, *budget, true);
        }
        for step in [up_step, down_step] {
            match step {
                Ok(Step::Blocked) => {}
                Ok(Step::Budget) => more = true,
                Err(e) => {
                    self.fail(e);
                    return false;
                }
            }
        }
        if std::mem::take(&mut self.up.moved) | std::mem::take(&mut self.down.moved) {
            self.active = Instant::now();
        }
        if let (Some(up), Some(down)) = (self.up.done, self.down.done) {
            self.result = Some(Ok((up, down)));
            return false;
        }
        more
    }

    /// When the idle timeout runs out if no byte moves before: the time
    /// to call [`on_timeout`](Self::on_timeout).
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        if self.result.is_some() {
            return None;
        }
        self.idle.and_then(|after| self.active.checked_add(after))
    }

    /// Ends the tunnel as a failure if its idle timeout ran out by `now`.
    pub fn on_timeout(&mut self, now: Instant) {
        if self.deadline().is_some_and(|deadline| deadline <= now) {
            self.fail(io::Error::new(
                io::ErrorKind::TimedOut,
                "tunnel idle timeout",
            ));
        }
    }

    /// Whether both directions ended, or the tunnel failed.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.result.is_some()
    }

    /// Once finished: the bytes written each way (to the backend, tail
    /// included; to the client), or the first error either socket gave
    /// (`TimedOut` for the idle timeout), after which both sockets are
    /// set to reset on close: drop them, do not shut them down.
    #[must_use]
    pub fn result(&self) -> Option<&io::Result<(u64, u64)>> {
        self.result.as_ref()
    }

    /// The bytes written so far each way: (to the backend, to the client).
    #[must_use]
    pub fn written(&self) -> (u64, u64) {
        (self.up.written, self.down.written)
    }

    /// The client's socket.
    #[must_use]
    pub fn client(&self) -> &C {
        &self.client
    }

    /// The backend's socket.
    #[must_use]
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The two sockets: (client, backend).
    #[must_use]
    pub fn into_parts(self) -> (C, B) {
        (self.client, self.backend)
    }

    fn fail(&mut self, error: io::Error) {
        // Best effort: the error that matters is the one that got us here.
        let _ = self.client.reset_on_close();
        let _ = self.backend.reset_on_close();
        self.result = Some(Err(error));
    }
}

impl<C: Source, B: Source> Tunnel<C, B> {
    /// Registers both sockets, for reading and writing, under their
    /// tokens (a socket that was registered already is registered again).
    ///
    /// # Errors
    ///
    /// What the registry says.
    pub fn register(
        &mut self,
        registry: &Registry,
        client: Token,
        backend: Token,
    ) -> io::Result<()> {
        register(registry, &mut self.client, client)?;
        register(registry, &mut self.backend, backend)
    }

    /// Deregisters both sockets.
    ///
    /// # Errors
    ///
    /// What the registry says.
    pub fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        registry.deregister(&mut self.client)?;
        registry.deregister(&mut self.backend)
    }
}

fn register(registry: &Registry, source: &mut impl Source, token: Token) -> io::Result<()> {
    let interest = Interest::READABLE | Interest::WRITABLE;
    match registry.register(source, token, interest) {
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            registry.reregister(source, token, interest)
        }
        other => other,
    }
}

/// How one direction stopped.
enum Step {
    /// It waits for an event (or it is done).
    Blocked,
    /// It spent its budget.
    Budget,
}

/// One direction: reader -> pipe (or buffer) -> writer. The pipe, or the
/// buffer, is filled only when it is empty, so a fill that would block
/// always means the reader has nothing (never that the pipe is full), and
/// a read error comes with nothing read before it left unwritten.
#[derive(Debug)]
struct Way {
    /// Bytes to write before anything read (the hand-off's tail).
    tail: Bytes,
    via: Via,
    /// The reader ended its stream.
    eof: bool,
    moved: bool,
    written: u64,
    /// The reader ended and the writer is shut down: the bytes written.
    done: Option<u64>,
}

enum Via {
    Pipe(Lease),
    Copy {
        buf: Box<[u8]>,
        start: usize,
        end: usize,
    },
}

impl std::fmt::Debug for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Via::Pipe(lease) => f.debug_struct("Pipe").field("len", &lease.len()).finish(),
            Via::Copy { start, end, .. } => {
                f.debug_struct("Copy").field("len", &(end - start)).finish()
            }
        }
    }
}

impl Via {
    fn copy() -> Self {
        Via::Copy {
            buf: vec![0; BUF_SIZE].into_boxed_slice(),
            start: 0,
            end: 0,
        }
    }

    /// Bytes read and not yet written.
    fn pending(&self) -> usize {
        match self {
            Via::Pipe(lease) => lease.len(),
            Via::Copy { start, end, .. } => end - start,
        }
    }
}

impl Way {
    fn new(tail: Bytes, pipes: &Pipes) -> Self {
        Self {
            tail,
            via: pipes.lease().map_or_else(Via::copy, Via::Pipe),
            eof: false,
            moved: false,
            written: 0,
            done: None,
        }
    }

    /// Moves until the reader or the writer would block, the reader ended
    /// (the writer then shut down, if `may_end`, and once its connect, if
    /// it had one, is over: `connect_done`, or it has a peer), or
    /// `budget` bytes were written.
    fn step<R, W>(
        &mut self,
        reader: &mut R,
        reader_ready: &mut Ready,
        writer: &mut W,
        writer_ready: &mut Ready,
        budget: usize,
        may_end: bool,
    ) -> io::Result<Step>
    where
        R: Socket + AsFd,
        W: Socket + AsFd,
    {
        if self.done.is_some() {
            return Ok(Step::Blocked);
        }
        let start = self.written;
        loop {
            if self.written - start >= budget as u64 {
                return Ok(Step::Budget);
            }
            if !self.tail.is_empty() || self.via.pending() > 0 {
                if !writer_ready.write {
                    return Ok(Step::Blocked);
                }
                let result = if self.tail.is_empty() {
                    match &mut self.via {
                        Via::Pipe(lease) => lease.drain(writer.as_fd()),
                        Via::Copy { buf, start, end } => writer.write(&buf[*start..*end]),
                    }
                } else {
                    writer.write(&self.tail)
                };
                match result {
                    Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                    Ok(n) => self.wrote(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        writer_ready.write = false;
                        return Ok(Step::Blocked);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
                continue;
            }
            if self.eof {
                if !may_end {
                    return Ok(Step::Blocked);
                }
                if !writer_ready.connect_done && writer.is_connecting() {
                    // A shutdown would abort the connect: the writer's
                    // writable event lets it go (or its read: on_ready).
                    writer_ready.write = false;
                    return Ok(Step::Blocked);
                }
                writer.shutdown_write()?;
                self.done = Some(self.written);
                // The pipe goes back to the pool (or the buffer is freed)
                // now, not when the other way ends.
                self.via = Via::Copy {
                    buf: Box::default(),
                    start: 0,
                    end: 0,
                };
                return Ok(Step::Blocked);
            }
            if !reader_ready.read {
                return Ok(Step::Blocked);
            }
            let result = match &mut self.via {
                Via::Pipe(lease) => lease.fill(reader.as_fd()),
                Via::Copy { buf, .. } => reader.read(buf),
            };
            if result.is_ok() {
                // Bytes or the end of the stream: no connecting socket
                // gives either, so a FIN to the reader cannot abort one.
                reader_ready.connect_done = true;
            }
            match result {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    // A lease counts what it holds.
                    if let Via::Copy { start, end, .. } = &mut self.via {
                        (*start, *end) = (0, n);
                    }
                    self.moved = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    reader_ready.read = false;
                    return Ok(Step::Blocked);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if self.refused(&e) => {
                    // The pipe is empty: it goes back to the pool.
                    self.via = Via::copy();
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether `error` is a splice refused (a socket splice(2) cannot
    /// read, or one stopped at a TCP urgent mark): copy instead. The pipe
    /// is empty, as every fill finds it, so nothing is lost.
    fn refused(&self, error: &io::Error) -> bool {
        matches!(self.via, Via::Pipe(_)) && is_unsupported(error)
    }

    /// `n` bytes were written: from the tail first, then from what was
    /// read.
    fn wrote(&mut self, n: usize) {
        if self.tail.is_empty() {
            // A lease counts what it drained itself.
            if let Via::Copy { start, end, .. } = &mut self.via {
                *start = (*start + n).min(*end);
            }
        } else {
            self.tail = self.tail.slice(n.min(self.tail.len())..);
        }
        self.written += n as u64;
        self.moved = true;
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use std::cell::Cell;
    use std::collections::VecDeque;
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::BorrowedFd;

    use super::*;
    use cleave_splice::PipesConfig;

    /// A socket in memory whose descriptor is a directory's: every splice
    /// from it fails with `EINVAL`, as from a socket splice(2) cannot read.
    struct Unspliceable {
        fd: File,
        reads: VecDeque<&'static [u8]>,
        written: Vec<u8>,
        shut: Cell<bool>,
    }

    impl Unspliceable {
        fn new(reads: &[&'static [u8]]) -> Self {
            Self {
                fd: File::open("/").unwrap(),
                reads: reads.iter().copied().collect(),
                written: Vec::new(),
                shut: Cell::new(false),
            }
        }
    }

    impl Read for Unspliceable {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            // Then the end of the stream.
            let Some(bytes) = self.reads.pop_front() else {
                return Ok(0);
            };
            buf[..bytes.len()].copy_from_slice(bytes);
            Ok(bytes.len())
        }
    }

    impl Write for Unspliceable {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Socket for Unspliceable {
        fn shutdown_write(&self) -> io::Result<()> {
            self.shut.set(true);
            Ok(())
        }
    }

    impl AsFd for Unspliceable {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
    }

    #[test]
    fn a_refused_first_splice_falls_back_to_copying_and_returns_the_pipes() {
        let pipes = Pipes::new(PipesConfig::default().max_open(Some(2)));
        let client = Unspliceable::new(&[b"up ", b"and up"]);
        let backend = Unspliceable::new(&[b"down"]);
        let tail = Bytes::from_static(b"tail, ");
        let mut tunnel = Tunnel::new(client, backend, tail, &pipes);
        assert!(!tunnel.on_ready(), "no budget spent");
        assert_eq!(tunnel.result().unwrap().as_ref().unwrap(), &(15, 4));
        let (client, backend) = tunnel.into_parts();
        assert_eq!(backend.written, b"tail, up and up");
        assert_eq!(client.written, b"down");
        assert!(client.shut.get() && backend.shut.get(), "both half-closed");
        // Both were leased, refused, and kept empty for the next tunnel.
        assert_eq!((pipes.open(), pipes.idle(), pipes.spliced()), (2, 2, 0));
    }
}
