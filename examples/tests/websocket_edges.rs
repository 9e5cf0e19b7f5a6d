//! The WebSocket echo servers (tokio and mio) over loopback with raw
//! bytes: exchanges, refused handshakes, and requests the HTTP parser
//! refuses before the handshake is judged.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

#[path = "support/ws_servers.rs"]
mod ws_servers;

use ws_servers::{mio_server, tokio_server, Running};

const UPGRADE: &[u8] = b"GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
    Sec-WebSocket-Version: 13\r\n\r\n";
const SWITCHING: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
    Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";

fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
    let key = [0x37, 0xfa, 0x21, 0x3d];
    let mut frame = vec![first];
    match payload.len() {
        n @ 0..=125 => frame.push(0x80 | n as u8),
        n @ 126..=0xffff => {
            frame.push(0x80 | 126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(0x80 | 127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(&key);
    frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ key[i % 4]));
    frame
}

/// Everything the server sends until it closes (or `wait` passes), and
/// whether it closed.
fn read_all(socket: &mut TcpStream, wait: Duration) -> (Vec<u8>, bool) {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let (start, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 65536]);
    while start.elapsed() < wait {
        match socket.read(&mut buf) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(_) => return (got, true),
        }
    }
    (got, false)
}

/// Server frames as lines.
fn lines(mut bytes: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while bytes.len() >= 2 {
        let b0 = bytes[0];
        let b1 = bytes[1];
        let (len, h) = match b1 & 0x7f {
            126 => (u16::from_be_bytes([bytes[2], bytes[3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(bytes[2..10].try_into().unwrap()) as usize,
                10,
            ),
            l => (l as usize, 2),
        };
        let h = if b1 & 0x80 != 0 { h + 4 } else { h };
        if bytes.len() < h + len {
            out.push(format!("partial {:?}", bytes));
            break;
        }
        let p = &bytes[h..h + len];
        out.push(match (b0, p) {
            (0x88, [hi, lo, reason @ ..]) => format!(
                "close {} {:?}",
                u16::from_be_bytes([*hi, *lo]),
                String::from_utf8_lossy(reason)
            ),
            _ => format!(
                "{b0:#04x} {}{p:?}",
                if b1 & 0x80 != 0 { "masked " } else { "" }
            ),
        });
        bytes = &bytes[h + len..];
    }
    out
}

fn servers() -> Vec<(&'static str, (SocketAddr, Running))> {
    vec![("tokio", tokio_server()), ("mio", mio_server())]
}

/// Sends `steps` (one write each), returns the answer after the 101.
fn exchange(addr: SocketAddr, steps: &[Vec<u8>], pause: Duration) -> (Vec<u8>, bool) {
    let mut socket = TcpStream::connect(addr).unwrap();
    for step in steps {
        socket.write_all(step).unwrap();
        thread::sleep(pause);
    }
    read_all(&mut socket, Duration::from_secs(5))
}

/// A case: its name, the bytes sent in steps, the lines expected back.
type Case = (&'static str, Vec<Vec<u8>>, Vec<&'static str>);

#[test]
fn raw_exchanges_on_both_servers() {
    let cases: Vec<Case> = vec![
        (
            "text with request",
            vec![
                [UPGRADE, &masked(0x81, b"hi")].concat(),
                masked(0x88, b"\x03\xe8"),
            ],
            vec!["0x81 [104, 105]", "close 1000 \"\""],
        ),
        (
            "ping with request",
            vec![
                [UPGRADE, &masked(0x89, b"hi")].concat(),
                masked(0x88, b"\x03\xe8"),
            ],
            vec!["0x8a [104, 105]", "close 1000 \"\""],
        ),
        (
            "close with request",
            vec![[UPGRADE, &masked(0x88, b"\x03\xe8")].concat()],
            vec!["close 1000 \"\""],
        ),
        (
            "unmasked with request",
            vec![[UPGRADE, b"\x81\x02hi".as_slice()].concat()],
            vec!["close 1002 \"\""],
        ),
        (
            "all in one",
            vec![[
                UPGRADE,
                &masked(0x81, b"a"),
                &masked(0x82, b"b"),
                &masked(0x88, b"\x03\xe8"),
            ]
            .concat()],
            vec!["0x81 [97]", "0x82 [98]", "close 1000 \"\""],
        ),
        (
            "separate",
            vec![
                UPGRADE.to_vec(),
                masked(0x81, b"a"),
                masked(0x01, b"b"),
                masked(0x80, b"c"),
                masked(0x88, b""),
            ],
            vec!["0x81 [97]", "0x01 [98]", "0x80 [99]", "0x88 []"],
        ),
        (
            "bad utf8",
            vec![UPGRADE.to_vec(), masked(0x81, b"\xff")],
            vec!["close 1007 \"\""],
        ),
    ];
    let mut wrong = Vec::new();
    for (server_name, (addr, _running)) in servers() {
        for (name, steps, expected) in &cases {
            let (answer, closed) = exchange(addr, steps, Duration::from_millis(20));
            let ok_head = answer.starts_with(SWITCHING);
            let got = if ok_head {
                lines(&answer[SWITCHING.len()..])
            } else {
                vec![String::from_utf8_lossy(&answer).into_owned()]
            };
            if !ok_head || got != *expected || !closed {
                wrong.push(format!("{server_name} {name}: closed={closed} {got:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn refused_handshakes_on_both_servers() {
    let bad_request = "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
    let upgrade = std::str::from_utf8(UPGRADE).unwrap();
    let cases = [
        (
            "version 8",
            upgrade.replace("Version: 13", "Version: 8"),
            "HTTP/1.1 426",
        ),
        (
            "plain GET",
            "GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_owned(),
            bad_request,
        ),
        (
            "a body",
            upgrade.replace("\r\n\r\n", "\r\nContent-Length: 3\r\n\r\nabc"),
            bad_request,
        ),
        (
            "HTTP/1.0",
            upgrade.replace("HTTP/1.1", "HTTP/1.0"),
            bad_request,
        ),
    ];
    let mut wrong = Vec::new();
    for (server_name, (addr, _running)) in servers() {
        for (name, request, expected) in &cases {
            let (answer, closed) = exchange(addr, &[request.as_bytes().to_vec()], Duration::ZERO);
            let text = String::from_utf8_lossy(&answer);
            if !text.starts_with(expected) || !closed {
                wrong.push(format!("{server_name} {name}: closed={closed} {text:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// RFC 6455, section 4.2.1: a server that finds the client did not send
/// a valid handshake ("including but not limited to any violations of the
/// ABNF grammar") MUST stop processing it "and return an HTTP response
/// with an appropriate error code (such as 400 Bad Request)". The echo
/// servers answer handshakes `accept` refuses (400/426), but a request the
/// HTTP parser refuses gets no answer at all: the connection just closes.
#[test]
fn echo_servers_answer_a_handshake_the_http_parser_refuses() {
    let upgrade = std::str::from_utf8(UPGRADE).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "two Host fields",
            upgrade.replace("Host: server.example.com\r\n", "Host: a\r\nHost: b\r\n"),
            "HTTP/1.1 400 ",
        ),
        (
            "a folded header line",
            upgrade.replace("Upgrade: websocket\r\n", "Upgrade: websocket\r\n x\r\n"),
            "HTTP/1.1 400 ",
        ),
        (
            "a space before a colon",
            upgrade.replace("Upgrade: websocket", "Upgrade : websocket"),
            "HTTP/1.1 400 ",
        ),
        (
            "a malformed request line",
            "GET  /chat HTTP/1.1\r\nHost: a\r\n\r\n".to_owned(),
            "HTTP/1.1 400 ",
        ),
    ];
    let mut wrong = Vec::new();
    for (server_name, (addr, _running)) in servers() {
        for (name, request, expected) in &cases {
            let mut socket = TcpStream::connect(addr).unwrap();
            socket.write_all(request.as_bytes()).unwrap();
            let (answer, closed) = read_all(&mut socket, Duration::from_secs(3));
            let text = String::from_utf8_lossy(&answer);
            if !text.starts_with(expected) {
                wrong.push(format!(
                    "{server_name}, {name}: answered {text:?} (closed: {closed})"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
