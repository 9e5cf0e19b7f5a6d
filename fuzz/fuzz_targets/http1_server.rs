//! `http1::Server` on any bytes, with any leniencies and limits: the whole
//! input, one byte at a time and cut into the pieces the fuzzer picks give
//! the same requests, the same body bytes, the same error and the same
//! rest; and each run keeps the contracts on its own:
//!
//! - every head, body piece and trailer section is the bytes at its place
//!   in the stream, and what lies between them is exactly framing (blank
//!   lines before a request, chunk-size lines, the CRLF after chunk data);
//!   nothing consumed is lost;
//! - events come in order (a head, its data, at most one trailer section,
//!   one end) and none after a request that stops the parsing;
//! - a body never runs past its Content-Length, its chunk sizes or the
//!   configured limits, and the framing agrees with the headers;
//! - an error is final: polled again it comes again, nothing consumed.
//!
//! The first 6 bytes choose the setup: flags (bare LF, chunk-size
//! whitespace, repeated Content-Length, end of stream, small head limits, a
//! body limit, resuming after an upgrade, a chunk-extension limit), two
//! piece sizes, the head limits, the body limit, the extension limit.

#![no_main]

use std::time::Duration;

use cleave_proto::http1::{Body, Headers, Http1Config, Request, Server, ServerEvent, Version};
use cleave_proto::{Conn, Error};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;
#[path = "support/http1.rs"]
mod support;
use harness::pieces;
use support::{
    check_head_lines, consumed, content_lengths, elements, has_element, ix, place, strip_eol, Open,
    State,
};

/// What the fuzzer chose besides the bytes.
#[derive(Clone, Copy, Debug)]
struct Setup {
    config: Http1Config,
    sizes: [usize; 2],
    /// The stream ends after the input.
    eof: bool,
    /// Decline every upgrade and CONNECT: parse on after it, if it keeps
    /// the connection open.
    resume: bool,
}

fn setup([flags, a, b, limits, body, ext]: [u8; 6]) -> Option<Setup> {
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
    Some(Setup {
        config,
        sizes: [usize::from(a % 64) + 1, usize::from(b % 64) + 1],
        eof: flags & 8 != 0,
        resume: flags & 0x40 != 0,
    })
}

/// One event as the runs compare it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seen {
    Head(Request),
    Data(Vec<u8>),
    Trailers(Headers),
    /// With whether the server waited for a switch (before any resume).
    End {
        switch_pending: bool,
    },
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
/// each until the server needs more; stops feeding at an error. Then
/// polls once more: the same error, or nothing, and nothing consumed.
fn run(setup: &Setup, pieces: &[&[u8]]) -> Run {
    let now = Duration::ZERO;
    let mut conn = Conn::new(Server::with_config(setup.config), now);
    let mut out = Run::default();
    let mut fed = 0;
    while fed < pieces.len() && out.error.is_none() {
        conn.feed(pieces[fed], now)
            .expect("the buffer takes the input");
        fed += 1;
        drain(&mut conn, setup, &mut out);
    }
    if setup.eof && out.error.is_none() {
        conn.handle_eof(now);
        drain(&mut conn, setup, &mut out);
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
        None => assert_eq!(again, Ok(None), "an event after the server said none"),
    }
    let after = (conn.recv_buf().offset(), conn.recv_buf().len());
    assert_eq!(after, (offset, len), "consumed after the last event");
    out.consumed = offset;
    out.rest = conn.recv_buf().peek().to_vec();
    out.rest.extend(pieces[fed..].concat());
    out
}

/// Polls until the server needs more, recording each event with the
/// offset after it; declines a switch right after its end if asked.
fn drain(conn: &mut Conn<Server>, setup: &Setup, out: &mut Run) {
    loop {
        let seen = match conn.poll_event() {
            Ok(Some(ServerEvent::Head(r))) => Seen::Head(r),
            Ok(Some(ServerEvent::Data(d))) => Seen::Data(d.to_vec()),
            Ok(Some(ServerEvent::Trailers(t))) => Seen::Trailers(t),
            Ok(Some(ServerEvent::End)) => {
                let switch_pending = conn.protocol().is_switch_pending();
                if switch_pending && setup.resume {
                    conn.protocol_mut().resume();
                }
                Seen::End { switch_pending }
            }
            Ok(None) => return,
            Err(e) => {
                out.error = Some(e);
                return;
            }
        };
        out.events.push((seen, conn.recv_buf().offset()));
    }
}

/// Whether `gap` is nothing but empty lines.
fn blank_lines(mut gap: &[u8], bare_lf: bool) -> bool {
    while !gap.is_empty() {
        match strip_eol(gap, bare_lf) {
            Some(tail) => gap = tail,
            None => return false,
        }
    }
    true
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
            let codings = elements(headers, "transfer-encoding", false);
            assert_eq!(codings.len(), 1, "not chunked alone: {codings:?}");
            assert!(codings[0].eq_ignore_ascii_case(b"chunked"));
        }
        Body::Empty => {
            assert!(!te, "an empty body with Transfer-Encoding");
            assert!(
                lengths.iter().all(|&l| l == Some(0)),
                "an empty body with a length"
            );
            assert!(lengths.len() <= 1 || config.get_allow_equal_content_lengths());
        }
        Body::UntilClose => panic!("a request body until the close"),
    }
}

fn check_request(r: &Request, config: &Http1Config) {
    let head = r.as_bytes();
    check_head_lines(head, config);
    let line = format!("{} {} {}", r.method(), r.target(), r.version());
    let after = head
        .strip_prefix(line.as_bytes())
        .expect("the request line as parsed");
    assert!(
        after.starts_with(b"\r\n") || after.starts_with(b"\n"),
        "more on the request line"
    );
    assert!(!r.method().is_empty() && !r.target().is_empty());
    let headers = r.headers();
    assert_eq!(headers.iter().count(), headers.len());
    assert!(
        headers.len() <= config.get_max_headers(),
        "over max_headers"
    );
    check_framing(headers, r.body(), r.version(), config);
    assert!(
        r.version() == Version::Http10 || r.host().is_some(),
        "HTTP/1.1 without a host"
    );
    let close = has_element(headers, "connection", b"close");
    let keep_alive = match r.version() {
        Version::Http11 => !close,
        Version::Http10 => !close && has_element(headers, "connection", b"keep-alive"),
    };
    assert_eq!(r.keep_alive(), keep_alive, "keep-alive against Connection");
    assert_eq!(r.is_connect(), r.method() == "CONNECT");
    let upgrade = r.version() == Version::Http11
        && headers.get("upgrade").is_some()
        && has_element(headers, "connection", b"upgrade");
    assert_eq!(
        r.is_upgrade(),
        upgrade,
        "upgrade against Upgrade, Connection and version"
    );
}

/// Walks one run's events over the input.
struct Checker<'a> {
    input: &'a [u8],
    setup: &'a Setup,
    /// Where the bytes accounted for end.
    pos: usize,
    state: State,
    /// The connection stays open after the open request, as far as it
    /// says.
    keep_alive: bool,
    /// The open request is an upgrade or a CONNECT: parsing stops after
    /// it unless declined.
    switch: bool,
}

impl Checker<'_> {
    fn event(&mut self, seen: &Seen, end: u64) {
        let end = ix(end);
        match seen {
            Seen::Head(r) => self.head(r, end),
            Seen::Data(d) => self.data(d, end),
            Seen::Trailers(t) => self.trailers(t, end),
            Seen::End { switch_pending } => self.end(*switch_pending, end),
        }
        self.pos = end;
    }

    fn open(&mut self, what: &str) -> &mut Open {
        match &mut self.state {
            State::Open(open) => open,
            state => panic!("{what} in {state:?}"),
        }
    }

    fn head(&mut self, r: &Request, end: usize) {
        assert!(
            matches!(self.state, State::Idle),
            "a head in {:?}",
            self.state
        );
        let config = &self.setup.config;
        let start = place(self.input, self.pos, r.as_bytes(), end);
        let gap = &self.input[self.pos..start];
        assert!(
            blank_lines(gap, config.get_allow_bare_lf()),
            "not blank lines before a head"
        );
        check_request(r, config);
        self.state = State::Open(Open::new(r.body()));
        self.keep_alive = r.keep_alive();
        self.switch = r.is_upgrade() || r.is_connect();
    }

    fn data(&mut self, d: &[u8], end: usize) {
        let (input, pos, config) = (self.input, self.pos, self.setup.config);
        self.open("data").data(input, pos, d, end, &config);
    }

    fn trailers(&mut self, t: &Headers, end: usize) {
        let (input, pos, config) = (self.input, self.pos, self.setup.config);
        self.open("trailers").trailers(input, pos, t, end, &config);
    }

    fn end(&mut self, switch_pending: bool, end: usize) {
        let (input, pos, setup) = (self.input, self.pos, self.setup);
        self.open("an end").end(&input[pos..end], &setup.config);
        assert_eq!(switch_pending, self.switch, "a switch pending or not");
        // A declined switch parses on only if the request keeps the
        // connection open.
        self.state = if self.keep_alive && (!self.switch || setup.resume) {
            State::Idle
        } else {
            State::Closed
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
            State::Idle => {
                let bare_lf = self.setup.config.get_allow_bare_lf();
                assert!(blank_lines(gap, bare_lf), "consumed past blank lines");
            }
            State::Closed => assert!(gap.is_empty(), "consumed after the last request"),
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
                State::Open(_) => panic!("the stream ended inside a request, without an error"),
            }
        }
    }
}

/// Checks one run's own contracts.
fn check(input: &[u8], setup: &Setup, run: &Run) {
    let mut checker = Checker {
        input,
        setup,
        pos: 0,
        state: State::Idle,
        keep_alive: false,
        switch: false,
    };
    for (seen, end) in &run.events {
        checker.event(seen, *end);
    }
    checker.finish(run);
}

fuzz_target!(|data: &[u8]| {
    let Some((knobs, input)) = data.split_first_chunk::<6>() else {
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
