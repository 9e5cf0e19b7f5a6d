//! The rpc server (`rpc_server::serve`) against a client that
//! pipelines requests and never reads its answers. The answers back up
//! (the socket, then the writer's queue fill); the server must then stop
//! taking requests, so that what one connection holds stays bounded.

use std::io::Write;
use std::time::{Duration, Instant};

use cleave_proto::codec::message::ProstCodec;
use cleave_proto::{Bytes, Encoder};

#[allow(dead_code)]
#[path = "../rpc_client.rs"]
mod rpc_client;

use rpc_client::rpc_server::{self, Op, Request};

#[test]
fn a_client_that_never_reads_cannot_make_the_server_hold_unbounded_requests() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(rpc_server::serve(listener));

    // 40 000 echo requests of 1 KiB each: 40 MiB, far more than the
    // socket buffers, the receive buffer and the write queue (128 KiB)
    // hold together.
    let mut codec = ProstCodec::<Request>::new();
    let mut chunk = Vec::new();
    for id in 0..1000u64 {
        let frame = codec
            .encode(Request {
                id,
                op: Some(Op::Echo(Bytes::from(vec![7u8; 1024]))),
            })
            .unwrap();
        chunk.extend_from_slice(frame.head());
        chunk.extend_from_slice(frame.body());
    }
    let mut socket = std::net::TcpStream::connect(addr).unwrap();
    socket
        .set_write_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let (start, mut sent) = (Instant::now(), 0usize);
    for _ in 0..40 {
        match socket.write_all(&chunk) {
            Ok(()) => sent += chunk.len(),
            Err(_) => break, // blocked for 2 s: the server pushes back
        }
        if start.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    let alive = runtime.metrics().num_alive_tasks();
    drop(socket);
    runtime.shutdown_background();
    assert!(
        sent < 24 << 20,
        "the server took {:.1} MiB of requests from a client that reads nothing \
         ({alive} tasks alive, each holding a request and its answer)",
        sent as f64 / f64::from(1 << 20)
    );
}
