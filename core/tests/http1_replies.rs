//! What a server writes on its own or in order: the 408 for a head that
//! did not come in time (only when it cannot be taken for another
//! request's response), and `100 Continue` in its place among the
//! responses; `Routed` as its server; encoders that write only what
//! cleave's own parsers read back as given.

use std::time::Duration;

use cleave_proto::http1::{
    response, Body, Client, ClientEvent, PerRequest, Routed, Server, ServerEvent, CONTINUE,
};
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::{Conn, ConnConfig, Error, Protocol, Timeout, Timeouts};

/// Everything queued, in the order it goes out.
fn wire<P: Protocol>(conn: &mut Conn<P>) -> String {
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

/// A request read whole and not answered yet (the queue is empty: the
/// application is still at it), then the next head stalls: a 408 would
/// read as the first request's answer, so the connection is reset.
#[test]
fn no_408_after_a_request_the_application_may_not_have_answered() {
    let mut conn = with_frame_timeout();
    conn.feed(
        b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nzGET /b HT",
        Duration::ZERO,
    )
    .unwrap();
    while let Ok(Some(_)) = conn.poll_event() {}
    conn.handle_timeout(Duration::from_secs(2));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Frame)));
    let written = wire(&mut conn);
    assert_eq!(written, "", "no 408");
    assert_eq!(
        conn.poll_shutdown(),
        Some(cleave_proto::conn::Shutdown::Reset)
    );
    // What a pipelining client would have made of a 408 here.
    let mut client = Client::new();
    client.expect_response("POST");
    let mut reader = Conn::new(client, Duration::ZERO);
    reader.feed(TIMEOUT_408.as_bytes(), Duration::ZERO).unwrap();
    assert!(
        matches!(reader.poll_event(), Ok(Some(ClientEvent::Head(r))) if r.status() == 408),
        "a 408 is read as the POST's answer"
    );
}

fn router() -> Router<&'static str> {
    Router::new("fallback").rule(Match::HttpHost(HostPattern::new("example.com")), "example")
}

/// `Routed` times out as the `Server` under it does: the 408 for a late
/// first head, a reset for a body cut short.
#[test]
fn routed_times_out_as_its_server_does() {
    let timeouts = Timeouts::default().frame(Some(Duration::from_secs(1)));
    let mut conn = Conn::with_config(
        Routed::new(router(), PerRequest::Follow),
        ConnConfig::default().timeouts(timeouts),
        Duration::ZERO,
    );
    conn.feed(b"GET / HT", Duration::ZERO).unwrap();
    assert!(matches!(conn.poll_event(), Ok(None)));
    conn.handle_timeout(Duration::from_secs(2));
    assert!(conn.poll_event().is_err());
    assert_eq!(wire(&mut conn), TIMEOUT_408);

    let idle = Timeouts::default().idle(Some(Duration::from_secs(1)));
    let mut conn = Conn::with_config(
        Routed::new(router(), PerRequest::Follow),
        ConnConfig::default().timeouts(idle),
        Duration::ZERO,
    );
    conn.feed(
        b"POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 9\r\n\r\nabc",
        Duration::ZERO,
    )
    .unwrap();
    while let Ok(Some(_)) = conn.poll_event() {}
    conn.handle_timeout(Duration::from_secs(2));
    assert!(conn.poll_event().is_err());
    assert_eq!(
        conn.poll_shutdown(),
        Some(cleave_proto::conn::Shutdown::Reset),
        "a body cut short must not end with a clean FIN"
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

/// What the encoders take, cleave's parsers read back as given: a CONNECT
/// with a body (which the server refuses) and a value with whitespace at
/// its ends (which a recipient trims) are refused when encoding.
#[test]
fn encoders_refuse_what_would_not_read_back_as_given() {
    use cleave_proto::http1::{last_chunk, request};
    use cleave_proto::{Misuse, Unencodable};
    let refused = |why| Err(Error::Misuse(Misuse::Unencodable(why)));
    for body in [Body::Length(5), Body::Chunked] {
        let head = request("CONNECT", "a:443", &[("Host", b"a:443")], body);
        assert_eq!(head, refused(Unencodable::HttpBody), "{body:?}");
    }
    let head = request("CONNECT", "a:443", &[("Host", b"a:443")], Body::Empty).unwrap();
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(&head, Duration::ZERO).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(ServerEvent::Head(_)))));

    for value in [&b" padded"[..], b"padded\t", b" ", b"\t"] {
        let head = request("GET", "/", &[("Host", b"a"), ("X", value)], Body::Empty);
        assert_eq!(head, refused(Unencodable::HttpValue), "{value:?}");
        let head = response(200, "OK", &[("X", value)], Body::Empty);
        assert_eq!(head, refused(Unencodable::HttpValue), "{value:?}");
        assert_eq!(
            last_chunk(&[("X", value)]),
            refused(Unencodable::HttpValue),
            "{value:?}"
        );
    }
    // Inner whitespace and an empty value are values as given.
    let head = request(
        "GET",
        "/",
        &[("Host", b"a"), ("X", b"a \t b"), ("Y", b"")],
        Body::Empty,
    );
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(&head.unwrap(), Duration::ZERO).unwrap();
    let Ok(Some(ServerEvent::Head(request))) = conn.poll_event() else {
        panic!("no head");
    };
    assert_eq!(request.headers().get("x"), Some(&b"a \t b"[..]));
    assert_eq!(request.headers().get("y"), Some(&b""[..]));
}
