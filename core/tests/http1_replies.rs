//! What a server writes on its own or in order: the 408 for a head that
//! did not come in time (only when it cannot be taken for another
//! request's response), and `100 Continue` in its place among the
//! responses.

use std::time::Duration;

use cleave_proto::http1::{response, Body, Server, ServerEvent, CONTINUE};
use cleave_proto::{Conn, ConnConfig, Error, Timeout, Timeouts};

/// Everything queued, in the order it goes out.
fn wire(conn: &mut Conn<Server>) -> String {
    let mut out = Vec::new();
    while let Some(chunk) = conn.poll_transmit_chunk() {
        out.extend_from_slice(&chunk);
        let n = chunk.len();
        conn.handle_written(n, conn.now()).unwrap();
    }
    String::from_utf8(out).unwrap()
}

fn with_frame_timeout() -> Conn<Server> {
    let timeouts = Timeouts::default().frame(Some(Duration::from_secs(1)));
    Conn::with_config(
        Server::new(),
        ConnConfig::default().timeouts(timeouts),
        Duration::ZERO,
    )
}

const TIMEOUT_408: &str =
    "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

#[test]
fn a_head_that_does_not_come_in_time_gets_a_408_then_a_clean_close() {
    let mut conn = with_frame_timeout();
    conn.feed(b"GET / HT", Duration::ZERO).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    conn.handle_timeout(Duration::from_secs(2));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Frame)));
    assert_eq!(wire(&mut conn), TIMEOUT_408);
    assert_eq!(
        conn.poll_shutdown(),
        Some(cleave_proto::conn::Shutdown::Write)
    );
}

#[test]
fn no_408_overtakes_a_queued_response() {
    let mut conn = with_frame_timeout();
    conn.feed(
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HT",
        Duration::ZERO,
    )
    .unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(ServerEvent::Head(_)))));
    assert_eq!(conn.poll_event(), Ok(Some(ServerEvent::End)));
    // The answer to /a is queued, not written, when /b times out.
    conn.push(response(200, "OK", &[], Body::Empty).unwrap())
        .unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    conn.handle_timeout(Duration::from_secs(2));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Frame)));
    // A 408 now would read as /a's answer: the connection is reset instead.
    assert_eq!(
        conn.poll_shutdown(),
        Some(cleave_proto::conn::Shutdown::Reset)
    );
}

#[test]
fn a_body_cut_short_by_the_clock_is_a_reset_and_an_idle_keep_alive_a_clean_close() {
    // A body's pace is the idle timeout's (the frame timeout runs while
    // bytes of a head wait in the buffer; body bytes come out as they
    // arrive).
    let idle = Timeouts::default().idle(Some(Duration::from_secs(1)));
    let mut conn = Conn::with_config(
        Server::new(),
        ConnConfig::default().timeouts(idle),
        Duration::ZERO,
    );
    conn.feed(
        b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nabc",
        Duration::ZERO,
    )
    .unwrap();
    while let Ok(Some(_)) = conn.poll_event() {}
    conn.handle_timeout(Duration::from_secs(2));
    assert!(conn.poll_event().is_err());
    assert_eq!(wire(&mut conn), "");
    assert_eq!(
        conn.poll_shutdown(),
        Some(cleave_proto::conn::Shutdown::Reset)
    );

    let idle = Timeouts::default().idle(Some(Duration::from_secs(1)));
    let mut conn = Conn::with_config(
        Server::new(),
        ConnConfig::default().timeouts(idle),
        Duration::ZERO,
    );
    conn.feed(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", Duration::ZERO)
        .unwrap();
    while let Ok(Some(_)) = conn.poll_event() {}
    conn.handle_timeout(Duration::from_secs(2));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Idle)));
    assert_eq!(wire(&mut conn), "");
    assert_eq!(
        conn.poll_shutdown(),
        Some(cleave_proto::conn::Shutdown::Write)
    );
}

#[test]
fn continue_keeps_its_place_after_earlier_responses() {
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(
        b"GET / HTTP/1.1\r\nHost: a\r\n\r\nPOST /e HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
        Duration::ZERO,
    )
    .unwrap();
    while let Some(event) = conn.poll_event().unwrap() {
        match event {
            ServerEvent::Head(r) if r.expects_continue() => {
                conn.push(cleave_proto::Bytes::from_static(CONTINUE))
                    .unwrap();
            }
            ServerEvent::End => {
                conn.push(response(200, "OK", &[], Body::Empty).unwrap())
                    .unwrap();
            }
            _ => {}
        }
    }
    assert_eq!(
        wire(&mut conn),
        "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"
    );
}
