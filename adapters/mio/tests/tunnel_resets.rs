//! A client that resets mid-upload: the backend sees a reset, never a
//! clean end, through cleave-mio's splicing `Tunnel`. The reset races the
//! tunnel's reads, so the test runs many short trials.

use std::io::{self, Write};
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Pipes, PipesConfig, Side, Tunnel};
use cleave_proto::Bytes;
use mio::net::TcpStream;
use mio::{Events, Poll, Token};

#[allow(dead_code)]
#[path = "support/net.rs"]
mod net;
use net::{accept, connect, listen, read_to_end_or_error, reset, STUCK};

/// Runs a tunnel between the proxy's two sockets to its end; its result.
fn run(
    client: std::net::TcpStream,
    backend: std::net::TcpStream,
    pipes: &Pipes,
) -> io::Result<(u64, u64)> {
    client.set_nonblocking(true).unwrap();
    backend.set_nonblocking(true).unwrap();
    let (client, backend) = (TcpStream::from_std(client), TcpStream::from_std(backend));
    let mut tunnel = Tunnel::new(client, backend, Bytes::new(), pipes);
    let mut poll = Poll::new().unwrap();
    tunnel
        .register(poll.registry(), Token(0), Token(1))
        .unwrap();
    let mut events = Events::with_capacity(16);
    let started = Instant::now();
    while !tunnel.is_finished() {
        assert!(started.elapsed() < STUCK, "the tunnel is stuck");
        poll.poll(&mut events, Some(Duration::from_secs(1)))
            .unwrap();
        for event in &events {
            let side = if event.token() == Token(0) {
                Side::Client
            } else {
                Side::Backend
            };
            let mut more = tunnel.on_event(side, event);
            while more {
                more = tunnel.on_ready();
            }
        }
    }
    let result = match tunnel.result().expect("finished") {
        Ok(written) => Ok(*written),
        Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
    };
    tunnel.deregister(poll.registry()).unwrap();
    drop(tunnel);
    result
}

/// A client streams one-byte writes and then resets: the backend must
/// never read a clean end of stream (a reset stays a reset).
#[test]
fn splice_a_client_reset_never_reaches_the_backend_as_a_clean_end() {
    let (listener, addr) = listen();
    let (backends, backend_addr) = listen();
    let pipes = Pipes::new(PipesConfig::default().max_open(Some(2)));
    let started = Instant::now();
    for trial in 0..4000usize {
        if started.elapsed() > Duration::from_secs(10) {
            break;
        }
        let writes = 1 + (trial * 7) % 400;
        let client = thread::spawn(move || {
            let mut client = connect(addr);
            client.set_nodelay(true).unwrap();
            for _ in 0..writes {
                if client.write_all(b"x").is_err() {
                    break;
                }
            }
            reset(client); // dropped: RST
        });
        let proxy_client = accept(&listener);
        let proxy_backend = connect(backend_addr);
        let mut backend = accept(&backends);
        let backend_side = thread::spawn(move || {
            let (got, end) = read_to_end_or_error(&mut backend, writes);
            drop(backend); // lets a tunnel that took the reset for an end finish
            (got.len(), end)
        });
        let result = run(proxy_client, proxy_backend, &pipes);
        let (got, end) = backend_side.join().unwrap();
        client.join().unwrap();
        assert!(
            end.is_err(),
            "trial {trial}: the client reset after {writes} one-byte writes; the backend read {got} \
             bytes then a clean end of stream; the tunnel returned {result:?}"
        );
    }
}
