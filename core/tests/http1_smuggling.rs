//! Request smuggling: every place where two HTTP/1.1 parsers could read
//! one message two ways, as hand-written vectors, each with where its idea
//! comes from (a PortSwigger technique, a CVE in another parser, a
//! section of RFC 9112 or RFC 9110) next to it.
//!
//! A refused vector must give, fed whole, byte by byte, and split at every
//! point into two feeds:
//!
//! 1. the typed error it names (the exact `HttpField` or `Limit`);
//! 2. the status [`http1::status_for`] documents for it;
//! 3. exactly the events before it (a message parsed before the bad one,
//!    the head of a body that turns bad), nothing after it, and the same
//!    error again from every later `poll_event`, even as more bytes come;
//! 4. the unconsumed bytes from the bad part on still in the buffer (for
//!    a truncation: in the error);
//! 5. the same error at the same offset, however the bytes came.
//!
//! Each refused vector also runs behind a valid pipelined message, which
//! must come out whole before the error. The accepted vectors show what
//! the strictness must not break: pipelining, 100-continue, the end of
//! parsing after a close, an upgrade or a CONNECT (with `resume` and
//! `switch`), and a client's framing of interim, switching, bodiless and
//! close-delimited responses.

use std::time::Duration;

use cleave_proto::http1::{self, Body, Client, ClientEvent, Http1Config, Server, ServerEvent};
use cleave_proto::{Bytes, Conn, Error, HttpField, InvalidInput, Limit, Protocol, Raw};

const T0: Duration = Duration::ZERO;

// ----- what a vector says -----

/// The error a refused vector must end with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Field(HttpField),
    Limit(Limit),
    Truncated,
}

impl Want {
    fn matches(self, e: &Error) -> bool {
        match (self, e) {
            (
                Self::Field(want),
                Error::InvalidInput {
                    kind: InvalidInput::Http(got),
                    ..
                },
            ) => want == *got,
            (Self::Limit(want), Error::LimitExceeded { limit, .. }) => want == *limit,
            (Self::Truncated, Error::Truncated { .. }) => true,
            _ => false,
        }
    }
}

/// An event as a vector states it: a head by its start line and the
/// framing decided for its body, body bytes joined, trailers as their
/// lines.
#[derive(Clone, PartialEq, Eq)]
enum Ev {
    Head(String, Body),
    Interim(String),
    Data(Vec<u8>),
    Trailers(Vec<u8>),
    End,
}

impl std::fmt::Debug for Ev {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Head(line, body) => write!(f, "Head({line:?}, {body:?})"),
            Self::Interim(line) => write!(f, "Interim({line:?})"),
            Self::Data(d) => write!(f, "Data(\"{}\")", d.escape_ascii()),
            Self::Trailers(t) => write!(f, "Trailers(\"{}\")", t.escape_ascii()),
            Self::End => f.write_str("End"),
        }
    }
}

fn head(line: &str, body: Body) -> Ev {
    Ev::Head(line.to_owned(), body)
}

fn data(bytes: &[u8]) -> Ev {
    Ev::Data(bytes.to_vec())
}

fn trailers(lines: &[u8]) -> Ev {
    Ev::Trailers(lines.to_vec())
}

/// Which side of the connection reads the vector.
#[derive(Clone, Debug)]
enum Side {
    /// A server reading requests.
    Server,
    /// A client reading responses to requests with these methods.
    Client(Vec<&'static str>),
}

/// One hand-written vector, refused or accepted.
#[derive(Clone, Debug)]
struct Vector {
    /// Where the idea comes from.
    source: &'static str,
    input: Vec<u8>,
    side: Side,
    config: Http1Config,
    /// `None`: accepted.
    want: Option<Want>,
    status: Option<u16>,
    /// The events before the error (or all of them, accepted).
    events: Vec<Ev>,
    /// Where the bytes left in the buffer start (for a truncation: the
    /// bytes the error hands back).
    rest_from: usize,
    /// The peer ends the stream after the input.
    eof: bool,
}

impl Vector {
    fn new(source: &'static str, input: &[u8], want: Option<Want>, status: Option<u16>) -> Self {
        Self {
            source,
            input: input.to_vec(),
            side: Side::Server,
            config: Http1Config::default(),
            want,
            status,
            events: Vec::new(),
            rest_from: if want.is_some() { 0 } else { input.len() },
            eof: false,
        }
    }

    /// The events before the error, or all of them.
    fn events(mut self, events: Vec<Ev>) -> Self {
        self.events = events;
        self
    }

    /// The bytes that stay unconsumed: a suffix of the input.
    fn rest(mut self, rest: &[u8]) -> Self {
        assert!(
            self.input.ends_with(rest),
            "{}: the rest is not a suffix",
            self.source
        );
        self.rest_from = self.input.len() - rest.len();
        self
    }

    fn config(mut self, config: Http1Config) -> Self {
        self.config = config;
        self
    }

    fn client(mut self, methods: &[&'static str]) -> Self {
        self.side = Side::Client(methods.to_vec());
        self
    }

    fn eof(mut self) -> Self {
        self.eof = true;
        self
    }

    /// The same vector behind a valid message that must come out whole
    /// first.
    fn behind_a_valid_message(&self) -> Self {
        let (prefix, first): (&[u8], Ev) = match self.side {
            Side::Server => (
                b"GET /first HTTP/1.1\r\nHost: a\r\n\r\n",
                head("GET /first HTTP/1.1", Body::Empty),
            ),
            Side::Client(_) => (
                b"HTTP/1.1 204 No Content\r\n\r\n",
                head("HTTP/1.1 204 No Content", Body::Empty),
            ),
        };
        let mut v = self.clone();
        v.input = [prefix, &self.input].concat();
        v.rest_from += prefix.len();
        v.events = [vec![first, Ev::End], self.events.clone()].concat();
        if let Side::Client(methods) = &mut v.side {
            methods.insert(0, "GET");
        }
        v
    }
}

/// A vector refused with `field`, which `status_for` answers with `status`.
fn bad(source: &'static str, input: &[u8], field: HttpField, status: u16) -> Vector {
    Vector::new(source, input, Some(Want::Field(field)), Some(status))
}

/// A vector over `limit`, which `status_for` answers with `status`.
fn over(source: &'static str, input: &[u8], limit: Limit, status: u16) -> Vector {
    Vector::new(source, input, Some(Want::Limit(limit)), Some(status))
}

/// A vector the end of the stream cuts short (no status answers it).
fn cut(source: &'static str, input: &[u8]) -> Vector {
    Vector::new(source, input, Some(Want::Truncated), None).eof()
}

/// A vector that must be accepted, with these events.
fn ok(source: &'static str, input: &[u8], events: Vec<Ev>) -> Vector {
    Vector::new(source, input, None, None).events(events)
}

// ----- the runner -----

/// The protocols under test, as the runner needs them.
trait Role: Protocol<Event: Clone + PartialEq + std::fmt::Debug> + Sized {
    fn brief(event: &Self::Event) -> Ev;
    fn data_of(event: &Self::Event) -> Option<&Bytes>;
    fn data_event(data: Bytes) -> Self::Event;
}

/// A start line, from a head's bytes.
fn start_line(head: &[u8]) -> String {
    let end = head
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(head.len());
    String::from_utf8_lossy(&head[..end]).into_owned()
}

impl Role for Server {
    fn brief(event: &ServerEvent) -> Ev {
        match event {
            ServerEvent::Head(r) => Ev::Head(start_line(r.as_bytes()), r.body()),
            ServerEvent::Data(d) => data(d),
            ServerEvent::Trailers(t) => trailers(t.as_bytes()),
            ServerEvent::End => Ev::End,
        }
    }

    fn data_of(event: &ServerEvent) -> Option<&Bytes> {
        match event {
            ServerEvent::Data(d) => Some(d),
            _ => None,
        }
    }

    fn data_event(data: Bytes) -> ServerEvent {
        ServerEvent::Data(data)
    }
}

impl Role for Client {
    fn brief(event: &ClientEvent) -> Ev {
        match event {
            ClientEvent::Interim(r) => Ev::Interim(start_line(r.as_bytes())),
            ClientEvent::Head(r) => Ev::Head(start_line(r.as_bytes()), r.body()),
            ClientEvent::Data(d) => data(d),
            ClientEvent::Trailers(t) => trailers(t.as_bytes()),
            ClientEvent::End => Ev::End,
        }
    }

    fn data_of(event: &ClientEvent) -> Option<&Bytes> {
        match event {
            ClientEvent::Data(d) => Some(d),
            _ => None,
        }
    }

    fn data_event(data: Bytes) -> ClientEvent {
        ClientEvent::Data(data)
    }
}

/// What one run saw: the events (body pieces joined), the error, the
/// bytes left in the buffer.
#[derive(Debug)]
struct Outcome<E> {
    events: Vec<E>,
    error: Option<Error>,
    rest: Vec<u8>,
}

/// Polls until the protocol needs more; an event after the error, or a
/// different second error, fails the test.
fn drain<P: Role>(conn: &mut Conn<P>, out: &mut Outcome<P::Event>) {
    loop {
        match conn.poll_event() {
            Ok(Some(event)) => {
                assert!(
                    out.error.is_none(),
                    "{event:?} after the error {:?}",
                    out.error
                );
                out.events.push(event);
            }
            Ok(None) => return,
            Err(e) => {
                match &out.error {
                    Some(first) => assert_eq!(first, &e, "a different error on a later poll"),
                    None => out.error = Some(e),
                }
                return;
            }
        }
    }
}

/// Body pieces joined: how the bytes were cut is the feeding's, not the
/// parser's.
fn joined<P: Role>(events: Vec<P::Event>) -> Vec<P::Event> {
    let mut out: Vec<P::Event> = Vec::new();
    for event in events {
        if let (Some(d), Some(last)) = (P::data_of(&event), out.last()) {
            if let Some(before) = P::data_of(last) {
                let both = Bytes::from([&before[..], &d[..]].concat());
                *out.last_mut().unwrap() = P::data_event(both);
                continue;
            }
        }
        out.push(event);
    }
    out
}

/// Feeds `pieces` in order, polling after each, then ends the stream if
/// `eof`. Bytes keep coming after an error, as from a peer that does not
/// stop: none of them may be parsed.
fn run<P: Role>(protocol: P, pieces: &[&[u8]], eof: bool) -> Outcome<P::Event> {
    let mut conn = Conn::new(protocol, T0);
    let mut out = Outcome {
        events: Vec::new(),
        error: None,
        rest: Vec::new(),
    };
    let mut fed = 0;
    for piece in pieces {
        conn.feed(piece, T0).expect("the buffer has room");
        fed += piece.len();
        drain(&mut conn, &mut out);
    }
    if eof {
        conn.handle_eof(T0);
        drain(&mut conn, &mut out);
    }
    if let Some(e) = &out.error {
        assert_eq!(conn.poll_event().err().as_ref(), Some(e), "polled again");
    }
    let recv = conn.recv_buf();
    assert_eq!(recv.offset() + recv.len() as u64, fed as u64, "bytes lost");
    out.rest = recv.peek().to_vec();
    out.events = joined::<P>(out.events);
    out
}

/// Whole, byte by byte, and split at every point into two feeds (every
/// 97th point past 4 KiB, where every point would take minutes).
fn feedings(input: &[u8]) -> Vec<(String, Vec<&[u8]>)> {
    let mut all = vec![
        ("whole".to_owned(), vec![input]),
        ("byte by byte".to_owned(), input.chunks(1).collect()),
    ];
    let step = if input.len() > 4096 { 97 } else { 1 };
    for split in (1..input.len()).step_by(step) {
        all.push((
            format!("split at {split}"),
            vec![&input[..split], &input[split..]],
        ));
    }
    all
}

fn offset_of(e: &Error) -> Option<u64> {
    match e {
        Error::InvalidInput { offset, .. }
        | Error::LimitExceeded { offset, .. }
        | Error::Truncated { offset, .. } => Some(*offset),
        _ => None,
    }
}

/// The same verdict: the same error at the same offset (a limit's
/// `attempted` says how far the bytes so far reached, which depends on how
/// they came).
fn same_verdict(a: &Error, b: &Error) -> bool {
    match (a, b) {
        (
            Error::LimitExceeded {
                limit: la,
                max: ma,
                offset: oa,
                ..
            },
            Error::LimitExceeded {
                limit: lb,
                max: mb,
                offset: ob,
                ..
            },
        ) => (la, ma, oa) == (lb, mb, ob),
        _ => a == b,
    }
}

fn escaped(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Judges one run of `v`.
fn judge<P: Role>(v: &Vector, out: &Outcome<P::Event>) -> Result<(), String> {
    let events: Vec<Ev> = out.events.iter().map(P::brief).collect();
    if events != v.events {
        return Err(format!(
            "events\n    got  {events:?}\n    want {:?}\n    error {:?}",
            v.events, out.error
        ));
    }
    let want_rest = match v.want {
        Some(Want::Truncated) => &[][..],
        _ => &v.input[v.rest_from..],
    };
    if out.rest != want_rest {
        return Err(format!(
            "rest \"{}\", want \"{}\" (error {:?})",
            escaped(&out.rest),
            escaped(want_rest),
            out.error
        ));
    }
    let Some(want) = v.want else {
        return match &out.error {
            None => Ok(()),
            Some(e) => Err(format!("refused: {e:?}")),
        };
    };
    let Some(e) = &out.error else {
        return Err(format!("not refused; want {want:?}"));
    };
    if !want.matches(e) {
        return Err(format!("want {want:?}, got {e:?}"));
    }
    if http1::status_for(e) != v.status {
        return Err(format!(
            "status_for({e:?}) = {:?}, want {:?}",
            http1::status_for(e),
            v.status
        ));
    }
    let offset = offset_of(e).unwrap_or_default();
    if let Error::Truncated { partial, .. } = e {
        if partial[..] != v.input[v.rest_from..] || offset != v.rest_from as u64 {
            return Err(format!(
                "truncated at {offset} with \"{}\", want at {} \"{}\"",
                escaped(partial),
                v.rest_from,
                escaped(&v.input[v.rest_from..])
            ));
        }
    } else if offset < v.rest_from as u64 || offset > v.input.len() as u64 {
        return Err(format!(
            "the error's offset {offset} is outside the bad part ({}..={})",
            v.rest_from,
            v.input.len()
        ));
    }
    Ok(())
}

/// Runs `v` every way; `Err` says how it went wrong.
fn check_as<P: Role>(v: &Vector, make: impl Fn() -> P) -> Result<(), String> {
    let mut first: Option<Outcome<P::Event>> = None;
    for (how, pieces) in feedings(&v.input) {
        let out = run(make(), &pieces, v.eof);
        judge::<P>(v, &out).map_err(|why| format!("{how}: {why}"))?;
        if let Some(first) = &first {
            if first.events != out.events {
                return Err(format!("{how}: other events than whole: {:?}", out.events));
            }
            match (&first.error, &out.error) {
                (Some(a), Some(b)) if !same_verdict(a, b) => {
                    return Err(format!("{how}: {b:?}, whole gave {a:?}"));
                }
                _ => {}
            }
        }
        if first.is_none() {
            first = Some(out);
        }
    }
    Ok(())
}

fn check(v: &Vector) -> Result<(), String> {
    match &v.side {
        Side::Server => check_as(v, || Server::with_config(v.config)),
        Side::Client(methods) => check_as(v, || {
            let mut client = Client::with_config(v.config);
            for m in methods {
                client.expect_upgrade(m);
            }
            client
        }),
    }
}

/// Runs a class: every vector alone and, when refused, behind a valid
/// message; reports every failure at once.
fn run_class(class: &str, vectors: &[Vector]) {
    assert!(
        vectors.len() >= 5,
        "{class}: only {} vectors",
        vectors.len()
    );
    let mut failures = Vec::new();
    for v in vectors {
        let mut runs = vec![("alone", v.clone())];
        if v.want.is_some() {
            runs.push(("behind a valid message", v.behind_a_valid_message()));
        }
        for (how, v) in runs {
            if let Err(why) = check(&v) {
                failures.push(format!(
                    "[{}] {how}: \"{}\"\n    {why}",
                    v.source,
                    escaped(&v.input)
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{class}: {} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ----- shorthands -----

/// A chunked request's head: the body vectors follow it.
const CHUNKED: &[u8] = b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";

fn chunked(body: &[u8]) -> Vec<u8> {
    [CHUNKED, body].concat()
}

fn post(body: Body) -> Ev {
    head("POST / HTTP/1.1", body)
}

fn cfg() -> Http1Config {
    Http1Config::default()
}

const OK_200: &str = "HTTP/1.1 200 OK";

// ----- Transfer-Encoding with Content-Length, and TE obfuscations -----

fn te_vectors() -> Vec<Vector> {
    use HttpField::{
        BothFraming, LineEnding, ObsFold, TransferCoding, TransferEncoding, Whitespace,
    };
    vec![
        bad(
            "PortSwigger CL.TE; RFC 9112 6.3 item 3",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nG",
            BothFraming,
            400,
        ),
        bad(
            "PortSwigger TE.CL; RFC 9112 6.3 item 3",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
            BothFraming,
            400,
        ),
        bad(
            "PortSwigger TE.TE obfuscation `xchunked`, with Content-Length",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: xchunked\r\n\r\n5c\r\n",
            BothFraming,
            400,
        ),
        bad(
            "PortSwigger TE.TE `xchunked` alone: chunked not last; RFC 9112 6.3 rule 4 (400)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "PortSwigger TE.TE `Transfer-Encoding:  chunked` (extra space), with Content-Length",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  chunked\r\nContent-Length: 4\r\n\r\n0\r\n\r\n",
            BothFraming,
            400,
        ),
        bad(
            "PortSwigger TE.TE `Transfer-Encoding:[tab]chunked`, with Content-Length",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding:\tchunked\r\n\r\n0\r\n\r\n",
            BothFraming,
            400,
        ),
        bad(
            "`chunked, identity`: chunked not last; RFC 9112 6.1; CVE-2022-32213 (llhttp)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "`chunked, gzip`: chunked not last; RFC 9112 6.1",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "`chunked, chunked`: chunked twice; RFC 9112 6.1",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "PortSwigger TE.TE `Transfer-Encoding : chunked`; CVE-2019-16869 (Netty); RFC 9112 5.1",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
            Whitespace,
            400,
        ),
        bad(
            "header name with a trailing tab; CVE-2021-22959 (llhttp); RFC 9112 5.1",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n",
            Whitespace,
            400,
        ),
        bad(
            "duplicate TE headers, both chunked; CVE-2020-8287 (Node.js); CVE-2021-21299 (hyper)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "PortSwigger TE.TE: `chunked` then `Transfer-encoding: x`",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-encoding: x\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "duplicate TE headers, unknown coding first; CVE-2021-21299 (hyper); RFC 9112 6.1 (501)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            TransferCoding,
            501,
        ),
        bad(
            "TE in HTTP/1.0: RFC 9112 6.1 (the framing is faulty)",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "TE and Content-Length in HTTP/1.0: RFC 9112 6.1, 6.3",
            b"POST / HTTP/1.0\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            BothFraming,
            400,
        ),
        bad(
            "empty Transfer-Encoding: RFC 9112 6.1 (1#transfer-coding)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "Transfer-Encoding of empty list elements only: RFC 9110 5.6.1",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , ,\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "unknown coding `gzip` alone: chunked not last; RFC 9112 6.3 rule 4 (400)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "`gzip, chunked`: a coding cleave does not decode; RFC 9112 6.1 (501)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            TransferCoding,
            501,
        ),
        bad(
            "`identity`, a coding RFC 7230 removed, alone: chunked not last (400); CVE-2019-16786 (waitress)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "quoted `\"chunked\"`: not the coding, so chunked not last (400); PortSwigger TE.TE",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        ),
        bad(
            "TE folded onto a second line; CVE-2022-32215 (llhttp multi-line TE); RFC 9112 5.2",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n chunked\r\n\r\n0\r\n\r\n",
            ObsFold,
            400,
        ),
        bad(
            "PortSwigger TE.TE `[space]Transfer-Encoding: chunked` as the first field; RFC 9112 2.2",
            b"POST / HTTP/1.1\r\n Transfer-Encoding: chunked\r\nHost: a\r\n\r\n0\r\n\r\n",
            Whitespace,
            400,
        ),
        bad(
            "PortSwigger TE.TE `X: X[\\n]Transfer-Encoding: chunked`; CVE-2022-32214 (llhttp)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nX: X\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "PortSwigger TE.TE `Transfer-Encoding[\\n] : chunked`",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\n : chunked\r\n\r\n0\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a response with TE and Content-Length: RFC 9112 6.3 item 3 (client side)",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
            BothFraming,
            400,
        )
        .client(&["GET"]),
        ok(
            "a response whose last coding is not chunked runs to the close (client side): RFC 9112 6.3 item 4",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n",
            vec![head(OK_200, Body::UntilClose), data(b"0\r\n\r\n"), Ev::End],
        )
        .client(&["GET"])
        .eof(),
        ok(
            "a response with a coding after chunked runs to the close (client side): RFC 9112 6.1",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n0\r\n\r\n",
            vec![head(OK_200, Body::UntilClose), data(b"0\r\n\r\n"), Ev::End],
        )
        .client(&["GET"])
        .eof(),
        ok(
            "a response whose last coding is chunked is chunked, whatever came before (client side)",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
            vec![head(OK_200, Body::Chunked), data(b"hi"), Ev::End],
        )
        .client(&["GET"]),
        bad(
            "a response chunked twice (client side): RFC 9112 7",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
            TransferEncoding,
            400,
        )
        .client(&["GET"]),
        ok(
            "`Transfer_Encoding` is another field: Content-Length frames; PortSwigger TE.TE",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
            vec![post(Body::Length(5)), data(b"0\r\n\r\n"), Ev::End],
        ),
        ok(
            "`Transfer-Encoding: CHUNKED`: codings are case-insensitive (RFC 9112 7)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: CHUNKED\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
            vec![post(Body::Chunked), data(b"hi"), Ev::End],
        ),
        ok(
            "`Transfer-Encoding:\\tchunked` alone: OWS, chunked",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\tchunked \r\n\r\n2\r\nhi\r\n0\r\n\r\n",
            vec![post(Body::Chunked), data(b"hi"), Ev::End],
        ),
        ok(
            "TE.0 (2024): a GET with a chunked body is framed by it, the next request follows",
            b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                head("GET / HTTP/1.1", Body::Chunked),
                Ev::End,
                head("GET /next HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
    ]
}

#[test]
fn transfer_encoding_with_content_length_and_obfuscations() {
    run_class("transfer-encoding", &te_vectors());
}

// ----- Content-Length -----

fn cl_vectors() -> Vec<Vector> {
    use HttpField::{ContentLength, Whitespace};
    let equal = cfg().allow_equal_content_lengths(true);
    vec![
        bad(
            "`+5`: CVE-2021-32715 (hyper); CVE-2023-38697 (protocol-http1)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "`-5`: RFC 9110 8.6 (1*DIGIT)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "`0x5`: CVE-2023-38697 (protocol-http1)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "`5 5`: RFC 9110 8.6",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5 5\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "`5,6`: differing values; RFC 9112 6.3 item 5",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,6\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "`5, 5`: refused by default (RFC 9110 8.6 lets a recipient choose)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "two equal headers, refused by default; CVE-2019-16792 (waitress)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            ContentLength,
            400,
        ),
        bad(
            "two differing headers; CVE-2019-20445 (Netty); RFC 9112 6.3 item 5",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
            ContentLength,
            400,
        ),
        bad(
            "two differing headers, even with allow_equal_content_lengths",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\ncontent-length: 5\r\n\r\nhello!",
            ContentLength,
            400,
        )
        .config(equal),
        bad(
            "`5, 6`, even with allow_equal_content_lengths",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\nhello!",
            ContentLength,
            400,
        )
        .config(equal),
        bad(
            "empty Content-Length: RFC 9110 8.6",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n",
            ContentLength,
            400,
        ),
        bad(
            "`5,`: an empty element",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\nhello",
            ContentLength,
            400,
        )
        .config(equal),
        bad(
            "2^64, past u64: RFC 9110 8.6 (overflow)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551616\r\n\r\n",
            ContentLength,
            400,
        ),
        bad(
            "far past u64",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            ContentLength,
            400,
        ),
        bad(
            "`Content-Length : 5`: RFC 9112 5.1; CVE-2019-16869 (Netty)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nhello",
            Whitespace,
            400,
        ),
        bad(
            "`+5` in a response (client side): CVE-2021-32715",
            b"HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\nhello",
            ContentLength,
            400,
        )
        .client(&["GET"]),
        bad(
            "two differing headers in a response (client side): RFC 9112 6.3 item 5",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 2\r\n\r\nhello",
            ContentLength,
            400,
        )
        .client(&["GET"]),
        ok(
            "`5, 5` with allow_equal_content_lengths: RFC 9110 8.6",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello",
            vec![post(Body::Length(5)), data(b"hello"), Ev::End],
        )
        .config(equal),
        ok(
            "two equal headers with allow_equal_content_lengths: RFC 9112 6.3 item 5",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
            vec![post(Body::Length(5)), data(b"hello"), Ev::End],
        )
        .config(equal),
        ok(
            "OWS around the value is fine: RFC 9112 5.1",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: \t 5 \t\r\n\r\nhello",
            vec![post(Body::Length(5)), data(b"hello"), Ev::End],
        ),
        ok(
            "no OWS at all",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length:5\r\n\r\nhello",
            vec![post(Body::Length(5)), data(b"hello"), Ev::End],
        ),
        ok(
            "leading zeros are digits: RFC 9110 8.6",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 005\r\n\r\nhello",
            vec![post(Body::Length(5)), data(b"hello"), Ev::End],
        ),
        ok(
            "u64::MAX is a length (the body is still to come)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n",
            vec![post(Body::Length(u64::MAX))],
        ),
        ok(
            "CL.0 (PortSwigger, browser-powered desync): a GET's body is framed by its Content-Length",
            b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 25\r\n\r\nGET /admin HTTP/1.1\r\nX: yGET /next HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                head("GET / HTTP/1.1", Body::Length(25)),
                data(b"GET /admin HTTP/1.1\r\nX: y"),
                Ev::End,
                head("GET /next HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
    ]
}

#[test]
fn content_length_values() {
    run_class("content-length", &cl_vectors());
}

// ----- chunk sizes -----

fn chunk_size_vectors() -> Vec<Vector> {
    use HttpField::ChunkSize;
    let size = |source, body: &[u8]| {
        bad(source, &chunked(body), ChunkSize, 400)
            .events(vec![post(Body::Chunked)])
            .rest(body)
    };
    vec![
        size(
            "`+5`: CVE-2023-38697 (protocol-http1); CVE-2022-24801 (Twisted)",
            b"+5\r\nhello\r\n0\r\n\r\n",
        ),
        size("`-5`: RFC 9112 7.1 (1*HEXDIG)", b"-5\r\nhello\r\n0\r\n\r\n"),
        size(
            "`0x5`: CVE-2023-38697 (protocol-http1); CVE-2022-24761 (waitress)",
            b"0x5\r\nhello\r\n0\r\n\r\n",
        ),
        size(
            "` 5`: whitespace before the size; RFC 9112 7.1",
            b" 5\r\nhello\r\n0\r\n\r\n",
        ),
        size(
            "`5 `: whitespace after the size, refused by default",
            b"5 \r\nhello\r\n0\r\n\r\n",
        ),
        size("`5\\t`: a tab after the size", b"5\t\r\nhello\r\n0\r\n\r\n"),
        size("an empty size line: RFC 9112 7.1", b"\r\nhello\r\n0\r\n\r\n"),
        size(
            "`10000000000000000`: past u64; CVE-2021-32714 (hyper); CVE-2013-2028 (nginx); CVE-2017-7657 (Jetty)",
            b"10000000000000000\r\nhello\r\n0\r\n\r\n",
        ),
        size("non-hex `g`", b"g\r\nhello\r\n0\r\n\r\n"),
        size("a hex size then garbage `5g`", b"5g\r\nhello\r\n0\r\n\r\n"),
        size("NUL after the size", b"5\x00\r\nhello\r\n0\r\n\r\n"),
        bad(
            "a valid chunk, then a bad size `zz`",
            &chunked(b"5\r\nhello\r\nzz\r\n0\r\n\r\n"),
            ChunkSize,
            400,
        )
        .events(vec![post(Body::Chunked), data(b"hello")])
        .rest(b"zz\r\n0\r\n\r\n"),
        bad(
            "`0x5` in a response (client side): CVE-2023-38697",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n",
            ChunkSize,
            400,
        )
        .client(&["GET"])
        .events(vec![head(OK_200, Body::Chunked)])
        .rest(b"0x5\r\nhello\r\n0\r\n\r\n"),
        ok(
            "`5 ` with allow_chunk_size_whitespace",
            &chunked(b"5 \r\nhello\r\n0\t\r\n\r\n"),
            vec![post(Body::Chunked), data(b"hello"), Ev::End],
        )
        .config(cfg().allow_chunk_size_whitespace(true)),
        ok(
            "leading zeros and both cases of hex digits: RFC 9112 7.1",
            &chunked(b"000005\r\nhello\r\nA\r\n0123456789\r\n00\r\n\r\n"),
            vec![post(Body::Chunked), data(b"hello0123456789"), Ev::End],
        ),
    ]
}

#[test]
fn chunk_sizes() {
    run_class("chunk-size", &chunk_size_vectors());
}

// ----- chunk extensions -----

fn chunk_extension_vectors() -> Vec<Vector> {
    use HttpField::{ChunkExtension, ChunkSize};
    let ext = |source, body: &[u8]| {
        bad(source, &chunked(body), ChunkExtension, 400)
            .events(vec![post(Body::Chunked)])
            .rest(body)
    };
    let limit = |source, max: u64, body: &[u8]| {
        over(source, &chunked(body), Limit::ChunkExtension, 400)
            .config(cfg().max_chunk_extensions(max))
            .events(vec![post(Body::Chunked)])
            .rest(body)
    };
    let long = [&b"5;"[..], &[b'a'; 64], b"\r\nhello\r\n0\r\n\r\n"].concat();
    vec![
        ext(
            "a bare LF inside: CVE-2023-38697 (protocol-http1); CVE-2024-52304 (aiohttp)",
            b"5;a\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "a bare CR inside: CVE-2021-22960 (llhttp ignored extensions)",
            b"5;a\rb\r\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "a bare CR before the CRLF",
            b"5;a=b\r\r\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "a bare LF inside a quoted value",
            b"5;a=\"b\nc\"\r\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "an unterminated quoted string: RFC 9110 5.6.4",
            b"5;a=\"b\r\nhello\r\n0\r\n\r\n",
        ),
        ext("`;` alone: RFC 9112 7.1.1", b"5;\r\nhello\r\n0\r\n\r\n"),
        ext("`;=x`: no name", b"5;=x\r\nhello\r\n0\r\n\r\n"),
        ext("`;a=`: no value", b"5;a=\r\nhello\r\n0\r\n\r\n"),
        ext("NUL in a name", b"5;a\x00\r\nhello\r\n0\r\n\r\n"),
        ext(
            "a control byte in a quoted value",
            b"5;a=\"\x01\"\r\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "a control byte escaped in a quoted value: RFC 9110 5.6.4",
            b"5;a=\"\\\x01\"\r\nhello\r\n0\r\n\r\n",
        ),
        ext("DEL in a token value", b"5;a=b\x7f\r\nhello\r\n0\r\n\r\n"),
        bad(
            "whitespace before `;` (BWS, RFC 9112 7.1.1), refused by default",
            &chunked(b"5 ;a\r\nhello\r\n0\r\n\r\n"),
            ChunkSize,
            400,
        )
        .events(vec![post(Body::Chunked)])
        .rest(b"5 ;a\r\nhello\r\n0\r\n\r\n"),
        ext(
            "whitespace after `;` (BWS): RFC 9112 7.1.1",
            b"5; a\r\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "whitespace before `=` (BWS)",
            b"5;a =b\r\nhello\r\n0\r\n\r\n",
        ),
        ext(
            "whitespace after `=` (BWS)",
            b"5;a= b\r\nhello\r\n0\r\n\r\n",
        ),
        ext("whitespace after a value", b"5;a=b \r\nhello\r\n0\r\n\r\n"),
        ext(
            "a bare LF inside an extension of the last chunk",
            b"5\r\nhello\r\n0;a\n\r\n",
        )
        .events(vec![post(Body::Chunked), data(b"hello")])
        .rest(b"0;a\n\r\n"),
        limit(
            "over the per-message limit: CVE-2024-21647 (Puma); CVE-2023-39326 (Go)",
            4,
            b"5;aaaa\r\nhello\r\n0\r\n\r\n",
        ),
        limit(
            "over the limit before the line ends: CVE-2023-39326 (Go)",
            4,
            &long,
        ),
        limit(
            "a limit of 0 refuses every extension",
            0,
            b"5;a\r\nhello\r\n0\r\n\r\n",
        ),
        limit(
            "a long extension, then a control byte past the limit: the limit is met first",
            4,
            &[&b"5;"[..], &[b'a'; 40], b"\x01\r\nhello\r\n0\r\n\r\n"].concat(),
        ),
        ext(
            "a control byte where the size line's LF must be at the latest (limit 4: a line of 22 bytes)",
            &[&b"5;"[..], &[b'a'; 19], b"\x01\r\nhello\r\n0\r\n\r\n"].concat(),
        )
        .config(cfg().max_chunk_extensions(4)),
        limit(
            "a control byte as the first byte past what a size line may take",
            4,
            &[&b"5;"[..], &[b'a'; 20], b"\x01\r\nhello\r\n0\r\n\r\n"].concat(),
        ),
        ext(
            "a control byte, then an extension past the limit: the control byte is met first",
            &[&b"5;a\x01"[..], &[b'a'; 40], b"\r\nhello\r\n0\r\n\r\n"].concat(),
        )
        .config(cfg().max_chunk_extensions(4)),
        over(
            "over the limit summed over the chunks of one message: CVE-2023-39326 (Go)",
            &chunked(b"1;aaa\r\nx\r\n1;bbb\r\ny\r\n0\r\n\r\n"),
            Limit::ChunkExtension,
            400,
        )
        .config(cfg().max_chunk_extensions(6))
        .events(vec![post(Body::Chunked), data(b"x")])
        .rest(b"1;bbb\r\ny\r\n0\r\n\r\n"),
        bad(
            "a bare LF inside an extension in a response (client side)",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a\nhello\r\n0\r\n\r\n",
            ChunkExtension,
            400,
        )
        .client(&["GET"])
        .events(vec![head(OK_200, Body::Chunked)])
        .rest(b"5;a\nhello\r\n0\r\n\r\n"),
        ok(
            "valid extensions: names, tokens, quoted strings with escapes (RFC 9112 7.1.1)",
            &chunked(b"5;a;b=c;d=\"e \\\" ;f\"\r\nhello\r\n0;z=1\r\n\r\n"),
            vec![post(Body::Chunked), data(b"hello"), Ev::End],
        ),
        ok(
            "the limit is per message: two messages each under it",
            &[
                chunked(b"1;aaaa\r\nx\r\n0\r\n\r\n"),
                chunked(b"1;bbbb\r\ny\r\n0\r\n\r\n"),
            ]
            .concat(),
            vec![
                post(Body::Chunked),
                data(b"x"),
                Ev::End,
                post(Body::Chunked),
                data(b"y"),
                Ev::End,
            ],
        )
        .config(cfg().max_chunk_extensions(6)),
        ok(
            "whitespace before `;` with allow_chunk_size_whitespace",
            &chunked(b"5 ;a=b\r\nhello\r\n0\r\n\r\n"),
            vec![post(Body::Chunked), data(b"hello"), Ev::End],
        )
        .config(cfg().allow_chunk_size_whitespace(true)),
    ]
}

#[test]
fn chunk_extensions() {
    run_class("chunk-extension", &chunk_extension_vectors());
}

// ----- the end of chunk data -----

fn chunk_data_end_vectors() -> Vec<Vector> {
    use HttpField::ChunkDataEnd;
    let end = |source, body: &[u8], before: &[u8], rest: &[u8]| {
        bad(source, &chunked(body), ChunkDataEnd, 400)
            .events(vec![post(Body::Chunked), data(before)])
            .rest(rest)
    };
    vec![
        end(
            "`XX` after the data: RFC 9112 7.1",
            b"5\r\nhelloXX0\r\n\r\n",
            b"hello",
            b"XX0\r\n\r\n",
        ),
        end(
            "a bare LF after the data: RFC 9112 2.2, 7.1",
            b"5\r\nhello\n0\r\n\r\n",
            b"hello",
            b"\n0\r\n\r\n",
        ),
        end(
            "an extra byte after the data",
            b"5\r\nhello!\r\n0\r\n\r\n",
            b"hello",
            b"!\r\n0\r\n\r\n",
        ),
        end(
            "a bare CR after the data",
            b"5\r\nhello\rX0\r\n\r\n",
            b"hello",
            b"\rX0\r\n\r\n",
        ),
        end(
            "CR CR LF after the data",
            b"5\r\nhello\r\r\n0\r\n\r\n",
            b"hello",
            b"\r\r\n0\r\n\r\n",
        ),
        end(
            "a size shorter than the data (PortSwigger TE.CL shape)",
            b"3\r\nhello\r\n0\r\n\r\n",
            b"hel",
            b"lo\r\n0\r\n\r\n",
        ),
        end(
            "the second chunk's data not followed by CRLF",
            b"2\r\nhe\r\n3\r\nlloXX\r\n0\r\n\r\n",
            b"hello",
            b"XX\r\n0\r\n\r\n",
        ),
        bad(
            "`XX` after the data in a response (client side)",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n",
            ChunkDataEnd,
            400,
        )
        .client(&["GET"])
        .events(vec![head(OK_200, Body::Chunked), data(b"hello")])
        .rest(b"XX0\r\n\r\n"),
        ok(
            "a bare LF after the data with allow_bare_lf",
            &chunked(b"5\r\nhello\n0\r\n\r\n"),
            vec![post(Body::Chunked), data(b"hello"), Ev::End],
        )
        .config(cfg().allow_bare_lf(true)),
    ]
}

#[test]
fn chunk_data_must_end_with_crlf() {
    run_class("chunk-data-end", &chunk_data_end_vectors());
}

// ----- bare LF and bare CR -----

fn line_ending_vectors() -> Vec<Vector> {
    use HttpField::LineEnding;
    let bare_lf = cfg().allow_bare_lf(true);
    let in_body = |source, body: &[u8], rest: &[u8], before: Vec<Ev>| {
        bad(source, &chunked(body), LineEnding, 400)
            .events(before)
            .rest(rest)
    };
    let mut vectors = vec![
        bad(
            "a bare LF after the request line: CVE-2019-16785 (waitress); CVE-2022-32214 (llhttp); RFC 9112 2.2",
            b"GET / HTTP/1.1\nHost: a\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a bare LF after a field: CVE-2021-41136 (Puma)",
            b"GET / HTTP/1.1\r\nHost: a\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a bare LF as the empty line",
            b"GET / HTTP/1.1\r\nHost: a\r\n\n",
            LineEnding,
            400,
        ),
        bad(
            "a bare LF before the request line: RFC 9112 2.2 (only CRLF may precede it)",
            b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a bare CR after the request line: CVE-2023-30589 (llhttp); RFC 9112 2.2",
            b"GET / HTTP/1.1\rHost: a\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a bare CR inside a value: CVE-2023-30589 (llhttp); RFC 9110 5.5",
            b"GET / HTTP/1.1\r\nX: a\rb\r\nHost: a\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "CR CR LF after a field: CVE-2022-35256 (llhttp)",
            b"GET / HTTP/1.1\r\nHost: a\r\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a bare CR stays refused with allow_bare_lf: RFC 9112 2.2",
            b"GET / HTTP/1.1\rHost: a\r\n\r\n",
            LineEnding,
            400,
        )
        .config(bare_lf),
        bad(
            "a bare CR before the request line",
            b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            LineEnding,
            400,
        ),
        in_body(
            "a bare LF after a chunk size: CVE-2021-41136 (Puma); RFC 9112 7.1",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            vec![post(Body::Chunked)],
        ),
        in_body(
            "a bare CR after a chunk size",
            b"5\rhello\r\n0\r\n\r\n",
            b"5\rhello\r\n0\r\n\r\n",
            vec![post(Body::Chunked)],
        ),
        in_body(
            "a bare LF after the last chunk's size",
            b"5\r\nhello\r\n0\n\r\n",
            b"0\n\r\n",
            vec![post(Body::Chunked), data(b"hello")],
        ),
        in_body(
            "a bare LF after a trailer field: RFC 9112 7.1.2",
            b"0\r\nX: a\n\r\n",
            b"X: a\n\r\n",
            vec![post(Body::Chunked)],
        ),
        in_body(
            "a bare LF ending the trailer section",
            b"0\r\nX: a\r\n\n",
            b"X: a\r\n\n",
            vec![post(Body::Chunked)],
        ),
        in_body(
            "a bare LF as the empty line after the last chunk",
            b"0\r\n\n",
            b"\n",
            vec![post(Body::Chunked)],
        ),
        in_body(
            "a bare CR inside a trailer",
            b"0\r\nX: a\rb\r\n\r\n",
            b"X: a\rb\r\n\r\n",
            vec![post(Body::Chunked)],
        ),
        bad(
            "a bare LF after the status line (client side): RFC 9112 2.2",
            b"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",
            LineEnding,
            400,
        )
        .client(&["GET"]),
        bad(
            "a bare CR inside a response's field (client side)",
            b"HTTP/1.1 200 OK\r\nX: a\rContent-Length: 0\r\n\r\n",
            LineEnding,
            400,
        )
        .client(&["GET"]),
        ok(
            "bare LF in the head with allow_bare_lf: RFC 9112 2.2",
            b"GET / HTTP/1.1\nHost: a\n\nGET /b HTTP/1.1\r\nHost: a\n\r\n",
            vec![
                head("GET / HTTP/1.1", Body::Empty),
                Ev::End,
                head("GET /b HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        )
        .config(bare_lf),
        ok(
            "bare LF in chunk lines and trailers with allow_bare_lf",
            b"POST / HTTP/1.1\nHost: a\nTransfer-Encoding: chunked\n\n5;a=b\nhello\n0\nX: 1\n\n",
            vec![
                post(Body::Chunked),
                data(b"hello"),
                trailers(b"X: 1\n"),
                Ev::End,
            ],
        )
        .config(bare_lf),
        ok(
            "empty lines (CRLF) before a request line are ignored: RFC 9112 2.2",
            b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        ),
    ];
    // Each line end in turn a bare LF, in a head whose fields end with
    // whitespace, with an empty value and with the framing fields: the
    // server finds every one of them, wherever the line is. The same head
    // with CRLF throughout is taken, so each of them is refused for its
    // line end alone.
    let lines: [(&[u8], &'static str); 7] = [
        (
            b"POST /a HTTP/1.1",
            "a bare LF after the request line, before fields",
        ),
        (b"Host: a ", "a bare LF after a value and a space"),
        (b"X-Empty:", "a bare LF after an empty value"),
        (
            b"Content-Length: 2\t",
            "a bare LF after a framing field and a tab",
        ),
        (b"Connection: keep-alive", "a bare LF after a value"),
        (b"Y: b \t ", "a bare LF after the last field's whitespace"),
        (b"", "a bare LF as the empty line after fields"),
    ];
    let head_with = |bare: Option<usize>| {
        let mut input = Vec::new();
        for (i, (line, _)) in lines.iter().enumerate() {
            input.extend_from_slice(line);
            input.extend_from_slice(if Some(i) == bare { b"\n" } else { b"\r\n" });
        }
        input.extend_from_slice(b"ok");
        input
    };
    vectors.push(ok(
        "the head of the bare-LF family, CRLF throughout: RFC 9112 2.2",
        &head_with(None),
        vec![
            head("POST /a HTTP/1.1", Body::Length(2)),
            data(b"ok"),
            Ev::End,
        ],
    ));
    for (bare, (_, source)) in lines.iter().enumerate() {
        vectors.push(bad(source, &head_with(Some(bare)), LineEnding, 400));
    }
    // A head with no field: the start line's end is judged with the
    // empty line's.
    vectors.push(bad(
        "a bare LF after the request line of a head with no field",
        b"GET / HTTP/1.0\n\r\n",
        LineEnding,
        400,
    ));
    vectors.push(bad(
        "a bare LF as the empty line of a head with no field",
        b"GET / HTTP/1.0\r\n\n",
        LineEnding,
        400,
    ));
    vectors
}

#[test]
fn bare_lf_and_bare_cr() {
    run_class("line-ending", &line_ending_vectors());
}

// ----- the shape of a head -----

fn head_shape_vectors() -> Vec<Vector> {
    use HttpField::{
        HeaderName, HeaderValue, LineEnding, ObsFold, RequestLine, StatusLine, Version, Whitespace,
    };
    vec![
        // obs-fold
        bad(
            "obs-fold: RFC 9112 5.2 (a server must reject it or replace it)",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
            ObsFold,
            400,
        ),
        bad(
            "obs-fold with a tab",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n",
            ObsFold,
            400,
        ),
        bad(
            "a folded Content-Length: CVE-2022-32215 (llhttp)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n 0\r\n\r\nhello",
            ObsFold,
            400,
        ),
        bad(
            "obs-fold in a response (client side): refused unless allow_obs_fold_in_responses; RFC 9112 5.2",
            b"HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 0\r\n\r\n",
            ObsFold,
            400,
        )
        .client(&["GET"]),
        // whitespace
        bad(
            "a space before the first field: RFC 9112 2.2",
            b"GET / HTTP/1.1\r\n Host: a\r\n\r\n",
            Whitespace,
            400,
        ),
        bad(
            "a tab before the first field: RFC 9112 2.2",
            b"GET / HTTP/1.1\r\n\tHost: a\r\n\r\n",
            Whitespace,
            400,
        ),
        bad(
            "a space before a colon: RFC 9112 5.1; CVE-2021-22959 (llhttp)",
            b"GET / HTTP/1.1\r\nHost : a\r\n\r\n",
            Whitespace,
            400,
        ),
        bad(
            "a tab before a colon: RFC 9112 5.1",
            b"GET / HTTP/1.1\r\nHost: a\r\nX\t: b\r\n\r\n",
            Whitespace,
            400,
        ),
        // control bytes in values
        bad(
            "NUL in a value: RFC 9110 5.5",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
            HeaderValue,
            400,
        ),
        bad(
            "NUL in the Host value: RFC 9110 5.5",
            b"GET / HTTP/1.1\r\nHost: a\x00\r\n\r\n",
            HeaderValue,
            400,
        ),
        bad(
            "SOH in a value: RFC 9110 5.5",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n\r\n",
            HeaderValue,
            400,
        ),
        bad(
            "ESC in a value",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x1bb\r\n\r\n",
            HeaderValue,
            400,
        ),
        bad(
            "DEL in a value: RFC 9110 5.5",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: \x7f\r\n\r\n",
            HeaderValue,
            400,
        ),
        // names
        bad(
            "a space inside a name: RFC 9110 5.1 (a token)",
            b"GET / HTTP/1.1\r\nHost: a\r\nX Y: b\r\n\r\n",
            HeaderName,
            400,
        ),
        bad(
            "a separator in a name: RFC 9110 5.6.2",
            b"GET / HTTP/1.1\r\nHost: a\r\nX(: b\r\n\r\n",
            HeaderName,
            400,
        ),
        bad(
            "a quoted name",
            b"GET / HTTP/1.1\r\nHost: a\r\n\"X\": b\r\n\r\n",
            HeaderName,
            400,
        ),
        bad(
            "an empty name",
            b"GET / HTTP/1.1\r\nHost: a\r\n: b\r\n\r\n",
            HeaderName,
            400,
        ),
        bad(
            "a line without a colon: CVE-2019-20444 (Netty)",
            b"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding chunked\r\n\r\n",
            HeaderName,
            400,
        ),
        bad(
            "NUL in a name",
            b"GET / HTTP/1.1\r\nHost: a\r\nX\x00: b\r\n\r\n",
            HeaderName,
            400,
        ),
        bad(
            "a byte past ASCII in a name",
            b"GET / HTTP/1.1\r\nHost: a\r\nH\xc3\xb6st: b\r\n\r\n",
            HeaderName,
            400,
        ),
        // request lines
        bad(
            "two spaces after the method: RFC 9112 3",
            b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "two spaces before the version: RFC 9112 3",
            b"GET /  HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "an empty target: RFC 9112 3",
            b"GET  HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "a trailing space after the version: RFC 9112 3",
            b"GET / HTTP/1.1 \r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "a tab as a separator: RFC 9112 3",
            b"GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "a space before the method",
            b" GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "a space inside the target",
            b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "DEL in the target",
            b"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "a byte past ASCII in the target: RFC 3986",
            b"GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "a method that is not a token: RFC 9112 3.1",
            b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        // versions
        bad(
            "no target, the version read as one: an HTTP/0.9 line (no version), 505",
            b"GET HTTP/1.1\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "a lowercase version: RFC 9112 2.3 (HTTP-name is case-sensitive)",
            b"GET / http/1.1\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "HTTP/2.0 on an HTTP/1 connection: RFC 9112 2.3",
            b"GET / HTTP/2.0\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "HTTP/0.9: CVE-2017-7656 (Jetty)",
            b"GET / HTTP/0.9\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "an HTTP/0.9 simple request, no version: CVE-2017-7656 (Jetty)",
            b"GET /\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "HTTP/1.2: RFC 9112 2.3 (one digit each)",
            b"GET / HTTP/1.2\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "HTTP/11: RFC 9112 2.3",
            b"GET / HTTP/11\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "HTTP/1.10: RFC 9112 2.3",
            b"GET / HTTP/1.10\r\nHost: a\r\n\r\n",
            Version,
            505,
        ),
        bad(
            "HTTP/2.0 in a status line (client side)",
            b"HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n",
            Version,
            505,
        )
        .client(&["GET"]),
        bad(
            "a status line without the space after the code: RFC 9112 4",
            b"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
            StatusLine,
            400,
        )
        .client(&["GET"]),
        bad(
            "a four-digit status: RFC 9112 4",
            b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
            StatusLine,
            400,
        )
        .client(&["GET"]),
        bad(
            "a lowercase HTTP-name in a status line: RFC 9112 2.3",
            b"http/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            StatusLine,
            400,
        )
        .client(&["GET"]),
        // two faults: the one a reader fed byte by byte meets first wins,
        // however the bytes come (a control byte is judged as it arrives,
        // the shape of the head once it is whole)
        bad(
            "a control byte, then obs-fold",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\r\n b\r\n\r\n",
            HeaderValue,
            400,
        ),
        bad(
            "a control byte, then a bare LF",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01\nY: b\r\n\r\n",
            HeaderValue,
            400,
        ),
        bad(
            "a bare LF, then a control byte",
            b"GET / HTTP/1.1\nHost: a\r\nX: \x01\r\n\r\n",
            LineEnding,
            400,
        ),
        bad(
            "a bad Content-Length, then a control byte: the control byte is met first",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\nX: \x00\r\n\r\nhello",
            HeaderValue,
            400,
        ),
        bad(
            "a control byte, then a line over max_line",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01"[..],
                &[b'a'; 40],
                b"\r\n\r\n",
            ]
            .concat(),
            HeaderValue,
            400,
        )
        .config(cfg().max_line(32).unwrap()),
        over(
            "a line over max_line, then a control byte",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
                &[b'a'; 40],
                b"\x01\r\n\r\n",
            ]
            .concat(),
            Limit::LineLength,
            431,
        )
        .config(cfg().max_line(32).unwrap()),
        bad(
            "a control byte, then a head over max_head",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: \x01"[..],
                &[b'a'; 80],
                b"\r\n\r\n",
            ]
            .concat(),
            HeaderValue,
            400,
        )
        .config(cfg().max_head(64).unwrap()),
        over(
            "a head over max_head, then a control byte",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
                &[b'a'; 80],
                b"\x01\r\n\r\n",
            ]
            .concat(),
            Limit::HeadLength,
            431,
        )
        .config(cfg().max_head(64).unwrap()),
        // at the edge: the last byte a reader fed byte by byte judges
        // before the line (or the head) is too long, and the first after
        bad(
            "a control byte as the last byte before a line is too long",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
                &[b'a'; 27],
                b"\x01aaaa\r\n\r\n",
            ]
            .concat(),
            HeaderValue,
            400,
        )
        .config(cfg().max_line(32).unwrap()),
        over(
            "a control byte as the first byte of a line too long",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
                &[b'a'; 28],
                b"\x01aaaa\r\n\r\n",
            ]
            .concat(),
            Limit::LineLength,
            431,
        )
        .config(cfg().max_line(32).unwrap()),
        bad(
            "a control byte as the last byte before a head is too long",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
                &[b'a'; 34],
                b"\x01aaaa\r\n\r\n",
            ]
            .concat(),
            HeaderValue,
            400,
        )
        .config(cfg().max_head(64).unwrap()),
        over(
            "a control byte as the first byte of a head too long",
            &[
                &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
                &[b'a'; 35],
                b"\x01aaaa\r\n\r\n",
            ]
            .concat(),
            Limit::HeadLength,
            431,
        )
        .config(cfg().max_head(64).unwrap()),
        bad(
            "a bare CR in a status line, then a control byte (client side)",
            b"HTTP/1.1 200 OK\rX: \x01\r\n\r\n",
            LineEnding,
            400,
        )
        .client(&["GET"]),
        bad(
            "a bare CR in the first bytes of a status line (client side)",
            b"H\rTTP/1.1 200 OK\r\n\r\n",
            LineEnding,
            400,
        )
        .client(&["GET"]),
        bad(
            "a status line cut short by CRLF (client side)",
            b"HT\r\n\r\n",
            StatusLine,
            400,
        )
        .client(&["GET"]),
        bad(
            "a control byte, then a bad status line (client side)",
            b"HTTP/1.1 200\r\nX: \x01\r\n\r\n",
            HeaderValue,
            400,
        )
        .client(&["GET"]),
        ok(
            "HTAB and bytes past ASCII (obs-text) in a value are fine: RFC 9110 5.5",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\tb \xe9\r\n\r\n",
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        ),
        ok(
            "HTTP/1.0 without Host: RFC 9112 3.2 applies to HTTP/1.1",
            b"GET / HTTP/1.0\r\n\r\n",
            vec![head("GET / HTTP/1.0", Body::Empty), Ev::End],
        ),
    ]
}

#[test]
fn obs_fold_whitespace_controls_names_request_lines_versions() {
    run_class("head-shape", &head_shape_vectors());
}

// ----- Host -----

fn host_vectors() -> Vec<Vector> {
    use HttpField::{Host, RequestLine};
    vec![
        bad(
            "no Host in HTTP/1.1: RFC 9112 3.2 (400)",
            b"GET / HTTP/1.1\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "two Host fields: RFC 9112 3.2 (400); PortSwigger Host header attacks",
            b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "two equal Host fields, in two cases: RFC 9112 3.2",
            b"GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "`Host: a b`: RFC 9110 7.2",
            b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "`Host: a@b` (userinfo): RFC 9110 7.2; PortSwigger Host header attacks",
            b"GET / HTTP/1.1\r\nHost: a@b\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "`Host: a:b`: a port that is not digits",
            b"GET / HTTP/1.1\r\nHost: a:b\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "`Host: a/b`: a path in the Host",
            b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "`Host: [::1`: an unclosed IPv6 literal",
            b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "an absolute-form target contradicting Host: RFC 9112 3.2.2; PortSwigger Host header attacks",
            b"GET http://b/ HTTP/1.1\r\nHost: a\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "an absolute-form target without Host in HTTP/1.1: RFC 9112 3.2",
            b"GET http://a/ HTTP/1.1\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "an absolute-form target with userinfo: RFC 9110 4.2.4",
            b"GET http://a@b/ HTTP/1.1\r\nHost: b\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`http:/evil/`, a target a URL parser reads as naming evil: RFC 9112 3.2 (400), RFC 9110 4.2.1",
            b"GET http:/evil.example/x HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`http:\\\\evil/`, the same with backslashes (WHATWG URL reads them as slashes)",
            b"GET http:\\\\evil.example/x HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`http:evil`, a scheme and no `//`: RFC 9110 4.2.1 (an http URI without a host)",
            b"GET http:evil.example HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`@evil/x`: no form (a proxy joining it to `http://backend` sends it to evil)",
            b"GET @evil.example/x HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`HTTPS:evil`: the scheme's case aside, the same",
            b"GET HTTPS:evil.example HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`1http://a/`: a scheme starts with a letter (RFC 3986 3.1)",
            b"GET 1http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        ok(
            "asterisk-form (RFC 9112 3.2.4), and an SSDP `M-SEARCH *` (llhttp's method.md)",
            b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\nM-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                head("OPTIONS * HTTP/1.1", Body::Empty),
                Ev::End,
                head("M-SEARCH * HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
        bad(
            "`a:@evil/x`, an absolute-URI without an authority: joined to `http://backend`, it names evil",
            b"GET a:@evil.example/x HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        bad(
            "`x.evil.com:80/`, the same, a host name of the client's choosing",
            b"GET x.evil.com:80/ HTTP/1.1\r\nHost: good.example\r\n\r\n",
            RequestLine,
            400,
        ),
        ok(
            "`//b/x`, origin-form with an empty first segment (RFC 9112 3.2.1): taken",
            b"GET //b/x HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![head("GET //b/x HTTP/1.1", Body::Empty), Ev::End],
        ),
        bad(
            "a CONNECT target contradicting Host: RFC 9112 3.2.3",
            b"CONNECT a:443 HTTP/1.1\r\nHost: b:443\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "a CONNECT without Host in HTTP/1.1: RFC 9112 3.2",
            b"CONNECT a:443 HTTP/1.1\r\n\r\n",
            Host,
            400,
        ),
        bad(
            "a CONNECT target that is not an authority: RFC 9112 3.2.3",
            b"CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n",
            RequestLine,
            400,
        ),
        ok(
            "HTTP/1.0 without Host is accepted: RFC 9112 3.2",
            b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
            vec![
                head("GET / HTTP/1.0", Body::Empty),
                Ev::End,
                head("GET /b HTTP/1.0", Body::Empty),
                Ev::End,
            ],
        ),
        ok(
            "an absolute-form target agreeing with Host, in another case: RFC 9110 4.2.3",
            b"GET http://A:80/x HTTP/1.1\r\nHost: a:80\r\n\r\n",
            vec![head("GET http://A:80/x HTTP/1.1", Body::Empty), Ev::End],
        ),
        ok(
            "an empty Host: RFC 9112 3.2 (a target without an authority)",
            b"OPTIONS * HTTP/1.1\r\nHost:\r\n\r\n",
            vec![head("OPTIONS * HTTP/1.1", Body::Empty), Ev::End],
        ),
        ok(
            "an IPv6 literal with a port: RFC 3986 3.2.2",
            b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        ),
    ]
}

#[test]
fn host() {
    run_class("host", &host_vectors());
}

#[test]
fn host_is_the_one_a_server_takes() {
    let mut conn = Conn::new(Server::new(), T0);
    conn.feed(
        b"GET http://example.com:8080/x HTTP/1.1\r\nHost: Example.com:8080\r\n\r\n\
          GET http://b.example/ HTTP/1.0\r\n\r\n",
        T0,
    )
    .unwrap();
    let Some(ServerEvent::Head(first)) = conn.poll_event().unwrap() else {
        panic!("a head")
    };
    assert_eq!(first.host(), Some("Example.com:8080"));
    assert_eq!(conn.poll_event().unwrap(), Some(ServerEvent::End));
    let Some(ServerEvent::Head(second)) = conn.poll_event().unwrap() else {
        panic!("a head")
    };
    // HTTP/1.0 without Host: the target's authority.
    assert_eq!(second.host(), Some("b.example"));
}

// ----- framing fields in trailers -----

fn trailer_vectors() -> Vec<Vector> {
    use HttpField::Trailer;
    let trailer = |source, body: &[u8], rest: &[u8]| {
        bad(source, &chunked(body), Trailer, 400)
            .events(vec![post(Body::Chunked)])
            .rest(rest)
    };
    vec![
        trailer(
            "Content-Length as a trailer: RFC 9110 6.5.1; RFC 9112 7.1.2",
            b"0\r\nContent-Length: 5\r\n\r\n",
            b"Content-Length: 5\r\n\r\n",
        ),
        trailer(
            "Transfer-Encoding as a trailer: RFC 9110 6.5.1",
            b"0\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"Transfer-Encoding: chunked\r\n\r\n",
        ),
        trailer(
            "Host as a trailer: RFC 9110 6.5.1 (routing)",
            b"0\r\nHost: b\r\n\r\n",
            b"Host: b\r\n\r\n",
        ),
        trailer(
            "Trailer as a trailer: RFC 9110 6.6.2",
            b"0\r\nTrailer: X\r\n\r\n",
            b"Trailer: X\r\n\r\n",
        ),
        trailer(
            "content-length in lowercase as a trailer",
            b"0\r\ncontent-length: 5\r\n\r\n",
            b"content-length: 5\r\n\r\n",
        ),
        trailer(
            "obs-fold in the trailers: RFC 9112 5.2",
            b"0\r\nX: a\r\n b\r\n\r\n",
            b"X: a\r\n b\r\n\r\n",
        ),
        trailer(
            "whitespace before a colon in the trailers: RFC 9112 5.1",
            b"0\r\nX : a\r\n\r\n",
            b"X : a\r\n\r\n",
        ),
        trailer(
            "NUL in a trailer value: RFC 9110 5.5",
            b"0\r\nX: a\x00\r\n\r\n",
            b"X: a\x00\r\n\r\n",
        ),
        bad(
            "a framing trailer after valid data and a valid trailer",
            &chunked(b"5\r\nhello\r\n0\r\nX: 1\r\nContent-Length: 5\r\n\r\n"),
            Trailer,
            400,
        )
        .events(vec![post(Body::Chunked), data(b"hello")])
        .rest(b"X: 1\r\nContent-Length: 5\r\n\r\n"),
        bad(
            "Content-Length as a trailer of a response (client side)",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n",
            Trailer,
            400,
        )
        .client(&["GET"])
        .events(vec![head(OK_200, Body::Chunked)])
        .rest(b"Content-Length: 5\r\n\r\n"),
        ok(
            "other trailers are fine: RFC 9112 7.1.2",
            &chunked(b"5\r\nhello\r\n0\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n"),
            vec![
                post(Body::Chunked),
                data(b"hello"),
                trailers(b"X-Sum: 1\r\nX-Other: 2\r\n"),
                Ev::End,
            ],
        ),
    ]
}

#[test]
fn framing_fields_in_trailers() {
    run_class("trailer", &trailer_vectors());
}

// ----- limits -----

/// `count` fields `X-n: v`.
fn fields(count: usize) -> Vec<u8> {
    (0..count)
        .flat_map(|i| format!("X-{i}: v\r\n").into_bytes())
        .collect()
}

fn limit_vectors() -> Vec<Vector> {
    use Limit::{BodyLength, HeadLength, HeaderCount, LineLength, RequestLine, TrailerLength};
    let long_x = [
        &b"GET / HTTP/1.1\r\nHost: a\r\nX: "[..],
        &[b'a'; 60],
        b"\r\n\r\n",
    ]
    .concat();
    let many = |n| [&b"GET / HTTP/1.1\r\nHost: a\r\n"[..], &fields(n), b"\r\n"].concat();
    let big_head = [
        &b"GET / HTTP/1.1\r\nHost: a\r\n"[..],
        &(0..10)
            .flat_map(|i| {
                [
                    format!("Cookie-{i}: ").into_bytes(),
                    vec![b'c'; 4000],
                    b"\r\n".to_vec(),
                ]
                .concat()
            })
            .collect::<Vec<_>>(),
        b"\r\n",
    ]
    .concat();
    let long_target = [
        &b"GET /"[..],
        &[b'a'; 8200],
        b" HTTP/1.1\r\nHost: a\r\n\r\n",
    ]
    .concat();
    vec![
        over(
            "a head over max_head: 431 (RFC 6585 5)",
            &long_x,
            HeadLength,
            431,
        )
        .config(cfg().max_head(64).unwrap()),
        over(
            "a head over the default 32 KiB (nginx's large_client_header_buffers)",
            &big_head,
            HeadLength,
            431,
        ),
        over(
            "three fields over max_headers 2: 431",
            &many(2),
            HeaderCount,
            431,
        )
        .config(cfg().max_headers(2).unwrap()),
        over(
            "101 fields over the default 100 (Apache LimitRequestFields)",
            &many(100),
            HeaderCount,
            431,
        ),
        over("a field line over max_line: 431", &long_x, LineLength, 431)
            .config(cfg().max_line(32).unwrap()),
        over(
            "a request line over max_line: its target is too long, 414 (RFC 9112, section 3)",
            &[&b"GET /"[..], &[b'a'; 40], b" HTTP/1.1\r\nHost: a\r\n\r\n"].concat(),
            RequestLine,
            414,
        )
        .config(cfg().max_line(32).unwrap()),
        over(
            "a request line over the default 8 KiB (Apache LimitRequestLine): 414",
            &long_target,
            RequestLine,
            414,
        ),
        over(
            "a trailer section over max_trailers: 400",
            &chunked(b"0\r\nX: aaaaaaaaaaaaaaaa\r\n\r\n"),
            TrailerLength,
            400,
        )
        .config(cfg().max_trailers(16).unwrap())
        .events(vec![post(Body::Chunked)])
        .rest(b"X: aaaaaaaaaaaaaaaa\r\n\r\n"),
        over(
            "three trailers over max_headers 2: 431",
            &chunked(b"0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
            HeaderCount,
            431,
        )
        .config(cfg().max_headers(2).unwrap())
        .events(vec![post(Body::Chunked)])
        .rest(b"A: 1\r\nB: 2\r\nC: 3\r\n\r\n"),
        over(
            "a trailer line over max_line: 431",
            &chunked(b"0\r\nX: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n"),
            LineLength,
            431,
        )
        .config(cfg().max_line(32).unwrap())
        .events(vec![post(Body::Chunked)])
        .rest(b"X: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n"),
        over(
            "a declared body over max_body: 413, at the head",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
            BodyLength,
            413,
        )
        .config(cfg().max_body(Some(4))),
        over(
            "a declared body of u64::MAX over max_body: 413",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 18446744073709551615\r\n\r\n",
            BodyLength,
            413,
        )
        .config(cfg().max_body(Some(1 << 20))),
        over(
            "a chunk over max_body: 413, at its size line",
            &chunked(b"5\r\nhello\r\n0\r\n\r\n"),
            BodyLength,
            413,
        )
        .config(cfg().max_body(Some(4)))
        .events(vec![post(Body::Chunked)])
        .rest(b"5\r\nhello\r\n0\r\n\r\n"),
        over(
            "chunks summing over max_body: 413, at the size line that passes it",
            &chunked(b"5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n"),
            BodyLength,
            413,
        )
        .config(cfg().max_body(Some(8)))
        .events(vec![post(Body::Chunked), data(b"hello")])
        .rest(b"5\r\nworld\r\n0\r\n\r\n"),
        over(
            "a close-delimited body over max_body (client side): 413",
            b"HTTP/1.1 200 OK\r\n\r\nhello",
            BodyLength,
            413,
        )
        .client(&["GET"])
        .config(cfg().max_body(Some(4)))
        .events(vec![head(OK_200, Body::UntilClose), data(b"hell")])
        .rest(b"o"),
        over(
            "a response head over max_head (client side)",
            b"HTTP/1.1 200 OK\r\nX: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n",
            HeadLength,
            431,
        )
        .client(&["GET"])
        .config(cfg().max_head(64).unwrap()),
        ok(
            "a head of exactly max_head",
            &long_x,
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        )
        .config(cfg().max_head(long_x.len()).unwrap()),
        ok(
            "exactly max_headers fields",
            &many(98),
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        )
        .config(cfg().max_headers(99).unwrap()),
        ok(
            "a line of exactly max_line, CRLF included",
            &long_x,
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        )
        .config(cfg().max_line(65).unwrap()),
        ok(
            "a body of exactly max_body, declared and chunked",
            &[
                &b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"[..],
                &chunked(b"2\r\nhe\r\n3\r\nllo\r\n0\r\n\r\n"),
            ]
            .concat(),
            vec![
                post(Body::Length(5)),
                data(b"hello"),
                Ev::End,
                post(Body::Chunked),
                data(b"hello"),
                Ev::End,
            ],
        )
        .config(cfg().max_body(Some(5))),
        ok(
            "a trailer section of exactly max_trailers, its empty line included",
            &chunked(b"0\r\nX: aaaaaaaaaa\r\n\r\n"),
            vec![post(Body::Chunked), trailers(b"X: aaaaaaaaaa\r\n"), Ev::End],
        )
        .config(cfg().max_trailers(17).unwrap()),
    ]
}

#[test]
fn limits() {
    run_class("limits", &limit_vectors());
}

// ----- truncation -----

fn truncation_vectors() -> Vec<Vector> {
    vec![
        cut(
            "a head cut by the end of the stream",
            b"GET / HTTP/1.1\r\nHost: a\r\n",
        ),
        cut(
            "a Content-Length body cut short: RFC 9112 8 (incomplete)",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhel",
        )
        .events(vec![post(Body::Length(5)), data(b"hel")])
        .rest(b""),
        cut(
            "a chunked body cut in a size line: RFC 9112 8",
            &chunked(b"5\r\nhello\r\n0"),
        )
        .events(vec![post(Body::Chunked), data(b"hello")])
        .rest(b"0"),
        cut(
            "a chunked body cut in its trailers",
            &chunked(b"0\r\nX: 1\r\n"),
        )
        .events(vec![post(Body::Chunked)])
        .rest(b"X: 1\r\n"),
        cut(
            "a response body cut short (client side): RFC 9112 8",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel",
        )
        .client(&["GET"])
        .events(vec![head(OK_200, Body::Length(5)), data(b"hel")])
        .rest(b""),
    ]
}

#[test]
fn truncation() {
    run_class("truncation", &truncation_vectors());
}

// ----- what the strictness must not break: the server -----

fn server_accepted_vectors() -> Vec<Vector> {
    vec![
        ok(
            "pipelined requests, each framed by its own head: RFC 9112 9.3.2",
            &[
                &b"POST /a HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello"[..],
                b"POST /b HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nX: 1\r\n\r\n",
                b"GET /c HTTP/1.1\r\nHost: a\r\n\r\n",
                b"GET /nex",
            ]
            .concat(),
            vec![
                head("POST /a HTTP/1.1", Body::Length(5)),
                data(b"hello"),
                Ev::End,
                head("POST /b HTTP/1.1", Body::Chunked),
                data(b"abc"),
                trailers(b"X: 1\r\n"),
                Ev::End,
                head("GET /c HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        )
        .rest(b"GET /nex"),
        ok(
            "Expect: 100-continue leaves the framing as it is: RFC 9110 10.1.1; PortSwigger Expect desync (2025)",
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                post(Body::Length(5)),
                data(b"hello"),
                Ev::End,
                head("GET /b HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
        ok(
            "Expect: 100-continue with a chunked body",
            b"POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                post(Body::Chunked),
                Ev::End,
                head("GET /b HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
        ok(
            "nothing is parsed after Connection: close, not even garbage: RFC 9112 9.6",
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /smuggled HTTP/1.1\r\n\x00\r\n",
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End],
        )
        .rest(b"GET /smuggled HTTP/1.1\r\n\x00\r\n"),
        ok(
            "close wins over keep-alive: RFC 9112 9.6",
            b"POST / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\n",
            vec![post(Body::Length(2)), data(b"hi"), Ev::End],
        )
        .rest(b"GET / HTTP/1.1\r\n"),
        ok(
            "HTTP/1.0 without keep-alive closes: RFC 9112 9.3",
            b"GET / HTTP/1.0\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
            vec![head("GET / HTTP/1.0", Body::Empty), Ev::End],
        )
        .rest(b"GET /b HTTP/1.0\r\n\r\n"),
        ok(
            "an upgrade request stops parsing after its body: RFC 9110 7.8",
            b"POST /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\nhi\x81\x05hello",
            vec![
                head("POST /ws HTTP/1.1", Body::Length(2)),
                data(b"hi"),
                Ev::End,
            ],
        )
        .rest(b"\x81\x05hello"),
        ok(
            "Upgrade without `Connection: upgrade` is no upgrade: RFC 9110 7.8",
            b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                head("GET / HTTP/1.1", Body::Empty),
                Ev::End,
                head("GET /b HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
        ok(
            "Upgrade in HTTP/1.0 is ignored and parsing goes on: RFC 9110 7.8",
            b"GET / HTTP/1.0\r\nConnection: keep-alive, upgrade\r\nUpgrade: websocket\r\n\r\nGET /b HTTP/1.0\r\n\r\n",
            vec![
                head("GET / HTTP/1.0", Body::Empty),
                Ev::End,
                head("GET /b HTTP/1.0", Body::Empty),
                Ev::End,
            ],
        ),
        ok(
            "body bytes are opaque: NUL, bare CR and LF in a body are data",
            b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n\x00\n\r\x01GET / HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![
                post(Body::Length(4)),
                data(b"\x00\n\r\x01"),
                Ev::End,
                head("GET / HTTP/1.1", Body::Empty),
                Ev::End,
            ],
        ),
        ok(
            "a CONNECT stops parsing: RFC 9110 9.3.6",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n\x16\x03\x01\x00\x05hello",
            vec![head("CONNECT a:443 HTTP/1.1", Body::Empty), Ev::End],
        )
        .rest(b"\x16\x03\x01\x00\x05hello"),
    ]
}

/// A CONNECT request has no content (RFC 9110, section 9.3.6): llhttp
/// ignores its Content-Length and takes the bytes as the tunnel's, h11
/// reads them as a body. Refused, so that a proxy and its backend cannot
/// cut the tunnel at different places.
fn connect_body_vectors() -> Vec<Vector> {
    use HttpField::ConnectBody;
    vec![
        bad(
            "CONNECT with Content-Length: RFC 9110 9.3.6; llhttp request/method.md 'CONNECT with body'",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nContent-Length: 10\r\n\r\nblarfcicle",
            ConnectBody,
            400,
        ),
        bad(
            "CONNECT in HTTP/1.0 with Content-Length: llhttp request/method.md 'CONNECT with body'",
            b"CONNECT foo.bar.com:443 HTTP/1.0\r\nContent-Length: 10\r\n\r\nblarfcicle\"",
            ConnectBody,
            400,
        ),
        bad(
            "CONNECT with a chunked body: RFC 9110 9.3.6",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
            ConnectBody,
            400,
        ),
        bad(
            "CONNECT with Content-Length: 1 hiding a request: h11 test_protocol_switch",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\ncontent-length: 1\r\n\r\n1GET / HTTP/1.0\r\n\r\n",
            ConnectBody,
            400,
        ),
        bad(
            "CONNECT that also asks for an upgrade, with a body: RFC 9110 9.3.6, 7.8",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nConnection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 2\r\n\r\nhi",
            ConnectBody,
            400,
        ),
        ok(
            "CONNECT with Content-Length: 0 has no content: accepted",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nContent-Length: 0\r\n\r\n\x16\x03\x01",
            vec![head("CONNECT a:443 HTTP/1.1", Body::Empty), Ev::End],
        )
        .rest(b"\x16\x03\x01"),
    ]
}

#[test]
fn connect_requests_with_content_are_refused() {
    run_class("connect-body", &connect_body_vectors());
}

#[test]
fn accepted_server_behaviours() {
    run_class("server, accepted", &server_accepted_vectors());
}

/// Feeds `input` whole and polls until the server needs more.
fn serve(input: &[u8]) -> (Conn<Server>, Vec<ServerEvent>) {
    let mut conn = Conn::new(Server::new(), T0);
    conn.feed(input, T0).unwrap();
    let mut events = Vec::new();
    while let Some(event) = conn.poll_event().unwrap() {
        events.push(event);
    }
    (conn, events)
}

fn request_of(event: &ServerEvent) -> &http1::Request {
    match event {
        ServerEvent::Head(r) => r,
        other => panic!("not a head: {other:?}"),
    }
}

const UPGRADE: &[u8] =
    b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n";
const CONNECT: &[u8] = b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n";
const NEXT: &[u8] = b"GET /next HTTP/1.1\r\nHost: a\r\n\r\n";

#[test]
fn expect_continue_is_reported_and_changes_no_framing() {
    let (_, events) =
        serve(b"PUT / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc");
    let request = request_of(&events[0]);
    assert!(request.expects_continue());
    assert_eq!(request.body(), Body::Length(3));
    assert_eq!(
        events[1..],
        [ServerEvent::Data("abc".into()), ServerEvent::End]
    );
    // HTTP/1.0 has no 100-continue (RFC 9110 10.1.1).
    let (_, events) = serve(b"PUT / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n");
    assert!(!request_of(&events[0]).expects_continue());
}

#[test]
fn a_declined_upgrade_or_connect_resumes_with_the_bytes_after_it() {
    for first in [UPGRADE, CONNECT] {
        let (mut conn, events) = serve(&[first, NEXT].concat());
        let request = request_of(&events[0]);
        assert!(request.is_upgrade() || request.is_connect());
        assert_eq!(events[1..], [ServerEvent::End]);
        assert!(conn.protocol().is_switch_pending());
        assert_eq!(conn.recv_buf().peek(), NEXT, "the bytes after it stay");
        assert_eq!(
            conn.poll_event().unwrap(),
            None,
            "nothing parsed before resume"
        );
        conn.protocol_mut().resume();
        assert!(!conn.protocol().is_switch_pending());
        let next = conn.poll_event().unwrap().unwrap();
        assert_eq!(request_of(&next).target(), "/next");
        assert_eq!(conn.poll_event().unwrap(), Some(ServerEvent::End));
        assert_eq!(conn.poll_event().unwrap(), None);
    }
}

#[test]
fn a_declined_switch_that_closes_does_not_resume() {
    // RFC 9112 9.6: no request after one that closes is processed.
    let closing: [&[u8]; 3] = [
        b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: upgrade, close\r\nUpgrade: websocket\r\n\r\n",
        b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\nConnection: close\r\n\r\n",
        b"CONNECT a:443 HTTP/1.0\r\n\r\n",
    ];
    for first in closing {
        let (mut conn, events) = serve(&[first, NEXT].concat());
        assert_eq!(events.len(), 2, "{}", escaped(first));
        assert!(conn.protocol().is_switch_pending());
        conn.protocol_mut().resume();
        assert!(!conn.protocol().is_switch_pending());
        assert_eq!(conn.poll_event().unwrap(), None, "{}", escaped(first));
        assert_eq!(conn.recv_buf().peek(), NEXT);
    }
}

#[test]
fn an_accepted_upgrade_or_connect_hands_the_bytes_to_the_next_protocol() {
    for first in [UPGRADE, CONNECT] {
        let tunnel: &[u8] = b"\x16\x03\x01 not HTTP \x00";
        let (conn, events) = serve(&[first, tunnel].concat());
        assert_eq!(events.len(), 2);
        let mut raw = conn.switch(|_| Raw::default());
        assert_eq!(raw.poll_event().unwrap(), Some(Bytes::from_static(tunnel)));
        raw.feed(b"more", T0).unwrap();
        assert_eq!(raw.poll_event().unwrap(), Some(Bytes::from_static(b"more")));
    }
}

#[test]
fn resume_does_nothing_after_a_close() {
    let (mut conn, _) = serve(
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
    );
    assert!(!conn.protocol().is_switch_pending());
    conn.protocol_mut().resume();
    assert_eq!(conn.poll_event().unwrap(), None);
    assert_eq!(
        conn.recv_buf().peek(),
        b"GET /b HTTP/1.1\r\nHost: a\r\n\r\n"
    );
}

// ----- what the strictness must not break: the client -----

fn client_accepted_vectors() -> Vec<Vector> {
    vec![
        ok(
            "1xx interim responses never end the exchange: RFC 9110 15.2",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            vec![
                Ev::Interim("HTTP/1.1 100 Continue".into()),
                Ev::Interim("HTTP/1.1 103 Early Hints".into()),
                head(OK_200, Body::Length(2)),
                data(b"ok"),
                Ev::End,
            ],
        )
        .client(&["POST"]),
        ok(
            "an interim response with a Content-Length has no body: RFC 9110 15.2",
            b"HTTP/1.1 100 Continue\r\nContent-Length: 5\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
            vec![
                Ev::Interim("HTTP/1.1 100 Continue".into()),
                head("HTTP/1.1 204 No Content", Body::Empty),
                Ev::End,
            ],
        )
        .client(&["GET"]),
        ok(
            "101 switches: the bytes after it stay, whatever it declares (RFC 9110 15.2.2)",
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\n\x81\x02hi",
            vec![
                head("HTTP/1.1 101 Switching Protocols", Body::Empty),
                Ev::End,
            ],
        )
        .client(&["GET"])
        .rest(b"\x81\x02hi"),
        ok(
            "a 2xx to CONNECT makes a tunnel, its framing fields ignored: RFC 9110 9.3.6",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\x16\x03\x03",
            vec![head(OK_200, Body::Empty), Ev::End],
        )
        .client(&["CONNECT"])
        .rest(b"\x16\x03\x03"),
        ok(
            "a refused CONNECT is framed as usual and the next response follows",
            b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 2\r\n\r\nnoHTTP/1.1 204 No Content\r\n\r\n",
            vec![
                head("HTTP/1.1 407 Proxy Authentication Required", Body::Length(2)),
                data(b"no"),
                Ev::End,
                head("HTTP/1.1 204 No Content", Body::Empty),
                Ev::End,
            ],
        )
        .client(&["CONNECT", "GET"]),
        ok(
            "HEAD, 204 and 304 have no body, whatever they declare: RFC 9112 6.3 item 1",
            b"HTTP/1.1 200 OK\r\nContent-Length: 512\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 3\r\n\r\nHTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
            vec![
                head(OK_200, Body::Empty),
                Ev::End,
                head("HTTP/1.1 204 No Content", Body::Empty),
                Ev::End,
                head("HTTP/1.1 304 Not Modified", Body::Empty),
                Ev::End,
                head(OK_200, Body::Length(2)),
                data(b"ok"),
                Ev::End,
            ],
        )
        .client(&["HEAD", "GET", "GET", "GET"]),
        ok(
            "a close-delimited body ends at the end of the stream: RFC 9112 6.3 item 8",
            b"HTTP/1.1 200 OK\r\n\r\nall of it\r\n0\r\n\r\n",
            vec![
                head(OK_200, Body::UntilClose),
                data(b"all of it\r\n0\r\n\r\n"),
                Ev::End,
            ],
        )
        .client(&["GET"])
        .eof(),
        ok(
            "a close-delimited body runs on until the end of the stream",
            b"HTTP/1.1 200 OK\r\n\r\nHTTP/1.1 200 OK\r\n",
            vec![head(OK_200, Body::UntilClose), data(b"HTTP/1.1 200 OK\r\n")],
        )
        .client(&["GET", "GET"]),
        ok(
            "pipelined responses framed by the recorded methods (HEAD, then GET)",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            vec![
                head(OK_200, Body::Empty),
                Ev::End,
                head(OK_200, Body::Length(5)),
                data(b"hello"),
                Ev::End,
            ],
        )
        .client(&["HEAD", "GET"]),
        ok(
            "nothing is parsed after a response that closes: RFC 9112 9.6",
            b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n\r\n",
            vec![
                head("HTTP/1.0 200 OK", Body::Length(2)),
                data(b"ok"),
                Ev::End,
            ],
        )
        .client(&["GET", "GET"])
        .rest(b"HTTP/1.1 200 OK\r\n\r\n"),
    ]
}

#[test]
fn accepted_client_behaviours() {
    run_class("client, accepted", &client_accepted_vectors());
}

#[test]
fn interim_responses_keep_the_request_pending() {
    let mut conn = Conn::new(Client::new(), T0);
    let head = conn
        .protocol_mut()
        .request("POST", "/", &[("Host", b"a")], Body::Length(2))
        .unwrap();
    conn.push(head).expect("room");
    conn.feed(b"HTTP/1.1 100 Continue\r\n\r\n", T0).unwrap();
    let Some(ClientEvent::Interim(interim)) = conn.poll_event().unwrap() else {
        panic!("an interim response")
    };
    assert!(interim.is_interim() && !interim.switches());
    assert_eq!(
        conn.protocol().pending(),
        1,
        "still waiting for the final one"
    );
    conn.feed(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n", T0)
        .unwrap();
    let Some(ClientEvent::Head(last)) = conn.poll_event().unwrap() else {
        panic!("the final response")
    };
    assert_eq!(last.status(), 201);
    assert_eq!(conn.protocol().pending(), 0);
    assert_eq!(conn.poll_event().unwrap(), Some(ClientEvent::End));
}

#[test]
fn a_client_switches_after_101_and_after_a_2xx_to_connect() {
    let cases: [(&str, &[u8]); 2] = [
        (
            "GET",
            b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        ),
        ("CONNECT", b"HTTP/1.1 200 Connection Established\r\n\r\n"),
    ];
    for (method, response) in cases {
        let mut client = Client::new();
        client.expect_upgrade(method);
        let mut conn = Conn::new(client, T0);
        conn.feed(&[response, b"\x00tunnel"].concat(), T0).unwrap();
        let Some(ClientEvent::Head(head)) = conn.poll_event().unwrap() else {
            panic!("a head")
        };
        assert!(head.switches() && !head.keep_alive());
        assert_eq!(conn.poll_event().unwrap(), Some(ClientEvent::End));
        assert_eq!(conn.poll_event().unwrap(), None);
        let mut raw = conn.switch(|_| Raw::default());
        assert_eq!(
            raw.poll_event().unwrap(),
            Some(Bytes::from_static(b"\x00tunnel"))
        );
    }
}

// ----- random input: split invariance, no panic -----

fn describe<P: Role>(out: &Outcome<P::Event>) -> String {
    let events: Vec<Ev> = out.events.iter().map(P::brief).collect();
    format!(
        "events={events:?} error={:?} rest=\"{}\"",
        out.error,
        escaped(&out.rest)
    )
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len())]
    }
}

const PIECES: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\n",
    b"POST /x HTTP/1.1\r\n",
    b"HEAD / HTTP/1.0\r\n",
    b"CONNECT a:1 HTTP/1.1\r\n",
    b"HTTP/1.1 200 OK\r\n",
    b"HTTP/1.1 100 Continue\r\n",
    b"HTTP/1.1 101 S\r\n",
    b"HTTP/1.0 204 N\r\n",
    b"HTTP/1.1 304 N\r\n",
    b"Host: a\r\n",
    b"Host: a:1\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Content-Length: 3\r\n",
    b"Content-Length: 0\r\n",
    b"Connection: close\r\n",
    b"Connection: keep-alive\r\n",
    b"Connection: upgrade\r\nUpgrade: ws\r\n",
    b"X: y\r\n",
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b"\t",
    b":",
    b";",
    b"=",
    b"\"",
    b"\\",
    b"\x00",
    b"\x7f",
    b"\xff",
    b"3\r\nabc\r\n",
    b"0\r\n\r\n",
    b"0\r\nT: v\r\n\r\n",
    b"1;e=\"q\\\"\"\r\nz\r\n",
    b"abc",
    b"ffffffffffffffff\r\n",
    b"0000000000000000000001\r\n",
    b"Expect: 100-continue\r\n",
    b"a",
    b"0",
    b"5",
    b"X: aaaaaaaaaaaaaaa\r\n",
    b"1;aaaaaaaaaaaaaaaaaaaaaa\r\nz\r\n",
    b"1;a=\"aaaaaaaaaaa\"\r\nz\r\n",
    b"0\r\nTrailerrrrrrrr: vvvvvvvvvvv\r\n\r\n",
    b"Transfer-Encoding: gzip\r\n",
    b"Content-Length: 1, 1\r\n",
    b"3 \r\nabc\r\n",
];

fn random_input(rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    let n = 1 + rng.below(14);
    for _ in 0..n {
        let p = rng.pick(PIECES);
        out.extend_from_slice(p);
    }
    // a few byte flips
    for _ in 0..rng.below(3) {
        if !out.is_empty() {
            let i = rng.below(out.len());
            out[i] = *rng.pick(&[
                b'\r', b'\n', b' ', b'\t', 0u8, b'0', b'a', b':', b';', 0x7f, 0x80,
            ]);
        }
    }
    out
}

fn random_config(rng: &mut Rng) -> Http1Config {
    let mut c = Http1Config::default()
        .allow_bare_lf(rng.below(3) == 0)
        .allow_chunk_size_whitespace(rng.below(3) == 0)
        .allow_equal_content_lengths(rng.below(3) == 0)
        .max_chunk_extensions(*rng.pick(&[0u64, 1, 5, 16 * 1024, u64::MAX]))
        .max_body(*rng.pick(&[None, Some(0), Some(2), Some(5)]));
    if rng.below(2) == 0 {
        c = c.max_head(*rng.pick(&[2usize, 10, 40, 80])).unwrap();
    }
    if rng.below(2) == 0 {
        c = c.max_line(*rng.pick(&[16usize, 20, 40])).unwrap();
    }
    if rng.below(2) == 0 {
        c = c.max_headers(*rng.pick(&[1usize, 2, 3])).unwrap();
    }
    if rng.below(2) == 0 {
        c = c.max_trailers(*rng.pick(&[2usize, 5, 12])).unwrap();
    }
    c
}

fn compare_feedings<P: Role>(input: &[u8], eof: bool, make: &dyn Fn() -> P) -> Result<(), String> {
    let whole = run(make(), &[input], eof);
    let mut feeds: Vec<(String, Vec<&[u8]>)> =
        vec![("byte by byte".into(), input.chunks(1).collect())];
    for split in 1..input.len() {
        feeds.push((
            format!("split {split}"),
            vec![&input[..split], &input[split..]],
        ));
    }
    // a few random multi-way cuts
    let mut r = Rng(input.len() as u64 * 7919 + 1);
    for _ in 0..8 {
        if input.len() < 3 {
            break;
        }
        let mut cuts: Vec<usize> = (0..1 + r.below(5))
            .map(|_| 1 + r.below(input.len() - 1))
            .collect();
        cuts.sort();
        cuts.dedup();
        let mut pieces = Vec::new();
        let mut at = 0;
        for c in &cuts {
            pieces.push(&input[at..*c]);
            at = *c;
        }
        pieces.push(&input[at..]);
        feeds.push((format!("cuts {cuts:?}"), pieces));
    }
    for (how, pieces) in feeds {
        let out = run(make(), &pieces, eof);
        let same_err = match (&whole.error, &out.error) {
            (Some(a), Some(b)) => same_verdict(a, b),
            (None, None) => true,
            _ => false,
        };
        if out.events != whole.events || !same_err || out.rest != whole.rest {
            return Err(format!(
                "{how}:\n   whole {}\n   this  {}",
                describe::<P>(&whole),
                describe::<P>(&out)
            ));
        }
    }
    Ok(())
}

#[test]
fn fuzz_split_invariance_and_no_panic() {
    let iters: usize = std::env::var("REVIEW_ITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let seed: u64 = std::env::var("REVIEW_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9e37_79b9_7f4a_7c15);
    let mut rng = Rng(seed);
    let mut failures = Vec::new();
    for _ in 0..iters {
        let input = random_input(&mut rng);
        let config = random_config(&mut rng);
        let eof = rng.below(2) == 0;
        let client = rng.below(2) == 0;
        let r = if client {
            let methods: Vec<&str> = (0..3)
                .map(|_| *rng.pick(&["GET", "HEAD", "CONNECT", "POST"]))
                .collect();
            let res = std::panic::catch_unwind(|| {
                compare_feedings(&input, eof, &|| {
                    let mut c = Client::with_config(config);
                    for m in &methods {
                        c.expect_upgrade(m);
                    }
                    c
                })
            });
            res.map_err(|_| "PANIC".to_string())
                .and_then(|r| r)
                .map_err(|e| {
                    format!(
                        "client {methods:?} {config:?} eof={eof} \"{}\"\n  {e}",
                        escaped(&input)
                    )
                })
        } else {
            let res = std::panic::catch_unwind(|| {
                compare_feedings(&input, eof, &|| Server::with_config(config))
            });
            res.map_err(|_| "PANIC".to_string())
                .and_then(|r| r)
                .map_err(|e| format!("server {config:?} eof={eof} \"{}\"\n  {e}", escaped(&input)))
        };
        if let Err(e) = r {
            failures.push(e);
            if failures.len() > 15 {
                break;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

// ----- at the edges: Host, bodiless responses, a 101 nobody asked for -----

/// RFC 9112 section 6.3 rule 1: a response to HEAD, or with a
/// 1xx, 204 or 304 status, ends at its empty line "regardless of the header
/// fields present"; rule 2: a client "MUST ignore any Content-Length or
/// Transfer-Encoding header fields" in a 2xx to CONNECT (the corpus
/// policy, tests/data/http1/PROVENANCE.md, rules 4 and 5). Their framing
/// fields are not read, so malformed ones fail nothing.
#[test]
fn bodiless_responses_ignore_their_framing_fields() {
    let vectors = vec![
        ok(
            "204 with a malformed Content-Length",
            b"HTTP/1.1 204 No Content\r\nContent-Length: x\r\n\r\n",
            vec![head("HTTP/1.1 204 No Content", Body::Empty), Ev::End],
        )
        .client(&["GET"]),
        ok(
            "HEAD response with a Content-Length list",
            b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
            vec![head("HTTP/1.1 200 OK", Body::Empty), Ev::End],
        )
        .client(&["HEAD"]),
        ok(
            "304 with chunked twice",
            b"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            vec![head("HTTP/1.1 304 Not Modified", Body::Empty), Ev::End],
        )
        .client(&["GET"]),
        ok(
            "101 with a malformed Content-Length",
            b"HTTP/1.1 101 Switching Protocols\r\nContent-Length: x\r\n\r\nraw",
            vec![head("HTTP/1.1 101 Switching Protocols", Body::Empty), Ev::End],
        )
        .client(&["GET"])
        .rest(b"raw"),
        ok(
            "100 with a malformed Content-Length, then the final response",
            b"HTTP/1.1 100 Continue\r\nContent-Length: x\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            vec![
                Ev::Interim("HTTP/1.1 100 Continue".into()),
                head("HTTP/1.1 200 OK", Body::Empty),
                Ev::End,
            ],
        )
        .client(&["GET"]),
        ok(
            "2xx to CONNECT with a malformed Content-Length (MUST ignore)",
            b"HTTP/1.1 200 Connection Established\r\nContent-Length: x\r\n\r\nraw",
            vec![head("HTTP/1.1 200 Connection Established", Body::Empty), Ev::End],
        )
        .client(&["CONNECT"])
        .rest(b"raw"),
    ];
    run_class("bodiless responses", &vectors);
}

/// RFC 9112 section 3.2: a server MUST answer 400 to a request
/// with "a Host header field with an invalid field value"; Host is
/// uri-host [":" port] (RFC 9110 7.2, RFC 3986 3.2.2: reg-name is
/// unreserved / pct-encoded / sub-delims; IP-literal is an IPv6 address or
/// IPvFuture); PROVENANCE.md rule 16. `"` `<` `>` `{` `}` `|` `^`
/// `` ` ``, a bare `%` and an empty or malformed IP literal are refused.
#[test]
fn host_value_must_be_a_uri_host() {
    let hosts: [&[u8]; 11] = [
        b"a\"b",
        b"a<b>",
        b"a{b}",
        b"a|b",
        b"a^b",
        b"a`b",
        b"a%zz",
        b"[]",
        b"x\"onload=alert(1)",
        b"a<b>:80",
        b"[1]",
    ];
    let inputs: Vec<Vec<u8>> = hosts
        .iter()
        .map(|h| [&b"GET / HTTP/1.1\r\nHost: "[..], h, b"\r\n\r\n"].concat())
        .collect();
    let mut vectors: Vec<Vector> = inputs
        .iter()
        .map(|i| bad("RFC 9112 3.2: invalid Host value", i, HttpField::Host, 400))
        .collect();
    // The same bytes as the authority of an absolute-form target.
    vectors.push(bad(
        "RFC 9112 3.2.2: invalid authority in absolute-form",
        b"GET http://a<b>/ HTTP/1.1\r\nHost: a<b>\r\n\r\n",
        HttpField::RequestLine,
        400,
    ));
    run_class("Host values", &vectors);
}

/// A 101 to a request that offered no upgrade: RFC 9110 15.2.2 and 7.8,
/// a server must not switch to a protocol the request did not offer (h11
/// refuses it too). A client that took it would hand the connection over
/// as a raw tunnel past a proxy's per-request checks (a backend tricked
/// into a 101: "WebSocket smuggling"). Refused with `HttpField::Switch`,
/// nothing after it parsed; a request that offered one switches.
#[test]
fn a_101_nobody_asked_for_is_not_a_switch() {
    const SWITCH: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nGET /admin HTTP/1.1\r\nHost: internal\r\n\r\n";
    let offered: [&[(&str, &[u8])]; 2] = [
        &[("Host", b"a")],
        &[
            ("Host", b"a"),
            ("Connection", b"keep-alive, Upgrade"),
            ("Upgrade", b"websocket"),
        ],
    ];
    for (headers, switches) in offered.into_iter().zip([false, true]) {
        let mut client = Client::new();
        client.request("GET", "/", headers, Body::Empty).unwrap();
        let mut conn = Conn::new(client, T0);
        conn.feed(SWITCH, T0).unwrap();
        let first = conn.poll_event();
        if switches {
            assert!(
                matches!(&first, Ok(Some(ClientEvent::Head(r))) if r.switches()),
                "{first:?}"
            );
        } else {
            assert!(
                matches!(
                    first,
                    Err(Error::InvalidInput {
                        kind: InvalidInput::Http(HttpField::Switch),
                        offset: 9
                    })
                ),
                "an unsolicited 101: {first:?}"
            );
            assert_eq!(conn.poll_event(), first, "final: nothing after it");
        }
    }
    // Recorded by hand: `expect_response` offered none, `expect_upgrade` did.
    for switches in [false, true] {
        let mut client = Client::new();
        if switches {
            client.expect_upgrade("GET");
        } else {
            client.expect_response("GET");
        }
        let mut conn = Conn::new(client, T0);
        conn.feed(SWITCH, T0).unwrap();
        assert_eq!(conn.poll_event().is_ok(), switches);
    }
}

/// The verdict does not depend on how the bytes came, for every valid
/// configuration, `max_head(1)` too: a CR alone at the front waits for
/// its LF (an empty line before a request is skipped, RFC 9112 2.2, and
/// counts toward the head's limit), so fed byte by byte as whole the
/// empty line itself is over the limit, at offset 0, and stays.
#[test]
fn split_invariance_with_a_one_byte_head_limit() {
    let input = b"\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n";
    let v = over(
        "a leading CRLF under max_head(1)",
        input,
        Limit::HeadLength,
        431,
    )
    .rest(input)
    .config(Http1Config::default().max_head(1).unwrap());
    if let Err(why) = check(&v) {
        panic!("{why}");
    }
}

/// Leading zeros of a chunk size take from the size line's bound (16
/// hex digits, CR, LF, and what is left of the extension budget), as the
/// `max_chunk_extensions` doc says: no size line is unbounded. With the
/// default budget a 21-digit size goes through; with none, it is refused.
#[test]
fn chunk_size_leading_zeros_take_from_the_line_bound() {
    let input = [CHUNKED, b"000000000000000000005\r\nhello\r\n0\r\n\r\n"].concat();
    let taken = ok(
        "leading zeros, no extension, the default budget",
        &input,
        vec![post(Body::Chunked), data(b"hello"), Ev::End],
    );
    let refused = over(
        "leading zeros, no extension, max_chunk_extensions(0)",
        &input,
        Limit::ChunkExtension,
        400,
    )
    .events(vec![post(Body::Chunked)])
    .rest(&input[CHUNKED.len()..])
    .config(Http1Config::default().max_chunk_extensions(0));
    for v in [taken, refused] {
        if let Err(why) = check(&v) {
            panic!("{why}");
        }
    }
}

/// Empty Transfer-Encoding elements are refused (PROVENANCE.md rule 14),
/// as hyper and llhttp refuse them: RFC 9110 5.6.1 would have a recipient
/// skip them, but a proxy that forwards the field as it came must not
/// frame `chunked,` as chunked where the next parser may not.
#[test]
fn transfer_encoding_empty_elements_follow_the_documented_policy() {
    let vectors = vec![
        bad(
            "trailing comma",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
        bad(
            "leading comma",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: ,chunked\r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
        bad(
            "empty element in the middle",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked , ,\r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
        bad(
            "a second, empty, Transfer-Encoding line after chunked",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: \r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
        bad(
            "an empty Transfer-Encoding line before chunked",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
    ];
    run_class("Transfer-Encoding empty elements", &vectors);
}

/// Attacker vectors, handled as RFC 9112 asks
/// (every feeding: whole, byte by byte, every two-way split).
#[test]
fn checked_vectors_hold() {
    let refused = vec![
        bad(
            "chunked, identity",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
        bad(
            "chunked;q=1 is another coding, so chunked not last (400)",
            b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n0\r\n\r\n",
            HttpField::TransferEncoding,
            400,
        ),
        bad(
            "LF-only request",
            b"GET / HTTP/1.1\nHost: a\n\n",
            HttpField::LineEnding,
            400,
        ),
        bad(
            "Host with userinfo",
            b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n",
            HttpField::Host,
            400,
        ),
        bad(
            "absolute-form authority differs from Host",
            b"GET http://b/ HTTP/1.1\r\nHost: a\r\n\r\n",
            HttpField::Host,
            400,
        ),
        bad(
            "unterminated quoted extension",
            &chunked(b"1;a=\"x\r\nx\r\n0\r\n\r\n"),
            HttpField::ChunkExtension,
            400,
        )
        .events(vec![post(Body::Chunked)])
        .rest(b"1;a=\"x\r\nx\r\n0\r\n\r\n"),
        bad(
            "DEL in a value",
            b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x7f\r\n\r\n",
            HttpField::HeaderValue,
            400,
        ),
    ];
    run_class("checked refusals", &refused);
    let accepted = vec![
        ok("TE with a trailing tab", b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n", vec![post(Body::Chunked), Ev::End]),
        ok("Content-Length: 00005", b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 00005\r\n\r\nhello", vec![post(Body::Length(5)), data(b"hello"), Ev::End]),
        ok("19-digit chunk size", &chunked(b"0000000000000000001\r\nx\r\n0\r\n\r\n"), vec![post(Body::Chunked), data(b"x"), Ev::End]),
        ok("quoted-pair in an extension", &chunked(b"1;a=\"\\\"x\\\\\"\r\nx\r\n0\r\n\r\n"), vec![post(Body::Chunked), data(b"x"), Ev::End]),
        ok("close wins over keep-alive", b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close, keep-alive\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End]).rest(b"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n"),
        ok("HTTP/1.0 keep-alive, then a 1.0 request that closes", b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /2 HTTP/1.0\r\n\r\nGET /3 HTTP/1.0\r\n\r\n",
            vec![head("GET / HTTP/1.0", Body::Empty), Ev::End, head("GET /2 HTTP/1.0", Body::Empty), Ev::End]).rest(b"GET /3 HTTP/1.0\r\n\r\n"),
        ok("nothing parsed after an upgrade", b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n",
            vec![head("GET / HTTP/1.1", Body::Empty), Ev::End]).rest(b"GET /2 HTTP/1.1\r\nHost: a\r\n\r\n"),
        ok("HEAD response with Content-Length", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            vec![head("HTTP/1.1 200 OK", Body::Empty), Ev::End]).client(&["HEAD"]),
    ];
    run_class("checked acceptances", &accepted);
}
