//! The client role: a request that says it is the connection's last
//! (`Connection: close`, RFC 9112 section 9.6) makes its response the
//! last one parsed, whether or not the server repeats "close"; each case
//! fed whole and cut at every point.

use std::time::Duration;

use cleave_proto::http1::{Body, Client, ClientEvent, Server, ServerEvent};
use cleave_proto::Conn;

const T0: Duration = Duration::ZERO;

/// A response that does not repeat "close", then bytes the server should
/// not have sent (a second response nobody may parse).
const ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
const AFTER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

/// A connection of `client` fed `input` in two reads cut at `cut`, and
/// the events it gave, polled after each read.
fn fed(client: Client, input: &[u8], cut: usize) -> (Conn<Client>, Vec<ClientEvent>) {
    let mut conn = Conn::new(client, T0);
    let mut events = Vec::new();
    for piece in [&input[..cut], &input[cut..]] {
        conn.feed(piece, T0).unwrap();
        while let Some(event) = conn.poll_event().unwrap() {
            events.push(event);
        }
    }
    (conn, events)
}

/// Feeds `ANSWER` then `AFTER` to a client made by `make`, cut at `cut`,
/// and checks the exchange is the last: `keep_alive` false, nothing
/// parsed after the end, the rest left in the buffer.
fn check_last(make: &dyn Fn() -> Client, label: &str) {
    let input = [ANSWER, AFTER].concat();
    for cut in 0..=input.len() {
        let (mut conn, events) = fed(make(), &input, cut);
        let [ClientEvent::Head(head), rest @ ..] = &events[..] else {
            panic!("{label} at {cut}: {events:?}")
        };
        assert_eq!(head.status(), 200, "{label} at {cut}");
        assert!(
            !head.keep_alive(),
            "{label} at {cut}: the exchange is the last"
        );
        let body: Vec<u8> = rest
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Data(d) => Some(d.to_vec()),
                _ => None,
            })
            .flatten()
            .collect();
        assert_eq!(body, b"ok", "{label} at {cut}");
        assert_eq!(rest.last(), Some(&ClientEvent::End), "{label} at {cut}");
        assert_eq!(conn.recv_buf().peek(), AFTER, "{label} at {cut}: kept");
        assert!(conn.is_finished() || conn.poll_event().unwrap().is_none());
    }
}

#[test]
fn a_request_sent_with_connection_close_is_the_last() {
    check_last(
        &|| {
            let mut client = Client::new();
            client
                .request(
                    "GET",
                    "/",
                    &[("Host", b"a"), ("Connection", b"keep-alive, Close")],
                    Body::Empty,
                )
                .unwrap();
            client
        },
        "request",
    );
}

#[test]
fn a_request_recorded_as_the_last_is_the_last() {
    check_last(
        &|| {
            let mut client = Client::new();
            client.expect_last_response("GET");
            client
        },
        "expect_last_response",
    );
}

/// A proxy forwards request heads as they came: the client side learns
/// from each head whether it was the last.
#[test]
fn a_forwarded_request_head_says_whether_it_is_the_last() {
    let cases: [(&[u8], bool); 4] = [
        (
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
            true,
        ),
        (b"GET / HTTP/1.0\r\n\r\n", true),
        (b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false),
        (b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", false),
    ];
    for (raw, last) in cases {
        let mut server = Conn::new(Server::new(), T0);
        server.feed(raw, T0).unwrap();
        let Some(ServerEvent::Head(request)) = server.poll_event().unwrap() else {
            panic!("a request head")
        };
        let make = || {
            let mut client = Client::new();
            client.expect_response_to(&request);
            client
        };
        if last {
            check_last(&make, "expect_response_to");
        } else {
            // Kept open: the second response is parsed too.
            let mut client = Conn::new(make(), T0);
            client.protocol_mut().expect_response("GET");
            client.feed(&[ANSWER, AFTER].concat(), T0).unwrap();
            let mut heads = 0;
            while let Some(event) = client.poll_event().unwrap() {
                if let ClientEvent::Head(head) = event {
                    assert!(head.keep_alive());
                    heads += 1;
                }
            }
            assert_eq!(heads, 2);
            assert!(client.recv_buf().peek().is_empty());
        }
    }
}

#[test]
fn a_head_request_that_is_the_last_has_no_body_and_ends_the_parse() {
    let mut client = Client::new();
    client
        .request(
            "HEAD",
            "/",
            &[("Host", b"a"), ("Connection", b"close")],
            Body::Empty,
        )
        .unwrap();
    let mut conn = Conn::new(client, T0);
    let input = b"HTTP/1.1 200 OK\r\nContent-Length: 512\r\n\r\nleftover";
    conn.feed(input, T0).unwrap();
    let Some(ClientEvent::Head(head)) = conn.poll_event().unwrap() else {
        panic!("a head")
    };
    assert!(!head.keep_alive());
    assert_eq!(conn.poll_event().unwrap(), Some(ClientEvent::End));
    assert_eq!(conn.poll_event().unwrap(), None);
    assert_eq!(conn.recv_buf().peek(), b"leftover");
}

/// A response with no request waiting is the connection's last: seen,
/// and nothing after it parsed (the bytes stay in the buffer), so it is
/// never taken for the answer to a request recorded after it.
#[test]
fn a_response_nobody_asked_for_is_the_last() {
    check_last(&Client::new, "nothing asked");
    // One answered, then one more the server should not have sent.
    let stray = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nevil";
    let input = [ANSWER, stray, AFTER].concat();
    for cut in 0..=input.len() {
        let mut client = Client::new();
        client.expect_response("GET");
        let (mut conn, events) = fed(client, &input[..], cut);
        let heads: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ClientEvent::Head(head) => Some(head.keep_alive()),
                _ => None,
            })
            .collect();
        assert_eq!(heads, [true, false], "at {cut}: {events:?}");
        assert_eq!(events.last(), Some(&ClientEvent::End), "at {cut}");
        assert_eq!(conn.protocol().pending(), 0, "at {cut}");
        // A request recorded now does not get the bytes after the stray.
        conn.protocol_mut().expect_response("GET");
        assert_eq!(conn.poll_event(), Ok(None), "at {cut}");
        assert_eq!(conn.recv_buf().peek(), AFTER, "at {cut}: kept");
    }
}

/// The stream ending after an interim response and before the final one
/// is a cut response, not a close between responses.
#[test]
fn a_close_after_an_interim_response_is_a_truncated_one() {
    let input = b"HTTP/1.1 100 Continue\r\n\r\n";
    for cut in 0..=input.len() {
        let mut client = Client::new();
        client.expect_response("POST");
        let (mut conn, events) = fed(client, &input[..], cut);
        assert!(
            matches!(&events[..], [ClientEvent::Interim(r)] if r.status() == 100),
            "at {cut}: {events:?}"
        );
        conn.handle_eof(T0);
        let error = conn.poll_event().unwrap_err();
        assert!(
            matches!(&error, cleave_proto::Error::Truncated { partial, offset }
                if partial.is_empty() && *offset == input.len() as u64),
            "at {cut}: {error:?}"
        );
        assert_eq!(conn.poll_event(), Err(error), "final");
        assert_eq!(conn.protocol().pending(), 1);
    }
    // Without an interim response, a close between responses is clean.
    let mut client = Client::new();
    client.expect_response("GET");
    let mut conn = Conn::new(client, T0);
    conn.handle_eof(T0);
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.protocol().pending(), 1);
}

/// With `allow_obs_fold_in_responses`, a folded field line is taken with
/// its fold replaced by spaces where it lies (RFC 9112, section 5.2),
/// before the framing is read; without it, refused. Whichever way the
/// bytes come.
#[test]
fn folded_response_lines_are_unfolded_in_place_when_allowed() {
    use cleave_proto::http1::Http1Config;
    use cleave_proto::{Error, HttpField, InvalidInput};
    let input = b"HTTP/1.1 200 OK\r\nX: a\r\n\tb\r\nTransfer-Encoding:\r\n chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n";
    let lenient = Http1Config::default().allow_obs_fold_in_responses(true);
    for cut in 0..=input.len() {
        let mut client = Client::with_config(lenient);
        client.expect_response("GET");
        let (_, events) = fed(client, &input[..], cut);
        let [ClientEvent::Head(head), data @ .., ClientEvent::End] = &events[..] else {
            panic!("at {cut}: {events:?}")
        };
        assert_eq!(head.body(), Body::Chunked, "at {cut}");
        let hi: Vec<u8> = data
            .iter()
            .flat_map(|e| match e {
                ClientEvent::Data(d) => d.to_vec(),
                other => panic!("at {cut}: {other:?}"),
            })
            .collect();
        assert_eq!(hi, b"hi", "at {cut}");
        assert_eq!(head.headers().get("x"), Some(&b"a  \tb"[..]), "at {cut}");
        assert_eq!(
            head.headers().get("transfer-encoding"),
            Some(&b"chunked"[..])
        );
        assert_eq!(
            &head.as_bytes()[..],
            &b"HTTP/1.1 200 OK\r\nX: a  \tb\r\nTransfer-Encoding:   chunked\r\n\r\n"[..],
            "at {cut}: unfolded where it lay"
        );
    }
    let refused = |config: Http1Config, input: &[u8]| {
        let mut client = Client::with_config(config);
        client.expect_response("GET");
        let mut conn = Conn::new(client, T0);
        conn.feed(input, T0).unwrap();
        let error = conn.poll_event().unwrap_err();
        assert_eq!(conn.recv_buf().peek(), input, "handed back as it came");
        error
    };
    let field = |field| Error::InvalidInput {
        kind: InvalidInput::Http(field),
        offset: 0,
    };
    let kind = |e: Error| match e {
        Error::InvalidInput { kind, .. } => field(match kind {
            InvalidInput::Http(f) => f,
            other => panic!("{other:?}"),
        }),
        other => panic!("{other:?}"),
    };
    // Off by default.
    assert_eq!(
        kind(refused(Http1Config::default(), input)),
        field(HttpField::ObsFold)
    );
    // A folded head refused for another fault stays as it came.
    let two_lengths =
        b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
    assert_eq!(
        kind(refused(lenient, two_lengths)),
        field(HttpField::ContentLength)
    );
    // Whitespace before the first field line is no fold (RFC 9112, 2.2).
    let first = b"HTTP/1.1 200 OK\r\n X: a\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(kind(refused(lenient, first)), field(HttpField::Whitespace));
    // Requests are never unfolded.
    let mut conn = Conn::new(
        Server::with_config(Http1Config::default().allow_obs_fold_in_responses(true)),
        T0,
    );
    conn.feed(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", T0)
        .unwrap();
    assert_eq!(
        kind(conn.poll_event().unwrap_err()),
        field(HttpField::ObsFold)
    );
}
