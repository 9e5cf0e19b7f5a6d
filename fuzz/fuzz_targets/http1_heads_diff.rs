//! cleave's heads against raw httparse, the parser it builds on: a head
//! cleave accepts is one httparse parses whole, to the same length, with
//! the same start line and the same header fields (names as sent, values
//! without the whitespace around them), and with a whole head in the
//! buffer cleave decides (a head or an error), never waits for more. So
//! cleave's own rules only ever refuse more, and its views of the head
//! (spans, the header iterator) read what httparse read (but a reason
//! with obs-text, which httparse gives as empty).
//!
//! The first byte picks the role (a server reading a request, a client
//! reading a response) and whether bare LF line ends are allowed.

#![no_main]

use std::time::Duration;

use cleave_proto::http1::{
    Client, ClientEvent, Headers, Http1Config, Server, ServerEvent, Version,
};
use cleave_proto::{Conn, Error, Protocol};
use libfuzzer_sys::fuzz_target;

/// As many header slots as cleave may ever accept.
const SLOTS: usize = cleave_proto::http1::MAX_HEADERS;

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn version(v: Option<u8>) -> Option<Version> {
    match v {
        Some(0) => Some(Version::Http10),
        Some(1) => Some(Version::Http11),
        _ => None,
    }
}

/// The same fields, in the same order.
fn assert_same_fields(ours: &Headers, theirs: &[httparse::Header<'_>]) {
    let ours: Vec<(&[u8], &[u8])> = ours
        .iter()
        .map(|h| (h.name().as_bytes(), h.value()))
        .collect();
    let theirs: Vec<(&[u8], &[u8])> = theirs
        .iter()
        .map(|h| (h.name.as_bytes(), trim(h.value)))
        .collect();
    assert_eq!(ours, theirs, "other header fields");
}

/// The first thing `protocol` makes of the whole input, with the stream
/// offset after it.
fn first<P: Protocol>(protocol: P, input: &[u8]) -> (Result<Option<P::Event>, Error>, usize) {
    let mut conn = Conn::new(protocol, Duration::ZERO);
    conn.feed(input, Duration::ZERO)
        .expect("the buffer takes the input");
    let event = conn.poll_event();
    let offset = usize::try_from(conn.recv_buf().offset()).expect("in memory");
    (event, offset)
}

/// httparse's verdict on a request at the start of `bytes`.
fn httparse_request(bytes: &[u8]) -> Option<usize> {
    let mut slots = [httparse::EMPTY_HEADER; SLOTS];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => Some(n),
        _ => None,
    }
}

fn server(config: Http1Config, input: &[u8]) {
    let (event, end) = first(Server::with_config(config), input);
    let request = match event {
        Ok(Some(ServerEvent::Head(request))) => request,
        Ok(None) => {
            // cleave waits only for a head httparse does not see whole.
            assert_eq!(
                httparse_request(input),
                None,
                "cleave waits for a whole head"
            );
            return;
        }
        Ok(Some(other)) => panic!("{other:?} first"),
        Err(_) => return,
    };
    let head = request.as_bytes();
    let start = end - head.len();
    assert_eq!(
        httparse_request(&input[start..]),
        Some(head.len()),
        "httparse ends the head elsewhere"
    );
    let mut slots = [httparse::EMPTY_HEADER; SLOTS];
    let mut req = httparse::Request::new(&mut slots);
    let parsed = req
        .parse(head)
        .expect("httparse refuses a head cleave accepts");
    assert_eq!(
        parsed,
        httparse::Status::Complete(head.len()),
        "httparse sees another head"
    );
    assert_eq!(req.method, Some(request.method()), "another method");
    assert_eq!(req.path, Some(request.target()), "another target");
    assert_eq!(
        version(req.version),
        Some(request.version()),
        "another version"
    );
    assert_same_fields(request.headers(), req.headers);
}

/// httparse's verdict on a response at the start of `bytes`.
fn httparse_response(bytes: &[u8]) -> Option<usize> {
    let mut slots = [httparse::EMPTY_HEADER; SLOTS];
    let mut res = httparse::Response::new(&mut slots);
    match res.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => Some(n),
        _ => None,
    }
}

fn client(config: Http1Config, input: &[u8]) {
    let (event, end) = first(Client::with_config(config), input);
    let response = match event {
        Ok(Some(ClientEvent::Head(r) | ClientEvent::Interim(r))) => r,
        Ok(None) => {
            assert_eq!(
                httparse_response(input),
                None,
                "cleave waits for a whole head"
            );
            return;
        }
        Ok(Some(other)) => panic!("{other:?} first"),
        Err(_) => return,
    };
    let head = response.as_bytes();
    assert_eq!(end, head.len(), "bytes before a response");
    let mut slots = [httparse::EMPTY_HEADER; SLOTS];
    let mut res = httparse::Response::new(&mut slots);
    let parsed = res
        .parse(head)
        .expect("httparse refuses a head cleave accepts");
    assert_eq!(
        parsed,
        httparse::Status::Complete(head.len()),
        "httparse sees another head"
    );
    assert_eq!(res.code, Some(response.status()), "another status");
    // httparse gives "" for a reason with obs-text; cleave gives it as sent.
    let reason = res.reason.expect("a reason").as_bytes();
    let obs_text = response.reason().iter().any(|&b| b >= 0x80);
    assert!(
        reason == response.reason() || reason.is_empty() && obs_text,
        "another reason"
    );
    assert_eq!(
        version(res.version),
        Some(response.version()),
        "another version"
    );
    assert_same_fields(response.headers(), res.headers);
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, input)) = data.split_first() else {
        return;
    };
    let config = Http1Config::default().allow_bare_lf(flags & 1 != 0);
    if flags & 2 == 0 {
        server(config, input);
    } else {
        client(config, input);
    }
});
