//! A write that failed inside `Stream::recv` is not reported as written
//! by a later flush or close.

use std::io::{self, Read, Write};

use cleave_proto::{Bytes, Error, Framed, Lines};
use cleave_std::{ConnError, Socket, Stream};

/// An in-memory socket: reads come from `input`, every write fails (the
/// peer reset the connection).
struct BrokenWrites {
    input: io::Cursor<Vec<u8>>,
}

impl Read for BrokenWrites {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.input.read(buf)
    }
}

impl Write for BrokenWrites {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::ErrorKind::BrokenPipe.into())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for BrokenWrites {
    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// The answer queued before `recv` is dropped when `recv`'s best-effort
/// write of it fails (the error reported is the protocol's). `close()`
/// must not then say that it wrote what the queue held and shut down.
#[test]
fn close_is_not_ok_after_a_write_failure_recv_swallowed() {
    let io = BrokenWrites {
        input: io::Cursor::new(b"one\ntw".to_vec()),
    };
    let mut stream = Stream::new(io, Framed::new(Lines::new()));
    assert_eq!(stream.recv().unwrap().unwrap(), "one");
    stream
        .conn_mut()
        .push(Bytes::from_static(b"answer\n"))
        .unwrap();
    match stream.recv() {
        Err(ConnError::Protocol(Error::Truncated { .. })) => {}
        other => panic!("{other:?}"),
    }
    let flushed = stream.flush();
    let closed = stream.close();
    assert!(
        flushed.is_err() || closed.is_err(),
        "the answer was never written (every write failed), yet flush() = {flushed:?} and close() = {closed:?}"
    );
}

/// A socket whose writes all succeed, into `out`; reads come one chunk
/// per call, then the end; its FIN fails when `fin_fails`.
struct Chunks {
    reads: Vec<&'static [u8]>,
    out: Vec<u8>,
    writes_fail: bool,
    fin_fails: bool,
}

impl Chunks {
    fn new(reads: Vec<&'static [u8]>) -> Self {
        Self {
            reads,
            out: Vec::new(),
            writes_fail: false,
            fin_fails: false,
        }
    }
}

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.reads.is_empty() {
            return Ok(0);
        }
        let chunk = self.reads.remove(0);
        buf[..chunk.len()].copy_from_slice(chunk);
        Ok(chunk.len())
    }
}

impl Write for Chunks {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        if self.writes_fail {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        self.out.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for Chunks {
    fn shutdown_write(&self) -> io::Result<()> {
        if self.fin_fails {
            return Err(io::ErrorKind::ConnectionReset.into());
        }
        Ok(())
    }

    fn writer(&mut self) -> Option<&mut dyn Write> {
        Some(self)
    }
}

/// A reset drops what is queued at once: a flush before the reset is
/// done must not say it was written.
#[test]
fn flush_is_not_ok_once_a_reset_dropped_the_queue() {
    let mut stream = Stream::new(Chunks::new(vec![]), Framed::new(Lines::new()));
    stream
        .conn_mut()
        .push(Bytes::from_static(b"answer\n"))
        .unwrap();
    stream.conn_mut().reset();
    let flushed = stream.flush();
    assert!(stream.get_ref().out.is_empty(), "nothing was written");
    assert!(
        matches!(&flushed, Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe),
        "{flushed:?}"
    );
}

/// `close()` is `Ok` only once the write half was shut down: a FIN the
/// socket refused is final, and a second `close()` says so again.
#[test]
fn a_failed_shutdown_is_final() {
    let mut io = Chunks::new(vec![]);
    io.fin_fails = true;
    let mut stream = Stream::new(io, Framed::new(Lines::new()));
    stream
        .conn_mut()
        .push(Bytes::from_static(b"answer\n"))
        .unwrap();
    let first = stream.close();
    assert!(
        matches!(&first, Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset),
        "{first:?}"
    );
    assert_eq!(stream.get_ref().out, b"answer\n", "written before the FIN");
    let second = stream.close();
    assert!(
        matches!(&second, Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe),
        "after {first:?}, close() = {second:?}"
    );
}

/// An I/O error from writing a reply inside `recv` is final, as a read's
/// is: the next `recv` says it again instead of reading on.
#[test]
fn a_write_error_inside_recv_is_final() {
    let mut io = Chunks::new(vec![b"one\n", b"two\n"]);
    io.writes_fail = true;
    let mut stream = Stream::new(io, Framed::new(Lines::new()));
    assert_eq!(stream.recv().unwrap().unwrap(), "one");
    stream
        .conn_mut()
        .push(Bytes::from_static(b"bye\n"))
        .unwrap();
    stream.conn_mut().close(); // recv writes it before it blocks
    let first = stream.recv();
    assert!(
        matches!(&first, Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe),
        "{first:?}"
    );
    let second = stream.recv();
    assert!(
        matches!(&second, Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe),
        "after {first:?}, recv() = {second:?}"
    );
}
