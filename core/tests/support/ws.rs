//! What the WebSocket tests share: a reference frame encoder (not
//! cleave's), a server and a predictable client, and a runner that feeds
//! bytes cut anywhere and collects what comes out.

#![allow(dead_code)] // each test file uses its own part of it

use std::time::Duration;

use cleave_proto::conn::Conn;
use cleave_proto::websocket::{Assembler, CloseFrame, Kind, WebSocket, WsConfig, WsEvent};
use cleave_proto::Error;

pub const NOW: Duration = Duration::ZERO;

/// One frame as RFC 6455 section 5.2 draws it.
pub fn frame(fin: bool, opcode: u8, payload: &[u8], mask: Option<[u8; 4]>) -> Vec<u8> {
    frame_rsv(fin, false, opcode, payload, mask)
}

/// The same, with RSV1 (a compressed message's first frame) as asked.
pub fn frame_rsv(
    fin: bool,
    rsv1: bool,
    opcode: u8,
    payload: &[u8],
    mask: Option<[u8; 4]>,
) -> Vec<u8> {
    let mut out = vec![(u8::from(fin) << 7) | (u8::from(rsv1) << 6) | opcode];
    let m = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(m | n as u8),
        n if n < 65536 => {
            out.push(m | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(m | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(key) => {
            out.extend_from_slice(&key);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
        }
        None => out.extend_from_slice(payload),
    }
    out
}

pub fn server() -> Conn<WebSocket> {
    server_with(WsConfig::default().pings(true))
}

pub fn server_with(config: WsConfig) -> Conn<WebSocket> {
    Conn::new(WebSocket::server(config), NOW)
}

/// A client whose masks count up from 1: predictable, for tests only.
pub fn client_with(config: WsConfig) -> Conn<WebSocket> {
    let mut next = 0u8;
    let entropy = move |buf: &mut [u8]| {
        for b in buf {
            next = next.wrapping_add(1);
            *b = next;
        }
    };
    Conn::new(WebSocket::client(config, entropy), NOW)
}

/// Everything the connection queued, written out.
pub fn drain(conn: &mut Conn<WebSocket>) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = conn.poll_transmit_chunk() {
        out.extend_from_slice(&chunk);
        conn.handle_written(chunk.len(), NOW).unwrap();
    }
    out
}

/// What came out: whole messages (parts assembled), pings, pongs, the
/// close, or the error that ended it.
#[derive(Debug, Default, PartialEq)]
pub struct Seen {
    pub messages: Vec<(Kind, Vec<u8>)>,
    pub pings: Vec<Vec<u8>>,
    pub pongs: Vec<Vec<u8>>,
    pub close: Option<CloseFrame>,
    pub error: Option<Error>,
}

pub fn poll_all(conn: &mut Conn<WebSocket>, seen: &mut Seen, assembler: &mut Assembler) {
    loop {
        match conn.poll_event() {
            Ok(Some(WsEvent::Text(t))) => seen.messages.push((Kind::Text, t.to_vec())),
            Ok(Some(WsEvent::Binary(b))) => seen.messages.push((Kind::Binary, b.to_vec())),
            Ok(Some(WsEvent::Part(part))) => {
                if let Some((kind, whole)) = assembler.push(part) {
                    seen.messages.push((kind, whole.to_vec()));
                }
            }
            Ok(Some(WsEvent::Ping(p))) => seen.pings.push(p.to_vec()),
            Ok(Some(WsEvent::Pong(p))) => seen.pongs.push(p.to_vec()),
            Ok(Some(WsEvent::Close(c))) => seen.close = Some(c),
            Ok(None) => return,
            Err(e) => {
                // Final: the same error again.
                assert_eq!(conn.poll_event(), Err(e.clone()));
                seen.error.get_or_insert(e);
                return;
            }
        }
    }
}

/// Feeds `bytes` cut at `cuts`, polling after each piece, then the end.
pub fn run(mut conn: Conn<WebSocket>, bytes: &[u8], cuts: &[usize]) -> (Seen, Conn<WebSocket>) {
    let mut seen = Seen::default();
    let mut assembler = Assembler::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    for cut in cuts {
        if cut > at && seen.error.is_none() && seen.close.is_none() {
            conn.feed(&bytes[at..cut], NOW).unwrap();
            at = cut;
        }
        poll_all(&mut conn, &mut seen, &mut assembler);
    }
    conn.handle_eof(NOW);
    poll_all(&mut conn, &mut seen, &mut assembler);
    (seen, conn)
}
