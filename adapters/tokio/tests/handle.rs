//! The cross-task writer's life cycle, on in-memory writers: the last
//! handle's drop closes, an ended writer task fails every waiter, a flush
//! is not held up by other handles' pushes, the `Sink`'s kept item is
//! not lost, and a writer's byte counts are checked. Also: a tunnel
//! passes its tail through a buffering backend at once.

use std::future::{poll_fn, Future};
use std::io;
use std::pin::{pin, Pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::{Bytes, WriteQueueConfig};
use cleave_tokio::{spawn_writer, tunnel, WriteError, Writer};
use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::time::timeout;

/// A wait this long means the future would never complete.
const STALLED: Duration = Duration::from_secs(20);

/// A writer that takes bytes only while its budget lasts, and counts
/// flushes.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<GateState>>);

#[derive(Default)]
struct GateState {
    budget: usize,
    written: Vec<u8>,
    flushes: usize,
    waker: Option<Waker>,
}

impl Gate {
    fn allow(&self, bytes: usize) {
        let mut state = self.0.lock().unwrap();
        state.budget += bytes;
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }

    fn written(&self) -> usize {
        self.0.lock().unwrap().written.len()
    }
}

impl AsyncWrite for Gate {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.0.lock().unwrap();
        if state.budget == 0 {
            state.waker = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let n = state.budget.min(buf.len());
        state.budget -= n;
        state.written.extend_from_slice(&buf[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.0.lock().unwrap().flushes += 1;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Polls `future` once.
async fn poll_once<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *future).poll(cx))).await
}

#[tokio::test]
async fn dropping_the_last_handle_writes_everything_then_shuts_down() {
    let (mut reader, writer) = tokio::io::duplex(64 * 1024);
    let (handle, task) = spawn_writer(writer, WriteQueueConfig::default());
    let other = handle.clone();
    handle.try_send(Bytes::from_static(b"one ")).unwrap();
    other.try_send(Bytes::from_static(b"two")).unwrap();
    drop(handle);
    drop(other); // no close(): the drop of the last handle closes
    let ended = timeout(STALLED, task).await.expect("the writer task ended");
    ended.unwrap().unwrap();
    let mut got = String::new();
    reader.read_to_string(&mut got).await.unwrap(); // ends: shut down
    assert_eq!(got, "one two");
}

#[tokio::test]
async fn an_aborted_writer_task_fails_every_waiter() {
    let gate = Gate::default(); // takes nothing
    let (handle, task) = spawn_writer(gate.clone(), WriteQueueConfig::default());
    let ticket = handle.try_send(Bytes::from(vec![1; 4096])).unwrap();
    tokio::task::yield_now().await; // the writer tries, and waits
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let written = timeout(STALLED, handle.written(ticket))
        .await
        .expect("not stuck");
    assert!(matches!(written, Err(WriteError::Failed(_))), "{written:?}");
    let flushed = timeout(STALLED, handle.flush()).await.expect("not stuck");
    assert!(matches!(flushed, Err(WriteError::Failed(_))), "{flushed:?}");
    let sent = handle.send(Bytes::from_static(b"late")).await.unwrap_err();
    assert!(matches!(sent.error(), WriteError::Failed(_)), "{sent:?}");
    assert_eq!(sent.into_value(), "late", "the bytes come back");
    let closed = timeout(STALLED, handle.close()).await.expect("not stuck");
    assert!(matches!(closed, Err(WriteError::Failed(_))), "{closed:?}");
}

#[tokio::test]
async fn a_flush_is_not_held_up_by_other_handles_pushing() {
    let gate = Gate::default();
    let (first, _task) = spawn_writer(gate.clone(), WriteQueueConfig::default());
    let second = first.clone();
    first.try_send(Bytes::from(vec![1; 1024])).unwrap();
    let mut flush = pin!(first.flush());
    assert!(poll_once(&mut flush).await.is_pending()); // its target: 1 KiB
                                                       // Another handle keeps the queue from ever emptying.
    second.try_send(Bytes::from(vec![2; 64 * 1024])).unwrap();
    gate.allow(2048);
    timeout(STALLED, flush)
        .await
        .expect("flushed once its own bytes were out")
        .unwrap();
    assert_eq!(gate.written(), 2048);
    assert!(first.pending_bytes() > 0, "the queue is not empty");
    assert!(gate.0.lock().unwrap().flushes >= 1);
}

#[tokio::test]
async fn the_sinks_kept_item_is_sent_by_the_inherent_close() {
    let gate = Gate::default();
    let config = WriteQueueConfig::default().max_items(1).unwrap();
    let (mut handle, task) = spawn_writer(gate.clone(), config);
    handle.try_send(Bytes::from(vec![1; 1000])).unwrap(); // the queue is full
                                                          // feed = poll_ready + start_send: the item does not fit and is kept.
    handle.feed(Bytes::from(vec![2; 1000])).await.unwrap();
    assert_eq!(handle.pending_bytes(), 1000, "kept, not queued");
    gate.allow(usize::MAX / 2);
    // The inherent close sends it first.
    timeout(STALLED, handle.close())
        .await
        .expect("not stuck")
        .unwrap();
    task.await.unwrap().unwrap();
    let written = gate.0.lock().unwrap().written.clone();
    assert_eq!(written.len(), 2000);
    assert!(written[..1000].iter().all(|&b| b == 1) && written[1000..].iter().all(|&b| b == 2));
}

#[tokio::test]
async fn the_sink_reports_the_writers_failure_not_a_close() {
    let (reader, writer) = tokio::io::duplex(16);
    drop(reader); // every write fails
    let (mut handle, task) = spawn_writer(writer, WriteQueueConfig::default());
    handle.try_send(Bytes::from_static(b"lost")).unwrap();
    assert!(task.await.unwrap().is_err());
    let sent = SinkExt::send(&mut handle, Bytes::from_static(b"more")).await;
    assert!(matches!(sent, Err(WriteError::Failed(_))), "{sent:?}");
}

#[tokio::test]
async fn the_sinks_flush_waits_only_for_what_it_sent() {
    let gate = Gate::default();
    let (mut sink, _task) = spawn_writer(gate.clone(), WriteQueueConfig::default());
    let other = sink.clone();
    sink.feed(Bytes::from(vec![1; 1024])).await.unwrap();
    other.try_send(Bytes::from(vec![2; 64 * 1024])).unwrap();
    gate.allow(1024);
    timeout(STALLED, SinkExt::flush(&mut sink))
        .await
        .expect("flushed once its own item was out")
        .unwrap();
    assert_eq!(gate.written(), 1024);
    assert_eq!(
        sink.pending_bytes(),
        64 * 1024,
        "the other handle's bytes wait"
    );
}

/// A plain (not vectored) writer that claims one byte more than it took.
struct Liar;

impl AsyncWrite for Liar {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len() + 1))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[tokio::test]
async fn a_writer_that_claims_more_than_it_was_given_is_an_error() {
    let mut writer = Writer::new(Liar);
    let first = writer.push(Bytes::from(vec![1; 1024])).unwrap();
    writer.push(Bytes::from(vec![2; 1024])).unwrap();
    let error = writer.flush().await.unwrap_err();
    // The core's misuse error, as on every adapter.
    assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
    let inner = error
        .get_ref()
        .and_then(|e| e.downcast_ref::<cleave_proto::Error>());
    assert!(
        matches!(
            inner,
            Some(cleave_proto::Error::Misuse(
                cleave_proto::Misuse::AdvanceTooFar { .. }
            ))
        ),
        "{error:?}"
    );
    assert!(
        !writer.queue().is_written(first),
        "no ticket completes on a lie"
    );
}

#[tokio::test]
async fn a_tunnel_passes_its_tail_through_a_buffering_backend_at_once() {
    let (mut client, mut client_end) = tokio::io::duplex(1024);
    let (backend_end, mut backend) = tokio::io::duplex(1024);
    let proxy = tokio::spawn(async move {
        let mut buffered = BufWriter::new(backend_end);
        tunnel(&mut client_end, &mut buffered, Bytes::from_static(b"hello")).await
    });
    // The client sends nothing more and waits; the backend must see the tail.
    let mut tail = [0; 5];
    timeout(STALLED, backend.read_exact(&mut tail))
        .await
        .expect("the tail reached the backend")
        .unwrap();
    assert_eq!(&tail, b"hello");
    backend.write_all(b"hi").await.unwrap();
    let mut answer = [0; 2];
    client.read_exact(&mut answer).await.unwrap();
    assert_eq!(&answer, b"hi");
    drop((client, backend));
    let _ = proxy.await.unwrap();
}
