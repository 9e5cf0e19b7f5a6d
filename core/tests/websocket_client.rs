//! The WebSocket client role: the checks of the server's 101, masking,
//! the close handshake, and permessage-deflate as the client negotiates
//! it.

use std::time::Duration;

use cleave_proto::conn::Conn;
use cleave_proto::http1::{Client, ClientEvent, Response};
#[allow(unused_imports)]
use cleave_proto::websocket::Assembler as _;
use cleave_proto::websocket::{
    accept_key, ClientHandshake, ConnectConfig, DeflateConfig, Kind, WebSocket, WsConfig, WsEvent,
};
use cleave_proto::{Bytes, Error, InvalidInput, WsField};

#[path = "support/ws.rs"]
mod ws;
use ws::{client_with as client, frame_rsv};

const NOW: Duration = Duration::ZERO;

fn entropy_fill(v: u8) -> impl FnMut(&mut [u8]) {
    move |buf: &mut [u8]| buf.fill(v)
}

/// A handshake and the accept value its answer must carry.
fn handshake(config: &ConnectConfig) -> (ClientHandshake, String) {
    let mut entropy = entropy_fill(9);
    let (hs, request) = ClientHandshake::new("a.example", "/", config, &mut entropy).unwrap();
    let text = String::from_utf8(request.to_vec()).unwrap();
    let key = text
        .lines()
        .find_map(|l| l.strip_prefix("Sec-WebSocket-Key: "))
        .unwrap()
        .trim()
        .to_owned();
    let accept = String::from_utf8(accept_key(key.as_bytes()).to_vec()).unwrap();
    (hs, accept)
}

fn parse_response(bytes: &[u8]) -> Option<Response> {
    let mut client = Client::new();
    client.expect_upgrade("GET");
    let mut conn = Conn::new(client, NOW);
    conn.feed(bytes, NOW).ok()?;
    match conn.poll_event() {
        Ok(Some(ClientEvent::Head(r))) => Some(r),
        _ => None,
    }
}

fn answer_with(hs: &ClientHandshake, accept: &str, extra: &str) -> Option<Result<(), Error>> {
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {accept}\r\n{extra}\r\n"
    );
    let response = parse_response(head.as_bytes())?;
    Some(hs.check(&response).map(|_| ()))
}

#[test]
fn handshake_answers() {
    let deflate = ConnectConfig::default().deflate(DeflateConfig::default());
    let (hs, acc) = handshake(&deflate);
    let cases: &[(&str, bool)] = &[
        ("Sec-WebSocket-Extensions: permessage-deflate\r\n", true),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=7\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=16\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=08\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=16\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=7\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover; server_no_context_takeover\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; client_no_context_takeover; client_no_context_takeover\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=10; server_max_window_bits=10\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits=10; client_max_window_bits=10\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_no_context_takeover=1\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; x=1\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Extensions: permessage-deflate\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate, permessage-deflate\r\n", false),
        ("Sec-WebSocket-Extensions: x-webkit-deflate-frame\r\n", false),
        ("Sec-WebSocket-Protocol: chat\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=\"10\"\r\n", true),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=\"1\\0\"\r\n", true),
        ("Sec-WebSocket-Extensions: permessage-deflate; server_max_window_bits=\"\"\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate;\r\n", false),
        ("Sec-WebSocket-Extensions: permessage-deflate,\r\n", true),
        ("Sec-WebSocket-Extensions: ,permessage-deflate\r\n", true),
        ("Sec-WebSocket-Extensions: \r\n", false),
    ];
    let mut wrong = Vec::new();
    for (extra, ok) in cases {
        let got = answer_with(&hs, &acc, extra);
        let accepted = matches!(got, Some(Ok(())));
        if accepted != *ok {
            wrong.push(format!("{extra:?}: got {got:?}, want ok={ok}"));
        }
    }
    // No deflate offered
    let (hs2, acc2) = handshake(&ConnectConfig::default());
    for extra in [
        "Sec-WebSocket-Extensions: permessage-deflate\r\n",
        "Sec-WebSocket-Protocol: chat\r\n",
        "Sec-WebSocket-Protocol: \r\n",
    ] {
        let got = answer_with(&hs2, &acc2, extra);
        if matches!(got, Some(Ok(()))) {
            wrong.push(format!("no offer: {extra:?} accepted"));
        }
    }
    // Status line / tokens.
    for head in [
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: {acc2}\r\n\r\n"),
        format!("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {acc2}\r\n\r\n"),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n".to_string(),
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {acc2}x\r\n\r\n"),
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nUpgrade: h2c\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {acc2}\r\n\r\n"),
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {acc2}\r\nSec-WebSocket-Accept: {acc2}\r\n\r\n"),
    ] {
        if let Some(r) = parse_response(head.as_bytes()) {
            if hs2.check(&r).is_ok() {
                wrong.push(format!("accepted {head:?}"));
            }
        }
    }
    // Should be accepted: whitespace around values.
    for head in [
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade:  websocket \r\nConnection:  Upgrade \r\nSec-WebSocket-Accept:  {acc2} \r\n\r\n"),
        format!("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept:\t{acc2}\t\r\n\r\n"),
        format!("HTTP/1.1 101 Web Socket Protocol Handshake\r\nupgrade: WEBSOCKET\r\nconnection: keep-alive, UPGRADE\r\nsec-websocket-accept: {acc2}\r\n\r\n"),
    ] {
        match parse_response(head.as_bytes()) {
            Some(r) => {
                if let Err(e) = hs2.check(&r) {
                    wrong.push(format!("refused {head:?}: {e:?}"));
                }
            }
            None => wrong.push(format!("unparsed {head:?}")),
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

// ---------------------------------------------------------------------
// frames
// ---------------------------------------------------------------------

fn frame(fin: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
    frame_rsv(fin, false, opcode, payload, None)
}

/// A frame the client wrote: (first byte, mask key if any, unmasked payload).
#[derive(Debug, Clone, PartialEq)]
struct Written {
    b0: u8,
    key: Option<[u8; 4]>,
    payload: Vec<u8>,
}

fn parse_written(out: &[u8]) -> Vec<Written> {
    let mut at = 0;
    let mut frames = Vec::new();
    while at < out.len() {
        let b0 = out[at];
        let b1 = out[at + 1];
        let (len, mut h) = match b1 & 0x7f {
            126 => (u16::from_be_bytes([out[at + 2], out[at + 3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(out[at + 2..at + 10].try_into().unwrap()) as usize,
                10,
            ),
            l => (l as usize, 2),
        };
        let key = if b1 & 0x80 != 0 {
            let k: [u8; 4] = out[at + h..at + h + 4].try_into().unwrap();
            h += 4;
            Some(k)
        } else {
            None
        };
        let mut payload = out[at + h..at + h + len].to_vec();
        if let Some(k) = key {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= k[i % 4];
            }
        }
        frames.push(Written { b0, key, payload });
        at += h + len;
    }
    frames
}

fn drain<P: cleave_proto::Protocol>(conn: &mut Conn<P>) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..10_000 {
        let Some(chunk) = conn.poll_transmit_chunk() else {
            break;
        };
        out.extend_from_slice(&chunk);
        conn.handle_written(chunk.len(), NOW).unwrap();
    }
    out
}

#[test]
fn every_client_frame_is_masked_with_a_fresh_key() {
    let mut conn = client(WsConfig::default().pings(true));
    let ws = conn.protocol_mut();
    let f1 = ws
        .message(Kind::Text, Bytes::from_static(b"hello"))
        .unwrap();
    let f2 = ws
        .message(Kind::Binary, Bytes::from(vec![1u8; 300]))
        .unwrap();
    let f3 = ws
        .part(Kind::Text, Bytes::from_static(b"ab"), true, false)
        .unwrap();
    let f4 = ws
        .part(Kind::Text, Bytes::from_static(b"cd"), false, true)
        .unwrap();
    let f5 = ws.ping(Bytes::from_static(b"p")).unwrap();
    let f6 = ws.pong(Bytes::from_static(b"q")).unwrap();
    for f in [f1, f2, f3, f4, f5, f6] {
        conn.push(f).unwrap();
    }
    // A server ping: the automatic pong is masked too.
    conn.feed(&frame(true, 9, b"srv"), NOW).unwrap();
    assert_eq!(
        conn.poll_event().unwrap(),
        Some(WsEvent::Ping(Bytes::from_static(b"srv")))
    );
    let close = conn.protocol_mut().close(1000, "bye").unwrap();
    conn.push(close).unwrap();
    let out = drain(&mut conn);
    let frames = parse_written(&out);
    assert_eq!(frames.len(), 8, "{frames:?}");
    let mut keys = std::collections::HashSet::new();
    for f in &frames {
        let key = f.key.expect("masked");
        assert!(keys.insert(key), "key reused: {frames:?}");
    }
    assert!(frames.iter().any(|f| f.payload == b"hello"));
    assert!(frames.iter().any(|f| f.payload == vec![1u8; 300]));
    assert!(frames.iter().any(|f| f.b0 == 0x8A && f.payload == b"srv"));
    assert_eq!(frames[7].payload, b"\x03\xe8bye");
}

#[test]
fn masked_server_frames_fail_the_connection() {
    for (opcode, payload) in [
        (1u8, &b"hi"[..]),
        (2, b""),
        (9, b"x"),
        (10, b""),
        (8, b"\x03\xe8"),
    ] {
        let mut conn = client(WsConfig::default().pings(true));
        conn.feed(
            &frame_rsv(true, false, opcode, payload, Some([1, 2, 3, 4])),
            NOW,
        )
        .unwrap();
        let e = conn.poll_event();
        assert!(
            matches!(
                e,
                Err(Error::InvalidInput {
                    kind: InvalidInput::WebSocket(WsField::Mask),
                    ..
                })
            ),
            "opcode {opcode}: {e:?}"
        );
        let out = drain(&mut conn);
        let frames = parse_written(&out);
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_eq!(frames[0].b0, 0x88);
        assert!(frames[0].key.is_some());
        assert_eq!(&frames[0].payload[..2], &1002u16.to_be_bytes());
    }
}

#[test]
fn server_close_is_echoed_masked() {
    let mut conn = client(WsConfig::default());
    conn.feed(&frame(true, 8, b"\x0f\xa0bye"), NOW).unwrap();
    let ev = conn.poll_event().unwrap();
    assert!(
        matches!(ev, Some(WsEvent::Close(ref c)) if c.code == Some(4000)),
        "{ev:?}"
    );
    let out = drain(&mut conn);
    let frames = parse_written(&out);
    assert_eq!(frames.len(), 1);
    assert!(frames[0].key.is_some());
    assert_eq!(frames[0].payload, b"\x0f\xa0");
    assert!(conn.poll_shutdown().is_some() || conn.is_write_done());
}

#[test]
fn client_close_then_data_then_server_close() {
    let mut conn = client(WsConfig::default());
    let close = conn.protocol_mut().close(1000, "").unwrap();
    conn.push(close).unwrap();
    let _ = drain(&mut conn);
    let mut bytes = frame(true, 1, b"late");
    bytes.extend(frame(true, 8, b"\x03\xe8"));
    conn.feed(&bytes, NOW).unwrap();
    let mut events = Vec::new();
    for _ in 0..10 {
        match conn.poll_event() {
            Ok(Some(e)) => events.push(e),
            Ok(None) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(
        matches!(events.last(), Some(WsEvent::Close(_))),
        "{events:?}"
    );
    let out = drain(&mut conn);
    assert!(parse_written(&out).is_empty(), "second close: {out:x?}");
}

#[test]
fn control_frame_rules_for_client() {
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (frame(false, 9, b"x"), "fragmented ping"),
        (frame(true, 9, &[0u8; 126]), "ping 126"),
        (frame(true, 8, &[0x03]), "close 1 byte"),
        (frame(true, 8, b"\x03\xed"), "close 1005"),
        (frame(true, 8, b"\x03\xee"), "close 1006"),
        (frame(true, 8, b"\x03\xf7"), "close 1015"),
        (frame(true, 8, b"\x03\xe8\xff"), "close bad utf8"),
        (frame(true, 3, b""), "opcode 3"),
        (frame(true, 0, b"x"), "continuation first"),
        (frame_rsv(true, true, 1, b"x", None), "rsv1 without deflate"),
    ];
    for (bytes, what) in cases {
        for cut in 0..=bytes.len() {
            let mut conn = client(WsConfig::default().pings(true));
            conn.feed(&bytes[..cut], NOW).unwrap();
            let mut result = conn.poll_event();
            if cut < bytes.len() && matches!(result, Ok(None)) {
                conn.feed(&bytes[cut..], NOW).unwrap();
                result = conn.poll_event();
            }
            assert!(result.is_err(), "{what} cut {cut}: {result:?}");
        }
    }
}

/// The 101 and the first frames in one read, and the same bytes cut at
/// every point: the frames come out the same.
#[test]
fn a_101_and_frames_cut_anywhere() {
    let (hs, acc) = handshake(&ConnectConfig::default());
    let mut bytes = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {acc}\r\n\r\n"
    )
    .into_bytes();
    bytes.extend(frame(true, 1, b"first"));
    bytes.extend(frame(false, 2, b"a"));
    bytes.extend(frame(true, 9, b"p"));
    bytes.extend(frame(true, 0, b"b"));
    bytes.extend(frame(true, 8, b"\x03\xe8"));
    for cut in 0..=bytes.len() {
        for cut2 in [cut, (cut + 1).min(bytes.len()), bytes.len()] {
            let mut client_proto = Client::new();
            client_proto.expect_upgrade("GET");
            let mut http = Conn::new(client_proto, NOW);
            let mut fed = 0;
            let mut response = None;
            let mut ended = false;
            for upto in [cut, cut2, bytes.len()] {
                if upto > fed {
                    http.feed(&bytes[fed..upto], NOW).unwrap();
                    fed = upto;
                }
                for _ in 0..4 {
                    match http.poll_event().unwrap() {
                        Some(ClientEvent::Head(r)) => response = Some(r),
                        Some(ClientEvent::End) => ended = true,
                        Some(other) => panic!("{other:?}"),
                        None => break,
                    }
                }
                if ended {
                    break;
                }
            }
            assert!(ended, "cut {cut}");
            hs.check(response.as_ref().unwrap()).unwrap();
            let mut ws = http.switch(|_| {
                WebSocket::client(WsConfig::default().pings(true), |b: &mut [u8]| b.fill(5))
            });
            if fed < bytes.len() {
                ws.feed(&bytes[fed..], NOW).unwrap();
            }
            let mut events = Vec::new();
            for _ in 0..20 {
                match ws.poll_event().unwrap() {
                    Some(e) => events.push(e),
                    None => break,
                }
            }
            assert_eq!(events.len(), 5, "cut {cut}/{cut2}: {events:?}");
            assert_eq!(events[0], WsEvent::Text(Bytes::from_static(b"first")));
        }
    }
}

// ---------------------------------------------------------------------
// permessage-deflate, client side
// ---------------------------------------------------------------------

use cleave_proto::websocket::DeflateParams;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress};

fn sync_flushed(c: &mut Compress, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() * 2 + 1024);
    let start = c.total_in();
    loop {
        let taken = (c.total_in() - start) as usize;
        c.compress_vec(&data[taken..], &mut out, FlushCompress::Sync)
            .unwrap();
        if (c.total_in() - start) as usize >= data.len() && out.len() < out.capacity() {
            break;
        }
        out.reserve(out.capacity());
    }
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// The params a client gets from `answer` to the default offer.
fn negotiated(answer: &str, config: &DeflateConfig) -> DeflateParams {
    DeflateParams::from_response(answer.as_bytes(), config).unwrap()
}

fn deflate_client(params: DeflateParams, config: &DeflateConfig) -> Conn<WebSocket> {
    let mut next = 0u8;
    let entropy = move |buf: &mut [u8]| {
        for b in buf {
            next = next.wrapping_add(1);
            *b = next;
        }
    };
    Conn::new(
        WebSocket::client(WsConfig::default(), entropy).with_deflate(params, config),
        NOW,
    )
}

fn messages() -> Vec<Vec<u8>> {
    let base: Vec<u8> = (0..2000u32).map(|i| (i * 7 % 251) as u8).collect();
    vec![
        b"hello hello hello hello".to_vec(),
        b"hello hello hello hello".to_vec(),
        base.clone(),
        base.clone(),
        Vec::new(),
        base[..300].to_vec(),
        b"x".to_vec(),
    ]
}

#[test]
fn client_inflates_server_messages_with_and_without_takeover() {
    let config = DeflateConfig::default();
    for (answer, reset) in [
        ("permessage-deflate", false),
        ("permessage-deflate; server_no_context_takeover", true),
        ("permessage-deflate", true),
        ("permessage-deflate; server_max_window_bits=9", false),
        (
            "permessage-deflate; server_max_window_bits=10; server_no_context_takeover",
            true,
        ),
        ("permessage-deflate; server_max_window_bits=8", false),
    ] {
        let params = negotiated(answer, &config);
        let bits = params.server_max_window_bits.max(9);
        let mut conn = deflate_client(params, &config);
        let mut c = Compress::new_with_window_bits(Compression::new(6), false, bits);
        let mut bytes = Vec::new();
        for m in messages() {
            if reset {
                c.reset();
            }
            let payload = if m.is_empty() {
                vec![0u8]
            } else {
                sync_flushed(&mut c, &m)
            };
            bytes.extend(frame_rsv(true, true, 2, &payload, None));
        }
        for cut in [0, 1, 7, bytes.len() / 2, bytes.len()] {
            let mut conn2 = deflate_client(params, &config);
            conn2.feed(&bytes[..cut], NOW).unwrap();
            let mut got = Vec::new();
            for _ in 0..50 {
                match conn2.poll_event() {
                    Ok(Some(WsEvent::Binary(b))) => got.push(b.to_vec()),
                    Ok(Some(e)) => panic!("{e:?}"),
                    Ok(None) => break,
                    Err(e) => panic!("{answer} cut {cut}: {e:?}"),
                }
            }
            conn2.feed(&bytes[cut..], NOW).unwrap();
            for _ in 0..50 {
                match conn2.poll_event() {
                    Ok(Some(WsEvent::Binary(b))) => got.push(b.to_vec()),
                    Ok(Some(e)) => panic!("{e:?}"),
                    Ok(None) => break,
                    Err(e) => panic!("{answer} cut {cut}: {e:?}"),
                }
            }
            assert_eq!(got, messages(), "{answer} cut {cut}");
        }
        drop(conn.feed(&[], NOW));
        let _ = conn.poll_event();
    }
}

/// What the client compresses, read back by an independent inflater that
/// follows the negotiated parameters.
#[test]
fn client_compresses_as_negotiated() {
    for (answer, config) in [
        ("permessage-deflate", DeflateConfig::default()),
        (
            "permessage-deflate; client_no_context_takeover",
            DeflateConfig::default(),
        ),
        (
            "permessage-deflate; client_max_window_bits=10",
            DeflateConfig::default(),
        ),
        (
            "permessage-deflate; client_max_window_bits=9",
            DeflateConfig::default(),
        ),
        (
            "permessage-deflate",
            DeflateConfig::default().no_context_takeover(true),
        ),
        (
            "permessage-deflate; client_max_window_bits=12",
            DeflateConfig::default().max_window_bits(12).unwrap(),
        ),
    ] {
        let params = negotiated(answer, &config);
        let mut conn = deflate_client(params, &config);
        for m in messages() {
            let f = conn
                .protocol_mut()
                .message(Kind::Binary, Bytes::from(m))
                .unwrap();
            conn.push(f).unwrap();
        }
        let out = drain(&mut conn);
        let frames = parse_written(&out);
        let reset = params.client_no_context_takeover;
        let mut d = Decompress::new_with_window_bits(false, params.client_max_window_bits.max(9));
        for (f, m) in frames.iter().zip(messages()) {
            assert!(f.key.is_some());
            assert_eq!(f.b0 & 0x40, 0x40, "{answer}: rsv1");
            if reset {
                d.reset(false);
            }
            let mut input = f.payload.clone();
            input.extend_from_slice(&[0, 0, 0xff, 0xff]);
            let mut outbuf = Vec::with_capacity(m.len() + 64);
            d.decompress_vec(&input, &mut outbuf, FlushDecompress::Sync)
                .unwrap();
            assert_eq!(outbuf, m, "{answer}");
        }
    }
}

#[test]
fn extra_headers_that_frame_a_body_are_refused() {
    use cleave_proto::websocket::{accept, AcceptConfig};
    let mut wrong = Vec::new();
    for (name, value) in [
        ("Content-Length", &b"5"[..]),
        ("content-length", b"0"),
        ("Transfer-Encoding", b"chunked"),
        ("Bad Name", b"x"),
        ("", b"x"),
        ("X-A", b"a\r\nb"),
        ("X-A", b"a\0b"),
        ("X-A", b"a\nb"),
        ("X-A", b"a\rb"),
    ] {
        let mut entropy = entropy_fill(3);
        let config = ConnectConfig::default().header(name, value);
        if let Ok((_, req)) = ClientHandshake::new("a", "/", &config, &mut entropy) {
            wrong.push(format!(
                "client {name:?}={value:?}: {:?}",
                String::from_utf8_lossy(&req)
            ));
        }
    }
    // server side
    let req = b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    let mut conn = Conn::new(cleave_proto::http1::Server::new(), NOW);
    conn.feed(req, NOW).unwrap();
    let Some(cleave_proto::http1::ServerEvent::Head(request)) = conn.poll_event().unwrap() else {
        panic!()
    };
    for (name, value) in [
        ("Content-Length", &b"5"[..]),
        ("Transfer-Encoding", b"chunked"),
        ("Bad Name", b"x"),
        ("X-A", b"a\r\nb"),
    ] {
        let config = AcceptConfig::default().header(name, value);
        if let Ok(acc) = accept(&request, &config) {
            wrong.push(format!(
                "server {name:?}: {:?}",
                String::from_utf8_lossy(acc.response())
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[derive(Debug, PartialEq)]
enum Ev {
    Msg(Kind, Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>),
    Err(String),
}

fn collect(
    conn: &mut Conn<WebSocket>,
    out: &mut Vec<Ev>,
    asm: &mut cleave_proto::websocket::Assembler,
) -> bool {
    for _ in 0..10_000 {
        match conn.poll_event() {
            Ok(Some(WsEvent::Text(t))) => out.push(Ev::Msg(Kind::Text, t.to_vec())),
            Ok(Some(WsEvent::Binary(t))) => out.push(Ev::Msg(Kind::Binary, t.to_vec())),
            Ok(Some(WsEvent::Part(p))) => {
                if let Some((k, w)) = asm.push(p) {
                    out.push(Ev::Msg(k, w.to_vec()));
                }
            }
            Ok(Some(WsEvent::Ping(p))) => out.push(Ev::Ping(p.to_vec())),
            Ok(Some(WsEvent::Pong(p))) => out.push(Ev::Pong(p.to_vec())),
            Ok(Some(WsEvent::Close(c))) => out.push(Ev::Close(c.code)),
            Ok(None) => return true,
            Err(e) => {
                out.push(Ev::Err(format!("{e:?}")));
                return false;
            }
        }
    }
    panic!("too many events")
}

#[test]
fn client_deflate_stream_cut_at_every_point() {
    let config = DeflateConfig::default();
    for answer in [
        "permessage-deflate",
        "permessage-deflate; server_no_context_takeover",
    ] {
        let params = negotiated(answer, &config);
        let reset = params.server_no_context_takeover;
        let mut c = Compress::new(Compression::new(6), false);
        let comp = |m: &[u8], c: &mut Compress| {
            if reset {
                c.reset();
            }
            sync_flushed(c, m)
        };
        let text = "abcabcabc héllo héllo ✓✓✓ ".repeat(10);
        let mut bytes = Vec::new();
        // whole compressed
        let p = comp(text.as_bytes(), &mut c);
        bytes.extend(frame_rsv(true, true, 1, &p, None));
        // fragmented compressed with ping in between
        let p = comp(text.as_bytes(), &mut c);
        let (a, b) = p.split_at(p.len() / 2);
        bytes.extend(frame_rsv(false, true, 1, a, None));
        bytes.extend(frame(true, 9, b"mid"));
        bytes.extend(frame(false, 0, &[]));
        bytes.extend(frame(true, 0, b));
        // uncompressed fragmented
        bytes.extend(frame(false, 2, b"xy"));
        bytes.extend(frame(true, 0, b"z"));
        // uncompressed whole
        bytes.extend(frame(true, 1, text.as_bytes()));
        // compressed after uncompressed
        let p = comp(b"tail tail tail", &mut c);
        bytes.extend(frame_rsv(true, true, 2, &p, None));
        bytes.extend(frame(true, 8, b"\x03\xe8ok"));
        let expected = vec![
            Ev::Msg(Kind::Text, text.clone().into_bytes()),
            Ev::Ping(b"mid".to_vec()),
            Ev::Msg(Kind::Text, text.clone().into_bytes()),
            Ev::Msg(Kind::Binary, b"xyz".to_vec()),
            Ev::Msg(Kind::Text, text.clone().into_bytes()),
            Ev::Msg(Kind::Binary, b"tail tail tail".to_vec()),
            Ev::Close(Some(1000)),
        ];
        for cut in 0..=bytes.len() {
            for config_stream in [
                WsConfig::default().pings(true),
                WsConfig::default().pings(true).stream_above(3),
            ] {
                let mut conn = Conn::new(
                    WebSocket::client(config_stream, |b: &mut [u8]| b.fill(1))
                        .with_deflate(params, &config),
                    NOW,
                );
                let mut out = Vec::new();
                let mut asm = cleave_proto::websocket::Assembler::new();
                conn.feed(&bytes[..cut], NOW).unwrap();
                collect(&mut conn, &mut out, &mut asm);
                conn.feed(&bytes[cut..], NOW).unwrap();
                collect(&mut conn, &mut out, &mut asm);
                assert_eq!(out, expected, "{answer} cut {cut}");
            }
        }
    }
}

#[test]
fn odd_configuration_never_panics() {
    for host in ["", "a", "é", "[::1]:80", "a b", "a\r\nb", "a:99999"] {
        for target in [
            "",
            "/",
            "*",
            "//",
            "/é",
            "/\0",
            "http://",
            "ws://x",
            "wss://x/#f",
            "/a?b#c",
            "x",
        ] {
            let mut entropy = entropy_fill(0);
            let _ = ClientHandshake::new(host, target, &ConnectConfig::default(), &mut entropy);
        }
    }
    for bits in [0u8, 1, 7, 8, 9, 15, 16, 200, 255] {
        for snct in [false, true] {
            let params = DeflateParams {
                server_no_context_takeover: snct,
                client_no_context_takeover: !snct,
                server_max_window_bits: bits,
                client_max_window_bits: bits,
                server_window_offered: snct,
            };
            let _ = params.to_header();
            for config in [
                DeflateConfig::default(),
                DeflateConfig::default().level(0).unwrap(),
                DeflateConfig::default().max_window_bits(8).unwrap(),
            ] {
                let mut conn = deflate_client(params, &config);
                for m in messages() {
                    let f = conn
                        .protocol_mut()
                        .message(Kind::Binary, Bytes::from(m))
                        .unwrap();
                    let _ = conn.push(f);
                }
                let _ = drain(&mut conn);
                let mut c = Compress::new(Compression::new(6), false);
                let p = sync_flushed(&mut c, &vec![7u8; 5000]);
                conn.feed(&frame_rsv(true, true, 2, &p, None), NOW).unwrap();
                let _ = conn.poll_event();
            }
        }
    }
}
