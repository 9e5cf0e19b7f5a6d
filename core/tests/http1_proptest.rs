//! HTTP/1.1 by property, in both roles.
//!
//! Generated pipelines of well-formed requests and responses (random
//! tokens, header values, Content-Length and chunked bodies with
//! extensions and trailers, interim responses, bodiless statuses, HEAD,
//! bodies delimited by the close, upgrades followed by foreign bytes)
//! must parse to the messages they were made from, however the bytes are
//! cut, with every body byte once and the bytes after the last message
//! left in the buffer. What the encoders write must parse back to what
//! was encoded. Mutated input must give the same events, or the same
//! typed error with nothing after it, however it is cut. And on request
//! heads cleave must agree with httparse field by field and never accept
//! what httparse refuses.
//!
//! Each property runs 256 cases unless `PROPTEST_CASES` says otherwise.

use std::time::Duration;

use cleave_proto::http1::{
    self, Body, Client, ClientEvent, Headers, Request, Response, Server, ServerEvent, Version,
};
use cleave_proto::{Bytes, Conn, Error, HttpField, InvalidInput, Lane, Protocol, WriteQueue};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;

/// A header field as parsed: its name and its value without the
/// whitespace around it.
type Field = (String, Vec<u8>);

// ----- what a run saw -----

/// One message, as the parser reported it or as a generator made it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Message {
    /// It came as `ClientEvent::Interim`.
    interim: bool,
    /// The head as it came (`as_bytes`).
    head: Vec<u8>,
    /// A request's method and target (empty for a response).
    method: String,
    target: String,
    /// A response's status and reason (0 and empty for a request).
    status: u16,
    reason: Vec<u8>,
    headers: Vec<Field>,
    framing: Body,
    /// A request that asks to upgrade, or a response that switches.
    switches: bool,
    /// The `Data` events, concatenated.
    body: Vec<u8>,
    trailers: Vec<Field>,
}

impl Message {
    fn request(head: Vec<u8>, method: &str, target: &str, framing: Body) -> Self {
        Self {
            interim: false,
            head,
            method: method.to_owned(),
            target: target.to_owned(),
            status: 0,
            reason: Vec::new(),
            headers: Vec::new(),
            framing,
            switches: false,
            body: Vec::new(),
            trailers: Vec::new(),
        }
    }

    fn response(head: Vec<u8>, status: u16, reason: &[u8], framing: Body) -> Self {
        Self {
            status,
            reason: reason.to_vec(),
            ..Self::request(head, "", "", framing)
        }
    }
}

fn fields(headers: &Headers) -> Vec<Field> {
    headers
        .iter()
        .map(|h| (h.name().to_owned(), h.value().to_vec()))
        .collect()
}

fn request_message(r: &Request) -> Message {
    Message {
        headers: fields(r.headers()),
        switches: r.is_upgrade(),
        ..Message::request(r.as_bytes().to_vec(), r.method(), r.target(), r.body())
    }
}

fn response_message(r: &Response, interim: bool) -> Message {
    Message {
        interim,
        headers: fields(r.headers()),
        switches: r.switches(),
        ..Message::response(r.as_bytes().to_vec(), r.status(), r.reason(), r.body())
    }
}

/// One event of either role.
enum Seen {
    Head(Message),
    Data(Bytes),
    Trailers(Vec<Field>),
    End,
}

/// A protocol whose events the runner understands.
trait Role: Protocol {
    fn seen(event: Self::Event) -> Seen;
}

impl Role for Server {
    fn seen(event: ServerEvent) -> Seen {
        match event {
            ServerEvent::Head(r) => Seen::Head(request_message(&r)),
            ServerEvent::Data(d) => Seen::Data(d),
            ServerEvent::Trailers(t) => Seen::Trailers(fields(&t)),
            ServerEvent::End => Seen::End,
        }
    }
}

impl Role for Client {
    fn seen(event: ClientEvent) -> Seen {
        match event {
            ClientEvent::Interim(r) => Seen::Head(response_message(&r, true)),
            ClientEvent::Head(r) => Seen::Head(response_message(&r, false)),
            ClientEvent::Data(d) => Seen::Data(d),
            ClientEvent::Trailers(t) => Seen::Trailers(fields(&t)),
            ClientEvent::End => Seen::End,
        }
    }
}

/// Everything one run saw: the messages that ended, the one under way,
/// the final error, and the bytes left in the buffer.
#[derive(Debug, Default, PartialEq, Eq)]
struct Outcome {
    messages: Vec<Message>,
    open: Option<Message>,
    error: Option<Error>,
    rest: Vec<u8>,
}

impl Outcome {
    /// Takes one event, checking that it comes where it may.
    fn take(&mut self, seen: Seen) {
        match seen {
            Seen::Head(m) => {
                assert!(self.open.is_none(), "a head inside a message");
                if m.interim {
                    self.messages.push(m);
                } else {
                    self.open = Some(m);
                }
            }
            Seen::Data(d) => {
                assert!(!d.is_empty(), "an empty Data event");
                let m = self.open.as_mut().expect("data outside a message");
                assert_ne!(m.framing, Body::Empty, "data in a message without a body");
                m.body.extend_from_slice(&d);
            }
            Seen::Trailers(t) => {
                let m = self.open.as_mut().expect("trailers outside a message");
                assert_eq!(m.framing, Body::Chunked, "trailers without chunks");
                assert!(
                    m.trailers.is_empty() && !t.is_empty(),
                    "trailers twice, or none"
                );
                m.trailers = t;
            }
            Seen::End => {
                let m = self.open.take().expect("an end outside a message");
                self.messages.push(m);
            }
        }
    }
}

/// Polls until the protocol needs more; after an error, checks that
/// polling gives the same error again and never an event.
fn drain<P: Role>(conn: &mut Conn<P>, out: &mut Outcome) {
    loop {
        let polled = conn.poll_event();
        if let Some(e) = &out.error {
            assert_eq!(polled.as_ref().err(), Some(e), "after an error, only it");
            return;
        }
        match polled {
            Ok(Some(event)) => out.take(P::seen(event)),
            Ok(None) => return,
            Err(e) => out.error = Some(e),
        }
    }
}

/// Feeds `input` cut at `cuts` (ascending, within the input), polling
/// after each piece, then the end of the stream if `eof`.
fn run<P: Role>(protocol: P, input: &[u8], cuts: &[usize], eof: bool) -> Outcome {
    let mut conn = Conn::new(protocol, Duration::ZERO);
    let mut out = Outcome::default();
    let mut from = 0;
    for &cut in cuts.iter().chain([input.len()].iter()) {
        conn.feed(&input[from..cut], Duration::ZERO)
            .expect("the buffer takes a small input");
        from = cut;
        drain(&mut conn, &mut out);
    }
    if eof {
        conn.handle_eof(Duration::ZERO);
        drain(&mut conn, &mut out);
    }
    out.rest = conn.recv_buf().peek().to_vec();
    if let Some(e) = out.error.clone() {
        // Final: more bytes and the end of the stream change nothing.
        let _ = conn.feed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Duration::ZERO);
        conn.handle_eof(Duration::ZERO);
        assert_eq!(conn.poll_event().err(), Some(e), "the error is final");
    }
    out
}

/// Split points from random indices: ascending, within `0..=len`.
fn cuts_of(picks: &[Index], len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = picks.iter().map(|i| i.index(len + 1)).collect();
    cuts.sort_unstable();
    cuts
}

fn every_byte(len: usize) -> Vec<usize> {
    (1..len).collect()
}

// ----- generators: the parts -----

const RESERVED: [&str; 7] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "upgrade",
    "expect",
    "trailer",
];

fn token(max: usize) -> impl Strategy<Value = String> {
    proptest::string::string_regex(&format!("[!#$%&'*+.^_`|~0-9A-Za-z-]{{1,{max}}}"))
        .expect("a valid pattern")
}

/// A field name that does not frame, route or switch the message.
fn field_name() -> impl Strategy<Value = String> {
    token(12).prop_filter("a name with a meaning of its own", |n| {
        !RESERVED.iter().any(|r| n.eq_ignore_ascii_case(r))
    })
}

/// A method; CONNECT takes an authority, not an origin-form target.
fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => prop::sample::select(vec!["GET", "POST", "PUT", "HEAD", "DELETE", "OPTIONS"])
            .prop_map(str::to_owned),
        1 => token(10).prop_filter("CONNECT", |m| m != "CONNECT"),
    ]
}

fn origin_target() -> impl Strategy<Value = String> {
    "/[A-Za-z0-9._~!$&'()*+,;=:@%/-]{0,20}(\\?[A-Za-z0-9._~!$&'()*+,;=:@%/?-]{0,12})?"
}

fn host() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9]([a-z0-9.-]{0,15})(:[0-9]{1,5})?",
        1 => "\\[(::1|2001:db8::[0-9a-f]{1,4}|[0-9a-f]{1,4}(:[0-9a-f]{1,4}){7})\\](:[0-9]{1,4})?",
    ]
}

/// A header field as sent: optional whitespace around a visible-ASCII
/// value (spaces and tabs inside it).
#[derive(Clone, Debug)]
struct WireField {
    name: String,
    before: String,
    value: Vec<u8>,
    after: String,
}

impl WireField {
    fn plain(name: &str, value: &[u8]) -> Self {
        Self {
            name: name.to_owned(),
            before: " ".to_owned(),
            value: value.to_vec(),
            after: String::new(),
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.name.as_bytes());
        out.push(b':');
        out.extend_from_slice(self.before.as_bytes());
        out.extend_from_slice(&self.value);
        out.extend_from_slice(self.after.as_bytes());
        out.extend_from_slice(b"\r\n");
    }

    fn parsed(&self) -> Field {
        (self.name.clone(), self.value.clone())
    }
}

fn wire_field() -> impl Strategy<Value = WireField> {
    (
        field_name(),
        "[ \t]{0,2}",
        "([!-~]([ \t!-~]{0,16}[!-~])?)?",
        "[ \t]{0,2}",
    )
        .prop_map(|(name, before, value, after)| WireField {
            name,
            before,
            value: value.into_bytes(),
            after,
        })
}

/// `;name`, `;name=token` or `;name="quoted"`, up to two.
fn chunk_ext() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        Just(String::new()),
        token(6).prop_map(|t| format!("={t}")),
        r#""([\t !#-\[\]-~]|\\[\t -~]){0,8}""#.prop_map(|q| format!("={q}")),
    ];
    vec((token(6), value), 0..3).prop_map(|exts| {
        exts.into_iter()
            .map(|(name, value)| format!(";{name}{value}"))
            .collect()
    })
}

/// One chunk: its data, and how its size line is spelled.
#[derive(Clone, Debug)]
struct Chunk {
    data: Vec<u8>,
    zeros: usize,
    upper: bool,
    ext: String,
}

fn chunk() -> impl Strategy<Value = Chunk> {
    (
        vec(any::<u8>(), 1..40),
        0..3usize,
        any::<bool>(),
        chunk_ext(),
    )
        .prop_map(|(data, zeros, upper, ext)| Chunk {
            data,
            zeros,
            upper,
            ext,
        })
}

/// A body as the generator frames it.
#[derive(Clone, Debug)]
enum BodySpec {
    /// No framing field.
    None,
    /// Content-Length and the bytes.
    Length(Vec<u8>),
    Chunked {
        chunks: Vec<Chunk>,
        last_zeros: usize,
        last_ext: String,
        trailers: Vec<WireField>,
    },
}

fn body_spec() -> impl Strategy<Value = BodySpec> {
    prop_oneof![
        1 => Just(BodySpec::None),
        2 => vec(any::<u8>(), 0..64).prop_map(BodySpec::Length),
        2 => (vec(chunk(), 0..5), 0..3usize, chunk_ext(), vec(wire_field(), 0..3)).prop_map(
            |(chunks, last_zeros, last_ext, trailers)| BodySpec::Chunked {
                chunks,
                last_zeros,
                last_ext,
                trailers,
            }
        ),
    ]
}

impl BodySpec {
    /// The field that frames it, spelled one of three ways.
    fn framing_field(&self, spelling: usize) -> Option<WireField> {
        match self {
            Self::None => None,
            Self::Length(data) => {
                let name = ["Content-Length", "content-length", "CONTENT-LENGTH"][spelling % 3];
                Some(WireField::plain(name, data.len().to_string().as_bytes()))
            }
            Self::Chunked { .. } => {
                let name = [
                    "Transfer-Encoding",
                    "transfer-encoding",
                    "TRANSFER-ENCODING",
                ][spelling % 3];
                let value: &[u8] = [&b"chunked"[..], b"Chunked", b"CHUNKED"][spelling % 3];
                Some(WireField::plain(name, value))
            }
        }
    }

    /// The framing a parser decides from the field.
    fn framing(&self) -> Body {
        match self {
            Self::None => Body::Empty,
            Self::Length(data) if data.is_empty() => Body::Empty,
            Self::Length(data) => Body::Length(data.len() as u64),
            Self::Chunked { .. } => Body::Chunked,
        }
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            Self::None => {}
            Self::Length(data) => out.extend_from_slice(data),
            Self::Chunked {
                chunks,
                last_zeros,
                last_ext,
                trailers,
            } => {
                for c in chunks {
                    let mut size = format!("{}{:x}", "0".repeat(c.zeros), c.data.len());
                    if c.upper {
                        size = size.to_uppercase();
                    }
                    out.extend_from_slice(size.as_bytes());
                    out.extend_from_slice(c.ext.as_bytes());
                    out.extend_from_slice(b"\r\n");
                    out.extend_from_slice(&c.data);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice("0".repeat(1 + last_zeros).as_bytes());
                out.extend_from_slice(last_ext.as_bytes());
                out.extend_from_slice(b"\r\n");
                for t in trailers {
                    t.write(out);
                }
                out.extend_from_slice(b"\r\n");
            }
        }
    }

    fn data(&self) -> Vec<u8> {
        match self {
            Self::None => Vec::new(),
            Self::Length(data) => data.clone(),
            Self::Chunked { chunks, .. } => chunks.iter().flat_map(|c| c.data.clone()).collect(),
        }
    }

    fn trailers(&self) -> Vec<Field> {
        match self {
            Self::Chunked { trailers, .. } => trailers.iter().map(WireField::parsed).collect(),
            _ => Vec::new(),
        }
    }
}

/// `fields` with each of `extra` inserted at a random place.
fn place(mut fields: Vec<WireField>, extra: Vec<WireField>, slots: &[Index]) -> Vec<WireField> {
    for (i, field) in extra.into_iter().enumerate() {
        let at = slots
            .get(i)
            .map_or(fields.len(), |s| s.index(fields.len() + 1));
        fields.insert(at, field);
    }
    fields
}

/// A head: the start line, the fields, the empty line.
fn head_bytes(start: &str, fields: &[WireField]) -> Vec<u8> {
    let mut head = start.as_bytes().to_vec();
    head.extend_from_slice(b"\r\n");
    for f in fields {
        f.write(&mut head);
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// A pipeline and what parsing it must give.
#[derive(Clone, Debug)]
struct Case {
    input: Vec<u8>,
    messages: Vec<Message>,
    /// What stays in the buffer.
    rest: Vec<u8>,
    /// The stream ends (a body delimited by the close).
    eof: bool,
    /// The methods of the requests the responses answer, in order.
    asked: Vec<&'static str>,
}

impl Case {
    fn push(&mut self, bytes: &[u8], message: Message) {
        self.input.extend_from_slice(bytes);
        self.messages.push(message);
    }

    fn client(&self) -> Client {
        let mut client = Client::new();
        for method in &self.asked {
            client.expect_upgrade(method);
        }
        client
    }
}

// ----- generators: requests -----

#[derive(Clone, Debug)]
struct RequestSpec {
    method: String,
    target: String,
    host: String,
    fields: Vec<WireField>,
    body: BodySpec,
    upgrade: bool,
    spelling: usize,
    slots: Vec<Index>,
}

fn request_spec(upgrade: bool) -> impl Strategy<Value = RequestSpec> {
    (
        method(),
        origin_target(),
        host(),
        vec(wire_field(), 0..=8),
        body_spec(),
        0..3usize,
        vec(any::<Index>(), 4),
    )
        .prop_map(
            move |(method, target, host, fields, body, spelling, slots)| RequestSpec {
                method,
                target,
                host,
                fields,
                body,
                upgrade,
                spelling,
                slots,
            },
        )
}

impl RequestSpec {
    /// The bytes, and the message they must parse to.
    fn render(&self) -> (Vec<u8>, Message) {
        let mut extra = vec![WireField::plain("Host", self.host.as_bytes())];
        extra.extend(self.body.framing_field(self.spelling));
        if self.upgrade {
            extra.push(WireField::plain("Connection", b"upgrade"));
            extra.push(WireField::plain("Upgrade", b"websocket"));
        }
        let fields = place(self.fields.clone(), extra, &self.slots);
        let head = head_bytes(
            &format!("{} {} HTTP/1.1", self.method, self.target),
            &fields,
        );
        let mut bytes = head.clone();
        self.body.write(&mut bytes);
        let message = Message {
            headers: fields.iter().map(WireField::parsed).collect(),
            switches: self.upgrade,
            body: self.body.data(),
            trailers: self.body.trailers(),
            ..Message::request(head, &self.method, &self.target, self.body.framing())
        };
        (bytes, message)
    }
}

/// How a pipeline of requests ends.
#[derive(Clone, Debug)]
enum ServerTail {
    Nothing,
    /// The start of a next request's head (shorter than the head).
    Partial(Index),
    /// An upgrade request, then bytes of another protocol.
    Upgrade(Box<RequestSpec>, Vec<u8>),
}

fn requests() -> impl Strategy<Value = Case> {
    let tail = prop_oneof![
        Just(ServerTail::Nothing),
        any::<Index>().prop_map(ServerTail::Partial),
        (request_spec(true), vec(any::<u8>(), 0..48))
            .prop_map(|(spec, bytes)| ServerTail::Upgrade(Box::new(spec), bytes)),
    ];
    (vec(request_spec(false), 1..=5), tail).prop_map(|(specs, tail)| {
        let mut case = Case {
            input: Vec::new(),
            messages: Vec::new(),
            rest: Vec::new(),
            eof: false,
            asked: Vec::new(),
        };
        for spec in &specs {
            let (bytes, message) = spec.render();
            case.push(&bytes, message);
        }
        match tail {
            ServerTail::Nothing => {}
            ServerTail::Partial(cut) => {
                let head = &case.messages[0].head;
                let rest = head[..cut.index(head.len())].to_vec();
                case.input.extend_from_slice(&rest);
                case.rest = rest;
            }
            ServerTail::Upgrade(spec, bytes) => {
                let (upgrade, message) = spec.render();
                case.push(&upgrade, message);
                case.input.extend_from_slice(&bytes);
                case.rest = bytes;
            }
        }
        case
    })
}

// ----- generators: responses -----

/// A response's body, as the request and status allow.
#[derive(Clone, Debug)]
enum ResponseBody {
    /// A 1xx, 204 or 304: no framing field, no body.
    Bodiless,
    /// To a HEAD: a Content-Length, no body.
    Head(u64),
    /// Framed by a field (none is a zero Content-Length).
    Framed(BodySpec),
    /// Until the close: no framing field.
    UntilClose(Vec<u8>),
    /// A 101: `Connection: upgrade`, `Upgrade: websocket`.
    Switch,
}

#[derive(Clone, Debug)]
struct ResponseSpec {
    status: u16,
    reason: String,
    fields: Vec<WireField>,
    body: ResponseBody,
    spelling: usize,
    slots: Vec<Index>,
}

impl ResponseSpec {
    fn render(&self) -> (Vec<u8>, Message) {
        let mut extra = Vec::new();
        let (framing, data, trailers) = match &self.body {
            ResponseBody::Bodiless => (Body::Empty, Vec::new(), Vec::new()),
            ResponseBody::Head(n) => {
                extra.push(WireField::plain("Content-Length", n.to_string().as_bytes()));
                (Body::Empty, Vec::new(), Vec::new())
            }
            ResponseBody::Framed(spec) => {
                let spec = match spec {
                    BodySpec::None => BodySpec::Length(Vec::new()),
                    other => other.clone(),
                };
                extra.extend(spec.framing_field(self.spelling));
                (spec.framing(), spec.data(), spec.trailers())
            }
            ResponseBody::UntilClose(data) => (Body::UntilClose, data.clone(), Vec::new()),
            ResponseBody::Switch => {
                extra.push(WireField::plain("Connection", b"upgrade"));
                extra.push(WireField::plain("Upgrade", b"websocket"));
                (Body::Empty, Vec::new(), Vec::new())
            }
        };
        let fields = place(self.fields.clone(), extra, &self.slots);
        let head = head_bytes(
            &format!("HTTP/1.1 {} {}", self.status, self.reason),
            &fields,
        );
        let mut bytes = head.clone();
        match &self.body {
            ResponseBody::Framed(BodySpec::None) => {}
            ResponseBody::Framed(spec) => spec.write(&mut bytes),
            ResponseBody::UntilClose(data) => bytes.extend_from_slice(data),
            _ => {}
        }
        let message = Message {
            interim: (100..200).contains(&self.status) && self.status != 101,
            headers: fields.iter().map(WireField::parsed).collect(),
            switches: self.status == 101,
            body: data,
            trailers,
            ..Message::response(head, self.status, self.reason.as_bytes(), framing)
        };
        (bytes, message)
    }
}

/// A reason phrase: visible ASCII, spaces and tabs inside, and obs-text
/// (`é` is two bytes past ASCII).
fn reason() -> impl Strategy<Value = String> {
    "([!-~\u{e9}]([ \t!-~\u{e9}]{0,12}[!-~\u{e9}])?)?"
}

fn response_spec(
    status: impl Strategy<Value = u16>,
    body: impl Strategy<Value = ResponseBody>,
) -> impl Strategy<Value = ResponseSpec> {
    (
        status,
        reason(),
        vec(wire_field(), 0..=8),
        body,
        0..3usize,
        vec(any::<Index>(), 4),
    )
        .prop_map(
            |(status, reason, fields, body, spelling, slots)| ResponseSpec {
                status,
                reason,
                fields,
                body,
                spelling,
                slots,
            },
        )
}

fn interim_status() -> impl Strategy<Value = u16> {
    prop_oneof![Just(100u16), Just(103), 102u16..200].prop_filter("101 switches", |s| *s != 101)
}

/// One request's method and the responses that answer it.
#[derive(Clone, Debug)]
struct Exchange {
    method: &'static str,
    interims: Vec<ResponseSpec>,
    last: ResponseSpec,
}

fn exchange() -> impl Strategy<Value = Exchange> {
    let interim = response_spec(interim_status(), Just(ResponseBody::Bodiless));
    let status = prop_oneof![Just(204u16), Just(304), 200u16..600];
    let last = response_spec(status, body_spec().prop_map(ResponseBody::Framed));
    (
        prop::sample::select(vec!["GET", "POST", "HEAD"]),
        vec(interim, 0..=2),
        last,
        0u64..100_000,
    )
        .prop_map(|(method, interims, mut last, declared)| {
            // The body the status and the method allow.
            if last.status == 204 || last.status == 304 {
                last.body = ResponseBody::Bodiless;
            } else if method == "HEAD" {
                last.body = ResponseBody::Head(declared);
            }
            Exchange {
                method,
                interims,
                last,
            }
        })
}

/// How a pipeline of responses ends.
#[derive(Clone, Debug)]
enum ClientTail {
    Nothing,
    /// The start of a next response's head (shorter than the head).
    Partial(Index),
    /// A 101, then bytes of another protocol.
    Switch(ResponseSpec, Vec<u8>),
    /// A response whose body runs to the close.
    Close(ResponseSpec),
}

fn responses() -> impl Strategy<Value = Case> {
    let switch = response_spec(Just(101u16), Just(ResponseBody::Switch));
    let close = response_spec(
        (200u16..600).prop_map(|s| if s == 204 || s == 304 { 200 } else { s }),
        vec(any::<u8>(), 0..64).prop_map(ResponseBody::UntilClose),
    );
    let tail = prop_oneof![
        Just(ClientTail::Nothing),
        any::<Index>().prop_map(ClientTail::Partial),
        (switch, vec(any::<u8>(), 0..48)).prop_map(|(s, b)| ClientTail::Switch(s, b)),
        close.prop_map(ClientTail::Close),
    ];
    (vec(exchange(), 1..=5), tail).prop_map(|(exchanges, tail)| {
        let mut case = Case {
            input: Vec::new(),
            messages: Vec::new(),
            rest: Vec::new(),
            eof: false,
            asked: Vec::new(),
        };
        for x in &exchanges {
            case.asked.push(x.method);
            for spec in x.interims.iter().chain([&x.last]) {
                let (bytes, message) = spec.render();
                case.push(&bytes, message);
            }
        }
        match tail {
            ClientTail::Nothing => {}
            ClientTail::Partial(cut) => {
                let head = &case.messages[0].head;
                let rest = head[..cut.index(head.len())].to_vec();
                case.input.extend_from_slice(&rest);
                case.rest = rest;
            }
            ClientTail::Switch(spec, bytes) => {
                case.asked.push("GET");
                let (head, message) = spec.render();
                case.push(&head, message);
                case.input.extend_from_slice(&bytes);
                case.rest = bytes;
            }
            ClientTail::Close(spec) => {
                case.asked.push("GET");
                let (bytes, message) = spec.render();
                case.push(&bytes, message);
                case.eof = true;
            }
        }
        case
    })
}

// ----- mutations -----

/// One edit: flip a byte (XOR with a nonzero mask), insert one, or
/// delete one.
#[derive(Clone, Debug)]
enum Edit {
    Flip(Index, u8),
    Insert(Index, u8),
    Delete(Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<Index>(), 1u8..=255).prop_map(|(i, m)| Edit::Flip(i, m)),
        (any::<Index>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<Index>().prop_map(Edit::Delete),
    ]
}

fn mutate(input: &[u8], edits: &[Edit]) -> Vec<u8> {
    let mut out = input.to_vec();
    for e in edits {
        match e {
            Edit::Flip(i, mask) if !out.is_empty() => {
                let at = i.index(out.len());
                out[at] ^= mask;
            }
            Edit::Insert(i, b) => {
                let at = i.index(out.len() + 1);
                out.insert(at, *b);
            }
            Edit::Delete(i) if !out.is_empty() => {
                let at = i.index(out.len());
                out.remove(at);
            }
            _ => {}
        }
    }
    out
}

// ----- checks shared by the properties -----

/// A short account of an outcome, for failure messages.
fn summary(o: &Outcome) -> String {
    format!(
        "{} messages, open {:?}, error {:?}, rest {:?}",
        o.messages.len(),
        o.open.as_ref().map(|m| m.body.len()),
        o.error,
        o.rest.escape_ascii().to_string()
    )
}

/// Checks that cutting `input` at `cuts` gives `whole`: the same
/// messages, the same error (kind and offset), the same rest.
fn same_as_whole<P: Role + Clone>(
    protocol: &P,
    input: &[u8],
    cuts: &[usize],
    eof: bool,
    whole: &Outcome,
) {
    let cut = run(protocol.clone(), input, cuts, eof);
    if cut != *whole {
        let first = cut
            .messages
            .iter()
            .zip(&whole.messages)
            .position(|(a, b)| a != b);
        panic!(
            "cut at {cuts:?} differs from whole\n input {}\n cut   {}\n whole {}\n first different message {first:?}",
            input.escape_ascii(),
            summary(&cut),
            summary(whole),
        );
    }
}

/// Whole, at random points, byte by byte: the same outcome.
fn same_every_way<P: Role + Clone>(protocol: &P, input: &[u8], picks: &[Index], eof: bool) {
    let whole = run(protocol.clone(), input, &[], eof);
    let cuts = cuts_of(picks, input.len());
    same_as_whole(protocol, input, &cuts, eof, &whole);
    same_as_whole(protocol, input, &every_byte(input.len()), eof, &whole);
}

/// The generated case parsed exactly: every message, every body byte
/// once in order, nothing refused, the rest left in the buffer.
fn conserves(case: &Case, out: &Outcome) {
    assert_eq!(out.error, None, "a well-formed pipeline refused");
    assert_eq!(out.open, None, "a message left open");
    assert_eq!(
        out.messages.len(),
        case.messages.len(),
        "messages lost or made up"
    );
    for (got, want) in out.messages.iter().zip(&case.messages) {
        assert_eq!(got, want);
    }
    assert_eq!(out.rest, case.rest, "the bytes after the last message");
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    ProptestConfig::with_cases(cases)
}

// ----- encoders -----

/// Header values an encoder may send: HTAB, SP, visible ASCII, obs-text,
/// with no whitespace at either end (a recipient trims it, so the encoder
/// refuses it).
fn encodable_value() -> impl Strategy<Value = Vec<u8>> {
    vec(
        prop_oneof![8 => 0x20u8..0x7f, 1 => Just(b'\t'), 1 => 0x80u8..=0xff],
        0..16,
    )
    .prop_map(|value| trimmed(&value))
}

fn encodable_fields(n: usize) -> impl Strategy<Value = Vec<(String, Vec<u8>)>> {
    vec((field_name(), encodable_value()), 0..=n)
}

/// The value a parser reports: without SP and HTAB around it.
fn trimmed(value: &[u8]) -> Vec<u8> {
    let start = value.iter().position(|b| !matches!(b, b' ' | b'\t'));
    let end = value.iter().rposition(|b| !matches!(b, b' ' | b'\t'));
    match (start, end) {
        (Some(s), Some(e)) => value[s..=e].to_vec(),
        _ => Vec::new(),
    }
}

fn as_refs(fields: &[(String, Vec<u8>)]) -> Vec<(&str, &[u8])> {
    fields
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect()
}

/// What a [`HeadSlice`](http1::HeadSlice) writes into a write queue when
/// it is pushed.
fn sliced(head: http1::HeadSlice<'_>) -> Vec<u8> {
    let mut queue = WriteQueue::new();
    queue.push_to(Lane::Bulk, head).expect("room");
    let mut chunks = Vec::new();
    queue.chunks_owned(&mut chunks, usize::MAX);
    let wire = chunks.concat();
    queue.advance(wire.len()).expect("handed out");
    wire
}

/// The fields a parser reports: exactly as encoded.
fn as_parsed(fields: &[(String, Vec<u8>)]) -> Vec<Field> {
    fields.iter().map(|(n, v)| (n.clone(), v.clone())).collect()
}

/// A body to encode.
#[derive(Clone, Debug)]
enum EncodedBody {
    Empty,
    Length(Vec<u8>),
    Chunked(Vec<Vec<u8>>, Vec<(String, Vec<u8>)>),
    UntilClose(Vec<u8>),
}

fn encoded_body(until_close: bool) -> impl Strategy<Value = EncodedBody> {
    let close_weight = u32::from(until_close);
    prop_oneof![
        1 => Just(EncodedBody::Empty),
        2 => vec(any::<u8>(), 0..64).prop_map(EncodedBody::Length),
        2 => (vec(vec(any::<u8>(), 1..40), 0..5), encodable_fields(3))
            .prop_map(|(chunks, trailers)| EncodedBody::Chunked(chunks, trailers)),
        close_weight => vec(any::<u8>(), 0..64).prop_map(EncodedBody::UntilClose),
    ]
}

impl EncodedBody {
    fn kind(&self) -> Body {
        match self {
            Self::Empty => Body::Empty,
            Self::Length(data) => Body::Length(data.len() as u64),
            Self::Chunked(..) => Body::Chunked,
            Self::UntilClose(_) => Body::UntilClose,
        }
    }

    /// Appends the body as the encoders write it.
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Self::Empty => {}
            Self::Length(data) | Self::UntilClose(data) => out.extend_from_slice(data),
            Self::Chunked(chunks, trailers) => {
                for c in chunks {
                    let frame = http1::chunk(Bytes::from(c.clone())).expect("a chunk");
                    out.extend_from_slice(&frame.to_bytes());
                }
                let last = http1::last_chunk(&as_refs(trailers)).expect("trailers");
                out.extend_from_slice(&last);
            }
        }
    }

    fn data(&self) -> Vec<u8> {
        match self {
            Self::Empty => Vec::new(),
            Self::Length(data) | Self::UntilClose(data) => data.clone(),
            Self::Chunked(chunks, _) => chunks.concat(),
        }
    }

    fn trailers(&self) -> Vec<Field> {
        match self {
            Self::Chunked(_, trailers) => as_parsed(trailers),
            _ => Vec::new(),
        }
    }

    /// The framing field the encoder adds, and the framing parsed from
    /// it; `bodiless` for a status that carries none.
    fn framing(&self, response: bool, bodiless: bool) -> (Option<Field>, Body) {
        let length = |n: usize| Some(("Content-Length".to_owned(), n.to_string().into_bytes()));
        match self {
            Self::Empty if response && !bodiless => (length(0), Body::Empty),
            Self::Empty => (None, Body::Empty),
            Self::Length(d) if d.is_empty() => (length(0), Body::Empty),
            Self::Length(d) => (length(d.len()), Body::Length(d.len() as u64)),
            Self::Chunked(..) => (
                Some(("Transfer-Encoding".to_owned(), b"chunked".to_vec())),
                Body::Chunked,
            ),
            Self::UntilClose(_) => (None, Body::UntilClose),
        }
    }
}

// ----- httparse -----

/// httparse's view of a request head: method, path, version, fields
/// (values trimmed of SP and HTAB), and the bytes the head took.
type Parsed = (String, String, u8, Vec<Field>, usize);

fn httparse_request(input: &[u8]) -> Option<Parsed> {
    let mut slots = [httparse::EMPTY_HEADER; 256];
    let mut req = httparse::Request::new(&mut slots);
    match req.parse(input) {
        Ok(httparse::Status::Complete(n)) => Some((
            req.method?.to_owned(),
            req.path?.to_owned(),
            req.version?,
            req.headers
                .iter()
                .map(|h| (h.name.to_owned(), trimmed(h.value)))
                .collect(),
            n,
        )),
        _ => None,
    }
}

/// cleave's view of the same, when a server accepts the head.
fn cleave_request(input: &[u8]) -> Option<Parsed> {
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(input, Duration::ZERO).expect("a small input");
    let Ok(Some(ServerEvent::Head(r))) = conn.poll_event() else {
        return None;
    };
    let version = match r.version() {
        Version::Http10 => 0,
        Version::Http11 => 1,
    };
    Some((
        r.method().to_owned(),
        r.target().to_owned(),
        version,
        fields(r.headers()),
        input.len() - conn.recv_buf().peek().len(),
    ))
}

/// A byte for a head from a wide alphabet: mostly token bytes, then the
/// delimiters and the bytes parsers disagree on.
fn wide_byte() -> impl Strategy<Value = u8> {
    prop_oneof![
        6 => prop::sample::select(
            b"!#$%&'*+.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-".to_vec()
        ),
        2 => prop::sample::select(b" \t:/?=;,\"()<>@[]{}\\\r\n\x00\x01\x7f\x80\xff".to_vec()),
        1 => any::<u8>(),
    ]
}

fn wide(max: usize) -> impl Strategy<Value = Vec<u8>> {
    vec(wide_byte(), 0..max)
}

/// A request head from the wide alphabet: a well-formed head cut into
/// its parts (method, separators, target, version, names, colons,
/// values, line ends), up to three of which are replaced by random
/// bytes, so that cleave accepts often enough to compare.
fn wide_head() -> impl Strategy<Value = Vec<u8>> {
    let version = prop::sample::select(vec![&b"HTTP/1.1"[..], b"HTTP/1.0"]);
    let value = vec(
        prop_oneof![8 => 0x20u8..0x7f, 1 => Just(b'\t'), 1 => 0x80u8..=0xff],
        0..14,
    );
    let field = (field_name(), value);
    (
        (method(), origin_target(), version, host(), any::<Index>()),
        vec(field, 0..6),
        vec((any::<Index>(), wide(10)), 0..=3),
        wide(6),
    )
        .prop_map(
            |((method, target, version, host, at), fields, edits, after)| {
                let mut fields: Vec<(Vec<u8>, Vec<u8>)> = fields
                    .into_iter()
                    .map(|(n, v)| (n.into_bytes(), v))
                    .collect();
                let at = at.index(fields.len() + 1);
                fields.insert(at, (b"Host".to_vec(), host.into_bytes()));
                let mut parts: Vec<Vec<u8>> = vec![
                    method.into_bytes(),
                    b" ".to_vec(),
                    target.into_bytes(),
                    b" ".to_vec(),
                    version.to_vec(),
                    b"\r\n".to_vec(),
                ];
                for (name, value) in fields {
                    parts.extend([name, b": ".to_vec(), value, b"\r\n".to_vec()]);
                }
                parts.push(b"\r\n".to_vec());
                for (i, bytes) in edits {
                    let i = i.index(parts.len());
                    parts[i] = bytes;
                }
                parts.push(after);
                parts.concat()
            },
        )
}

// ----- the properties -----

proptest! {
    #![proptest_config(config())]

    /// (a) A server sees the same requests whether the bytes come whole,
    /// in random pieces or byte by byte.
    #[test]
    fn server_events_do_not_depend_on_the_cuts(case in requests(), picks in vec(any::<Index>(), 0..8)) {
        same_every_way(&Server::new(), &case.input, &picks, case.eof);
    }

    /// (a) Likewise a client, for responses.
    #[test]
    fn client_events_do_not_depend_on_the_cuts(case in responses(), picks in vec(any::<Index>(), 0..8)) {
        same_every_way(&case.client(), &case.input, &picks, case.eof);
    }

    /// (b) A server gives back every request as generated: heads, bodies
    /// byte for byte, trailers; after an upgrade (or the last request)
    /// the bytes that follow stay in the buffer.
    #[test]
    fn server_conserves_messages_and_bytes(case in requests(), picks in vec(any::<Index>(), 0..8)) {
        conserves(&case, &run(Server::new(), &case.input, &[], case.eof));
        conserves(&case, &run(Server::new(), &case.input, &cuts_of(&picks, case.input.len()), case.eof));
    }

    /// (b) Likewise a client: interim responses, HEAD and bodiless
    /// statuses, a body to the close, a 101 and the bytes after it.
    #[test]
    fn client_conserves_messages_and_bytes(case in responses(), picks in vec(any::<Index>(), 0..8)) {
        conserves(&case, &run(case.client(), &case.input, &[], case.eof));
        conserves(&case, &run(case.client(), &case.input, &cuts_of(&picks, case.input.len()), case.eof));
    }

    /// (c) What `request`, `chunk` and `last_chunk` write, a server
    /// parses back to the same method, target, fields, body and trailers;
    /// `request_slice` writes the same head into a write queue.
    #[test]
    fn encoded_requests_parse_back(
        method in method(),
        target in origin_target(),
        host in host(),
        fields in encodable_fields(8),
        body in encoded_body(false),
        picks in vec(any::<Index>(), 0..4),
    ) {
        let mut all = vec![("Host".to_owned(), host.into_bytes())];
        all.extend(fields);
        let mut input = http1::request(&method, &target, &as_refs(&all), body.kind())
            .expect("encodable")
            .to_vec();
        let refs = as_refs(&all);
        let slice = http1::request_slice(&method, &target, &refs, body.kind()).expect("encodable");
        prop_assert_eq!((slice.len(), sliced(slice)), (input.len(), input.clone()));
        body.encode(&mut input);
        let (framing_field, framing) = body.framing(false, false);
        let mut want = Message {
            headers: as_parsed(&all),
            body: body.data(),
            trailers: body.trailers(),
            ..Message::request(Vec::new(), &method, &target, framing)
        };
        want.headers.extend(framing_field);
        let out = run(Server::new(), &input, &cuts_of(&picks, input.len()), false);
        prop_assert_eq!(&out.error, &None);
        prop_assert_eq!(out.messages.len(), 1);
        let mut got = out.messages[0].clone();
        prop_assert_eq!(&got.head[..], &input[..got.head.len()]);
        got.head.clear();
        prop_assert_eq!(got, want);
        prop_assert!(out.rest.is_empty());
    }

    /// (c) What `response`, `chunk` and `last_chunk` write, a client
    /// parses back: interim responses first, a HEAD's declared length
    /// without a body, bodiless statuses, a body to the close;
    /// `response_slice` writes the same head into a write queue.
    #[test]
    fn encoded_responses_parse_back(
        head_request in any::<bool>(),
        interims in vec((interim_status(), reason()), 0..3),
        status in prop_oneof![Just(204u16), Just(304), 200u16..600],
        reason in "[ \t!-~\u{e9}]{0,12}",
        fields in encodable_fields(8),
        body in encoded_body(true),
        picks in vec(any::<Index>(), 0..4),
    ) {
        let mut client = Client::new();
        let method = if head_request { "HEAD" } else { "GET" };
        client.request(method, "/", &[("Host", b"a")], Body::Empty).expect("encodable");
        let mut input = Vec::new();
        let mut want = Vec::new();
        for (s, r) in &interims {
            let head = http1::response(*s, r, &[], Body::Empty).expect("encodable");
            input.extend_from_slice(&head);
            want.push(Message { interim: true, ..Message::response(Vec::new(), *s, r.as_bytes(), Body::Empty) });
        }
        let bodiless = status == 204 || status == 304;
        let (kind, sent) = if bodiless {
            (Body::Empty, EncodedBody::Empty)
        } else if head_request {
            // The length the body would have, and no body.
            (Body::Length(body.data().len() as u64 + 1), EncodedBody::Empty)
        } else {
            (body.kind(), body.clone())
        };
        let mut headers = as_parsed(&fields);
        let framing = if head_request && !bodiless {
            headers.push(("Content-Length".to_owned(), (body.data().len() + 1).to_string().into_bytes()));
            Body::Empty
        } else {
            let (field, framing) = sent.framing(true, bodiless);
            headers.extend(field);
            framing
        };
        let head = http1::response(status, &reason, &as_refs(&fields), kind).expect("encodable");
        let refs = as_refs(&fields);
        let slice = http1::response_slice(status, &reason, &refs, kind).expect("encodable");
        prop_assert_eq!(sliced(slice), &head[..]);
        input.extend_from_slice(&head);
        sent.encode(&mut input);
        want.push(Message {
            headers,
            body: sent.data(),
            trailers: sent.trailers(),
            ..Message::response(Vec::new(), status, reason.as_bytes(), framing)
        });
        let eof = matches!(sent, EncodedBody::UntilClose(_));
        let out = run(client, &input, &cuts_of(&picks, input.len()), eof);
        prop_assert_eq!(&out.error, &None);
        let got: Vec<Message> = out.messages.iter().cloned().map(|mut m| { m.head.clear(); m }).collect();
        prop_assert_eq!(got, want);
        prop_assert!(out.rest.is_empty());
    }

    /// (d) A server never panics on a mutated pipeline, and however the
    /// bytes are cut it sees the same events, or the same final error
    /// with no event after it.
    #[test]
    fn server_mutations_fail_the_same_way(
        case in requests(),
        edits in vec(edit(), 1..4),
        picks in vec(any::<Index>(), 0..8),
    ) {
        let input = mutate(&case.input, &edits);
        same_every_way(&Server::new(), &input, &picks, case.eof);
    }

    /// (d) Likewise a client.
    #[test]
    fn client_mutations_fail_the_same_way(
        case in responses(),
        edits in vec(edit(), 1..4),
        picks in vec(any::<Index>(), 0..8),
    ) {
        let input = mutate(&case.input, &edits);
        same_every_way(&case.client(), &input, &picks, case.eof);
    }

    /// httparse and cleave both accept a generated request head and
    /// agree on method, path, version and every (name, value).
    #[test]
    fn httparse_agrees_on_generated_heads(spec in request_spec(false)) {
        let (_, message) = spec.render();
        let theirs = httparse_request(&message.head);
        prop_assert!(theirs.is_some(), "httparse refused");
        let ours = cleave_request(&message.head);
        prop_assert!(ours.is_some(), "cleave refused");
        prop_assert_eq!(ours, theirs);
    }

    /// On heads with random bytes in the method, target, names and
    /// values: whenever cleave accepts, httparse accepts the same bytes
    /// and agrees field by field (cleave is never looser).
    #[test]
    fn cleave_is_never_looser_than_httparse(input in wide_head()) {
        if let Some(ours) = cleave_request(&input) {
            let theirs = httparse_request(&input);
            prop_assert!(theirs.is_some(), "cleave accepted what httparse refuses");
            prop_assert_eq!(Some(ours), theirs);
        }
    }
}

// ----- errors that once depended on the cuts, at their smallest -----

/// The error of `input` in `role` (a server, or a client that sent a
/// GET), whole and byte by byte.
fn errors_whole_and_by_byte(input: &[u8], client: bool) -> (Option<Error>, Option<Error>) {
    let bytes = every_byte(input.len());
    if client {
        let mut c = Client::new();
        c.expect_response("GET");
        (
            run(c.clone(), input, &[], false).error,
            run(c, input, &bytes, false).error,
        )
    } else {
        (
            run(Server::new(), input, &[], false).error,
            run(Server::new(), input, &bytes, false).error,
        )
    }
}

/// Checks that `input` fails with `field` at `offset`, whole and byte by
/// byte.
fn fails_at(input: &[u8], client: bool, field: HttpField, offset: u64) {
    let want = Some(Error::InvalidInput {
        kind: InvalidInput::Http(field),
        offset,
    });
    let (whole, bytes) = errors_whole_and_by_byte(input, client);
    assert_eq!(whole, want, "whole: {}", input.escape_ascii());
    assert_eq!(bytes, want, "byte by byte: {}", input.escape_ascii());
}

/// A control byte in a value is refused at that byte (the offset
/// `Error::InvalidInput` promises: "the first offending byte"), whether
/// the head comes whole (parsed at once: httparse's refusal once gave
/// the head's start) or byte by byte (judged early, at the byte).
#[test]
fn head_error_offset_does_not_depend_on_the_cuts() {
    let request = b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n";
    fails_at(request, false, HttpField::HeaderValue, 29);
    let response = b"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n";
    fails_at(response, true, HttpField::HeaderValue, 21);
}

/// Two faults in one head: the one a reader fed byte by byte meets first
/// wins, whole too (whole, the line scan once found the later bare LF
/// first). A control byte then a bare LF; a request line that starts
/// with a byte no token holds, then a bare LF; a status line with a bare
/// CR where `HTTP/` should be.
#[test]
fn head_error_kind_does_not_depend_on_the_cuts() {
    let request = b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x01\n\r\n";
    fails_at(request, false, HttpField::HeaderValue, 29);
    fails_at(b"\x80 / HTTP/1.1\n\r\n", false, HttpField::RequestLine, 0);
    let response = b"HTTP/1.1 200 OK\r\nX: a\x01\n\r\n";
    fails_at(response, true, HttpField::HeaderValue, 21);
    fails_at(b"H\rTTP/1.1 200 OK\r\n\r\n", true, HttpField::LineEnding, 1);
}

/// A reason phrase with obs-text (allowed by RFC 9112 and by
/// `Response::reason`'s documentation) comes out as sent, though
/// httparse gives `""` for such a reason.
#[test]
fn reason_with_obs_text_is_kept() {
    let mut client = Client::new();
    client.expect_response("GET");
    let out = run(
        client,
        b"HTTP/1.1 200 Caf\xe9\r\nContent-Length: 0\r\n\r\n",
        &[],
        false,
    );
    assert_eq!(out.error, None);
    assert_eq!(out.messages[0].reason, b"Caf\xe9");
}
