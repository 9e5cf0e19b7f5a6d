//! The connection's timeouts against peers that stop reading, trickle or
//! stall, and its events after a read error: every deadline that a
//! hostile peer could otherwise dodge, and the order of two that pass at
//! once.

#[path = "support/events.rs"]
mod events;
#[path = "support/ws.rs"]
mod ws;

use core::time::Duration;

use cleave_proto::conn::{Conn, ConnConfig, Framed, Phase, Protocol, Raw, Shutdown};
use cleave_proto::websocket::{Kind, WebSocket, WsConfig, WsEvent};
use cleave_proto::{Bytes, Error, Lines, LinesConfig, Timeout, Timeouts, WriteQueueConfig};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The connection's deadline acts: a reset, the peer having taken
/// nothing.
fn resets_at_its_deadline<P: Protocol>(conn: &mut Conn<P>, why: &str) {
    let at = conn
        .poll_timeout()
        .unwrap_or_else(|| panic!("no deadline: {why}"));
    conn.handle_timeout(at);
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset), "{why}");
}

fn with<P: Protocol>(protocol: P, timeouts: Timeouts) -> Conn<P> {
    Conn::with_config(
        protocol,
        ConnConfig::default().timeouts(timeouts),
        Duration::ZERO,
    )
}

/// A protocol error leaves the write side open (the application may
/// still answer), yet a peer that stops reading the queued answer is
/// bounded as before the error.
#[test]
fn after_a_protocol_error_a_queued_answer_still_has_a_deadline() {
    let lines = Framed::new(Lines::with_config(LinesConfig::default().max_length(8)));
    let mut conn = with(lines, Timeouts::NONE.idle(Some(ms(100))));
    conn.feed(b"ask\n", ms(10)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("ask"))));
    assert_eq!(conn.poll_event(), Ok(None));
    conn.push(Bytes::from_static(b"an answer the peer never reads\n"))
        .unwrap();
    assert_eq!(conn.poll_timeout(), Some(ms(110)), "idle bounds it now");
    conn.feed(b"xxxxxxxxxxxxxxxxxxxx", ms(20)).unwrap(); // over the limit
    assert!(matches!(
        conn.poll_event(),
        Err(Error::LimitExceeded { .. })
    ));
    assert!(!conn.is_finished(), "the answer is still queued");
    resets_at_its_deadline(&mut conn, "after the error");
}

/// A tunnel whose peer half-closed and reads nothing: with only a tunnel
/// timeout given, that span bounds it.
#[test]
fn a_half_closed_tunnel_whose_peer_reads_nothing_has_the_tunnel_deadline() {
    let mut conn = with(Raw::new(), Timeouts::NONE.tunnel_idle(Some(ms(1000))));
    conn.feed(b"request", ms(10)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("request"))));
    conn.push(Bytes::from_static(b"the backend's answer"))
        .unwrap();
    assert_eq!(conn.poll_timeout(), Some(ms(1010)));
    conn.handle_eof(ms(20)); // FIN; the peer never reads
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.protocol().phase(), Phase::Done);
    assert!(!conn.is_finished(), "the answer is still queued");
    assert_eq!(
        conn.poll_timeout(),
        Some(ms(1010)),
        "the tunnel span from the last byte"
    );
    conn.handle_timeout(ms(1010));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::TunnelIdle)));
}

/// After a read error, complete events still buffered come out, even
/// behind a reply that waits for room (a pong past the urgent lane's
/// limit): the protocol's `None` then means "room", not "nothing more"
/// (`Protocol::waits_for_room`). Once all is out, nothing more comes.
#[test]
fn after_a_read_error_a_message_behind_an_owed_pong_still_comes() {
    const KEY: Option<[u8; 4]> = Some([0x11, 0x22, 0x33, 0x44]);
    let queue = WriteQueueConfig::default().urgent_max_items(2).unwrap();
    let config = ConnConfig::default().write_queue(queue);
    let mut conn = Conn::with_config(WebSocket::server(WsConfig::default()), config, ms(0));
    let mut bytes = Vec::new();
    for i in 0..3u8 {
        bytes.extend(ws::frame(true, 9, &[i], KEY)); // pings
    }
    bytes.extend(ws::frame(true, 1, b"hello", KEY));
    conn.feed(&bytes, ms(1)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None), "the third pong is owed");
    conn.handle_read_error(ms(2));
    assert_eq!(conn.poll_event(), Ok(None));
    assert!(!conn.is_read_done(), "a message may still come");
    let mut events = Vec::new();
    for _ in 0..4 {
        ws::drain(&mut conn); // the peer takes the pongs: room
        events.extend(conn.poll_event().ok().flatten());
    }
    assert_eq!(events, vec![WsEvent::Text("hello".into())]);
    assert!(conn.recv_buf().is_empty());
    assert!(conn.is_read_done(), "nothing more after it");
}

/// A clean close after a frame timeout, with only that span given: the
/// close waits for a peer that reads nothing only so long.
#[test]
fn a_clean_close_after_a_frame_timeout_lingers_a_span_then_resets() {
    let mut conn = with(
        WebSocket::server(WsConfig::default()),
        Timeouts::NONE.frame(Some(ms(100))),
    );
    let message = conn
        .protocol_mut()
        .message(Kind::Binary, Bytes::from(vec![7u8; 100_000]))
        .unwrap();
    conn.push(message).unwrap();
    conn.feed(&[0x82], ms(10)).unwrap(); // half a frame; the peer never reads
    assert_eq!(conn.poll_event(), Ok(None));
    conn.handle_timeout(ms(110));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Frame)));
    assert!(!conn.is_finished(), "the message and the close are queued");
    resets_at_its_deadline(&mut conn, "after the timeout");
}

/// Empty lines between keep-alive requests count toward the next head's
/// limit: a peer that sends only empty lines, a byte at a time (each
/// restarts the idle timeout, and no frame starts), is refused at
/// `max_head` bytes of them, at the same byte fed whole or byte by byte.
#[test]
fn empty_lines_before_a_request_count_toward_its_head_limit() {
    use cleave_proto::http1::{Http1Config, Server, ServerEvent};
    use cleave_proto::Limit;
    const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    let config = Http1Config::default().max_head(64).unwrap();
    let mut input = REQUEST.to_vec();
    input.extend(b"\r\n".repeat(40));
    let mut outcomes = Vec::new();
    for piece in [input.len(), 1] {
        let mut conn = Conn::new(Server::with_config(config), Duration::ZERO);
        let (events, failed) = events::feed_pieces(&mut conn, input.chunks(piece));
        assert!(matches!(
            events[..],
            [ServerEvent::Head(_), ServerEvent::End]
        ));
        outcomes.push((failed, conn.recv_buf().offset()));
    }
    let at = (REQUEST.len() + 64) as u64;
    let refused = Error::LimitExceeded {
        limit: Limit::HeadLength,
        max: 64,
        attempted: 66,
        offset: at,
    };
    assert_eq!(outcomes, [(Some(refused.clone()), at), (Some(refused), at)]);
    // Up to the limit, empty lines are skipped as before.
    let mut conn = Conn::new(Server::with_config(config), Duration::ZERO);
    let within = [&b"\r\n".repeat(32)[..], REQUEST].concat();
    conn.feed(&within, Duration::ZERO).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(ServerEvent::Head(_)))));
}

/// A timer that fires late, past both the router's inspect delay (5 s)
/// and the opening timeout (10 s), acts as one on time: the silent
/// client is routed to the fallback, not cut.
#[test]
fn a_late_timer_acts_on_the_protocols_earlier_deadline_first() {
    use cleave_proto::route::{Match, Reason, Router};
    use cleave_proto::{Event, Session, SessionConfig};
    let session = || {
        let router = Router::new("other").rule(Match::Prefix("SSH-".into()), "ssh");
        Session::tunnel(router, SessionConfig::default())
    };
    let timeouts = Timeouts::NONE
        .opening(Some(ms(10_000)))
        .tunnel_idle(Some(ms(60_000)));
    let (mut on_time, mut late) = (with(session(), timeouts), with(session(), timeouts));
    assert_eq!(on_time.poll_timeout(), Some(ms(5000)));
    on_time.handle_timeout(ms(5000));
    let Ok(Some(Event::Routed(decision))) = on_time.poll_event() else {
        panic!()
    };
    assert_eq!(decision.reason, Reason::DeadlinePassed);
    late.handle_timeout(ms(12_000));
    let got = late.poll_event();
    assert!(matches!(got, Ok(Some(Event::Routed(_)))), "late: {got:?}");

    // A driver that calls again at once, before any `poll_event` (a
    // shared driver whose events another task takes): the opening timeout
    // still waits for the protocol's turn, and is no deadline meanwhile.
    let mut again = with(session(), timeouts);
    again.handle_timeout(ms(12_000));
    assert_eq!(again.poll_timeout(), None, "nothing due before the turn");
    again.handle_timeout(ms(12_001));
    let got = again.poll_event();
    assert!(matches!(got, Ok(Some(Event::Routed(_)))), "again: {got:?}");
}
