//! RFC 6455 rules at the corners of the WebSocket state machine: a ping
//! after a close of ours is still answered, a streamed frame whose header
//! fills the buffer is refused instead of waiting for ever, the client
//! writes only opening requests a server takes, and a connection taken
//! apart half way through a masked frame hands back the bytes that
//! arrived (and reads them again if put back together).

use std::time::Duration;

use cleave_proto::conn::{Conn, Raw};
use cleave_proto::http1::{Server, ServerEvent};
use cleave_proto::websocket::{
    accept, AcceptConfig, ClientHandshake, ConnectConfig, WebSocket, WsConfig, WsEvent,
};
use cleave_proto::{Bytes, ConnConfig, Error, Limit, Misuse, RecvBufConfig, Timeouts, Unencodable};

const NOW: Duration = Duration::ZERO;
const KEY: [u8; 4] = [0x11, 0x22, 0x33, 0x44];

/// A client's frame: FIN, `opcode`, masked with [`KEY`].
fn masked(opcode: u8, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0x80 | opcode];
    match payload.len() {
        n @ 0..=125 => frame.push(0x80 | n as u8),
        n => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    frame.extend_from_slice(&KEY);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ KEY[i % 4]));
    frame
}

/// Everything queued, as written.
fn drain(conn: &mut Conn<WebSocket>) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = conn.poll_transmit_chunk() {
        out.extend_from_slice(&chunk);
        conn.handle_written(chunk.len(), NOW).unwrap();
    }
    out
}

// ----- pings after a close of ours (RFC 6455, section 5.5.2) -----

#[test]
fn a_ping_after_our_close_is_still_answered() {
    let mut conn = Conn::new(WebSocket::server(WsConfig::default()), NOW);
    let close = conn.protocol_mut().close(1000, "").unwrap();
    conn.push(close).unwrap();
    assert_eq!(drain(&mut conn), b"\x88\x02\x03\xe8");
    // The client has not seen our close yet: it pings.
    conn.feed(&masked(0x9, b"hi"), NOW).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(drain(&mut conn), b"\x8a\x02hi");
    // Its close ends the handshake: nothing more is read or answered.
    conn.feed(&masked(0x8, b"\x03\xe8"), NOW).unwrap();
    conn.feed(&masked(0x9, b"late"), NOW).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(drain(&mut conn), b"");
}

// ----- a streamed frame whose header fills the buffer -----

fn streaming_server(max_buffered: usize) -> Conn<WebSocket> {
    let config = ConnConfig::default()
        .recv_buf(RecvBufConfig::default().max_buffered(max_buffered).unwrap());
    Conn::with_config(
        WebSocket::server(WsConfig::default().stream_above(0)),
        config,
        NOW,
    )
}

#[test]
fn a_streamed_frame_whose_header_fills_the_buffer_is_refused() {
    // A masked binary frame of 5 bytes: a 6-byte header.
    let frame = masked(0x2, b"hello");
    for max in [5, 6] {
        let mut conn = streaming_server(max);
        conn.feed(&frame[..max], NOW).unwrap();
        let refused = conn.poll_event();
        assert!(
            matches!(
                refused,
                Err(Error::LimitExceeded {
                    limit: Limit::Buffer,
                    offset: 0,
                    ..
                })
            ),
            "max_buffered {max}: {refused:?}"
        );
        // Nothing lost: the bytes that came are still there.
        assert_eq!(conn.recv_buf().peek(), &frame[..max]);
    }
    // One byte more room: the payload streams a byte at a time.
    let mut conn = streaming_server(7);
    let mut data = Vec::new();
    let mut fed = 0;
    while fed < frame.len() {
        let n = conn.recv_buf().remaining().min(frame.len() - fed);
        conn.feed(&frame[fed..fed + n], NOW).unwrap();
        fed += n;
        while let Some(event) = conn.poll_event().unwrap() {
            let WsEvent::Part(part) = event else {
                panic!("{event:?}")
            };
            data.extend_from_slice(&part.data);
        }
    }
    assert_eq!(data, b"hello");
}

// ----- the client's opening request (RFC 6455, section 4.1) -----

#[test]
fn the_client_writes_only_requests_a_server_accepts() {
    for (host, target, ok) in [
        ("example.com", "/chat", true),
        ("example.com", "/chat?room=1", true),
        ("example.com", "http://example.com/chat", true),
        ("example.com", "HTTPS://example.com/chat", true),
        // A server takes these (see below); a client may not send them.
        ("example.com", "ws://example.com/chat", false),
        ("example.com", "WSS://example.com/chat", false),
        ("example.com", "*", false),
        ("example.com", "chat", false),
        ("example.com", "example.com:80", false),
        ("example.com", "/chat#frag", false),
        ("example.com", "ftp://example.com/chat", false),
        ("", "/chat", false),
    ] {
        let mut entropy = |b: &mut [u8]| b.fill(7);
        let made = ClientHandshake::new(host, target, &ConnectConfig::default(), &mut entropy);
        let Ok((_, request)) = made else {
            assert!(!ok, "{host:?} {target:?} refused: {made:?}");
            assert!(
                matches!(
                    made,
                    Err(Error::Misuse(Misuse::Unencodable(Unencodable::WsTarget)))
                ),
                "{made:?}"
            );
            continue;
        };
        assert!(ok, "{host:?} {target:?} written");
        let mut server = Conn::new(Server::new(), NOW);
        server.feed(&request, NOW).unwrap();
        let Ok(Some(ServerEvent::Head(head))) = server.poll_event() else {
            panic!("{host:?} {target:?}: no head");
        };
        accept(&head, &AcceptConfig::default()).unwrap();
    }
}

/// The request a client would write for `target`, by hand.
fn upgrade_request(target: &str) -> Vec<u8> {
    format!(
        "GET {target} HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n\
         Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn a_server_refuses_a_target_with_a_fragment() {
    for (target, ok) in [("/chat#frag", false), ("/chat", true)] {
        let mut server = Conn::new(Server::new(), NOW);
        server.feed(&upgrade_request(target), NOW).unwrap();
        let Ok(Some(ServerEvent::Head(head))) = server.poll_event() else {
            panic!("{target}: no head");
        };
        assert_eq!(
            accept(&head, &AcceptConfig::default()).is_ok(),
            ok,
            "{target}"
        );
    }
}

// ----- a connection taken apart half way through a masked frame -----

/// A text frame of two-byte characters, so that a cut can fall inside one.
fn text_frame() -> (Vec<u8>, &'static str) {
    let text = "héllo wörld, κόσμε";
    (masked(0x1, text.as_bytes()), text)
}

#[test]
fn into_parts_mid_frame_hands_back_the_bytes_that_arrived() {
    let (frame, text) = text_frame();
    for cut in 7..frame.len() {
        for stream_above in [0, 1 << 20] {
            let config = WsConfig::default().stream_above(stream_above);
            let mut conn = Conn::new(WebSocket::server(config), NOW);
            conn.feed(&frame[..cut], NOW).unwrap();
            let mut got = Vec::new();
            while let Some(event) = conn.poll_event().unwrap() {
                let WsEvent::Part(part) = event else {
                    panic!("{event:?}")
                };
                got.extend_from_slice(&part.data);
            }
            let (ws, recv, queue) = conn.into_parts();
            // What the buffer holds is what arrived, past what was taken.
            let taken = cut - recv.len();
            assert_eq!(recv.peek(), &frame[taken..cut], "cut {cut}");
            // Put back together, it reads on: the same text, checked once.
            let mut conn = Conn::from_parts(ws, recv, queue, Timeouts::default(), NOW);
            conn.feed(&frame[cut..], NOW).unwrap();
            while let Some(event) = conn.poll_event().unwrap() {
                match event {
                    WsEvent::Part(part) => got.extend_from_slice(&part.data),
                    WsEvent::Text(whole) => got.extend_from_slice(&whole),
                    other => panic!("{other:?}"),
                }
            }
            assert_eq!(
                got,
                text.as_bytes(),
                "cut {cut}, stream_above {stream_above}"
            );
        }
    }
}

#[test]
fn a_switch_mid_frame_keeps_the_bytes_that_arrived() {
    let (frame, _) = text_frame();
    for cut in 7..frame.len() {
        let mut conn = Conn::new(WebSocket::server(WsConfig::default()), NOW);
        conn.feed(&frame[..cut], NOW).unwrap();
        assert_eq!(conn.poll_event(), Ok(None));
        let mut raw = conn.switch(|_| Raw::new());
        assert_eq!(
            raw.poll_event().unwrap(),
            Some(Bytes::copy_from_slice(&frame[..cut])),
            "cut {cut}"
        );
    }
}

#[test]
fn invalid_text_handed_back_and_read_again_fails_at_the_same_place() {
    // "é" cut after its first byte and followed by an ASCII byte: invalid.
    let frame = masked(0x1, b"ab\xc3(cd");
    let cut = 6 + 3; // the header and "ab\xc3"
    let mut conn = Conn::new(WebSocket::server(WsConfig::default()), NOW);
    conn.feed(&frame[..cut], NOW).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    let (ws, recv, queue) = conn.into_parts();
    assert_eq!(recv.peek(), &frame[..cut]);
    let mut conn = Conn::from_parts(ws, recv, queue, Timeouts::default(), NOW);
    conn.feed(&frame[cut..], NOW).unwrap();
    let failed = conn.poll_event();
    assert!(
        matches!(
            failed,
            Err(Error::InvalidInput {
                kind: cleave_proto::InvalidInput::Utf8,
                ..
            })
        ),
        "{failed:?}"
    );
}
