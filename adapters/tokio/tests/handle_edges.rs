//! The spawned writer's handles at the edges: a flush asked for after a
//! failure, pushes after the driver was aborted, a close while a sender
//! waits for room, a flush cancelled while it holds the sink's kept item.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use cleave_proto::{Bytes, WriteQueueConfig};
use cleave_tokio::{spawn_writer, WriteError};
use futures_util::SinkExt;
use tokio::time::timeout;

/// A safety net: a wait this long means it would never end.
const STUCK: Duration = Duration::from_secs(5);

/// A writer that takes bytes only while its budget lasts, and fails every
/// write once told to.
#[derive(Clone, Default)]
struct Gate(Arc<Mutex<GateState>>);

#[derive(Default)]
struct GateState {
    budget: usize,
    fail: bool,
    written: Vec<u8>,
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

    fn fail(&self) {
        let mut state = self.0.lock().unwrap();
        state.fail = true;
        if let Some(waker) = state.waker.take() {
            waker.wake();
        }
    }

    fn written(&self) -> Vec<u8> {
        self.0.lock().unwrap().written.clone()
    }
}

impl tokio::io::AsyncWrite for Gate {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.0.lock().unwrap();
        if state.fail {
            return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
        }
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
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// `flush` waits "until everything queued so far is written and the
/// socket flushed": after a failed write dropped the queue, what was
/// queued will never be, and a flush asked for then fails (it used to
/// take its target from the emptied queue and say Ok).
#[tokio::test]
async fn flush_after_a_failed_write_is_not_ok_for_bytes_that_were_dropped() {
    let gate = Gate::default();
    let (handle, task) = spawn_writer(gate.clone(), WriteQueueConfig::default());
    let ticket = handle
        .try_send(Bytes::from_static(b"never written"))
        .unwrap();
    gate.fail();
    let ended = timeout(STUCK, task).await.expect("the writer task ends");
    assert!(ended.unwrap().is_err(), "the writer failed");
    assert!(gate.written().is_empty(), "nothing went out");
    assert!(
        matches!(handle.written(ticket).await, Err(WriteError::Failed(_))),
        "the ticket is not written"
    );
    let flushed = timeout(STUCK, handle.flush()).await.expect("not stuck");
    assert!(
        matches!(flushed, Err(WriteError::Failed(_))),
        "flush after the failure: {flushed:?} (the queued bytes were dropped)"
    );
}

/// After the driver task is aborted, `try_send` is refused like `send`
/// (it used to take items whose tickets could never complete), and the
/// queue says it is closed.
#[tokio::test]
async fn try_send_after_the_driver_was_aborted_is_refused() {
    let gate = Gate::default(); // takes nothing
    let (handle, task) = spawn_writer(gate.clone(), WriteQueueConfig::default());
    tokio::task::yield_now().await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    let sent = handle.send(Bytes::from_static(b"late")).await;
    assert!(sent.is_err(), "send fails");
    let tried = handle.try_send(Bytes::from_static(b"late"));
    assert!(handle.is_closed());
    assert!(
        tried.is_err(),
        "try_send after the abort: {tried:?}, is_closed() = {}, pending_bytes() = {}",
        handle.is_closed(),
        handle.pending_bytes()
    );
}

/// A task waits in `send` for room; another closes the queue. The sender
/// learns `Closed` at once (its item can never go in), not when the peer
/// next reads (with a peer that never reads, it used to wait for ever).
#[tokio::test]
async fn a_close_wakes_a_sender_waiting_for_room() {
    let gate = Gate::default(); // takes nothing: the peer does not read
    let config = WriteQueueConfig::default().max_items(1).unwrap();
    let (handle, _task) = spawn_writer(gate.clone(), config);
    handle.try_send(Bytes::from(vec![1; 1000])).unwrap(); // full
    let sender = handle.clone();
    let mut send = tokio::spawn(async move {
        sender
            .send(Bytes::from_static(b"waits for room"))
            .await
            .map(drop)
            .map_err(|r| r.into_parts().0)
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!send.is_finished(), "waits for room");
    let closer = handle.clone();
    let _close = tokio::spawn(async move { closer.close().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(handle.is_closed(), "the queue is closed");
    // A direct push says so at once...
    assert!(handle.try_send(Bytes::from_static(b"x")).is_err());
    // ...and so does the waiting sender.
    let sent = timeout(STUCK, &mut send).await;
    assert!(
        matches!(sent, Ok(Ok(Err(WriteError::Closed)))),
        "the waiting sender after the close: {sent:?}"
    );
}

/// The sink keeps an item that found no room; the inherent `flush` waits
/// for room with it still kept, so a flush cancelled meanwhile (a
/// timeout, a `select!`) loses nothing: a later close writes it.
#[tokio::test]
async fn a_cancelled_flush_does_not_lose_the_sinks_kept_item() {
    let gate = Gate::default();
    let config = WriteQueueConfig::default().max_items(1).unwrap();
    let (mut handle, task) = spawn_writer(gate.clone(), config);
    handle.try_send(Bytes::from(vec![1; 1000])).unwrap(); // the queue is full
    handle.feed(Bytes::from(vec![2; 1000])).await.unwrap(); // kept by the sink
    assert!(
        timeout(Duration::from_millis(100), handle.flush())
            .await
            .is_err(),
        "the flush waits for room"
    );
    gate.allow(usize::MAX / 2);
    timeout(STUCK, SinkExt::close(&mut handle))
        .await
        .expect("not stuck")
        .unwrap();
    timeout(STUCK, task).await.unwrap().unwrap().unwrap();
    assert_eq!(
        gate.written().len(),
        2000,
        "the sink's item accepted by start_send and closed Ok was not written"
    );
}
