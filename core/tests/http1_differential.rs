//! HTTP/1.1, differential: random pipelines (both roles: Content-Length
//! and chunked bodies with extensions and trailers, interim responses,
//! bodiless statuses, HEAD, upgrades and CONNECT followed by foreign
//! bytes, a body to the close) with the smuggling suite's faults, under
//! random limits (body, head, line, header count, chunk extensions,
//! trailers, the receive buffer) and leniencies, cut off at random,
//! fed whole, byte by byte and at random cuts.
//!
//! Checked: the same events, the same error (limits: the same limit,
//! max and offset) and the same bytes left, however the bytes came; the
//! error again on every later poll, even as more bytes come, and nothing
//! consumed after it; nothing lost (the buffer's offset plus its length
//! is what was fed). And the rule the HTTP/1.1 docs give for what stays
//! after an error ("the bytes from the bad message on", refined by the
//! smuggling suite to the bad part: the head, the chunk-size line, the
//! bytes after a chunk's data, the trailer section): the buffer holds
//! exactly the input from its offset to what was fed, its offset is the
//! start of such a part (one the error kind may be charged to), and the
//! error's offset lies in that part (`buffer offset <= error offset <=
//! fed`). For `Truncated`, `partial` is the input from the error's offset
//! to what was fed, and that offset is the start of a part (or inside a
//! body, whose bytes come out as they arrive).
//!
//! `HTTP_DIFF_SEED=<u64>` runs another sequence, `HTTP_DIFF_ROUNDS=<n>`
//! another number of rounds.

use std::collections::BTreeMap;
use std::time::Duration;

use cleave_proto::http1::{Client, ClientEvent, Http1Config, Server, ServerEvent};
use cleave_proto::{
    Conn, ConnConfig, Error, HttpField, InvalidInput, Limit, Protocol, RecvBufConfig,
};

const NOW: Duration = Duration::ZERO;

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

// ----- the setup -----

#[derive(Clone, Copy, Debug)]
struct Setup {
    client: bool,
    max_body: Option<u64>,
    max_head: usize,
    max_line: usize,
    max_headers: usize,
    max_ext: u64,
    max_trailers: usize,
    bare_lf: bool,
    size_ws: bool,
    equal_cl: bool,
    max_buffered: usize,
    eof: bool,
}

impl Setup {
    fn random(r: &mut Rng) -> Self {
        Self {
            client: r.one_in(2),
            max_body: r.pick(&[None, None, Some(0), Some(10), Some(150), Some(1000)]),
            max_head: r.pick(&[32 * 1024, 32 * 1024, 80, 200]),
            max_line: r.pick(&[8 * 1024, 8 * 1024, 40, 90]),
            max_headers: r.pick(&[100, 100, 3, 5]),
            max_ext: r.pick(&[16 * 1024, 16 * 1024, 0, 6, 30]),
            max_trailers: r.pick(&[16 * 1024, 16 * 1024, 12, 40]),
            bare_lf: r.one_in(4),
            size_ws: r.one_in(4),
            equal_cl: r.one_in(4),
            max_buffered: r.pick(&[8 << 20, 8 << 20, 8 << 20, 256, 3000]),
            eof: !r.one_in(4),
        }
    }

    fn config(&self) -> Http1Config {
        Http1Config::default()
            .max_body(self.max_body)
            .max_head(self.max_head)
            .unwrap()
            .max_line(self.max_line)
            .unwrap()
            .max_headers(self.max_headers)
            .unwrap()
            .max_chunk_extensions(self.max_ext)
            .max_trailers(self.max_trailers)
            .unwrap()
            .allow_bare_lf(self.bare_lf)
            .allow_chunk_size_whitespace(self.size_ws)
            .allow_equal_content_lengths(self.equal_cl)
    }

    fn conn_config(&self) -> ConnConfig {
        ConnConfig::default().recv_buf(
            RecvBufConfig::default()
                .max_buffered(self.max_buffered)
                .unwrap(),
        )
    }
}

// ----- the stream -----

/// The parts an error may be charged to, where they start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    /// A head (a message's first byte; also the end of the previous one).
    Head,
    /// A chunk-size line.
    Line,
    /// The bytes after a chunk's data.
    DataEnd,
    /// A trailer section (after the last chunk's line).
    Trailers,
}

#[derive(Clone, Debug, Default)]
struct Stream {
    bytes: Vec<u8>,
    parts: Vec<(usize, Part)>,
    /// Body bytes, which come out as they arrive: `start..=end`.
    data: Vec<(usize, usize)>,
    /// Bodies delimited by the close: `start..=end`.
    until_close: Vec<(usize, usize)>,
    /// For a client: the requests sent, `(method, offered an upgrade)`.
    asked: Vec<(&'static str, bool)>,
    /// Bytes were flipped after the stream was made: the parts may not be
    /// where the parser finds them.
    flipped: bool,
    /// The faults put in, for the statistics.
    faults: Vec<&'static str>,
}

impl Stream {
    fn mark(&mut self, part: Part) {
        self.parts.push((self.bytes.len(), part));
    }
    fn put(&mut self, b: &[u8]) {
        self.bytes.extend_from_slice(b);
    }
}

/// A fault of the smuggling suite's kinds, put in one message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    None,
    // Heads.
    BothFraming,
    TeTwice,
    TeGzip,
    TeComma,
    ClPlus,
    ClTwoValues,
    ClHex,
    ClDiffering,
    ClEqual,
    BareLfHead,
    BareCrHead,
    ObsFold,
    SpaceBeforeColon,
    WsFirstHeader,
    NulValue,
    NoHost,
    TwoHosts,
    BadVersion,
    SpaceInTarget,
    BadStatus,
    NoReasonSpace,
    Unasked101,
    // Chunked bodies.
    Size0x,
    SizeSign,
    SizeEmpty,
    SizeSpace,
    SizeOverflow,
    SizeZeros,
    ExtBadWs,
    ExtUnterminated,
    ExtCtl,
    DataEndXx,
    DataEndBareLf,
    LineBareLf,
    TrailerCl,
    TrailerFold,
    TrailerNul,
    TrailerBareLf,
    TrailerNoColon,
}

const HEAD_FAULTS: &[Fault] = &[
    Fault::BothFraming,
    Fault::TeTwice,
    Fault::TeGzip,
    Fault::TeComma,
    Fault::ClPlus,
    Fault::ClTwoValues,
    Fault::ClHex,
    Fault::ClDiffering,
    Fault::ClEqual,
    Fault::BareLfHead,
    Fault::BareCrHead,
    Fault::ObsFold,
    Fault::SpaceBeforeColon,
    Fault::WsFirstHeader,
    Fault::NulValue,
    Fault::NoHost,
    Fault::TwoHosts,
    Fault::BadVersion,
    Fault::SpaceInTarget,
    Fault::BadStatus,
    Fault::NoReasonSpace,
    Fault::Unasked101,
];

const BODY_FAULTS: &[Fault] = &[
    Fault::Size0x,
    Fault::SizeSign,
    Fault::SizeEmpty,
    Fault::SizeSpace,
    Fault::SizeOverflow,
    Fault::SizeZeros,
    Fault::ExtBadWs,
    Fault::ExtUnterminated,
    Fault::ExtCtl,
    Fault::DataEndXx,
    Fault::DataEndBareLf,
    Fault::LineBareLf,
    Fault::TrailerCl,
    Fault::TrailerFold,
    Fault::TrailerNul,
    Fault::TrailerBareLf,
    Fault::TrailerNoColon,
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyKind {
    None,
    Length(usize),
    Chunked,
    UntilClose,
}

fn word(r: &mut Rng, max: u64) -> Vec<u8> {
    let n = r.below(max) + 1;
    (0..n).map(|_| b'a' + r.below(26) as u8).collect()
}

fn body_bytes(r: &mut Rng, n: usize) -> Vec<u8> {
    if r.one_in(2) {
        (0..n).map(|i| b'a' + (i % 26) as u8).collect()
    } else {
        (0..n).map(|_| r.next() as u8).collect()
    }
}

/// A head: start line, fields (the framing ones for `body`), the empty
/// line; `fault` if it is a head fault.
fn head(
    r: &mut Rng,
    s: &mut Stream,
    start: &[u8],
    mut fields: Vec<(Vec<u8>, Vec<u8>)>,
    body: BodyKind,
    fault: Fault,
) {
    match (body, fault) {
        (BodyKind::Length(n), Fault::ClPlus) => {
            fields.push((b"Content-Length".to_vec(), format!("+{n}").into()))
        }
        (BodyKind::Length(n), Fault::ClTwoValues) => {
            fields.push((b"Content-Length".to_vec(), format!("{n} {n}").into()))
        }
        (BodyKind::Length(n), Fault::ClHex) => {
            fields.push((b"Content-Length".to_vec(), format!("0x{n:x}").into()))
        }
        (BodyKind::Length(n), Fault::ClDiffering) => {
            fields.push((b"Content-Length".to_vec(), n.to_string().into()));
            fields.push((b"Content-Length".to_vec(), (n + 1).to_string().into()));
        }
        (BodyKind::Length(n), Fault::ClEqual) => {
            fields.push((b"Content-Length".to_vec(), n.to_string().into()));
            fields.push((b"Content-Length".to_vec(), n.to_string().into()));
        }
        (BodyKind::Length(n), _) => fields.push((b"Content-Length".to_vec(), n.to_string().into())),
        (BodyKind::Chunked, Fault::BothFraming) => {
            fields.push((b"Transfer-Encoding".to_vec(), b"chunked".to_vec()));
            fields.push((b"Content-Length".to_vec(), b"3".to_vec()));
        }
        (BodyKind::Chunked, Fault::TeTwice) => {
            fields.push((b"Transfer-Encoding".to_vec(), b"chunked, chunked".to_vec()))
        }
        (BodyKind::Chunked, Fault::TeGzip) => {
            fields.push((b"Transfer-Encoding".to_vec(), b"gzip, chunked".to_vec()))
        }
        (BodyKind::Chunked, Fault::TeComma) => {
            fields.push((b"Transfer-Encoding".to_vec(), b"chunked,".to_vec()))
        }
        (BodyKind::Chunked, _) => {
            let spelling = r.pick(&[&b"chunked"[..], b"Chunked", b"CHUNKED"]);
            fields.push((b"Transfer-Encoding".to_vec(), spelling.to_vec()));
        }
        _ => {}
    }
    // Shuffle a little: framing fields not always last.
    if fields.len() > 1 && r.one_in(2) {
        let i = r.below(fields.len() as u64) as usize;
        let last = fields.len() - 1;
        fields.swap(i, last);
    }
    match fault {
        Fault::NulValue if !fields.is_empty() => fields[0].1.push(0),
        Fault::TwoHosts => fields.push((b"Host".to_vec(), b"b".to_vec())),
        _ => {}
    }
    s.put(start);
    s.put(if fault == Fault::BareLfHead {
        b"\n"
    } else {
        b"\r\n"
    });
    for (i, (name, value)) in fields.iter().enumerate() {
        if i == 0 && fault == Fault::WsFirstHeader {
            s.put(b" ");
        }
        s.put(name);
        if i == 0 && fault == Fault::SpaceBeforeColon {
            s.put(b" ");
        }
        s.put(b": ");
        s.put(value);
        if i == 0 && fault == Fault::BareCrHead {
            s.put(b"\rx");
        }
        s.put(b"\r\n");
        if i == 0 && fault == Fault::ObsFold {
            s.put(b" folded\r\n");
        }
    }
    s.put(b"\r\n");
}

/// Random extra fields: long ones hit the line and head limits, many the
/// count.
fn extra_fields(r: &mut Rng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut fields = Vec::new();
    for _ in 0..r.below(6) {
        let name = [&b"X-"[..], &word(r, 8)].concat();
        let value = match r.below(4) {
            0 => word(r, 70),
            1 => b"\xc3\xa9t\xc3\xa9".to_vec(),
            _ => word(r, 12),
        };
        fields.push((name, value));
    }
    fields
}

/// A chunk-size line, with the extension maybe, and the fault if it is
/// one of a line.
fn size_line(r: &mut Rng, s: &mut Stream, size: usize, fault: Fault) {
    s.mark(Part::Line);
    let hex = if r.one_in(2) {
        format!("{size:x}")
    } else {
        format!("{size:X}")
    };
    match fault {
        Fault::Size0x => s.put(format!("0x{hex}").as_bytes()),
        Fault::SizeSign => s.put(format!("+{hex}").as_bytes()),
        Fault::SizeEmpty => {}
        Fault::SizeSpace => s.put(format!("{hex} ").as_bytes()),
        Fault::SizeOverflow => s.put(b"1ffffffffffffffff"),
        Fault::SizeZeros => s.put(format!("{}{hex}", "0".repeat(20)).as_bytes()),
        _ if r.one_in(6) => s.put(format!("00{hex}").as_bytes()),
        _ => s.put(hex.as_bytes()),
    }
    match fault {
        Fault::ExtBadWs => s.put(b";a =b"),
        Fault::ExtUnterminated => s.put(b";a=\"open"),
        Fault::ExtCtl => s.put(b";a=\x01"),
        _ => match r.below(5) {
            0 => s.put(b";a=b"),
            1 => s.put(b";name=\"quoted \\\" value\""),
            2 => {
                let w = word(r, 20);
                s.put(b";");
                s.put(&w);
            }
            _ => {}
        },
    }
    s.put(if fault == Fault::LineBareLf {
        b"\n"
    } else {
        b"\r\n"
    });
}

/// A chunked body; `fault` is put at a random chunk.
fn chunked(r: &mut Rng, s: &mut Stream, fault: Fault) {
    let n = r.below(4) as usize;
    let at = r.below(n as u64 + 2) as usize;
    for i in 0..n {
        let size = match r.below(4) {
            0 => 1 + r.below(5) as usize,
            1 => 1 + r.below(40) as usize,
            _ => 1 + r.below(200) as usize,
        };
        let f = if i == at { fault } else { Fault::None };
        size_line(r, s, size, f);
        let data = body_bytes(r, size);
        let start = s.bytes.len();
        s.put(&data);
        s.data.push((start, s.bytes.len()));
        s.mark(Part::DataEnd);
        match f {
            Fault::DataEndXx => s.put(b"XX"),
            Fault::DataEndBareLf => s.put(b"\n"),
            _ => s.put(b"\r\n"),
        }
    }
    let f = if at >= n { fault } else { Fault::None };
    let last_fault = match f {
        Fault::DataEndXx | Fault::DataEndBareLf => Fault::None,
        f => f,
    };
    size_line(r, s, 0, last_fault);
    s.mark(Part::Trailers);
    let trailers = r.below(3);
    for i in 0..trailers {
        let w = word(r, 15);
        s.put(b"X-T");
        s.put(&w);
        s.put(b": ");
        s.put(&word(r, 25));
        if i == 0 && last_fault == Fault::TrailerNul {
            s.put(b"\x00");
        }
        s.put(if i == 0 && last_fault == Fault::TrailerBareLf {
            b"\n"
        } else {
            b"\r\n"
        });
        if i == 0 && last_fault == Fault::TrailerFold {
            s.put(b" fold\r\n");
        }
    }
    match last_fault {
        Fault::TrailerCl => s.put(b"Content-Length: 5\r\n"),
        Fault::TrailerNoColon => s.put(b"nocolon\r\n"),
        _ => {}
    }
    s.put(b"\r\n");
}

fn body(r: &mut Rng, s: &mut Stream, kind: BodyKind, fault: Fault) {
    match kind {
        BodyKind::None => {}
        BodyKind::Length(n) => {
            let start = s.bytes.len();
            let data = body_bytes(r, n);
            s.put(&data);
            s.data.push((start, s.bytes.len()));
        }
        BodyKind::Chunked => chunked(r, s, fault),
        BodyKind::UntilClose => {
            let start = s.bytes.len();
            let n = r.below(400) as usize;
            let data = body_bytes(r, n);
            s.put(&data);
            s.data.push((start, s.bytes.len()));
            s.until_close.push((start, s.bytes.len()));
        }
    }
}

fn random_body(r: &mut Rng) -> BodyKind {
    match r.below(5) {
        0 => BodyKind::None,
        1 | 2 => BodyKind::Length(match r.below(3) {
            0 => 1 + r.below(9) as usize,
            1 => 1 + r.below(140) as usize,
            _ => 1 + r.below(1200) as usize,
        }),
        _ => BodyKind::Chunked,
    }
}

/// What stops the parsing after a message: the bytes after it are
/// foreign.
fn foreign(r: &mut Rng, s: &mut Stream) {
    s.mark(Part::Head);
    let tail = r.pick(&[
        &b"\x81\x02hi"[..],
        b"\x16\x03\x01\x00\x05hello",
        b"GET /after HTTP/1.1\r\nHost: a\r\n\r\n",
        b"",
    ]);
    s.put(tail);
}

fn requests(r: &mut Rng) -> Stream {
    let mut s = Stream::default();
    let n = r.below(4) + 1;
    let faulty = if r.one_in(2) { Some(r.below(n)) } else { None };
    for i in 0..n {
        s.mark(Part::Head);
        if r.one_in(8) {
            // Empty lines before a request line are skipped.
            s.put(b"\r\n");
            s.mark(Part::Head);
        }
        let mut kind = random_body(r);
        let fault = match faulty {
            Some(f) if f == i => {
                if r.one_in(2) {
                    kind = BodyKind::Chunked;
                    r.pick(BODY_FAULTS)
                } else {
                    let f = r.pick(HEAD_FAULTS);
                    if matches!(
                        f,
                        Fault::ClPlus
                            | Fault::ClTwoValues
                            | Fault::ClHex
                            | Fault::ClDiffering
                            | Fault::ClEqual
                    ) {
                        kind = BodyKind::Length(1 + r.below(50) as usize);
                    }
                    if matches!(
                        f,
                        Fault::BothFraming | Fault::TeTwice | Fault::TeGzip | Fault::TeComma
                    ) {
                        kind = BodyKind::Chunked;
                    }
                    f
                }
            }
            _ => Fault::None,
        };
        if fault != Fault::None {
            s.faults.push(fault_name(fault));
        }
        let mut last = false;
        let (method, target) = match r.below(10) {
            0 => ("CONNECT", "a:443".to_owned()),
            1 => ("HEAD", "/h".to_owned()),
            2 | 3 => (
                "POST",
                format!("/{}", String::from_utf8(word(r, 10)).unwrap()),
            ),
            _ => (
                "GET",
                format!("/{}", String::from_utf8(word(r, 30)).unwrap()),
            ),
        };
        let version = if r.one_in(10) { "HTTP/1.0" } else { "HTTP/1.1" };
        let version = if fault == Fault::BadVersion {
            "HTTP/1.2"
        } else {
            version
        };
        let target = if fault == Fault::SpaceInTarget {
            format!("{target} x")
        } else {
            target
        };
        let mut fields = Vec::new();
        if fault != Fault::NoHost {
            let host = if method == "CONNECT" {
                &b"a:443"[..]
            } else {
                b"a"
            };
            fields.push((b"Host".to_vec(), host.to_vec()));
        }
        fields.extend(extra_fields(r));
        if r.one_in(5) {
            fields.push((b"Expect".to_vec(), b"100-continue".to_vec()));
        }
        let upgrade = method == "GET" && r.one_in(8);
        if upgrade {
            fields.push((b"Upgrade".to_vec(), b"websocket".to_vec()));
            fields.push((b"Connection".to_vec(), b"Upgrade".to_vec()));
            last = version == "HTTP/1.1";
        }
        if method == "CONNECT" {
            last = true;
        }
        if r.one_in(8) {
            fields.push((b"Connection".to_vec(), b"close".to_vec()));
            last = true;
        }
        if version == "HTTP/1.0" {
            if r.one_in(2) {
                fields.push((b"Connection".to_vec(), b"keep-alive".to_vec()));
            } else {
                last = true;
            }
        }
        let start = format!("{method} {target} {version}");
        head(r, &mut s, start.as_bytes(), fields, kind, fault);
        body(r, &mut s, kind, fault);
        if last {
            foreign(r, &mut s);
            break;
        }
    }
    s.mark(Part::Head);
    s
}

fn responses(r: &mut Rng) -> Stream {
    let mut s = Stream::default();
    let n = r.below(4) + 1;
    let faulty = if r.one_in(2) { Some(r.below(n)) } else { None };
    for i in 0..n {
        s.mark(Part::Head);
        let (method, offers) = match r.below(10) {
            0 => ("HEAD", false),
            1 => ("CONNECT", false),
            2 => ("GET", true),
            _ => ("GET", false),
        };
        s.asked.push((method, offers));
        if r.one_in(5) {
            // An interim response first.
            if r.one_in(2) {
                s.put(b"HTTP/1.1 100 Continue\r\n\r\n");
            } else {
                s.put(b"HTTP/1.1 103 Early Hints\r\nLink: </a>; rel=preload\r\n\r\n");
            }
            s.mark(Part::Head);
        }
        let mut kind = random_body(r);
        let fault = match faulty {
            Some(f) if f == i => {
                if r.one_in(2) {
                    kind = BodyKind::Chunked;
                    r.pick(BODY_FAULTS)
                } else {
                    let f = r.pick(HEAD_FAULTS);
                    if matches!(
                        f,
                        Fault::ClPlus
                            | Fault::ClTwoValues
                            | Fault::ClHex
                            | Fault::ClDiffering
                            | Fault::ClEqual
                    ) {
                        kind = BodyKind::Length(1 + r.below(50) as usize);
                    }
                    if matches!(
                        f,
                        Fault::BothFraming | Fault::TeTwice | Fault::TeGzip | Fault::TeComma
                    ) {
                        kind = BodyKind::Chunked;
                    }
                    f
                }
            }
            _ => Fault::None,
        };
        if fault != Fault::None {
            s.faults.push(fault_name(fault));
        }
        let status: u16 = match (method, offers) {
            _ if fault == Fault::Unasked101 && !offers => 101,
            ("CONNECT", _) => r.pick(&[200, 407]),
            (_, true) => r.pick(&[101, 200]),
            _ => r.pick(&[200, 200, 200, 204, 304, 404]),
        };
        let switches = status == 101 || (method == "CONNECT" && status == 200);
        let bodiless = switches || method == "HEAD" || status == 204 || status == 304;
        let mut last = switches;
        let mut fields = extra_fields(r);
        if r.one_in(8) {
            fields.push((b"Connection".to_vec(), b"close".to_vec()));
            last = true;
        }
        // A body to the close: the last response.
        if !bodiless && fault == Fault::None && r.one_in(6) {
            kind = BodyKind::UntilClose;
            last = true;
        }
        if switches {
            kind = BodyKind::None;
        }
        if kind == BodyKind::None && !bodiless {
            // No framing field would be a body to the close.
            fields.push((b"Content-Length".to_vec(), b"0".to_vec()));
        }
        let start = match fault {
            Fault::BadStatus => format!("HTTP/1.1 {}0 OK", status),
            Fault::NoReasonSpace => format!("HTTP/1.1 {status}"),
            Fault::BadVersion => format!("HTTP/2.0 {status} OK"),
            _ => format!("HTTP/1.1 {status} OK"),
        };
        // HEAD and the bodiless statuses get framing fields but no body.
        head(r, &mut s, start.as_bytes(), fields, kind, fault);
        if !bodiless {
            body(r, &mut s, kind, fault);
        }
        if last {
            if kind != BodyKind::UntilClose {
                foreign(r, &mut s);
            }
            break;
        }
    }
    s.mark(Part::Head);
    s
}

fn fault_name(f: Fault) -> &'static str {
    // Debug names, leaked once each (a handful).
    Box::leak(format!("{f:?}").into_boxed_str())
}

fn random_stream(r: &mut Rng, s: Setup) -> Stream {
    let mut stream = if s.client { responses(r) } else { requests(r) };
    if r.one_in(12) && !stream.bytes.is_empty() {
        let i = r.below(stream.bytes.len() as u64) as usize;
        stream.bytes[i] ^= 1 << r.below(8);
        stream.flipped = true;
    }
    if r.one_in(5) && !stream.bytes.is_empty() {
        let n = stream.bytes.len() as u64;
        stream.bytes.truncate(r.below(n) as usize);
    }
    stream
}

// ----- driving -----

#[derive(Debug, PartialEq)]
struct Out {
    events: Vec<String>,
    error: Option<Error>,
    /// The buffer at the end, as `(offset, bytes)`.
    left: (u64, Vec<u8>),
    fed: usize,
}

trait Role: Protocol + Sized {
    fn make(s: &Setup, stream: &Stream) -> Self;
    /// The event, briefly; body bytes as `Data`.
    fn brief(e: &Self::Event) -> (String, Option<Vec<u8>>);
}

impl Role for Server {
    fn make(s: &Setup, _: &Stream) -> Self {
        Server::with_config(s.config())
    }
    fn brief(e: &ServerEvent) -> (String, Option<Vec<u8>>) {
        match e {
            ServerEvent::Head(h) => (
                format!(
                    "Head({}, {:?}, continue {})",
                    h.as_bytes().escape_ascii(),
                    h.body(),
                    h.expects_continue()
                ),
                None,
            ),
            ServerEvent::Data(d) => (String::new(), Some(d.to_vec())),
            ServerEvent::Trailers(t) => {
                (format!("Trailers({})", t.as_bytes().escape_ascii()), None)
            }
            ServerEvent::End => ("End".into(), None),
        }
    }
}

impl Role for Client {
    fn make(s: &Setup, stream: &Stream) -> Self {
        let mut c = Client::with_config(s.config());
        for &(m, up) in &stream.asked {
            if up {
                c.expect_upgrade(m);
            } else {
                c.expect_response(m);
            }
        }
        c
    }
    fn brief(e: &ClientEvent) -> (String, Option<Vec<u8>>) {
        match e {
            ClientEvent::Interim(h) => (format!("Interim({})", h.as_bytes().escape_ascii()), None),
            ClientEvent::Head(h) => (
                format!("Head({}, {:?})", h.as_bytes().escape_ascii(), h.body()),
                None,
            ),
            ClientEvent::Data(d) => (String::new(), Some(d.to_vec())),
            ClientEvent::Trailers(t) => {
                (format!("Trailers({})", t.as_bytes().escape_ascii()), None)
            }
            ClientEvent::End => ("End".into(), None),
        }
    }
}

/// Feeds `bytes` cut at `cuts` (what fits in the buffer each time),
/// polling after each piece, then the end of the stream if `s.eof`.
fn drive<P: Role>(s: &Setup, stream: &Stream, cuts: &[usize]) -> Out {
    let bytes = &stream.bytes;
    let mut c = Conn::with_config(P::make(s, stream), s.conn_config(), NOW);
    let mut events: Vec<String> = Vec::new();
    let mut data: Vec<u8> = Vec::new();
    let mut error: Option<Error> = None;
    let mut fed = 0usize;
    let mut cuts: Vec<usize> = cuts.iter().map(|&x| x.min(bytes.len())).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());

    let poll = |c: &mut Conn<P>,
                events: &mut Vec<String>,
                data: &mut Vec<u8>,
                error: &mut Option<Error>,
                fed: usize| loop {
        match c.poll_event() {
            Ok(Some(e)) => {
                assert!(error.is_none(), "an event after the error");
                let (text, d) = P::brief(&e);
                match d {
                    Some(d) => {
                        assert!(!d.is_empty(), "an empty Data");
                        data.extend_from_slice(&d);
                    }
                    None => {
                        if !data.is_empty() {
                            events.push(format!("Data({})", data.escape_ascii()));
                            data.clear();
                        }
                        events.push(text);
                    }
                }
            }
            Ok(None) => return,
            Err(e) => {
                let (off, len) = (c.recv_buf().offset(), c.recv_buf().len());
                assert_eq!(
                    c.poll_event().err(),
                    Some(e.clone()),
                    "the same error again"
                );
                assert_eq!(
                    (c.recv_buf().offset(), c.recv_buf().len()),
                    (off, len),
                    "consumed after the error"
                );
                assert_eq!(
                    off + len as u64,
                    fed as u64,
                    "bytes lost at the error {e:?}"
                );
                if error.is_none() {
                    *error = Some(e);
                }
                return;
            }
        }
    };

    let mut at = 0;
    for cut in cuts {
        while at < cut && error.is_none() {
            let room = c.recv_buf().remaining();
            if room == 0 {
                break;
            }
            let end = cut.min(at + room);
            c.feed(&bytes[at..end], NOW).unwrap();
            at = end;
            fed = at;
            poll(&mut c, &mut events, &mut data, &mut error, fed);
        }
        poll(&mut c, &mut events, &mut data, &mut error, fed);
    }
    if s.eof {
        c.handle_eof(NOW);
        poll(&mut c, &mut events, &mut data, &mut error, fed);
    }
    if !data.is_empty() {
        events.push(format!("Data({})", data.escape_ascii()));
    }
    let left = (c.recv_buf().offset(), c.recv_buf().peek().to_vec());
    assert_eq!(left.0 + left.1.len() as u64, fed as u64, "bytes lost");
    if let Some(e) = &error {
        // Final: more bytes change nothing.
        let _ = c.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", NOW);
        c.handle_eof(NOW);
        assert_eq!(c.poll_event().err().as_ref(), Some(e), "the error is final");
        assert_eq!(c.recv_buf().offset(), left.0, "consumed after the error");
    }
    Out {
        events,
        error,
        left,
        fed,
    }
}

fn offset_of(e: &Error) -> Option<u64> {
    e.offset()
}

/// The parts an error may be charged to.
fn parts_for(e: &Error) -> &'static [Part] {
    use Part::*;
    match e {
        Error::InvalidInput {
            kind: InvalidInput::Http(field),
            ..
        } => match field {
            HttpField::ChunkSize | HttpField::ChunkExtension => &[Line],
            HttpField::ChunkDataEnd => &[DataEnd],
            HttpField::Trailer => &[Trailers],
            HttpField::LineEnding => &[Head, Line, Trailers],
            HttpField::HeaderName
            | HttpField::HeaderValue
            | HttpField::ObsFold
            | HttpField::Whitespace => &[Head, Trailers],
            _ => &[Head],
        },
        Error::LimitExceeded { limit, .. } => match limit {
            Limit::ChunkExtension => &[Line],
            Limit::TrailerLength => &[Trailers],
            Limit::BodyLength => &[Head, Line],
            Limit::HeadLength => &[Head],
            Limit::LineLength | Limit::HeaderCount => &[Head, Trailers],
            _ => &[Head, Line, DataEnd, Trailers],
        },
        _ => &[Head, Line, DataEnd, Trailers],
    }
}

fn within(ranges: &[(usize, usize)], at: usize) -> bool {
    ranges.iter().any(|&(a, b)| a <= at && at <= b)
}

/// The rule for what stays after an error (see the module's docs).
fn check(stream: &Stream, out: &Out, what: &str) -> Result<(), String> {
    let bytes = &stream.bytes;
    let (boff, left) = &out.left;
    let boff = *boff as usize;
    if left[..] != bytes[boff..out.fed] {
        return Err(format!(
            "{what}: the buffer at {boff} does not hold the input from there to {}",
            out.fed
        ));
    }
    let Some(e) = &out.error else {
        return Ok(());
    };
    let Some(off) = offset_of(e) else {
        return Ok(());
    };
    let off = off as usize;
    if off > out.fed {
        return Err(format!(
            "{what}: offset {off} past what was fed ({}): {e:?}",
            out.fed
        ));
    }
    if let Error::Truncated { partial, .. } = e {
        if partial[..] != bytes[off..out.fed] {
            return Err(format!(
                "{what}: partial is not the input from {off}: {e:?}"
            ));
        }
        let at_part = stream.parts.iter().any(|&(p, _)| p == off);
        if !stream.flipped && !at_part && !within(&stream.data, off) {
            return Err(format!(
                "{what}: truncated at {off}, not the start of a part: {e:?}"
            ));
        }
        return Ok(());
    }
    if !(boff <= off && off <= out.fed) {
        return Err(format!(
            "{what}: the error's offset {off} is outside the bytes left ({boff}..={}): {e:?}",
            out.fed
        ));
    }
    if stream.flipped {
        return Ok(());
    }
    let allowed = parts_for(e);
    let at_part = stream
        .parts
        .iter()
        .any(|&(p, kind)| p == boff && allowed.contains(&kind));
    let body_limit = matches!(
        e,
        Error::LimitExceeded {
            limit: Limit::BodyLength | Limit::Buffer,
            ..
        }
    ) && within(&stream.until_close, boff);
    if !at_part && !body_limit {
        let here: Vec<_> = stream.parts.iter().filter(|&&(p, _)| p == boff).collect();
        return Err(format!(
            "{what}: the bytes left start at {boff} ({here:?}), not at a part {allowed:?} the error is charged to: {e:?}; left \"{}\"",
            left.escape_ascii()
        ));
    }
    Ok(())
}

/// The same verdict: limits compare by limit, max and offset (`attempted`
/// says how far the bytes so far reached).
fn same_error(a: &Option<Error>, b: &Option<Error>) -> bool {
    match (a, b) {
        (
            Some(Error::LimitExceeded {
                limit: la,
                max: ma,
                offset: oa,
                ..
            }),
            Some(Error::LimitExceeded {
                limit: lb,
                max: mb,
                offset: ob,
                ..
            }),
        ) => (la, ma, oa) == (lb, mb, ob),
        _ => a == b,
    }
}

fn short(e: &Option<Error>) -> String {
    match e {
        None => "None".into(),
        Some(Error::InvalidInput { kind, .. }) => format!("InvalidInput {kind:?}"),
        Some(Error::LimitExceeded { limit, .. }) => format!("Limit {limit:?}"),
        Some(Error::Truncated { .. }) => "Truncated".into(),
        Some(e) => format!("{e:?}"),
    }
}

fn round<P: Role>(
    r: &mut Rng,
    s: &Setup,
    stream: &Stream,
    n: usize,
    failures: &mut Vec<String>,
) -> Out {
    let bytes = &stream.bytes;
    let whole = drive::<P>(s, stream, &[]);
    let step = if bytes.len() > 3000 { 7 } else { 1 };
    let all: Vec<usize> = (0..bytes.len()).step_by(step).collect();
    let trickled = drive::<P>(s, stream, &all);
    let cuts: Vec<usize> = (0..r.below(4))
        .map(|_| r.below(bytes.len() as u64 + 1) as usize)
        .collect();
    let cut = drive::<P>(s, stream, &cuts);
    let mut fails = Vec::new();
    for (name, out) in [("whole", &whole), ("trickled", &trickled), ("cut", &cut)] {
        if let Err(why) = check(stream, out, name) {
            fails.push(why);
        }
    }
    for (name, other) in [("trickled", &trickled), ("cut", &cut)] {
        if whole.events != other.events {
            let i = whole
                .events
                .iter()
                .zip(&other.events)
                .position(|(a, b)| a != b);
            fails.push(format!(
                "{name}: other events (first difference at {i:?}): whole {:?} vs {:?}",
                i.and_then(|i| whole.events.get(i)),
                i.and_then(|i| other.events.get(i))
            ));
        }
        if !same_error(&whole.error, &other.error) {
            fails.push(format!(
                "{name}: error {:?}, whole {:?}",
                other.error, whole.error
            ));
        }
        if whole.left.0 != other.left.0 {
            fails.push(format!(
                "{name}: left at {}, whole at {}",
                other.left.0, whole.left.0
            ));
        }
    }
    if !fails.is_empty() {
        failures.push(format!(
            "round {n} {s:?} faults {:?} flipped {}\n  input \"{}\"\n  whole error {:?}\n  {}",
            stream.faults,
            stream.flipped,
            bytes.escape_ascii(),
            whole.error,
            fails.join("\n  ")
        ));
    }
    whole
}

#[test]
fn differential_whole_vs_trickled() {
    let mut r = Rng(std::env::var("HTTP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x2545_F491_4F6C_DD1D));
    let rounds: usize = std::env::var("HTTP_DIFF_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut stats: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for n in 0..rounds {
        let s = Setup::random(&mut r);
        let stream = random_stream(&mut r, s);
        let whole = if s.client {
            round::<Client>(&mut r, &s, &stream, n, &mut failures)
        } else {
            round::<Server>(&mut r, &s, &stream, n, &mut failures)
        };
        let key = if matches!(whole.error, None | Some(Error::Truncated { .. }))
            && whole.fed < stream.bytes.len()
        {
            // See `a_full_buffer_is_refused_not_waited_on`.
            format!("{}, after a stall on a full buffer", short(&whole.error))
        } else {
            short(&whole.error)
        };
        *stats.entry(key).or_insert(0) += 1;
    }
    for (k, v) in &stats {
        eprintln!("{v:6} {k}");
    }
    let total = failures.len();
    failures.truncate(6);
    assert!(
        total == 0,
        "{total} rounds failed; the first:\n{}",
        failures.join("\n\n")
    );
    let clean = stats.get("None").copied().unwrap_or(0);
    assert!(clean > rounds / 10 && clean < rounds * 9 / 10, "{stats:?}");
}

// ===== Framed and Session over the line, length-prefixed and varint decoders =====

use cleave_proto::conn::Framed;
use cleave_proto::route::{Match, Router};
use cleave_proto::{
    Bytes, Decoder, Endian, Event, LengthConfig, LengthPrefixed, Lines, LinesConfig, ProxyMode,
    Session, SessionConfig, Varint, VarintConfig,
};

#[derive(Clone, Copy, Debug)]
enum Codec {
    Lines(LinesConfig),
    Length(LengthConfig),
    Varint(VarintConfig),
}

/// One decoder of any of the three kinds, so that one driver serves all.
#[derive(Clone, Debug)]
enum AnyDecoder {
    Lines(Lines),
    Length(LengthPrefixed),
    Varint(Varint),
}

impl AnyDecoder {
    fn new(c: Codec) -> Self {
        match c {
            Codec::Lines(c) => Self::Lines(Lines::with_config(c)),
            Codec::Length(c) => Self::Length(LengthPrefixed::with_config(c).unwrap()),
            Codec::Varint(c) => Self::Varint(Varint::with_config(c)),
        }
    }
}

impl Decoder for AnyDecoder {
    type Item = Bytes;
    fn decode(&mut self, buf: &mut cleave_proto::RecvBuf) -> Result<Option<Bytes>, Error> {
        match self {
            Self::Lines(d) => d.decode(buf),
            Self::Length(d) => d.decode(buf),
            Self::Varint(d) => d.decode(buf),
        }
    }
    fn decode_eof(&mut self, buf: &mut cleave_proto::RecvBuf) -> Result<Option<Bytes>, Error> {
        match self {
            Self::Lines(d) => d.decode_eof(buf),
            Self::Length(d) => d.decode_eof(buf),
            Self::Varint(d) => d.decode_eof(buf),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct FrameSetup {
    codec: Codec,
    /// `None`: `Framed`; `Some(mode)`: a `Session` with this PROXY mode.
    session: Option<ProxyMode>,
    max_buffered: usize,
    eof: bool,
}

fn frame_setup(r: &mut Rng) -> FrameSetup {
    let codec = match r.below(3) {
        0 => Codec::Lines(
            LinesConfig::default()
                .max_length(r.pick(&[64 * 1024, 10, 40]))
                .utf8(r.one_in(2))
                .strip_cr(!r.one_in(4))
                .unterminated_last_line(r.one_in(3)),
        ),
        1 => Codec::Length(
            match r.below(3) {
                0 => LengthConfig::default(),
                1 => LengthConfig::messagepack(),
                // A 2-byte little-endian length that counts itself.
                _ => LengthConfig::default()
                    .field_width(2)
                    .unwrap()
                    .endian(Endian::Little)
                    .adjustment(-2),
            }
            .max_frame_length(r.pick(&[8 << 20, 30, 100])),
        ),
        _ => Codec::Varint(
            VarintConfig::default()
                .max_frame_length(r.pick(&[8 << 20, 30, 200]))
                .allow_non_minimal(r.one_in(3)),
        ),
    };
    FrameSetup {
        codec,
        session: r.pick(&[
            None,
            None,
            Some(ProxyMode::Off),
            Some(ProxyMode::Optional),
            Some(ProxyMode::Required),
        ]),
        max_buffered: r.pick(&[8 << 20, 8 << 20, 120, 600]),
        eof: !r.one_in(4),
    }
}

/// Frames for `codec` with faults; `marks` are where frames (and the
/// PROXY header, and the routed bytes) start.
fn frame_stream(r: &mut Rng, f: &FrameSetup) -> (Vec<u8>, Vec<usize>) {
    let mut b = Vec::new();
    let mut marks = vec![0];
    if f.session.is_some_and(|m| m != ProxyMode::Off) && !r.one_in(4) {
        let header: &[u8] = r.pick(&[
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\r\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n",
            b"PROXY TCP9 1.2.3.4\r\n",
        ]);
        b.extend_from_slice(header);
        marks.push(b.len());
    }
    if f.session.is_some() && r.one_in(3) {
        b.extend_from_slice(b"TAG:");
        marks.push(b.len());
    }
    let n = r.below(6) + 1;
    for _ in 0..n {
        let len = match r.below(4) {
            0 => r.below(5) as usize,
            1 => r.below(45) as usize,
            _ => r.below(300) as usize,
        };
        let fault = r.one_in(6);
        match f.codec {
            Codec::Lines(_) => {
                let mut line: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
                if fault && !line.is_empty() {
                    let i = r.below(line.len() as u64) as usize;
                    line[i] = r.pick(&[0xff, 0xc3, b'\r']);
                }
                b.extend_from_slice(&line);
                b.extend_from_slice(if r.one_in(2) { b"\r\n" } else { b"\n" });
            }
            Codec::Length(c) => {
                let mut head = c.get_magic().to_vec();
                if fault && !head.is_empty() {
                    head[0] ^= 1;
                }
                let wide = c.header_len() - c.get_magic().len() == 4;
                if wide {
                    let v = if fault && head.is_empty() {
                        0xffff_fff0u32
                    } else {
                        len as u32
                    };
                    head.extend_from_slice(&v.to_be_bytes());
                } else {
                    // Counts itself: 0 or 1 is out of range.
                    let v = if fault {
                        r.below(2) as u16
                    } else {
                        len as u16 + 2
                    };
                    head.extend_from_slice(&v.to_le_bytes());
                }
                b.extend_from_slice(&head);
                b.extend((0..len).map(|i| i as u8));
            }
            Codec::Varint(_) => {
                let mut varint = Vec::new();
                let mut v = len as u64;
                loop {
                    let byte = (v & 0x7f) as u8;
                    v >>= 7;
                    if v == 0 {
                        varint.push(byte);
                        break;
                    }
                    varint.push(byte | 0x80);
                }
                if fault {
                    match r.below(3) {
                        0 => {
                            // Not minimal: a zero group more.
                            let last = varint.len() - 1;
                            varint[last] |= 0x80;
                            varint.push(0);
                        }
                        1 => varint = vec![0xff; 11],
                        _ => {
                            varint =
                                vec![0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]
                        }
                    }
                }
                b.extend_from_slice(&varint);
                b.extend((0..len).map(|i| i as u8));
            }
        }
        marks.push(b.len());
    }
    if r.one_in(4) {
        let n = b.len() as u64;
        b.truncate(r.below(n + 1) as usize);
    }
    (b, marks)
}

#[derive(Debug, PartialEq)]
struct FrameOut {
    events: Vec<String>,
    error: Option<Error>,
    left: (u64, Vec<u8>),
    fed: usize,
    /// A `Session`'s `Closed` bytes, with the stream offset of their first.
    closed: Option<(usize, Vec<u8>)>,
}

fn drive_frames(f: &FrameSetup, bytes: &[u8], cuts: &[usize]) -> FrameOut {
    let cc = ConnConfig::default().recv_buf(
        RecvBufConfig::default()
            .max_buffered(f.max_buffered)
            .unwrap(),
    );
    match f.session {
        None => drive_any(
            Conn::with_config(Framed::new(AnyDecoder::new(f.codec)), cc, NOW),
            f.eof,
            bytes,
            cuts,
            |e: &Bytes| (format!("Frame({})", e.escape_ascii()), None),
        ),
        Some(mode) => {
            let router = Router::new("other")
                .rule(Match::PrefixConsumed("TAG:".into()), "tag")
                .rule(Match::Prefix("PROXY".into()), "never");
            let session = Session::framed(
                router,
                AnyDecoder::new(f.codec),
                |_: &Bytes| false,
                SessionConfig::default().proxy(mode),
            );
            drive_any(
                Conn::with_config(session, cc, NOW),
                f.eof,
                bytes,
                cuts,
                |e: &Event<&'static str, Bytes>| match e {
                    Event::Closed(b) => ("Closed".into(), Some(b.to_vec())),
                    e => (format!("{e:?}"), None),
                },
            )
        }
    }
}

fn drive_any<P: Protocol>(
    mut c: Conn<P>,
    eof: bool,
    bytes: &[u8],
    cuts: &[usize],
    brief: impl Fn(&P::Event) -> (String, Option<Vec<u8>>),
) -> FrameOut {
    let mut out = FrameOut {
        events: vec![],
        error: None,
        left: (0, vec![]),
        fed: 0,
        closed: None,
    };
    let mut cuts: Vec<usize> = cuts.iter().map(|&x| x.min(bytes.len())).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    let poll = |c: &mut Conn<P>, out: &mut FrameOut| loop {
        match c.poll_event() {
            Ok(Some(e)) => {
                let (text, closed) = brief(&e);
                if let Some(b) = closed {
                    out.closed = Some((out.fed - b.len(), b));
                }
                out.events.push(text);
            }
            Ok(None) => return,
            Err(e) => {
                let at = (c.recv_buf().offset(), c.recv_buf().len());
                assert_eq!(
                    c.poll_event().err(),
                    Some(e.clone()),
                    "the same error again"
                );
                assert_eq!(
                    (c.recv_buf().offset(), c.recv_buf().len()),
                    at,
                    "consumed after the error"
                );
                if out.error.is_none() {
                    out.error = Some(e);
                }
                return;
            }
        }
    };
    let mut at = 0;
    for cut in cuts {
        while at < cut && out.error.is_none() {
            let room = c.recv_buf().remaining();
            if room == 0 {
                break;
            }
            let end = cut.min(at + room);
            c.feed(&bytes[at..end], NOW).unwrap();
            at = end;
            out.fed = at;
            poll(&mut c, &mut out);
        }
        poll(&mut c, &mut out);
    }
    if eof {
        c.handle_eof(NOW);
        poll(&mut c, &mut out);
    }
    out.left = (c.recv_buf().offset(), c.recv_buf().peek().to_vec());
    assert_eq!(
        out.left.0 + out.left.1.len() as u64,
        out.fed as u64,
        "bytes lost"
    );
    out
}

fn check_frames(bytes: &[u8], marks: &[usize], out: &FrameOut) -> Result<(), String> {
    let (boff, left) = &out.left;
    let boff = *boff as usize;
    if left[..] != bytes[boff..out.fed] {
        return Err(format!("the buffer at {boff} is not the input from there"));
    }
    if let Some((at, closed)) = &out.closed {
        if !marks.contains(at) && !closed.is_empty() {
            return Err(format!("Closed bytes start at {at}, not at a frame"));
        }
    }
    let Some(e) = &out.error else { return Ok(()) };
    let Some(off) = e.offset() else { return Ok(()) };
    let off = off as usize;
    if let Error::Truncated { partial, .. } = e {
        if partial[..] != bytes[off..out.fed] || !marks.contains(&off) {
            return Err(format!(
                "truncated at {off}, partial not the frame's bytes: {e:?}"
            ));
        }
        return Ok(());
    }
    if !(boff <= off && off <= out.fed) {
        return Err(format!(
            "error offset {off} outside the bytes left {boff}..={}: {e:?}",
            out.fed
        ));
    }
    if !marks.contains(&boff) {
        return Err(format!(
            "the bytes left start at {boff}, not at a frame: {e:?}"
        ));
    }
    if matches!(e, Error::LimitExceeded { .. }) && off != boff {
        return Err(format!("a limit at {off}, the buffer at {boff}: {e:?}"));
    }
    Ok(())
}

#[test]
fn framed_and_session_differential() {
    let mut r = Rng(std::env::var("HTTP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15));
    let rounds: usize = std::env::var("HTTP_DIFF_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut stats: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for n in 0..rounds {
        let f = frame_setup(&mut r);
        let (bytes, marks) = frame_stream(&mut r, &f);
        let whole = drive_frames(&f, &bytes, &[]);
        let all: Vec<usize> = (0..bytes.len()).collect();
        let trickled = drive_frames(&f, &bytes, &all);
        let cuts: Vec<usize> = (0..r.below(4))
            .map(|_| r.below(bytes.len() as u64 + 1) as usize)
            .collect();
        let cut = drive_frames(&f, &bytes, &cuts);
        let mut fails = Vec::new();
        for (name, out) in [("whole", &whole), ("trickled", &trickled), ("cut", &cut)] {
            if let Err(why) = check_frames(&bytes, &marks, out) {
                fails.push(format!("{name}: {why}"));
            }
        }
        for (name, other) in [("trickled", &trickled), ("cut", &cut)] {
            if whole.events != other.events
                || !same_error(&whole.error, &other.error)
                || whole.left.0 != other.left.0
            {
                fails.push(format!(
                    "{name}: {:?} {:?} left at {}; whole {:?} {:?} left at {}",
                    other.events,
                    other.error,
                    other.left.0,
                    whole.events,
                    whole.error,
                    whole.left.0
                ));
            }
        }
        if !fails.is_empty() {
            failures.push(format!(
                "round {n} {f:?}\n  input \"{}\"\n  {}",
                bytes.escape_ascii(),
                fails.join("\n  ")
            ));
        }
        *stats.entry(short(&whole.error)).or_insert(0) += 1;
    }
    for (k, v) in &stats {
        eprintln!("{v:6} {k}");
    }
    let total = failures.len();
    failures.truncate(4);
    assert!(
        total == 0,
        "{total} rounds failed; the first:\n{}",
        failures.join("\n\n")
    );
}

// ===== a full buffer =====

/// Feeds `bytes` while the buffer has room, polling after each byte;
/// returns the last poll (an event as `true`).
fn fill<P: Protocol>(c: &mut Conn<P>, bytes: &[u8]) -> Result<bool, Error> {
    let mut polled = Ok(false);
    for b in bytes {
        if c.recv_buf().remaining() == 0 {
            break;
        }
        c.feed(std::slice::from_ref(b), NOW).unwrap();
        polled = c.poll_event().map(|e| e.is_some());
        if polled.is_err() {
            break;
        }
    }
    polled
}

/// A buffer full of an HTTP element that cannot end in it (a head, a
/// chunk-size line, a trailer section: within the HTTP limits, longer
/// than `max_buffered`). As the decoders (`Latch`), `Session`
/// (`fail_full`) and WebSocket do, the protocol must fail with
/// `Limit::Buffer` at the element, its bytes in place. Instead it answers
/// `Ok(None)` for ever while the connection no longer wants to read:
/// with the default `Timeouts::NONE`, the connection hangs.
#[test]
fn a_full_buffer_is_refused_not_waited_on() {
    fn small() -> ConnConfig {
        ConnConfig::default().recv_buf(RecvBufConfig::default().max_buffered(64).unwrap())
    }
    let long = "a".repeat(100);
    let chunked = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n";
    let cases = [
        (
            "server head",
            false,
            format!("GET / HTTP/1.1\r\nHost: a\r\nX-long: {long}\r\n\r\n"),
            0u64,
        ),
        (
            "client head",
            true,
            format!("HTTP/1.1 200 OK\r\nX-long: {long}\r\nContent-Length: 0\r\n\r\n"),
            0,
        ),
        (
            "chunk-size line",
            false,
            format!("{chunked}5;{long}\r\nhello\r\n0\r\n\r\n"),
            chunked.len() as u64,
        ),
        (
            "trailer section",
            false,
            format!("{chunked}0\r\nX-long: {long}\r\n\r\n"),
            chunked.len() as u64 + 3,
        ),
    ];
    let mut failures = Vec::new();
    for (what, client, input, at) in cases {
        let (polled, full, wants_read, offset) = if client {
            let mut c = Conn::with_config(Client::new(), small(), NOW);
            c.protocol_mut().expect_response("GET");
            let polled = fill(&mut c, input.as_bytes());
            (
                polled,
                c.recv_buf().is_full(),
                c.wants_read(),
                c.recv_buf().offset(),
            )
        } else {
            let mut c = Conn::with_config(Server::new(), small(), NOW);
            let polled = fill(&mut c, input.as_bytes());
            (
                polled,
                c.recv_buf().is_full(),
                c.wants_read(),
                c.recv_buf().offset(),
            )
        };
        let refused = matches!(&polled, Err(Error::LimitExceeded { limit: Limit::Buffer, offset: o, .. }) if *o == at)
            && offset == at;
        if !refused {
            failures.push(format!(
                "{what}: poll_event gave {polled:?}, buffer full {full}, wants_read {wants_read}, buffer at {offset}; \
                 want Err(LimitExceeded {{ limit: Buffer, offset: {at} }}) with the buffer at {at}"
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}
