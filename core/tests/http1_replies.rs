//! What a server writes on its own or in order: the 408 for a head that
//! did not come in time (only when it cannot be taken for another
//! request's response), and `100 Continue` in its place among the
//! responses; `Routed` as its server; encoders that write only what
//! cleave's own parsers read back as given.

use std::time::Duration;

#[path = "support/events.rs"]
mod events;

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

/// Header fields as the encoders take them.
type Fields<'a> = &'a [(&'a str, &'a [u8])];

/// The request encoders refuse the Host and target faults cleave's server
/// refuses (RFC 9112, section 3.2; RFC 9110, section 9.3.6), and what
/// they take, the server takes.
#[test]
fn request_encoders_refuse_heads_the_server_refuses() {
    use cleave_proto::http1::request;
    use cleave_proto::{Misuse, Unencodable};
    let refused = |why| Err(Error::Misuse(Misuse::Unencodable(why)));
    let cases: [(&str, &str, Fields<'_>, Unencodable); 7] = [
        ("GET", "/", &[], Unencodable::HttpHost),
        ("GET", "/", &[("X", b"1")], Unencodable::HttpHost),
        (
            "GET",
            "/",
            &[("Host", b"a"), ("host", b"a")],
            Unencodable::HttpHost,
        ),
        ("GET", "/", &[("Host", b"a b")], Unencodable::HttpHost),
        (
            "GET",
            "http://a/x",
            &[("Host", b"b")],
            Unencodable::HttpHost,
        ),
        ("CONNECT", "/", &[("Host", b"a")], Unencodable::HttpToken),
        (
            "GET",
            "http:///x",
            &[("Host", b"a")],
            Unencodable::HttpToken,
        ),
    ];
    for (method, target, headers, why) in cases {
        let head = request(method, target, headers, Body::Empty);
        assert_eq!(head, refused(why), "{method} {target} {headers:?}");
        // Built by hand, the server refuses the same head.
        let mut raw = format!("{method} {target} HTTP/1.1\r\n").into_bytes();
        for (name, value) in headers {
            raw.extend_from_slice(format!("{name}: ").as_bytes());
            raw.extend_from_slice(value);
            raw.extend_from_slice(b"\r\n");
        }
        raw.extend_from_slice(b"\r\n");
        let mut conn = Conn::new(Server::new(), Duration::ZERO);
        conn.feed(&raw, Duration::ZERO).unwrap();
        assert!(
            conn.poll_event().is_err(),
            "the server took {method} {target}"
        );
    }
    let taken: [(&str, &str, Fields<'_>); 4] = [
        ("GET", "/", &[("Host", b"a")]),
        ("GET", "http://A:80/x", &[("Host", b"a:80")]),
        ("CONNECT", "a:443", &[("Host", b"a:443")]),
        ("OPTIONS", "*", &[("Host", b"[::1]:8080")]),
    ];
    for (method, target, headers) in taken {
        let head = request(method, target, headers, Body::Empty).unwrap();
        let mut conn = Conn::new(Server::new(), Duration::ZERO);
        conn.feed(&head, Duration::ZERO).unwrap();
        assert!(
            matches!(conn.poll_event(), Ok(Some(ServerEvent::Head(_)))),
            "{method} {target}"
        );
    }
}

/// A HEAD (or a CONNECT) that offers an upgrade (`curl -I --http2` sends
/// a HEAD with `Upgrade: h2c`) is switched by a 101; any other answer is
/// still framed by its method: no body after a HEAD.
#[test]
fn a_head_that_offered_an_upgrade_can_be_switched() {
    const SWITCH: &[u8] =
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\nPRI";
    const PLAIN: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    for (method, target, host) in [("HEAD", "/", "a"), ("CONNECT", "a:443", "a:443")] {
        let offer: [(&str, &[u8]); 3] = [
            ("Host", host.as_bytes()),
            ("Connection", b"upgrade"),
            ("Upgrade", b"h2c"),
        ];
        let mut by_hand = Client::new();
        by_hand.expect_upgrade(method);
        let mut by_request = Client::new();
        by_request
            .request(method, target, &offer, Body::Empty)
            .unwrap();
        for client in [by_hand, by_request] {
            let mut conn = Conn::new(client, Duration::ZERO);
            conn.feed(SWITCH, Duration::ZERO).unwrap();
            let first = conn.poll_event();
            assert!(
                matches!(&first, Ok(Some(ClientEvent::Head(r))) if r.switches()),
                "{method}: {first:?}"
            );
        }
    }
    let mut client = Client::new();
    client.expect_upgrade("HEAD");
    let mut conn = Conn::new(client, Duration::ZERO);
    conn.feed(PLAIN, Duration::ZERO).unwrap();
    let head = conn.poll_event();
    assert!(
        matches!(&head, Ok(Some(ClientEvent::Head(r))) if !r.switches() && r.body() == Body::Empty),
        "{head:?}"
    );
    assert_eq!(conn.poll_event(), Ok(Some(ClientEvent::End)));
}

/// A chunk-size line may run 18 bytes past the extension budget left (16
/// hex digits, CR, LF), as `max_chunk_extensions` says, not 19: with no
/// budget, 16 digits are taken and 17 refused.
#[test]
fn a_size_line_one_byte_past_its_bound_is_refused() {
    use cleave_proto::http1::Http1Config;
    use cleave_proto::Limit;
    let config = Http1Config::default().max_chunk_extensions(0);
    for digits in [15usize, 16, 17, 18] {
        let mut input = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        input.extend(std::iter::repeat_n(b'0', digits - 1));
        input.extend_from_slice(b"5\r\nhello\r\n0\r\n\r\n");
        // Whole, and a byte at a time: the same verdict.
        for whole in [true, false] {
            let mut conn = Conn::new(
                {
                    let mut c = Client::with_config(config);
                    c.expect_response("GET");
                    c
                },
                Duration::ZERO,
            );
            let pieces: Vec<&[u8]> = if whole {
                vec![&input[..]]
            } else {
                input.chunks(1).collect()
            };
            let (events, failed) = events::feed_pieces(&mut conn, pieces);
            if digits <= 16 {
                assert_eq!(failed, None, "{digits} digits");
                let body: Vec<u8> = events
                    .iter()
                    .filter_map(|e| match e {
                        ClientEvent::Data(d) => Some(&d[..]),
                        _ => None,
                    })
                    .flatten()
                    .copied()
                    .collect();
                assert_eq!(body, b"hello", "{digits} digits, whole {whole}");
                assert!(matches!(events.last(), Some(ClientEvent::End)));
            } else {
                assert!(
                    matches!(
                        failed,
                        Some(Error::LimitExceeded {
                            limit: Limit::ChunkExtension,
                            ..
                        })
                    ),
                    "{digits} digits, whole {whole}: {failed:?}"
                );
            }
        }
    }
}

/// A protocol handed a buffer other than the one it was reading (its
/// parts taken apart and put together with a shorter buffer at the same
/// stream position) answers
/// from that buffer, the same on every poll, where a position kept from
/// the old one used to index past its end.
#[test]
fn a_shorter_buffer_under_a_parser_mid_line_gives_an_answer() {
    use cleave_proto::{BytesMut, RecvBuf, RecvBufConfig};
    for (kept, swapped) in [
        // Mid chunk-size line: its search stood at byte 13.
        (
            &b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=aaaaaaa"[..],
            &b"5\r\n"[..],
        ),
        // Mid head: its line scan stood past the swapped buffer's end.
        (
            &b"GET / HTTP/1.1\r\nHost: a\r\nX-Pad: aaaaaaaa"[..],
            &b"GET"[..],
        ),
    ] {
        let mut conn = Conn::new(Server::new(), Duration::ZERO);
        conn.feed(kept, Duration::ZERO).expect("room");
        while let Ok(Some(_)) = conn.poll_event() {}
        let (server, old, queue) = conn.into_parts();
        // At the old buffer's place in its stream: the parser's notes
        // seem to apply.
        let buf = RecvBuf::from_buffer_at(
            BytesMut::from(swapped),
            old.position(),
            RecvBufConfig::default(),
        )
        .expect("a valid buffer");
        let mut conn = Conn::from_parts(server, buf, queue, Timeouts::default(), Duration::ZERO);
        match conn.poll_event() {
            Err(e) => assert_eq!(conn.poll_event(), Err(e), "the error is not final"),
            Ok(None) => assert_eq!(conn.poll_event(), Ok(None)),
            Ok(Some(event)) => panic!("an event from {swapped:?}: {event:?}"),
        }
    }
}
