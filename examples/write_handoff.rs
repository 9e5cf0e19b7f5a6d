//! Many tasks write to one connection: clones of one `WriteHandle` from
//! `spawn_writer` are shared by producer tasks, which queue messages
//! fire-and-forget with `try_send`, fall back to `send().await` when the
//! queue is full, and wait for one ticket; then the owner flushes and
//! closes. The reader on the other end checks that every byte arrived, in
//! order for each producer.
//!
//! ```text
//! cargo run --example write_handoff
//! ```
//!
//! Each message is one line, `<producer> <seq> <padding>\n`, so the reader
//! can cut them with `Lines` and check them.

use std::net::SocketAddr;
use std::time::Duration;

use cleave_proto::{Bytes, Lines, Refusal, WriteQueueConfig};
use cleave_tokio::{spawn_writer, FrameReader, WriteHandle};
use futures_util::StreamExt;
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const PRODUCERS: usize = 4;
const MESSAGES: usize = 2_000;

/// Message `seq` of `producer`: its length varies from 10 bytes to about
/// 2 KiB, so some are copied into the queue's runs and some are not.
fn message(producer: usize, seq: usize) -> Bytes {
    let pad = (seq * 7919 + producer * 104_729) % 2048;
    let mut line = format!("{producer} {seq} ").into_bytes();
    line.resize(line.len() + pad, b'a' + (seq % 26) as u8);
    line.push(b'\n');
    Bytes::from(line)
}

/// What one producer did.
#[derive(Debug, Default)]
struct Sent {
    bytes: usize,
    fire_and_forget: usize,
    waited_for_room: usize,
}

/// Queues `MESSAGES` messages through its clone of the handle.
async fn produce(handle: WriteHandle, producer: usize) -> Result<Sent, BoxError> {
    let mut sent = Sent::default();
    for seq in 0..MESSAGES {
        let msg = message(producer, seq);
        sent.bytes += msg.len();
        let ticket = match handle.try_send(msg) {
            // Queued: nobody waits for it.
            Ok(ticket) => {
                sent.fire_and_forget += 1;
                ticket
            }
            // Full: wait for room (the queue's limits are the backpressure).
            Err(rejected) if matches!(rejected.error(), Refusal::Full(_)) => {
                sent.waited_for_room += 1;
                handle.send(rejected.into_value()).await?
            }
            Err(rejected) => return Err(rejected.into_parts().0.into()),
        };
        if producer == 0 && seq == MESSAGES / 2 {
            // Wait for this one message to be handed to the socket.
            handle.written(ticket).await?;
            println!(
                "producer 0: message {seq} written (it ends at byte {} of the stream)",
                ticket.offset()
            );
        }
    }
    Ok(sent)
}

/// Reads every message and checks it; returns (messages, bytes).
async fn read_all(listener: TcpListener) -> Result<(usize, usize), BoxError> {
    let (socket, _) = listener.accept().await?;
    let mut lines = FrameReader::new(socket, Lines::new());
    let mut next = [0usize; PRODUCERS];
    let (mut count, mut bytes) = (0, 0);
    while let Some(line) = lines.next().await {
        let line = line?;
        let text = std::str::from_utf8(&line)?;
        let mut fields = text.splitn(3, ' ');
        let producer: usize = fields.next().ok_or("no producer")?.parse()?;
        let seq: usize = fields.next().ok_or("no seq")?.parse()?;
        let expected = next.get_mut(producer).ok_or("unknown producer")?;
        // Within a producer, messages arrive in the order it sent them.
        let want = message(producer, seq);
        if seq != *expected || line[..] != want[..want.len() - 1] {
            return Err(
                format!("producer {producer}: got message {seq}, wanted {expected}").into(),
            );
        }
        *expected += 1;
        count += 1;
        bytes += line.len() + 1;
    }
    if next.iter().any(|&n| n != MESSAGES) {
        return Err(format!("messages missing: {next:?}").into());
    }
    Ok((count, bytes))
}

async fn run(addr: SocketAddr) -> Result<(usize, usize), BoxError> {
    let socket = TcpStream::connect(addr).await?;
    // A small queue (32 KiB, 64 writes) so producers meet backpressure.
    let config = WriteQueueConfig::default()
        .max_bytes(32 * 1024)?
        .max_items(64)?;
    let (handle, writer_task) = spawn_writer(socket, config);

    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| tokio::spawn(produce(handle.clone(), p)))
        .collect();
    let mut total = 0;
    for (p, task) in producers.into_iter().enumerate() {
        let sent = task.await??;
        println!(
            "producer {p}: {MESSAGES} messages, {} bytes: {} queued at once, {} waited for room",
            sent.bytes, sent.fire_and_forget, sent.waited_for_room
        );
        total += sent.bytes;
    }
    // Everything pushed so far is on the socket once this returns.
    handle.flush().await?;
    println!("flushed; {} bytes pending", handle.pending_bytes());
    // No more writes: drain, shut the socket down, end the writer task.
    handle.close().await?;
    writer_task.await??;
    Ok((PRODUCERS * MESSAGES, total))
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let reader = tokio::spawn(read_all(listener));
    let both = async {
        let sent = run(addr).await?;
        let received = reader.await??;
        Ok::<_, BoxError>((sent, received))
    };
    let ((messages, bytes), (got, got_bytes)) =
        tokio::time::timeout(Duration::from_secs(20), both).await??;
    println!("sent {messages} messages ({bytes} bytes) from {PRODUCERS} tasks on one connection");
    println!("read {got} messages ({got_bytes} bytes), each producer's in order");
    if (messages, bytes) != (got, got_bytes) {
        return Err("bytes went missing".into());
    }
    Ok(())
}
