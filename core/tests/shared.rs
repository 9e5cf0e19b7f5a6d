//! `conn::Shared`: the rules a driver task and its handles follow, without
//! a runtime. Each test plays the tasks by hand, with wakers that count
//! their wake-ups, and a socket that is a closure.

#![cfg(feature = "std")]

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use cleave_proto::conn::{Conn, Framed, Shared, Shutdown};
use cleave_proto::{Bytes, ConnConfig, ConnError, Lane, Lines, WriteError, WriteQueueConfig};

/// A task: a waker that counts how often it was woken.
struct Task(AtomicUsize);

impl Wake for Task {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn task() -> (Arc<Task>, Waker) {
    let task = Arc::new(Task(AtomicUsize::new(0)));
    (task.clone(), Waker::from(task))
}

fn woken(task: &Task) -> usize {
    task.0.load(Ordering::SeqCst)
}

const NOW: Duration = Duration::ZERO;

fn lines(max_bytes: usize) -> Shared<Framed<Lines>> {
    let queue = WriteQueueConfig::default().max_bytes(max_bytes).unwrap();
    let config = ConnConfig::default().write_queue(queue);
    Shared::new(Conn::with_config(Framed::new(Lines::new()), config, NOW))
}

/// One driver turn that writes at most `max` bytes of what is queued.
fn write_turn(
    shared: &mut Shared<Framed<Lines>>,
    max: usize,
    out: &mut Vec<u8>,
) -> Option<cleave_proto::Marks> {
    let start = shared.start_turn();
    shared
        .conn_mut()
        .write_io(NOW, |slices| {
            let all: Vec<u8> = slices.iter().flat_map(|s| s.iter().copied()).collect();
            let n = all.len().min(max);
            out.extend_from_slice(&all[..n]);
            Ok(Some(n))
        })
        .unwrap();
    shared.end_turn(start)
}

#[test]
fn a_ticket_waiter_is_woken_by_the_turn_that_writes_its_bytes() {
    let mut shared = lines(1 << 20);
    let (handle, waker) = task();
    let cx = Context::from_waker(&waker);
    let first = shared
        .push(Lane::Bulk, Bytes::from_static(b"one\n"))
        .unwrap();
    let second = shared
        .push(Lane::Bulk, Bytes::from_static(b"two\n"))
        .unwrap();
    assert!(shared.poll_written(&cx, second).is_pending());

    let mut out = Vec::new();
    write_turn(&mut shared, 4, &mut out);
    assert_eq!(out, b"one\n");
    assert_eq!(woken(&handle), 0, "its bytes are not out yet");
    assert!(matches!(
        shared.poll_written(&cx, first),
        Poll::Ready(Ok(()))
    ));
    write_turn(&mut shared, 64, &mut out);
    assert_eq!(out, b"one\ntwo\n");
    assert_eq!(woken(&handle), 1);
    assert!(matches!(
        shared.poll_written(&cx, second),
        Poll::Ready(Ok(()))
    ));
}

#[test]
fn a_flush_waiter_is_answered_after_the_socket_is_flushed() {
    let mut shared = lines(1 << 20);
    let (handle, waker) = task();
    let cx = Context::from_waker(&waker);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"one\n"))
        .unwrap();
    let target = shared.conn().queue().end_marks();
    assert!(shared.poll_flushed(&cx, target).is_pending());

    let mut out = Vec::new();
    let flush_at = write_turn(&mut shared, 64, &mut out).expect("a flush is due");
    assert!(
        shared.poll_flushed(&cx, target).is_pending(),
        "written, not flushed"
    );
    shared.did_flush(flush_at);
    assert!(woken(&handle) >= 1);
    assert!(matches!(
        shared.poll_flushed(&cx, target),
        Poll::Ready(Ok(()))
    ));
    // Nothing new: no flush asked for again.
    assert!(write_turn(&mut shared, 64, &mut out).is_none());
}

#[test]
fn a_full_lane_keeps_the_item_and_the_turn_that_frees_room_wakes_the_sender() {
    let mut shared = lines(8);
    let (sender, waker) = task();
    let cx = Context::from_waker(&waker);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"1234567\n"))
        .unwrap();
    let mut slot = Some(Bytes::from_static(b"next\n"));
    assert!(shared.poll_push(&cx, &mut slot).is_pending());
    assert_eq!(slot.as_deref(), Some(&b"next\n"[..]), "the item is kept");

    let mut out = Vec::new();
    write_turn(&mut shared, 64, &mut out);
    assert_eq!(woken(&sender), 1);
    assert!(matches!(
        shared.poll_push(&cx, &mut slot),
        Poll::Ready(Ok(_))
    ));
    assert!(slot.is_none());
}

#[test]
fn a_failed_socket_answers_every_waiter_with_its_error() {
    let mut shared = lines(8);
    let (waiter, waker) = task();
    let cx = Context::from_waker(&waker);
    let ticket = shared
        .push(Lane::Bulk, Bytes::from_static(b"1234567\n"))
        .unwrap();
    assert!(shared.poll_written(&cx, ticket).is_pending());
    assert!(shared.poll_closed(&cx).is_pending());

    let e = shared.fail(io::ErrorKind::ConnectionReset.into(), NOW);
    assert!(matches!(&e, ConnError::Io(e) if e.kind() == io::ErrorKind::ConnectionReset));
    assert!(woken(&waiter) >= 1);
    for polled in [shared.poll_written(&cx, ticket), shared.poll_closed(&cx)] {
        assert!(
            matches!(&polled, Poll::Ready(Err(WriteError::Failed(e))) if e.kind() == io::ErrorKind::ConnectionReset),
            "{polled:?}"
        );
    }
    let refused = shared.push_or_full(Bytes::from_static(b"x\n")).unwrap_err();
    assert!(matches!(refused.into_parts(), (WriteError::Failed(_), item) if item == "x\n"));
    // The events stream ends with the socket's error.
    assert!(matches!(
        shared.poll_event(&cx),
        Poll::Ready(Some(Err(ConnError::Io(_))))
    ));
}

#[test]
fn with_events_and_handles_gone_the_write_side_closes_after_what_was_queued() {
    let mut shared = lines(1 << 20);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"last\n"))
        .unwrap();
    shared.drop_events();
    shared.drop_handle();
    let start = shared.start_turn();
    assert!(shared.conn().queue().is_closed());
    let _ = shared.end_turn(start);
    assert_eq!(
        shared.conn().poll_shutdown(),
        None,
        "the queued line goes first"
    );
    let mut out = Vec::new();
    write_turn(&mut shared, 64, &mut out);
    assert_eq!(out, b"last\n");
    assert_eq!(shared.conn().poll_shutdown(), Some(Shutdown::Write));
}

#[test]
fn a_failed_connection_with_bytes_left_and_nobody_holding_it_resets() {
    let mut shared = lines(1 << 20);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"never read\n"))
        .unwrap();
    // A protocol error: more than a line may hold.
    let big = vec![b'x'; 100 * 1024];
    let _ = shared.conn_mut().feed(&big, NOW);
    let (_, waker) = task();
    let cx = Context::from_waker(&waker);
    while let Poll::Ready(Some(Ok(_))) = shared.poll_event(&cx) {}
    assert!(shared.conn().error().is_some());
    shared.drop_events();
    shared.drop_handle();
    let _ = shared.start_turn();
    assert_eq!(shared.conn().poll_shutdown(), Some(Shutdown::Reset));
}

#[test]
fn the_events_stream_gets_the_events_then_the_end() {
    let mut shared = lines(1 << 20);
    let (events, waker) = task();
    let cx = Context::from_waker(&waker);
    assert!(shared.poll_event(&cx).is_pending());
    shared.conn_mut().feed(b"one\n", NOW).unwrap();
    shared.after_read();
    assert_eq!(woken(&events), 1);
    assert!(matches!(shared.poll_event(&cx), Poll::Ready(Some(Ok(line))) if line == "one"));
    shared.conn_mut().handle_eof(NOW);
    assert!(matches!(shared.poll_event(&cx), Poll::Ready(None)));
}

#[test]
fn the_driver_finishes_once_the_queue_is_closed_and_waits_while_it_is_open() {
    let mut shared = lines(1 << 20);
    let (driver, waker) = task();
    let cx = Context::from_waker(&waker);
    assert!(
        shared.finish(&cx).is_pending(),
        "the handles may still push"
    );
    shared
        .push(Lane::Bulk, Bytes::from_static(b"more\n"))
        .unwrap();
    assert_eq!(woken(&driver), 1, "a push wakes the waiting driver");
    let (closer, close_waker) = task();
    assert!(shared
        .poll_closed(&Context::from_waker(&close_waker))
        .is_pending());
    assert!(matches!(shared.finish(&cx), Poll::Ready(Ok(()))));
    assert!(woken(&closer) >= 1, "everyone learns the driver stopped");
}

#[test]
fn an_abandoned_driver_fails_every_waiter() {
    let mut shared = lines(1 << 20);
    let (waiter, waker) = task();
    let cx = Context::from_waker(&waker);
    let ticket = shared
        .push(Lane::Bulk, Bytes::from_static(b"one\n"))
        .unwrap();
    assert!(shared.poll_written(&cx, ticket).is_pending());
    shared.abandon();
    assert_eq!(woken(&waiter), 1);
    assert!(matches!(
        shared.poll_written(&cx, ticket),
        Poll::Ready(Err(WriteError::Failed(_)))
    ));
}

/// A sender re-polled while the lane stays full (a `select!` loop, a
/// spurious wake-up) waits once: it is registered, and woken, once.
#[test]
fn a_sender_polled_again_is_registered_once() {
    let mut shared = lines(8);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"1234567\n"))
        .unwrap();
    let (sender, waker) = task();
    let cx = Context::from_waker(&waker);
    let mut slot = Some(Bytes::from_static(b"more\n"));
    for _ in 0..1_000 {
        assert!(shared.poll_push(&cx, &mut slot).is_pending());
    }
    let mut out = Vec::new();
    write_turn(&mut shared, 64, &mut out);
    assert_eq!(woken(&sender), 1);
}

/// A close from a handle wakes the senders waiting for room (none will
/// come), and a flush asked for after a failure fails.
#[test]
fn a_close_wakes_the_senders_and_a_flush_after_a_failure_fails() {
    let mut shared = lines(8);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"1234567\n"))
        .unwrap();
    let (sender, waker) = task();
    let mut slot = Some(Bytes::from_static(b"more\n"));
    assert!(shared
        .poll_push(&Context::from_waker(&waker), &mut slot)
        .is_pending());
    let (_, close_waker) = task();
    assert!(shared
        .poll_closed(&Context::from_waker(&close_waker))
        .is_pending());
    assert_eq!(woken(&sender), 1);
    assert!(matches!(
        shared.poll_push(&Context::from_waker(&waker), &mut slot),
        Poll::Ready(Err(_))
    ));

    assert!(shared.flush_target().is_ok());
    let _ = shared.fail(io::ErrorKind::ConnectionReset.into(), NOW);
    assert!(matches!(shared.flush_target(), Err(WriteError::Failed(_))));
}

/// A failure that dropped nothing (the socket failed reading after
/// everything queued was written and flushed) does not fail a flush asked
/// for after it: there is nothing it could not do.
#[test]
fn a_flush_after_a_failure_that_dropped_nothing_is_ok() {
    let mut shared = lines(1 << 20);
    let (_, waker) = task();
    let cx = Context::from_waker(&waker);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"one\n"))
        .unwrap();
    let target = shared.flush_target().unwrap();
    assert!(shared.poll_flushed(&cx, target).is_pending());
    let mut out = Vec::new();
    let flush_at = write_turn(&mut shared, 64, &mut out).expect("a flush is due");
    shared.did_flush(flush_at);

    let _ = shared.fail(io::ErrorKind::ConnectionReset.into(), NOW);
    let target = shared.flush_target();
    assert!(target.is_ok(), "{target:?}");
    assert!(matches!(
        shared.poll_flushed(&cx, target.unwrap()),
        Poll::Ready(Ok(()))
    ));
}

/// A failed write drops the queue before the driver reports the failure:
/// the queue then looks empty, and a flush asked for after it still fails
/// (what was queued will never go out).
#[test]
fn a_flush_after_a_failed_write_that_dropped_bytes_fails() {
    let mut shared = lines(1 << 20);
    shared
        .push(Lane::Bulk, Bytes::from_static(b"one\ntwo\n"))
        .unwrap();
    let mut out = Vec::new();
    write_turn(&mut shared, 4, &mut out);
    assert_eq!(out, b"one\n");

    // The driver's write fails: the core drops the rest, then the failure
    // is shared.
    shared.conn_mut().handle_write_error(NOW);
    assert!(shared.conn().queue().is_flushed(), "the queue looks empty");
    let _ = shared.fail(io::ErrorKind::BrokenPipe.into(), NOW);
    assert!(matches!(
        shared.flush_target(),
        Err(WriteError::Failed(e)) if e.kind() == io::ErrorKind::BrokenPipe
    ));
}
