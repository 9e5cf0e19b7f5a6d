//! splice(2) and pipes, where they exist.

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
    pub(super) fn size(&self) -> usize {
        self.size
    }

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
    io::Error::other(crate::lease::UrgentMark)
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
