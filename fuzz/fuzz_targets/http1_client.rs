//! `http1::Client` on any bytes, with any leniencies and limits, answering
//! the requests the fuzzer records (GET, HEAD, CONNECT, POST): the whole
//! input, one byte at a time and cut into the pieces the fuzzer picks give
//! the same responses, the same body bytes, the same error and the same
//! rest; and each run keeps the contracts on its own:
//!
//! - every head, body piece and trailer section is the bytes at its place
//!   in the stream, and what lies between them is exactly framing
//!   (chunk-size lines, the CRLF after chunk data); nothing consumed is
//!   lost;
//! - events come in order (interim responses, then a head, its data, at
//!   most one trailer section, one end) and none after a response that
//!   ends HTTP on the connection; each final response answers the next
//!   recorded request;
//! - a body is framed for the request it answers (none after HEAD, a 1xx,
//!   204 or 304; a tunnel after a 101 or a 2xx to CONNECT; to the close
//!   without a length), never runs past its Content-Length, its chunk
//!   sizes or the configured limits, and ends at the close only at the end
//!   of the stream;
//! - an error is final: polled again it comes again, nothing consumed.
//!
//! The first 7 bytes choose the setup: flags (bare LF, chunk-size
//! whitespace, repeated Content-Length, end of stream, small head limits, a
//! body limit, recording the requests, a chunk-extension limit), two piece
//! sizes, the head limits, the body limit, the extension limit (and, in
//! its top bit, obs-fold unfolded in responses), four methods.

#![no_main]

use std::time::Duration;

use cleave_proto::http1::{Body, Client, ClientEvent, Headers, Http1Config, Response, Version};
use cleave_proto::{Conn, Error};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;
#[path = "support/http1.rs"]
mod support;
use harness::pieces;
use support::{
    check_head_lines, consumed, content_lengths, elements, has_element, ix, place, Open, State,
};

/// What the fuzzer chose besides the bytes.
#[derive(Clone, Debug)]
struct Setup {
    config: Http1Config,
    sizes: [usize; 2],
    /// The stream ends after the input.
    eof: bool,
    /// The requests recorded before the responses come, in order.
    methods: Vec<&'static str>,
}

fn setup([flags, a, b, limits, body, ext, methods]: [u8; 7]) -> Option<Setup> {
    let mut config = Http1Config::default()
        .allow_bare_lf(flags & 1 != 0)
        .allow_chunk_size_whitespace(flags & 2 != 0)
        .allow_equal_content_lengths(flags & 4 != 0);
    if flags & 0x10 != 0 {
        let k = usize::from(limits);
        config = config
            .max_line(16 + k % 32 * 8)
            .ok()?
            .max_head(16 + k * 8)
            .ok()?
            .max_headers(k % 16 + 1)
            .ok()?
            .max_trailers(2 + k)
            .ok()?;
    }
    if flags & 0x20 != 0 {
        config = config.max_body(Some(u64::from(body) * 2));
    }
    if flags & 0x80 != 0 {
        config = config.max_chunk_extensions(u64::from(ext % 64));
    }
    config = config.allow_obs_fold_in_responses(ext & 0x80 != 0);
    Some(Setup {
        config,
        sizes: [usize::from(a % 64) + 1, usize::from(b % 64) + 1],
        eof: flags & 8 != 0,
        methods: if flags & 0x40 != 0 {
            (0..4)
                .map(|i| ["GET", "HEAD", "CONNECT", "POST"][usize::from((methods >> (2 * i)) & 3)])
                .collect()
        } else {
            Vec::new()
        },
    })
}

/// One event as the runs compare it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Interim(Response),
    Head(Response),
    Data(Vec<u8>),
    Trailers(Headers),
    End,
}

/// Everything one run saw.
#[derive(Debug, Default, PartialEq, Eq)]
struct Run {
    /// Each event with the stream offset right after it.
    events: Vec<(Seen, u64)>,
    error: Option<Error>,
    /// The stream offset of the first byte never consumed.
    consumed: u64,
    /// The bytes never consumed: the buffer, then the input never fed.
    rest: Vec<u8>,
    /// The requests still waiting for their response.
    pending: usize,
}

impl Run {
    /// The events with neighbouring data merged: the pieces of a body
    /// depend on how the bytes arrived, their concatenation does not.
    fn merged(&self) -> Vec<(Seen, u64)> {
        let mut out: Vec<(Seen, u64)> = Vec::new();
        for (seen, end) in &self.events {
            if let (Seen::Data(more), Some((Seen::Data(data), last))) = (seen, out.last_mut()) {
                data.extend_from_slice(more);
                *last = *end;
                continue;
            }
            out.push((seen.clone(), *end));
        }
        out
    }
}

/// Feeds `pieces` (then the end of the stream if asked), polling after
/// each until the client needs more; stops feeding at an error. Then
/// polls once more: the same error, or nothing, and nothing consumed.
fn run(setup: &Setup, pieces: &[&[u8]]) -> Run {
    let now = Duration::ZERO;
    let mut client = Client::with_config(setup.config);
    for method in &setup.methods {
        client.expect_response(method);
    }
    let mut conn = Conn::new(client, now);
    let mut out = Run::default();
    let mut fed = 0;
    while fed < pieces.len() && out.error.is_none() {
        conn.feed(pieces[fed], now)
            .expect("the buffer takes the input");
        fed += 1;
        drain(&mut conn, &mut out);
    }
    if setup.eof && out.error.is_none() {
        conn.handle_eof(now);
        drain(&mut conn, &mut out);
    }
    let (offset, len) = (conn.recv_buf().offset(), conn.recv_buf().len());
    let again = conn.poll_event();
    match &out.error {
        Some(e) => {
            assert_eq!(again.as_ref().err(), Some(e), "the error is not final");
            conn.handle_eof(now);
            let last = conn.poll_event();
            assert_eq!(last.as_ref().err(), Some(e), "not final at the end");
        }
        None => assert_eq!(again, Ok(None), "an event after the client said none"),
    }
    let after = (conn.recv_buf().offset(), conn.recv_buf().len());
    assert_eq!(after, (offset, len), "consumed after the last event");
    out.consumed = offset;
    out.rest = conn.recv_buf().peek().to_vec();
    out.rest.extend(pieces[fed..].concat());
    out.pending = conn.protocol().pending();
    out
}

/// Polls until the client needs more, recording each event with the
/// offset after it.
fn drain(conn: &mut Conn<Client>, out: &mut Run) {
    loop {
        let seen = match conn.poll_event() {
            Ok(Some(ClientEvent::Interim(r))) => Seen::Interim(r),
            Ok(Some(ClientEvent::Head(r))) => Seen::Head(r),
            Ok(Some(ClientEvent::Data(d))) => Seen::Data(d.to_vec()),
            Ok(Some(ClientEvent::Trailers(t))) => Seen::Trailers(t),
            Ok(Some(ClientEvent::End)) => Seen::End,
            Ok(None) => return,
            Err(e) => {
                out.error = Some(e);
                return;
            }
        };
        out.events.push((seen, conn.recv_buf().offset()));
    }
}

/// The framing the headers declare agrees with the one decided.
fn check_framing(headers: &Headers, body: Body, version: Version, config: &Http1Config) {
    let te = headers.get("transfer-encoding").is_some();
    let lengths = content_lengths(headers);
    match body {
        Body::Length(n) => {
            assert!(n > 0 && !te, "a length body with {headers:?}");
            assert!(!lengths.is_empty(), "a length body without Content-Length");
            assert!(
                lengths.iter().all(|&l| l == Some(n)),
                "Content-Length is not {n}"
            );
            assert!(lengths.len() == 1 || config.get_allow_equal_content_lengths());
            assert!(
                config.get_max_body().is_none_or(|max| n <= max),
                "over max_body"
            );
        }
        Body::Chunked => {
            assert!(te && lengths.is_empty() && version == Version::Http11);
            let codings = codings(headers);
            let last = codings.last().expect("a coding");
            assert!(last.eq_ignore_ascii_case(b"chunked"), "{codings:?}");
        }
        Body::Empty => {
            assert!(!te, "an empty body with Transfer-Encoding");
            assert!(!lengths.is_empty(), "an empty body without Content-Length");
            assert!(
                lengths.iter().all(|&l| l == Some(0)),
                "an empty body with a length"
            );
            assert!(lengths.len() == 1 || config.get_allow_equal_content_lengths());
        }
        Body::UntilClose => {
            assert!(lengths.is_empty(), "to the close with {headers:?}");
            if te {
                // RFC 9112 6.3 rule 4: the last coding is not chunked.
                assert!(version == Version::Http11, "TE in HTTP/1.0");
                let codings = codings(headers);
                let last = codings.last().expect("a coding");
                assert!(!last.eq_ignore_ascii_case(b"chunked"), "{codings:?}");
            }
        }
    }
}

/// A response's Transfer-Encoding list, checked as the client takes it:
/// no empty element, chunked at most once.
fn codings(headers: &Headers) -> Vec<&[u8]> {
    let codings = elements(headers, "transfer-encoding", true);
    assert!(!codings.iter().any(|c| c.is_empty()), "an empty coding");
    let chunked = codings
        .iter()
        .filter(|c| c.eq_ignore_ascii_case(b"chunked"))
        .count();
    assert!(chunked <= 1, "chunked twice: {codings:?}");
    codings
}

/// A final or interim response, answering a request with `method` (or
/// none: `method` is then GET, and the response is the last).
/// `came` is the head as it came: the limits bound its lines.
fn check_response(r: &Response, came: &[u8], method: &str, asked: bool, config: &Http1Config) {
    let head = r.as_bytes();
    check_head_lines(came, config);
    let status = r.status();
    assert!((100..=999).contains(&status), "status {status}");
    let line = format!("{} {status} ", r.version());
    let after = head
        .strip_prefix(line.as_bytes())
        .expect("the status line as parsed");
    let after = after
        .strip_prefix(r.reason())
        .expect("the reason as parsed");
    assert!(
        after.starts_with(b"\r\n") || after.starts_with(b"\n"),
        "more on the status line"
    );
    let headers = r.headers();
    assert_eq!(headers.iter().count(), headers.len());
    assert!(
        headers.len() <= config.get_max_headers(),
        "over max_headers"
    );
    let switches = status == 101 || (method == "CONNECT" && (200..300).contains(&status));
    assert_eq!(r.switches(), switches, "switches, answering {method}");
    assert_eq!(
        r.is_interim(),
        (100..200).contains(&status) && status != 101
    );
    let bodiless =
        method == "HEAD" || (100..200).contains(&status) || status == 204 || status == 304;
    if bodiless || switches {
        assert_eq!(r.body(), Body::Empty, "a body, answering {method}");
    } else {
        check_framing(headers, r.body(), r.version(), config);
    }
    let close = has_element(headers, "connection", b"close");
    let keep_alive = match r.version() {
        Version::Http11 => !close,
        Version::Http10 => !close && has_element(headers, "connection", b"keep-alive"),
    };
    let keep_alive = keep_alive && r.body() != Body::UntilClose && !switches && asked;
    assert_eq!(
        r.keep_alive(),
        keep_alive,
        "keep-alive against Connection and framing"
    );
}

/// `head` with each obs-fold undone as RFC 9112, section 5.2 says: a
/// line end (CRLF, or a bare LF) inside the field lines that a space or a
/// tab follows becomes as many spaces. The status line's end never is
/// one: whitespace after it is refused.
fn unfolded(head: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(head.len());
    let mut lines = head.split_inclusive(|&b| b == b'\n').peekable();
    let mut first = true;
    while let Some(line) = lines.next() {
        let folds = !first
            && matches!(lines.peek(), Some(next) if next.starts_with(b" ") || next.starts_with(b"\t"));
        first = false;
        match (folds, line.strip_suffix(b"\r\n"), line.strip_suffix(b"\n")) {
            (true, Some(text), _) => {
                out.extend_from_slice(text);
                out.extend_from_slice(b"  ");
            }
            (true, None, Some(text)) => {
                out.extend_from_slice(text);
                out.push(b' ');
            }
            _ => out.extend_from_slice(line),
        }
    }
    out
}

/// Walks one run's events over the input.
struct Checker<'a> {
    input: &'a [u8],
    setup: &'a Setup,
    /// Where the bytes accounted for end.
    pos: usize,
    state: State,
    /// Parsing stops after the open response (close, a switch).
    last: bool,
    /// The requests whose responses have not come.
    asked: std::collections::VecDeque<&'static str>,
}

impl<'a> Checker<'a> {
    fn event(&mut self, seen: &Seen, end: u64) {
        let end = ix(end);
        match seen {
            Seen::Interim(r) => self.interim(r, end),
            Seen::Head(r) => self.head(r, end),
            Seen::Data(d) => self.data(d, end),
            Seen::Trailers(t) => self.trailers(t, end),
            Seen::End => self.end(end),
        }
        self.pos = end;
    }

    fn open(&mut self, what: &str) -> &mut Open {
        match &mut self.state {
            State::Open(open) => open,
            state => panic!("{what} in {state:?}"),
        }
    }

    /// A head right after what is accounted for: no blank lines before a
    /// response. With obs-fold allowed, the head is the bytes that came
    /// with each fold's line end made spaces; folded or not, no fold is
    /// left in it.
    fn start(&self, r: &Response, end: usize) -> &'a [u8] {
        assert!(
            matches!(self.state, State::Idle),
            "a head in {:?}",
            self.state
        );
        let head = r.as_bytes();
        let start = if self.setup.config.get_allow_obs_fold_in_responses() {
            let start = end.checked_sub(head.len()).expect("a head past the stream");
            assert!(start >= self.pos, "a head over bytes accounted for");
            let came = unfolded(&self.input[start..end]);
            assert_eq!(head, came.as_slice(), "a head not as it came, unfolded");
            start
        } else {
            place(self.input, self.pos, head, end)
        };
        assert_eq!(start, self.pos, "bytes skipped before a response");
        assert_eq!(unfolded(head), head.as_ref(), "a folded line in a head");
        &self.input[start..end]
    }

    fn interim(&mut self, r: &Response, end: usize) {
        let came = self.start(r, end);
        let asked = self.asked.front().copied();
        let method = asked.unwrap_or("GET");
        check_response(r, came, method, asked.is_some(), &self.setup.config);
        assert!(r.is_interim(), "a final response as interim");
    }

    fn head(&mut self, r: &Response, end: usize) {
        let came = self.start(r, end);
        let asked = self.asked.pop_front();
        let method = asked.unwrap_or("GET");
        check_response(r, came, method, asked.is_some(), &self.setup.config);
        assert!(!r.is_interim(), "an interim response as final");
        self.state = State::Open(Open::new(r.body()));
        self.last = !r.keep_alive();
    }

    fn data(&mut self, d: &[u8], end: usize) {
        let (input, pos, config) = (self.input, self.pos, self.setup.config);
        self.open("data").data(input, pos, d, end, &config);
    }

    fn trailers(&mut self, t: &Headers, end: usize) {
        let (input, pos, config) = (self.input, self.pos, self.setup.config);
        self.open("trailers").trailers(input, pos, t, end, &config);
    }

    fn end(&mut self, end: usize) {
        let (input, pos, setup) = (self.input, self.pos, self.setup);
        let open = self.open("an end");
        if open.body == Body::UntilClose {
            assert!(setup.eof, "ended before the close");
        }
        open.end(&input[pos..end], &setup.config);
        self.state = if self.last {
            State::Closed
        } else {
            State::Idle
        };
    }

    /// The end of the run: the bytes consumed but not in an event are
    /// framing, the rest is what follows, the error points past what was
    /// given.
    fn finish(&self, run: &Run) {
        let consumed = consumed(
            self.input,
            self.pos,
            run.error.as_ref(),
            run.consumed,
            &run.rest,
        );
        let gap = &self.input[self.pos..consumed];
        match &self.state {
            State::Idle | State::Closed => assert!(gap.is_empty(), "consumed, not given"),
            State::Open(open) => {
                let framing = gap.is_empty() || open.is_framing(gap, &self.setup.config);
                let gap = gap.escape_ascii().to_string();
                assert!(framing, "{gap:?} consumed, not given: {:?}", run.error);
            }
        }
        if self.setup.eof && run.error.is_none() {
            match self.state {
                State::Idle => assert!(run.rest.is_empty(), "bytes left at the end"),
                State::Closed => {}
                State::Open(_) => panic!("the stream ended inside a response, without an error"),
            }
        }
        let heads = run
            .events
            .iter()
            .filter(|(seen, _)| matches!(seen, Seen::Head(_)));
        let pending = self.setup.methods.len().saturating_sub(heads.count());
        assert_eq!(run.pending, pending, "the requests still waiting");
    }
}

/// Checks one run's own contracts.
fn check(input: &[u8], setup: &Setup, run: &Run) {
    let mut checker = Checker {
        input,
        setup,
        pos: 0,
        state: State::Idle,
        last: false,
        asked: setup.methods.iter().copied().collect(),
    };
    for (seen, end) in &run.events {
        checker.event(seen, *end);
    }
    checker.finish(run);
}

fuzz_target!(|data: &[u8]| {
    let Some((knobs, input)) = data.split_first_chunk::<7>() else {
        return;
    };
    let Some(setup) = setup(*knobs) else {
        return;
    };
    let whole = run(&setup, &[input]);
    check(input, &setup, &whole);
    let expected = whole.merged();
    for sizes in [&[1][..], &setup.sizes[..]] {
        let cut = run(&setup, &pieces(input, sizes));
        check(input, &setup, &cut);
        assert_eq!(cut.merged(), expected, "pieces {sizes:?}: other events");
        assert_eq!(cut.error, whole.error, "pieces {sizes:?}: another error");
        let rest = (cut.consumed, &cut.rest);
        assert_eq!(
            rest,
            (whole.consumed, &whole.rest),
            "pieces {sizes:?}: another rest"
        );
    }
});
