//! The socket-facing rules every driver shares (`conn::write_chunks`,
//! `Conn::flush_io`): partial and interrupted writes lose nothing, a
//! writer that takes nothing fails, a failed flush is final.

#![cfg(feature = "std")]

use std::io::{self, Write};
use std::time::Duration;

use cleave_proto::conn::{write_chunks, Conn, Framed};
use cleave_proto::{Bytes, ConnError, Lines};

/// Takes at most `max` bytes a call, and is interrupted every other
/// call.
struct Stingy {
    out: Vec<u8>,
    max: usize,
    calls: usize,
}

impl Write for Stingy {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.calls += 1;
        if self.calls % 2 == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.max);
        self.out.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn partial_and_interrupted_writes_lose_nothing() {
    let chunks: Vec<Bytes> = (0..50u8)
        .map(|i| Bytes::from(vec![i; usize::from(i) * 97 % 1500 + 1]))
        .collect();
    let expected = chunks.concat();
    let mut io = Stingy {
        out: Vec::new(),
        max: 333,
        calls: 0,
    };
    let mut rest = chunks;
    while !rest.is_empty() {
        let written = write_chunks(&rest, |slices| io.write_vectored(slices).map(Some));
        let mut n = written.unwrap().expect("a blocking writer always says");
        while n > 0 {
            let take = n.min(rest[0].len());
            rest[0] = rest[0].slice(take..);
            if rest[0].is_empty() {
                rest.remove(0);
            }
            n -= take;
        }
    }
    assert_eq!(io.out, expected);
}

#[test]
fn a_writer_that_takes_nothing_is_an_error() {
    let mut full: &mut [u8] = &mut [];
    let e = write_chunks(&[Bytes::from_static(b"x")], |s| {
        full.write_vectored(s).map(Some)
    })
    .unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WriteZero);
    let nothing = write_chunks(&[], |s| full.write_vectored(s).map(Some)).unwrap();
    assert_eq!(nothing, Some(0), "nothing to write");
}

#[test]
fn a_failed_flush_fails_writing_and_an_interrupted_one_is_retried() {
    let now = Duration::ZERO;
    let mut conn = Conn::new(Framed::new(Lines::new()), now);
    let mut calls = 0;
    let flushed = conn.flush_io(now, || {
        calls += 1;
        match calls {
            1 => Err(io::ErrorKind::Interrupted.into()),
            _ => Ok(Some(())),
        }
    });
    assert!(matches!(flushed, Ok(true)));
    assert_eq!(calls, 2);
    assert!(matches!(conn.flush_io(now, || Ok(None)), Ok(false)));
    assert!(!conn.is_write_failed(), "nothing now is not a failure");

    conn.push(Bytes::from_static(b"queued\n")).unwrap();
    let failed = conn.flush_io(now, || Err(io::ErrorKind::ConnectionReset.into()));
    assert!(matches!(failed, Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::ConnectionReset));
    assert!(conn.is_write_failed());
    assert!(conn.queue().is_empty(), "what was queued is dropped");
    assert!(
        matches!(conn.check_written(), Err(ConnError::Io(e)) if e.kind() == io::ErrorKind::BrokenPipe)
    );
}
