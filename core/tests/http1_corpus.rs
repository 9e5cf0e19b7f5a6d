//! The framing cases of three public HTTP/1.1 test suites (llhttp's
//! `test/request` and `test/response`, hyper's decoder and role tables,
//! h11's reader tests), ported to `tests/data/http1/*.jsonl` with cleave's
//! strict verdicts (the provenance of each vector is its `source` field;
//! see `tests/data/http1/PROVENANCE.md`).
//!
//! Each vector runs whole, byte by byte, split at every point into two
//! reads, and (when it ends between messages) with trailing bytes that
//! must stay in the buffer: h11's habit. Every run must give the same
//! messages, the same unconsumed bytes, and for a refused vector the same
//! typed error with nothing parsed after it.

use cleave_proto::http1::{Client, ClientEvent, Headers, Server, ServerEvent};
use std::time::Duration;

use cleave_proto::{Bytes, Conn, Error, HttpField, InvalidInput, Limit, Protocol};
use serde_json::Value;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Message {
    start: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
    trailers: Vec<(Vec<u8>, Vec<u8>)>,
}

/// What one run saw.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    messages: Vec<Message>,
    error: Option<Error>,
    rest: Vec<u8>,
}

fn fields(headers: &Headers) -> Vec<(Vec<u8>, Vec<u8>)> {
    headers
        .iter()
        .map(|h| (h.name().as_bytes().to_vec(), h.value().to_vec()))
        .collect()
}

fn start_line(head: &Bytes) -> Vec<u8> {
    let end = head
        .iter()
        .position(|&b| b == b'\r' || b == b'\n')
        .unwrap_or(head.len());
    head[..end].to_vec()
}

/// One HTTP event, either role, as the runner needs it.
enum Seen {
    Head(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>, bool),
    Data(Bytes),
    Trailers(Vec<(Vec<u8>, Vec<u8>)>),
    End,
}

trait Role: Protocol {
    fn seen(event: Self::Event) -> Seen;
}

impl Role for Server {
    fn seen(event: ServerEvent) -> Seen {
        match event {
            ServerEvent::Head(r) => {
                Seen::Head(start_line(r.as_bytes()), fields(r.headers()), false)
            }
            ServerEvent::Data(d) => Seen::Data(d),
            ServerEvent::Trailers(t) => Seen::Trailers(fields(&t)),
            ServerEvent::End => Seen::End,
        }
    }
}

impl Role for Client {
    fn seen(event: ClientEvent) -> Seen {
        match event {
            ClientEvent::Interim(r) => {
                Seen::Head(start_line(r.as_bytes()), fields(r.headers()), true)
            }
            ClientEvent::Head(r) => {
                Seen::Head(start_line(r.as_bytes()), fields(r.headers()), false)
            }
            ClientEvent::Data(d) => Seen::Data(d),
            ClientEvent::Trailers(t) => Seen::Trailers(fields(&t)),
            ClientEvent::End => Seen::End,
        }
    }
}

/// Feeds `pieces` in order (then the end of the stream if `eof`),
/// polling after each, and collects what came.
fn run<P: Role>(protocol: P, pieces: &[&[u8]], eof: bool) -> Outcome {
    let mut conn = Conn::new(protocol, Duration::ZERO);
    let mut messages = Vec::new();
    let mut current: Option<Message> = None;
    let mut error = None;
    let mut drain = |conn: &mut Conn<P>, error: &mut Option<Error>| loop {
        match conn.poll_event() {
            Ok(Some(event)) => {
                assert!(error.is_none(), "an event after the error");
                match P::seen(event) {
                    Seen::Head(start, headers, interim) => {
                        assert!(current.is_none(), "a head inside a message");
                        let m = Message {
                            start,
                            headers,
                            ..Message::default()
                        };
                        if interim {
                            messages.push(m);
                        } else {
                            current = Some(m);
                        }
                    }
                    Seen::Data(d) => current
                        .as_mut()
                        .expect("data outside a message")
                        .body
                        .extend_from_slice(&d),
                    Seen::Trailers(t) => {
                        current
                            .as_mut()
                            .expect("trailers outside a message")
                            .trailers = t
                    }
                    Seen::End => messages.push(current.take().expect("an end outside a message")),
                }
            }
            Ok(None) => return,
            Err(e) => {
                *error = Some(e);
                return;
            }
        }
    };
    for piece in pieces {
        if error.is_some() {
            break;
        }
        if let Err(e) = conn.feed(piece, Duration::ZERO) {
            // The connection refuses bytes after its error: fine.
            assert!(
                error.is_some() || conn.error().is_some(),
                "feed failed: {e}"
            );
            break;
        }
        drain(&mut conn, &mut error);
    }
    if eof && error.is_none() {
        conn.handle_eof(Duration::ZERO);
        drain(&mut conn, &mut error);
    }
    // Nothing after an error: polling again gives it again.
    if let Some(e) = &error {
        assert_eq!(conn.poll_event().as_ref().err(), Some(e));
    }
    let rest = conn.recv_buf().peek().to_vec();
    Outcome {
        messages,
        error,
        rest,
    }
}

fn bytes_of(v: &Value, key: &str) -> Vec<u8> {
    v[key]
        .as_str()
        .map(|s| s.as_bytes().to_vec())
        .unwrap_or_default()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The corpus's strings are the bytes in UTF-8 (bytes that are not UTF-8
/// come as hex).
fn latin1(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn pairs(v: &Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        latin1(p[0].as_str().unwrap()),
                        latin1(p[1].as_str().unwrap()),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn expected_messages(v: &Value) -> Vec<Message> {
    v["messages"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| Message {
                    start: latin1(m["start"].as_str().unwrap_or_default()),
                    headers: pairs(&m["headers"]),
                    body: latin1(m["body"].as_str().unwrap_or_default()),
                    trailers: pairs(&m["trailers"]),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `e` is the class the vector names.
fn is_class(e: &Error, class: &str) -> bool {
    use HttpField as F;
    let field = match e {
        Error::InvalidInput {
            kind: InvalidInput::Http(field),
            ..
        } => Some(*field),
        _ => None,
    };
    match class {
        "incomplete" => matches!(e, Error::Truncated { .. }),
        "chunk-extension" => {
            field == Some(F::ChunkExtension)
                || matches!(
                    e,
                    Error::LimitExceeded {
                        limit: Limit::ChunkExtension,
                        ..
                    }
                )
        }
        "transfer-encoding" => matches!(field, Some(F::TransferEncoding | F::TransferCoding)),
        _ => {
            field
                == Some(match class {
                    "both-framing" => F::BothFraming,
                    "content-length" => F::ContentLength,
                    "chunk-size" => F::ChunkSize,
                    "chunk-data" => F::ChunkDataEnd,
                    "line-ending" => F::LineEnding,
                    "obs-fold" => F::ObsFold,
                    "whitespace" => F::Whitespace,
                    "header-name" => F::HeaderName,
                    "header-value" => F::HeaderValue,
                    "request-line" => F::RequestLine,
                    "version" => F::Version,
                    "status-line" => F::StatusLine,
                    "host" => F::Host,
                    "trailer" => F::Trailer,
                    "connect-body" => F::ConnectBody,
                    other => panic!("unknown class {other}"),
                })
        }
    }
}

/// Runs one vector every way; `Err` says how it went wrong.
fn check(v: &Value) -> Result<(), String> {
    let input = match v["input"].as_str() {
        Some(_) => bytes_of(v, "input"),
        None => hex(v["input_hex"].as_str().unwrap()),
    };
    let response = v["role"] == "response";
    let method = v["request_method"].as_str().unwrap_or("GET").to_owned();
    let expect_ok = v["expect"] == "ok";
    let eof = v["eof_ends_body"].as_bool().unwrap_or(false) || v["error"] == "incomplete";
    let messages = expected_messages(v);
    let rest = latin1(v["rest"].as_str().unwrap_or_default());

    let go = |pieces: &[&[u8]]| -> Outcome {
        if response {
            let mut client = Client::new();
            for _ in 0..64 {
                client.expect_upgrade(&method); // a 101 answers an offered upgrade (rule 5)
            }
            run(client, pieces, eof)
        } else {
            run(Server::new(), pieces, eof)
        }
    };
    let judge = |how: &str, out: &Outcome| -> Result<(), String> {
        if expect_ok {
            if let Some(e) = &out.error {
                return Err(format!("{how}: refused with {e:?}"));
            }
            if out.messages != messages {
                return Err(format!(
                    "{how}: messages\n  got  {:?}\n  want {:?}",
                    out.messages, messages
                ));
            }
            if !rest.ends_with(&out.rest) {
                return Err(format!(
                    "{how}: rest {:?}, want (a suffix of) {:?}",
                    out.rest.escape_ascii().to_string(),
                    rest.escape_ascii().to_string()
                ));
            }
        } else {
            let class = v["error"].as_str().unwrap();
            match &out.error {
                Some(e) if is_class(e, class) => {}
                other => {
                    return Err(format!(
                        "{how}: want {class}, got {other:?} after {:?}",
                        out.messages
                    ))
                }
            }
            if out.messages != messages {
                return Err(format!(
                    "{how}: messages before the error\n  got  {:?}\n  want {:?}",
                    out.messages, messages
                ));
            }
        }
        Ok(())
    };

    let whole = go(&[&input]);
    judge("whole", &whole)?;
    let bytes: Vec<&[u8]> = input.chunks(1).collect();
    let one = go(&bytes);
    judge("byte by byte", &one)?;
    if one != whole && expect_ok {
        return Err("byte by byte differs from whole".into());
    }
    for split in 1..input.len() {
        let out = go(&[&input[..split], &input[split..]]);
        judge(&format!("split at {split}"), &out)?;
        if expect_ok && out != whole {
            return Err(format!("split at {split} differs from whole"));
        }
    }
    if expect_ok && !eof && rest.is_empty() {
        // Bytes of a next message that has not come whole stay put.
        let trailing: &[u8] = if response { b"HTTP/1.1 2" } else { b"GET /nex" };
        let out = go(&[&input, trailing]);
        if out.error.is_some() || out.messages != messages || out.rest != trailing {
            return Err(format!("trailing bytes: {out:?}"));
        }
    }
    Ok(())
}

fn corpus(name: &str) {
    let path = format!("{}/tests/data/http1/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        count += 1;
        if let Err(why) = check(&v) {
            failures.push(format!("{}\n  {why}", v["source"].as_str().unwrap_or("?")));
        }
    }
    assert!(count > 100, "{name}: only {count} vectors");
    assert!(
        failures.is_empty(),
        "{name}: {} of {count} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn llhttp_request_and_response_cases() {
    corpus("llhttp.jsonl");
}

#[test]
fn hyper_decoder_and_role_tables() {
    corpus("hyper.jsonl");
}

#[test]
fn h11_reader_tests() {
    corpus("h11.jsonl");
}
