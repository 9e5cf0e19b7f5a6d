//! Length-prefixed frames over TCP with tokio: a client encodes frames
//! with `LengthPrefixed` and hands them to a spawned writer through its
//! `WriteHandle` (`try_send`, tickets, `written(ticket).await`); the
//! server cuts them out again with a `FrameReader` and prints their sizes.
//!
//! ```text
//! cargo run --example length_prefix
//! ```
//!
//! Each frame is a 4-byte big-endian length and the body. The bodies are
//! never copied on the way out: the encoder puts the length in an inline
//! head and the queue hands the body to `writev` as it is.

use std::net::SocketAddr;
use std::time::Duration;

use cleave_proto::{Bytes, Encoder, LengthPrefixed, Refusal, WriteQueueConfig};
use cleave_tokio::{spawn_writer, FrameReader};
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Body sizes the client sends: empty, tiny, around the coalescing
/// threshold (512 B), and larger than the queue (64 KiB here) and than one
/// writev piece.
const SIZES: [usize; 9] = [0, 1, 24, 511, 512, 4096, 65_536, 300_000, 17];

/// A body whose bytes say which frame they belong to.
fn body(index: usize, len: usize) -> Bytes {
    Bytes::from(vec![b'a' + index as u8; len])
}

/// Reads frames until the client closes, checking each body.
async fn server(listener: TcpListener) -> Result<usize, BoxError> {
    let (socket, peer) = listener.accept().await?;
    println!("server: connection from {peer}");
    let mut frames = FrameReader::new(socket, LengthPrefixed::new());
    let mut count = 0;
    while let Some(frame) = frames.next().await {
        // A bad length or a stream cut inside a frame is a typed error.
        let frame = frame?;
        let expected = body(count, SIZES.get(count).copied().unwrap_or(0));
        println!(
            "server: frame {count}: {:>7} bytes {}",
            frame.len(),
            if frame == expected { "ok" } else { "CORRUPT" }
        );
        if frame != expected {
            return Err(format!("frame {count} differs from what was sent").into());
        }
        count += 1;
    }
    println!("server: end of stream after {count} frames");
    Ok(count)
}

/// Encodes and sends the frames through a spawned writer.
async fn client(addr: SocketAddr) -> Result<(), BoxError> {
    let socket = TcpStream::connect(addr).await?;
    // A small queue (64 KiB), so the large frames meet backpressure.
    let config = WriteQueueConfig::default().max_bytes(64 * 1024)?;
    let (handle, writer_task) = spawn_writer(socket, config);
    let mut codec = LengthPrefixed::new();

    let mut last = None;
    for (i, &len) in SIZES.iter().enumerate() {
        let mut frame = codec.encode(body(i, len))?;
        let ticket = loop {
            // Queue now if there is room; else the frame comes back whole.
            match handle.try_send(frame) {
                Ok(ticket) => break ticket,
                Err(rejected) => {
                    let (why, back) = rejected.into_parts();
                    let full = matches!(why, Refusal::Full(_));
                    let Some(last) = last.filter(|_| full) else {
                        return Err(why.into()); // closed, or the writer failed
                    };
                    println!("client: queue full ({why})");
                    // Everything queued is out once the last push is
                    // written: then there is room.
                    handle.written(last).await?;
                    println!("client:   ticket {} written, trying again", last.offset());
                    frame = back;
                }
            }
        };
        // A ticket is where the push ends in the connection's byte stream;
        // it costs nothing to keep and nothing to ignore.
        println!(
            "client: queued frame {i} ({len} bytes), ticket {}",
            ticket.offset()
        );
        last = Some(ticket);
    }
    if let Some(last) = last {
        handle.written(last).await?;
        println!("client: last frame written (ticket {})", last.offset());
    }
    // Close: write what is queued, flush, shut the socket down.
    handle.close().await?;
    writer_task.await??;
    println!("client: closed");
    Ok(())
}

// One thread: the spawned writer runs only when the client awaits, so the
// client's burst of pushes fills the queue and meets backpressure the same
// way on every run.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    println!("server on {addr}");
    let server = tokio::spawn(server(listener));
    let run = async {
        client(addr).await?;
        server.await?
    };
    let received = tokio::time::timeout(Duration::from_secs(10), run).await??;
    let bytes: usize = SIZES.iter().map(|len| len + 4).sum();
    println!(
        "{received} of {} frames arrived intact ({bytes} bytes on the wire)",
        SIZES.len()
    );
    if received != SIZES.len() {
        return Err("frames went missing".into());
    }
    Ok(())
}
