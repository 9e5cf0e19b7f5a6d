//! cleave-splice: the pipes of cleave's kernel-side tunnels.
//!
//! A tunnel direction moves its bytes socket -> pipe -> socket with
//! splice(2), so they never enter user space. This crate holds what
//! cleave-tokio's `splice_tunnel` and cleave-mio's `Tunnel` share: a
//! bounded pool of pipes ([`Pipes`]) that keeps the empty ones for the next
//! tunnel, and the two calls a direction makes on the pipe it leases
//! ([`Lease::fill`], [`Lease::drain`]). It does no waiting: the adapters
//! bring the readiness (tokio's, or a mio loop's).
//!
//! ```text
//!   Pipes::lease() ──> Lease
//!   socket ──Lease::fill──> pipe ──Lease::drain──> socket     (non-blocking)
//!   drop(Lease)  ──> back to the pool if empty, closed otherwise
//! ```
//!
//! A direction fills the pipe only when it is empty: then a fill that
//! would block says the socket has nothing, never that the pipe is full,
//! and the readiness it clears is the socket's.
//!
//! Where splice(2) does not exist (not Linux), or where `SIGPIPE` would
//! end the process, a pool opens no pipe: [`Pipes::lease`] returns `None`
//! and the adapters copy. A fill splice(2) will not do (a socket type it
//! does not read, a TCP urgent mark it stops at) fails with an error
//! [`is_unsupported`] recognises: the adapters copy from there on.

#![warn(missing_docs, unreachable_pub)]
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![forbid(unsafe_code)]

/// This crate's README, its example compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The most pipes a pool keeps open by default, whatever the descriptor
/// limit.
const MAX_OPEN_CAP: usize = 4096;
/// The idle pipes a pool keeps for the next tunnels by default.
const DEFAULT_MAX_IDLE: usize = 64;

/// Configuration of a [`Pipes`] pool.
///
/// ```
/// use cleave_splice::PipesConfig;
///
/// // HAProxy's `maxpipes 1000` and `tune.pipesize 262144`.
/// let config = PipesConfig::default().max_open(Some(1000)).size(Some(256 * 1024));
/// assert_eq!(config.get_max_open(), Some(1000));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PipesConfig {
    max_open: Option<usize>,
    max_idle: usize,
    size: Option<usize>,
}

impl Default for PipesConfig {
    fn default() -> Self {
        Self {
            max_open: None,
            max_idle: DEFAULT_MAX_IDLE,
            size: None,
        }
    }
}

impl PipesConfig {
    /// The most pipes open at once, in use and idle (each is two file
    /// descriptors; a spliced tunnel uses one per direction). A tunnel
    /// direction that finds none left copies through user space instead.
    /// Default (`None`): a quarter of
    /// the process's descriptor limit (`RLIMIT_NOFILE`, its soft value when
    /// the pool is made), at most 4096, so that pipes never take the
    /// descriptors the listener needs (HAProxy's `maxpipes` defaults to a
    /// quarter of its connections for the same reason).
    #[must_use]
    pub fn max_open(mut self, pipes: Option<usize>) -> Self {
        self.max_open = pipes;
        self
    }

    /// The most idle pipes kept open for the next tunnels; more are
    /// closed when their tunnel ends. Default: 64. A pipe is only kept if
    /// its tunnel left it empty.
    #[must_use]
    pub fn max_idle(mut self, pipes: usize) -> Self {
        self.max_idle = pipes;
        self
    }

    /// Each pipe's capacity in bytes (`F_SETPIPE_SZ`; the kernel rounds it
    /// up to a power of two pages). Default (`None`): the system's, 64 KiB
    /// on Linux. An unprivileged process cannot go above
    /// `/proc/sys/fs/pipe-max-size` (1 MiB by default): a pipe that cannot
    /// be sized is closed and its tunnel direction copies instead.
    #[must_use]
    pub fn size(mut self, bytes: Option<usize>) -> Self {
        self.size = bytes;
        self
    }

    /// The most pipes open at once, `None` for the default.
    #[must_use]
    pub fn get_max_open(&self) -> Option<usize> {
        self.max_open
    }

    /// The most idle pipes kept.
    #[must_use]
    pub fn get_max_idle(&self) -> usize {
        self.max_idle
    }

    /// Each pipe's capacity, `None` for the system's.
    #[must_use]
    pub fn get_size(&self) -> Option<usize> {
        self.size
    }
}

/// A pool of pipes for kernel-side tunnels: at most
/// [`max_open`](PipesConfig::max_open) open at once, the empty ones kept
/// for the next tunnel.
///
/// Memory: a pipe holds no bytes of its own while idle. In use, it holds
/// references to the socket buffers' pages it carries, at most its
/// [`size`](PipesConfig::size) (64 KiB by default), which the bytes would
/// have taken in a copying tunnel's user-space buffer too (a copying
/// tunnel keeps 16 KiB each way). The kernel's bookkeeping of an open pipe
/// (two files, an inode, the ring of 16 page slots) is about 2 KiB of slab
/// (1.8 to 2.2 KiB over three runs of the `pipe_memory` bench, Linux 6.18).
///
/// Most programs use the process's [`Pipes::global`] pool; a pool of
/// their own sets its own limits. A `Pipes` is a handle: its clones share
/// one pool.
#[derive(Clone)]
pub struct Pipes {
    inner: Arc<Inner>,
}

struct Inner {
    config: PipesConfig,
    max_open: usize,
    idle: Mutex<Vec<sys::Pipe>>,
    open: AtomicUsize,
    spliced: AtomicU64,
}

impl fmt::Debug for Pipes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipes")
            .field("max_open", &self.max_open())
            .field("open", &self.open())
            .field("idle", &self.idle())
            .field("spliced", &self.spliced())
            .finish_non_exhaustive()
    }
}

impl Default for Pipes {
    fn default() -> Self {
        Self::new(PipesConfig::default())
    }
}

impl Pipes {
    /// A pool with `config`'s limits. It opens pipes when tunnels need
    /// them; where splice(2) does not exist (not Linux), it opens none.
    ///
    /// Nor does it where `SIGPIPE` would end the process, its disposition
    /// the default one when the pool is made (a Rust program ignores it
    /// from the start; a C program that embeds this one may not): a
    /// splice(2) into a socket whose peer has gone raises `SIGPIPE`, and
    /// unlike `send`'s `MSG_NOSIGNAL` no flag prevents it. Tunnels then
    /// copy; ignore `SIGPIPE` (or handle it) before making the pool to
    /// splice.
    #[must_use]
    pub fn new(config: PipesConfig) -> Self {
        let max_open = config
            .max_open
            .unwrap_or_else(|| (sys::descriptor_limit() / 4).min(MAX_OPEN_CAP));
        let splice = sys::SPLICE && !sys::sigpipe_ends_the_process();
        let inner = Inner {
            config,
            max_open: if splice { max_open } else { 0 },
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
            spliced: AtomicU64::new(0),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The process's pool, with the default configuration.
    pub fn global() -> &'static Pipes {
        static GLOBAL: OnceLock<Pipes> = OnceLock::new();
        GLOBAL.get_or_init(Pipes::default)
    }

    /// The configuration it was made with.
    #[must_use]
    pub fn config(&self) -> &PipesConfig {
        &self.inner.config
    }

    /// The most pipes it opens at once (the configured or the computed
    /// limit; 0 where there is no splice, or where `SIGPIPE` would end the
    /// process).
    #[must_use]
    pub fn max_open(&self) -> usize {
        self.inner.max_open
    }

    /// Pipes open now, in use and idle.
    #[must_use]
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Acquire)
    }

    /// Idle pipes kept for the next tunnels.
    #[must_use]
    pub fn idle(&self) -> usize {
        let idle = self.inner.idle.lock();
        idle.unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Bytes moved through this pool's pipes so far: what the kernel
    /// tunnelled without a copy.
    #[must_use]
    pub fn spliced(&self) -> u64 {
        self.inner.spliced.load(Ordering::Relaxed)
    }

    /// An idle pipe, or a new one within the limit; `None` when the limit
    /// is reached, the system refuses a pipe (out of descriptors, say), or
    /// there is no splice(2) here.
    #[must_use]
    pub fn lease(&self) -> Option<Lease> {
        let inner = &*self.inner;
        let kept = inner
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let pipe = match kept {
            Some(pipe) => pipe,
            None => {
                inner
                    .open
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                        (open < inner.max_open).then_some(open + 1)
                    })
                    .ok()?;
                match sys::Pipe::new(inner.config.size) {
                    Ok(pipe) => pipe,
                    Err(_) => {
                        inner.open.fetch_sub(1, Ordering::AcqRel);
                        return None;
                    }
                }
            }
        };
        Some(Lease {
            pipes: self.clone(),
            pipe: Some(pipe),
            len: 0,
        })
    }

    /// Takes a pipe back: kept if it is empty and there is room, closed
    /// otherwise.
    fn put(&self, pipe: sys::Pipe, empty: bool) {
        let inner = &*self.inner;
        if empty {
            let mut idle = inner.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() < inner.config.max_idle {
                idle.push(pipe);
                return;
            }
        }
        drop(pipe);
        inner.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A pipe taken from a [`Pipes`] pool, given back when dropped: kept if it
/// is empty, closed if bytes were left in it (a failed tunnel).
pub struct Lease {
    pipes: Pipes,
    pipe: Option<sys::Pipe>,
    /// Bytes in the pipe.
    len: usize,
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// Bytes in the pipe: filled and not yet drained.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the pipe is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[cfg(unix)]
    fn pipe(&self) -> &sys::Pipe {
        self.pipe
            .as_ref()
            .expect("a lease holds its pipe until dropped")
    }

    /// Moves what `socket` has, as much as the pipe takes, into the pipe,
    /// without blocking: `Ok(0)` at the end of the socket's stream,
    /// `WouldBlock` when it has nothing (or, if the pipe was not empty,
    /// when the pipe is full). Fill an empty pipe only, so that
    /// `WouldBlock` is the socket's.
    ///
    /// splice(2) stops at a TCP urgent mark (a byte the peer sent out of
    /// band, `MSG_OOB`) and moves nothing past it until a `recv` has read
    /// past it: it then says `Ok(0)` if the peer's FIN is queued and
    /// `EAGAIN` if not, though bytes are waiting. So when splice(2) says
    /// either, `fill` asks the socket (`recv` with `MSG_PEEK`) whether it
    /// holds bytes; if it does, `fill` fails with an error
    /// [`is_unsupported`] recognises, and the caller copies from there on,
    /// as a copying tunnel does (its reads leave the out-of-band byte out).
    ///
    /// # Errors
    ///
    /// What splice(2) says: `WouldBlock`, the socket's own errors, and
    /// those [`is_unsupported`] recognises: a socket splice cannot read,
    /// or one stopped at an urgent mark.
    #[cfg(unix)]
    pub fn fill(&mut self, socket: impl std::os::fd::AsFd) -> io::Result<usize> {
        let socket = socket.as_fd();
        let filled = self.pipe().fill(socket);
        // A full pipe blocks too: ask only when it was empty.
        let stuck = |e: &io::Error| e.kind() == io::ErrorKind::WouldBlock && self.len == 0;
        // The question can meet the socket's error (a reset that came
        // since the splice): that is the answer, as a read's would be.
        // Reporting it clears it, so it must not be dropped: the next
        // splice would find the read side shut and say 0, a clean end.
        let filled = match filled {
            // Bytes may have arrived between the splice that found none
            // and the question: splice once more before calling it a
            // mark. A splice stopped at an urgent mark stays stopped.
            Err(e) if stuck(&e) && sys::holds_bytes(socket)? => self.pipe().fill(socket),
            filled => filled,
        };
        match filled {
            Ok(0) if sys::holds_bytes(socket)? => Err(sys::stopped_at_urgent_mark()),
            Err(e) if stuck(&e) && sys::holds_bytes(socket)? => Err(sys::stopped_at_urgent_mark()),
            Ok(n) => {
                self.len += n;
                Ok(n)
            }
            Err(e) => Err(e),
        }
    }

    /// Moves the pipe's bytes, as many as `socket` takes, into `socket`,
    /// without blocking; `WouldBlock` when it takes none.
    ///
    /// # Errors
    ///
    /// What splice(2) says: `WouldBlock`, or the socket's own errors.
    #[cfg(unix)]
    pub fn drain(&mut self, socket: impl std::os::fd::AsFd) -> io::Result<usize> {
        let n = self.pipe().drain(socket, self.len)?;
        self.len -= n.min(self.len);
        let spliced = &self.pipes.inner.spliced;
        spliced.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Whether a failed [`Lease::fill`] says splice(2) cannot read this socket
/// (`EINVAL`, `ENOSYS`, `EOPNOTSUPP`), or cannot read it now (stopped at a
/// TCP urgent mark with bytes waiting past it), rather than that the
/// connection failed: copy instead. The pipe is empty then if it was
/// empty when filled, so copying from there loses nothing.
#[must_use]
pub fn is_unsupported(error: &io::Error) -> bool {
    sys::unsupported(error) || is_urgent_mark(error)
}

/// The error [`Lease::fill`] gives when splice(2) is stopped at a TCP
/// urgent mark.
#[derive(Debug)]
struct UrgentMark;

impl fmt::Display for UrgentMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("splice(2) stopped at a TCP urgent mark with bytes past it")
    }
}

impl std::error::Error for UrgentMark {}

fn is_urgent_mark(error: &io::Error) -> bool {
    error.get_ref().is_some_and(|e| e.is::<UrgentMark>())
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some(pipe) = self.pipe.take() {
            self.pipes.put(pipe, self.len == 0);
        }
    }
}

/// splice(2) and pipes, where they exist.
#[cfg(any(target_os = "linux", target_os = "android"))]
mod sys {
    use std::io;
    use std::os::fd::{AsFd, OwnedFd};

    use rustix::pipe::{self, PipeFlags, SpliceFlags};

    pub(super) const SPLICE: bool = true;

    /// A pipe: its read end and its write end, both non-blocking.
    pub(super) struct Pipe {
        read: OwnedFd,
        write: OwnedFd,
        size: usize,
    }

    impl Pipe {
        pub(super) fn new(size: Option<usize>) -> io::Result<Self> {
            let (read, write) = pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
            let size = match size {
                Some(bytes) => pipe::fcntl_setpipe_size(&write, bytes)?,
                None => pipe::fcntl_getpipe_size(&write)?,
            };
            Ok(Self { read, write, size })
        }

        /// Moves what `socket` has, as much as the pipe takes, into the
        /// pipe; 0 at the end of the stream.
        pub(super) fn fill(&self, socket: impl AsFd) -> io::Result<usize> {
            let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
            Ok(pipe::splice(
                socket,
                None,
                &self.write,
                None,
                self.size,
                flags,
            )?)
        }

        /// Moves up to `len` bytes of the pipe into `socket`.
        pub(super) fn drain(&self, socket: impl AsFd, len: usize) -> io::Result<usize> {
            let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
            Ok(pipe::splice(&self.read, None, socket, None, len, flags)?)
        }
    }

    /// Whether `socket` holds bytes to read: a `recv` with `MSG_PEEK`,
    /// which reads past an urgent mark where splice(2) stops. No for what
    /// is not a socket, or has nothing now; the socket's error (a reset)
    /// otherwise, which the `recv` took from it.
    pub(super) fn holds_bytes(socket: impl AsFd) -> io::Result<bool> {
        use rustix::io::Errno;
        use rustix::net::{recv, RecvFlags};
        let mut byte = [0; 1];
        let flags = RecvFlags::PEEK | RecvFlags::DONTWAIT;
        match recv(socket, &mut byte[..], flags) {
            Ok((n, _)) => Ok(n > 0),
            Err(Errno::AGAIN | Errno::NOTSOCK | Errno::INTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn stopped_at_urgent_mark() -> io::Error {
        io::Error::other(super::UrgentMark)
    }

    /// Whether a failed splice says it cannot be done on this socket
    /// (rather than that the connection failed).
    pub(super) fn unsupported(error: &io::Error) -> bool {
        use rustix::io::Errno;
        [Errno::INVAL, Errno::NOSYS, Errno::OPNOTSUPP]
            .iter()
            .any(|e| error.raw_os_error() == Some(e.raw_os_error()))
    }

    /// Whether `SIGPIPE` has its default disposition (ending the
    /// process): neither ignored nor caught, as `/proc/self/status` says.
    /// Yes when it cannot tell.
    pub(super) fn sigpipe_ends_the_process() -> bool {
        const SIGPIPE: u32 = 13;
        let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
            return true;
        };
        let mask = |field: &str| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        };
        let (Some(ignored), Some(caught)) = (mask("SigIgn:"), mask("SigCgt:")) else {
            return true;
        };
        (ignored | caught) & (1 << (SIGPIPE - 1)) == 0
    }

    /// `RLIMIT_NOFILE`'s soft value.
    pub(super) fn descriptor_limit() -> usize {
        use rustix::process::{getrlimit, Resource};
        getrlimit(Resource::Nofile)
            .current
            .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX))
    }
}

/// No splice here: no pool ever opens a pipe.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
mod sys {
    use std::io;

    pub(super) const SPLICE: bool = false;

    pub(super) enum Pipe {}

    impl Pipe {
        pub(super) fn new(_: Option<usize>) -> io::Result<Self> {
            Err(io::ErrorKind::Unsupported.into())
        }

        pub(super) fn fill<S>(&self, _: S) -> io::Result<usize> {
            match *self {}
        }

        pub(super) fn drain<S>(&self, _: S, _: usize) -> io::Result<usize> {
            match *self {}
        }
    }

    pub(super) fn unsupported(_: &io::Error) -> bool {
        true
    }

    pub(super) fn descriptor_limit() -> usize {
        0
    }

    pub(super) fn sigpipe_ends_the_process() -> bool {
        true
    }

    #[cfg(unix)]
    pub(super) fn holds_bytes(_: impl std::os::fd::AsFd) -> io::Result<bool> {
        Ok(false)
    }

    #[cfg(unix)]
    pub(super) fn stopped_at_urgent_mark() -> io::Error {
        io::Error::other(super::UrgentMark)
    }
}

#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests {
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    use super::*;

    fn pool(max_open: usize, max_idle: usize) -> Pipes {
        Pipes::new(
            PipesConfig::default()
                .max_open(Some(max_open))
                .max_idle(max_idle),
        )
    }

    /// A connected pair of non-blocking Unix sockets.
    fn pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[test]
    fn a_lease_moves_bytes_socket_to_pipe_to_socket_and_counts_them() {
        let pipes = pool(1, 1);
        let (mut client, from) = pair();
        let (to, mut sink) = pair();
        let mut lease = pipes.lease().expect("one pipe");
        // Nothing yet: the socket says so.
        let e = lease.fill(&from).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);

        client.write_all(b"through the kernel").unwrap();
        assert_eq!(lease.fill(&from).unwrap(), 18);
        assert_eq!((lease.len(), lease.is_empty()), (18, false));
        assert_eq!(lease.drain(&to).unwrap(), 18);
        assert!(lease.is_empty());
        let mut got = [0; 18];
        sink.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"through the kernel");
        assert_eq!(pipes.spliced(), 18);

        // The end of the stream.
        drop(client);
        assert_eq!(lease.fill(&from).unwrap(), 0);
        drop(lease);
        assert_eq!((pipes.open(), pipes.idle()), (1, 1), "kept, empty");
    }

    #[test]
    fn the_pool_is_bounded_reuses_empty_pipes_and_closes_full_ones() {
        let pipes = pool(2, 1);
        let (first, second) = (pipes.lease().unwrap(), pipes.lease().unwrap());
        assert!(pipes.lease().is_none(), "two at most");
        assert_eq!((pipes.open(), pipes.idle()), (2, 0));
        drop(first);
        drop(second);
        // One kept (max_idle), one closed.
        assert_eq!((pipes.open(), pipes.idle()), (1, 1));
        let reused = pipes.lease().unwrap();
        assert_eq!((pipes.open(), pipes.idle()), (1, 0), "the kept one");

        // A pipe left holding bytes (a failed tunnel) is closed, not kept.
        let mut full = reused;
        let (mut client, from) = pair();
        client.write_all(b"left behind").unwrap();
        assert_eq!(full.fill(&from).unwrap(), 11);
        drop(full);
        assert_eq!((pipes.open(), pipes.idle()), (0, 0));
    }

    #[test]
    fn a_zero_limit_opens_nothing_and_the_default_leaves_most_descriptors() {
        let none = pool(0, 8);
        assert!(none.lease().is_none());
        assert_eq!(none.open(), 0);
        let default = Pipes::default();
        assert!(default.max_open() > 0 && default.max_open() <= 4096);
        assert_eq!(default.config(), &PipesConfig::default());
    }

    #[test]
    fn a_descriptor_splice_cannot_read_is_unsupported() {
        let pipes = pool(1, 1);
        let mut lease = pipes.lease().unwrap();
        let dir = std::fs::File::open("/").unwrap();
        let e = lease.fill(&dir).unwrap_err();
        assert!(is_unsupported(&e), "{e}");
        assert!(!is_unsupported(&io::ErrorKind::WouldBlock.into()));
    }

    #[test]
    fn a_pipe_can_be_sized() {
        let pipes = Pipes::new(PipesConfig::default().size(Some(256 * 1024)));
        let lease = pipes.lease().expect("within pipe-max-size");
        assert_eq!(pipes.config().get_size(), Some(256 * 1024));
        drop(lease);
        // Above what an unprivileged process may ask for, a pool refuses
        // the pipe rather than hand out one of another size; as root, the
        // kernel grants it.
        let huge = Pipes::new(PipesConfig::default().size(Some(1 << 30)));
        if let Some(lease) = huge.lease() {
            drop(lease);
        }
        assert_eq!(huge.idle(), huge.open());
    }

    /// A loopback TCP connection whose peer sent `abc`, an out-of-band
    /// `X`, `def`, and (if `fin`) its end: the proxy's side, non-blocking,
    /// and the peer's.
    fn urgent(fin: bool) -> (std::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (ours, _) = listener.accept().unwrap();
        peer.write_all(b"abc").unwrap();
        socket2::SockRef::from(&peer)
            .send_out_of_band(b"X")
            .unwrap();
        peer.write_all(b"def").unwrap();
        if fin {
            peer.shutdown(std::net::Shutdown::Write).unwrap();
        }
        ours.set_nonblocking(true).unwrap();
        (ours, peer)
    }

    /// Fills and drains until `fill` refuses; what went through the pipe.
    /// Waits for bytes still on their way (a millisecond at a time, a
    /// bounded number of times); an end of stream fails the test.
    fn splice_until_refused(lease: &mut Lease, from: &std::net::TcpStream) -> (Vec<u8>, io::Error) {
        let (to, mut sink) = pair();
        let mut got = Vec::new();
        for _ in 0..10_000 {
            match lease.fill(from) {
                Ok(0) => panic!("an end of stream with bytes past the urgent mark"),
                Ok(n) => {
                    assert_eq!(lease.drain(&to).unwrap(), n);
                    let mut buf = vec![0; n];
                    sink.read_exact(&mut buf).unwrap();
                    got.extend_from_slice(&buf);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(e) => return (got, e),
            }
        }
        panic!("stuck at {got:?}: the bytes past the urgent mark never came");
    }

    #[test]
    fn a_fill_stopped_at_an_urgent_mark_says_copy_and_loses_nothing() {
        for fin in [false, true] {
            let pipes = pool(1, 1);
            let mut lease = pipes.lease().unwrap();
            let (mut ours, _peer) = urgent(fin);
            let (spliced, e) = splice_until_refused(&mut lease, &ours);
            assert_eq!(spliced, b"abc", "up to the mark (fin: {fin})");
            assert!(is_unsupported(&e), "{e}");
            assert!(lease.is_empty(), "nothing held back");
            // A read goes on past the mark, without the out-of-band byte.
            ours.set_nonblocking(false).unwrap();
            let mut rest = [0; 3];
            ours.read_exact(&mut rest).unwrap();
            assert_eq!(&rest, b"def");
            if fin {
                assert_eq!(ours.read(&mut rest).unwrap(), 0, "then the end");
            }
            drop(lease);
            assert_eq!((pipes.open(), pipes.idle()), (1, 1), "kept, empty");
        }
    }

    #[test]
    fn only_an_urgent_mark_or_an_unreadable_socket_is_unsupported() {
        assert!(is_unsupported(&sys::stopped_at_urgent_mark()));
        for kind in [
            io::ErrorKind::WouldBlock,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::Other,
        ] {
            assert!(!is_unsupported(&kind.into()), "{kind:?}");
        }
        assert!(!is_unsupported(&io::Error::other("another error")));
    }

    #[test]
    fn a_rust_program_ignores_sigpipe_so_its_pools_splice() {
        // The Rust runtime ignores SIGPIPE before `main` (and the test
        // harness's); `tests/sigpipe.rs` puts it back to the default.
        assert!(!sys::sigpipe_ends_the_process());
        assert!(pool(1, 1).lease().is_some());
    }
}
