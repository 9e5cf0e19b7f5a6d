//! The HTTP/1.1 example servers (`cleave_examples::http1`, the code of
//! `http1_server` and `http1_mio_server`) against unusual peers: a
//! declined Upgrade or CONNECT with a request pipelined behind it, and one
//! client that keeps its connection busy while another asks.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::{Duration, Instant};

#[path = "support/busy.rs"]
mod busy;
#[path = "support/http1_servers.rs"]
mod http1_servers;

use busy::Busy;

use http1_servers::{mio_server, tokio_server};

/// What arrives on `socket` within `wait` (or until it ends, or until
/// `enough` says so); `<EOF>` or `<RST>` appended when it ended.
fn read_for(socket: &mut TcpStream, wait: Duration, enough: impl Fn(&[u8]) -> bool) -> String {
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let (start, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 8192]);
    while start.elapsed() < wait && !enough(&got) {
        match socket.read(&mut buf) {
            Ok(0) => {
                got.extend_from_slice(b"<EOF>");
                break;
            }
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::TimedOut => {
            }
            Err(_) => {
                got.extend_from_slice(b"<RST>");
                break;
            }
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

// ----- 1. a request that carries Upgrade (curl --http2 on http://), or a
//          CONNECT, then a pipelined request -----

/// The server declines the switch (it answers the request itself, not
/// with a 101 or a 2xx to CONNECT), so the connection must go on with the
/// next request (RFC 9110 7.8: a server may ignore Upgrade); at the very
/// least a server that closes must say `Connection: close` and not drop
/// the request behind silently.
#[test]
fn a_declined_upgrade_or_connect_does_not_drop_the_pipelined_request_behind() {
    let cases: [(&str, &[u8]); 2] = [
        (
            "GET with Upgrade: h2c",
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\n\
              Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n\
              GET /host HTTP/1.1\r\nHost: second\r\n\r\n",
        ),
        (
            "CONNECT (answered 404)",
            b"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n\
              GET /host HTTP/1.1\r\nHost: second\r\n\r\n",
        ),
    ];
    let mut failures = Vec::new();
    for server in [tokio_server(), mio_server()] {
        for (what, request) in cases {
            let mut socket = TcpStream::connect(server.addr).unwrap();
            socket.write_all(request).unwrap();
            let got = read_for(&mut socket, Duration::from_secs(3), |got| {
                got.ends_with(b"second\n")
            });
            if !got.ends_with("second\n") {
                failures.push(format!("{} server, {what}: got {got:?}", server.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "the pipelined GET /host was never answered:\n{}",
        failures.join("\n")
    );
}

// ----- 2. one client that uploads faster than the mio server parses -----

/// A client that keeps the mio server's socket full (a chunked upload of
/// one-byte chunks, to a route that discards it, pipelined, reading its
/// answers) must not keep the one-thread server from everyone else: the
/// read budget of cleave-mio exists for that.
#[test]
fn one_busy_uploader_does_not_starve_the_other_connections() {
    for server in [tokio_server(), mio_server()] {
        let mut request =
            b"POST /discard HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..100_000 {
            request.extend_from_slice(b"1\r\na\r\n");
        }
        request.extend_from_slice(b"0\r\n\r\n");
        let busy = Busy::start(TcpStream::connect(server.addr).unwrap(), request);
        thread::sleep(Duration::from_millis(500));
        // Another client, a plain GET.
        let start = Instant::now();
        let answer = TcpStream::connect(server.addr).map(|mut other| {
            other
                .write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                .unwrap();
            read_for(&mut other, Duration::from_secs(5), |got| {
                got.ends_with(b"hello\n")
            })
        });
        let took = start.elapsed();
        busy.stop();
        let name = server.name;
        drop(server);
        let answer = answer.unwrap();
        assert!(
            answer.ends_with("hello\n"),
            "{name} server: the other client got {answer:?} in {took:?} while one client uploaded"
        );
    }
}
