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
