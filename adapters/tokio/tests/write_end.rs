//! How the write side ends, told truly: a close or flush is `Ok` only when
//! everything queued went out and the write half was shut down (even if
//! reading fails right after), `Err` when a reset or a failed write dropped
//! it; and a closed queue waiting for a slow reader does not keep the
//! driver and the events stream waking each other.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::conn::Framed;
use cleave_proto::{Bytes, ConnConfig, Error, Lines, Timeout, Timeouts};
use cleave_tokio::{spawn_connection, ConnError, FrameReader, Reset};
use futures_util::StreamExt;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream, ReadBuf};
use tokio::time::timeout;

/// A safety net against a stuck test, never what a test asserts.
const STUCK: Duration = Duration::from_secs(20);

/// A duplex stream that counts how often it is polled (reads and writes).
struct Counting {
    inner: DuplexStream,
    polls: Arc<AtomicUsize>,
}

impl AsyncRead for Counting {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.polls.fetch_add(1, Ordering::SeqCst);
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for Counting {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        this.polls.fetch_add(1, Ordering::SeqCst);
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl Reset for Counting {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// After `close()` on a handle, while the peer does not read (the close
/// cannot finish) and the application waits for the next event (reading
/// goes on), the driver and the events stream must both sleep: nothing
/// can change until the peer reads or writes.
#[tokio::test]
async fn a_close_waiting_for_a_slow_reader_does_not_spin_driver_and_events() {
    timeout(STUCK, async {
        let (client, server) = tokio::io::duplex(64);
        let polls = Arc::new(AtomicUsize::new(0));
        let io = Counting {
            inner: server,
            polls: polls.clone(),
        };
        let (mut events, handle, driver) =
            spawn_connection(io, Framed::new(Lines::new()), ConnConfig::default());
        handle.try_send(Bytes::from(vec![b'x'; 4096])).unwrap();
        let closer = {
            let handle = handle.clone();
            tokio::spawn(async move { handle.close().await })
        };
        // Let the driver write what the duplex takes (64 bytes).
        tokio::time::sleep(Duration::from_millis(50)).await;
        let before = polls.load(Ordering::SeqCst);
        // The client neither reads nor writes: no event comes.
        let waited = timeout(Duration::from_millis(300), events.next()).await;
        assert!(waited.is_err(), "no event: {waited:?}");
        let spent = polls.load(Ordering::SeqCst) - before;
        assert!(
            spent < 50,
            "the socket was polled {spent} times while nothing could change"
        );
        closer.abort();
        driver.abort();
        drop(client);
    })
    .await
    .expect("stuck");
}

/// A socket that takes every write, shuts down cleanly, and whose read
/// fails with a reset once its write half was shut down: a peer that
/// read everything, then closed with unread data (a RST).
#[derive(Clone, Default)]
struct ResetAfterFin(Arc<Mutex<ResetState>>);

#[derive(Default)]
struct ResetState {
    written: Vec<u8>,
    shut: bool,
    reader: Option<Waker>,
}

impl AsyncRead for ResetAfterFin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut st = self.0.lock().unwrap();
        if st.shut {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        st.reader = Some(cx.waker().clone());
        Poll::Pending
    }
}

impl AsyncWrite for ResetAfterFin {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.lock().unwrap().written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut st = self.0.lock().unwrap();
        st.shut = true;
        if let Some(reader) = st.reader.take() {
            reader.wake();
        }
        Poll::Ready(Ok(()))
    }
}

impl Reset for ResetAfterFin {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// Everything was written and the write half shut down (a FIN): `close()`
/// says so, even if the peer's reset is read right after.
#[tokio::test]
async fn close_is_ok_once_everything_was_written_and_shut_even_if_a_read_then_fails() {
    timeout(STUCK, async {
        let io = ResetAfterFin::default();
        let (events, handle, driver) =
            spawn_connection(io.clone(), Framed::new(Lines::new()), ConnConfig::default());
        let ticket = handle.send(Bytes::from_static(b"bye\n")).await.unwrap();
        let closed = handle.close().await;
        {
            let st = io.0.lock().unwrap();
            assert_eq!(st.written, b"bye\n", "everything was written");
            assert!(st.shut, "and the write half shut down");
        }
        assert!(
            handle.written(ticket).await.is_ok(),
            "the ticket is written"
        );
        assert!(
            closed.is_ok(),
            "close() after everything was written and shut down: {closed:?}"
        );
        let flushed = handle.flush().await;
        assert!(flushed.is_ok(), "nothing unflushed: {flushed:?}");
        drop(events);
        let _ = driver.await;
    })
    .await
    .expect("stuck");
}

/// A frame timeout with half a line in the buffer resets the connection:
/// what is left of the answer queued before it is dropped and no FIN goes
/// out. A later `close()` (or `flush()`) must not say it wrote what the
/// queue held and shut down.
#[tokio::test]
async fn close_after_a_reset_dropped_the_queue_is_not_ok() {
    timeout(STUCK, async {
        // 4 bytes of room: the answer cannot all go out before the reset.
        let (client, server) = tokio::io::duplex(4);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let timeouts = Timeouts::default().frame(Some(Duration::from_millis(100)));
        let mut conn = FrameReader::with_config(
            server,
            Lines::new(),
            ConnConfig::default().timeouts(timeouts),
        );
        let writer = tokio::spawn(async move {
            client_write.write_all(b"one\ntw").await.unwrap();
            client_write
        });
        assert_eq!(conn.next().await.unwrap().unwrap(), "one");
        conn.send(Bytes::from_static(b"answer\n")).await.unwrap();
        match conn.next().await {
            Some(Err(ConnError::Protocol(Error::TimedOut(Timeout::Frame)))) => {}
            other => panic!("{other:?}"),
        }
        let closed = conn.close().await;
        let flushed = conn.flush().await;
        drop(conn);
        let _client_write = writer.await.unwrap();
        let mut got = Vec::new();
        let _ = client_read.read_to_end(&mut got).await;
        assert_ne!(got, b"answer\n", "the reset dropped part of the answer");
        assert!(
            closed.is_err(),
            "close() said Ok though the queue was dropped by a reset (client got {got:?})"
        );
        assert!(
            flushed.is_err(),
            "flush() said Ok though the queue was dropped by a reset"
        );
    })
    .await
    .expect("stuck");
}

/// A socket whose flush fails once, then would succeed.
#[derive(Default)]
struct FlushFailsOnce {
    failed: bool,
    written: Vec<u8>,
}

impl AsyncRead for FlushFailsOnce {
    fn poll_read(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        _: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Poll::Pending
    }
}

impl AsyncWrite for FlushFailsOnce {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().written.extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(Ok(()));
        }
        this.failed = true;
        Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Reset for FlushFailsOnce {
    fn reset_on_close(&self) -> io::Result<()> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// A failed flush is final, as a failed write is (and as the spawned
/// driver and cleave-std treat it): the next flush does not report the
/// bytes queued since as delivered.
#[tokio::test]
async fn a_failed_flush_is_final() {
    let mut conn = FrameReader::new(FlushFailsOnce::default(), Lines::new());
    conn.send(Bytes::from_static(b"one\n")).await.unwrap();
    let first = conn.flush().await.unwrap_err();
    assert!(matches!(&first, ConnError::Io(e) if e.kind() == io::ErrorKind::ConnectionReset));
    assert!(conn.conn().is_write_failed());
    let again = conn.send(Bytes::from_static(b"two\n")).await;
    assert!(
        again.is_err(),
        "the queue takes nothing after a failure: {again:?}"
    );
    let second = conn.flush().await.unwrap_err();
    assert!(matches!(&second, ConnError::Io(e) if e.kind() == io::ErrorKind::BrokenPipe));
    assert_eq!(conn.get_ref().written, b"one\n");
}
