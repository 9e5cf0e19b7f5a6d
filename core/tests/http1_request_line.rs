//! What a server must refuse in a request line, with the status it
//! answers: a CONNECT without a valid port or with an empty host, an
//! absolute-form `http` target with an empty host (refused by the
//! encoders too), a request line too long (414, not 431), and a
//! Transfer-Encoding whose last coding is not chunked (400, not 501).

use std::time::Duration;

use cleave_proto::http1::{request, status_for, Body, Server, ServerEvent};
use cleave_proto::{Conn, Error};

/// Feeds `input` whole to a fresh server; the first event (or the error).
fn first_event(input: &[u8]) -> Result<Option<ServerEvent>, Error> {
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(input, Duration::ZERO).unwrap();
    conn.poll_event()
}

/// RFC 9110 9.3.6: "There is no default port; a client MUST send the port
/// number" and "A server MUST reject a CONNECT request that targets an
/// empty or invalid port number". RFC 9112 3.2.3: authority-form =
/// uri-host ":" port.
#[test]
fn connect_without_a_valid_port_is_refused() {
    let mut taken = Vec::new();
    for input in [
        &b"CONNECT example.com HTTP/1.1\r\nHost: example.com\r\n\r\n"[..],
        b"CONNECT example.com: HTTP/1.1\r\nHost: example.com:\r\n\r\n",
        b"CONNECT example.com:99999 HTTP/1.1\r\nHost: example.com:99999\r\n\r\n",
        b"CONNECT :443 HTTP/1.1\r\nHost: :443\r\n\r\n",
    ] {
        let polled = first_event(input);
        if polled.as_ref().err().and_then(status_for) != Some(400) {
            taken.push(String::from_utf8_lossy(input).into_owned());
        }
    }
    assert!(taken.is_empty(), "taken: {taken:#?}");
}

/// The encoder must not write such a CONNECT either (RFC 9110 9.3.6:
/// the client MUST send the port number).
#[test]
fn connect_encoder_requires_a_port() {
    let encoded: Vec<_> = ["example.com", "example.com:", ":443"]
        .into_iter()
        .filter(|target| {
            request(
                "CONNECT",
                target,
                &[("Host", target.as_bytes())],
                Body::Empty,
            )
            .is_ok()
        })
        .collect();
    assert!(encoded.is_empty(), "encoded: {encoded:?}");
}

/// RFC 9110 4.2.1: "A sender MUST NOT generate an "http" URI with an
/// empty host identifier. A recipient that processes such a URI
/// reference MUST reject it as invalid." (cleave already refuses
/// `http:///x`, an empty authority, but not an empty host with a port.)
#[test]
fn absolute_form_http_uri_with_an_empty_host_is_refused() {
    let polled = first_event(b"GET http://:80/ HTTP/1.1\r\nHost: :80\r\n\r\n");
    assert!(polled.is_err(), "taken: {polled:?}");
    let encoded = request("GET", "http://:80/", &[("Host", b":80")], Body::Empty);
    assert!(encoded.is_err(), "encoded {:?}", encoded);
}

/// RFC 9112 section 3: "A server that receives a request-target longer
/// than any URI it wishes to parse MUST respond with a 414 (URI Too Long)
/// status code". 431 is for header fields (RFC 6585 section 5).
#[test]
fn a_request_target_over_the_line_limit_is_a_414() {
    let input = [
        &b"GET /"[..],
        &[b'a'; 9000],
        b" HTTP/1.1\r\nHost: a\r\n\r\n",
    ]
    .concat();
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(&input, Duration::ZERO).unwrap();
    let e = conn.poll_event().unwrap_err();
    assert_eq!(status_for(&e), Some(414), "{e:?}");
}

/// RFC 9112 section 6.3, rule 4: "If a Transfer-Encoding header field is
/// present in a request and the chunked transfer coding is not the final
/// encoding, the message body length cannot be determined reliably; the
/// server MUST respond with the 400 (Bad Request) status code and then
/// close the connection." (The 501 of section 6.1 is a SHOULD, for a
/// coding not understood in a message whose length is known: `gzip,
/// chunked`.)
#[test]
fn chunked_not_final_in_a_request_is_a_400() {
    let mut wrong = Vec::new();
    for te in ["gzip", "xchunked", "identity"] {
        let input = format!("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: {te}\r\n\r\n");
        let mut conn = Conn::new(Server::new(), Duration::ZERO);
        conn.feed(input.as_bytes(), Duration::ZERO).unwrap();
        let e = conn.poll_event().unwrap_err();
        if status_for(&e) != Some(400) {
            wrong.push((te, status_for(&e), e));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A CONNECT with a host and a port from 1 to 65535 is taken (an IP
/// literal too); port 0 is not a port to connect to.
#[test]
fn connect_with_a_host_and_a_port_is_taken() {
    for (target, ok) in [
        ("example.com:443", true),
        ("example.com:65535", true),
        ("[::1]:8080", true),
        ("127.0.0.1:1", true),
        ("example.com:0", false),
        ("example.com:65536", false),
        ("[::1]", false),
    ] {
        let input = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
        let polled = first_event(input.as_bytes());
        assert_eq!(
            matches!(polled, Ok(Some(ServerEvent::Head(_)))),
            ok,
            "{target}: {polled:?}"
        );
        let encoded = request(
            "CONNECT",
            target,
            &[("Host", target.as_bytes())],
            Body::Empty,
        );
        assert_eq!(encoded.is_ok(), ok, "{target}: {encoded:?}");
    }
}
