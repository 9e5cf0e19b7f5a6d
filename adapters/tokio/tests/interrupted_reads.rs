//! A read that is `Interrupted` is retried (the core's `read_io` rule)
//! on every read path of a `Connection`, not only once the buffer holds a
//! block.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use cleave_proto::conn::Framed;
use cleave_proto::Lines;
use cleave_tokio::{Connection, Reset};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A stream that plays its script of reads (then waits for ever), and
/// takes every write.
struct Scripted {
    reads: VecDeque<io::Result<&'static [u8]>>,
}

impl AsyncRead for Scripted {
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

impl AsyncWrite for Scripted {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(b.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Reset for Scripted {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

fn interrupted() -> io::Result<&'static [u8]> {
    Err(io::ErrorKind::Interrupted.into())
}

/// With bytes already buffered (the read goes through `Conn::read_io`),
/// an interrupted read is retried.
#[tokio::test]
async fn an_interrupted_read_into_a_buffer_with_a_block_is_retried() {
    let io = Scripted {
        reads: [Ok(&b"hel"[..]), interrupted(), Ok(&b"lo\n"[..])].into(),
    };
    let mut conn = Connection::new(io, Framed::new(Lines::new()));
    let line = tokio::time::timeout(Duration::from_secs(5), conn.next())
        .await
        .expect("stuck");
    assert_eq!(line.unwrap().unwrap(), "hello");
}

/// With an empty buffer (the read goes into the stack first), the same
/// interrupted read ends the connection with a final `Interrupted` error.
#[tokio::test]
async fn an_interrupted_read_into_an_empty_buffer_is_retried_too() {
    let io = Scripted {
        reads: [interrupted(), Ok(&b"hello\n"[..])].into(),
    };
    let mut conn = Connection::new(io, Framed::new(Lines::new()));
    let line = tokio::time::timeout(Duration::from_secs(5), conn.next())
        .await
        .expect("stuck");
    match line {
        Some(Ok(line)) => assert_eq!(line, "hello"),
        other => panic!("an interrupted read ended the connection: {other:?}"),
    }
}
