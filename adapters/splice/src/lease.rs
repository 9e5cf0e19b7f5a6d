//! A pipe leased from the pool, and the two calls a tunnel direction
//! makes on it.

use std::fmt;
use std::io;

use crate::pool::Pipes;
use crate::sys;

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
    /// An empty `pipe` leased from `pipes`.
    pub(crate) fn new(pipes: Pipes, pipe: sys::Pipe) -> Self {
        Self {
            pipes,
            pipe: Some(pipe),
            len: 0,
        }
    }

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

    /// The pipe's size as the kernel reports it (`F_GETPIPE_SZ`): 16
    /// pages by default (64 KiB with 4 KiB pages), or what
    /// [`PipesConfig::size`](crate::PipesConfig::size) asked for, rounded
    /// up to a power of two pages. One [`fill`](Self::fill) moves at most
    /// this many bytes.
    #[must_use]
    pub fn pipe_size(&self) -> usize {
        self.pipe.as_ref().map_or(0, sys::Pipe::size)
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
        self.pipes.count_spliced(n);
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
pub(crate) struct UrgentMark;

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
