//! The write side: pushes drained into a writer, fragmentation, encoding,
//! and the measurement behind the coalescing threshold.
//!
//! Run: `cargo bench -p cleave-benches --bench write`.

use std::hint::black_box;
use std::io::{IoSlice, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cleave_benches::{block_on, Counting};
use cleave_proto::{fragments, Encoder, LengthPrefixed, WriteQueue, WriteQueueConfig};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use futures_util::SinkExt;
use tokio_util::codec::{BytesCodec, FramedWrite, LengthDelimitedCodec};

const PUSHES: usize = 10_000;

/// Drains `queue` into `writer` until it is flushed; returns bytes written.
fn drain(queue: &mut WriteQueue, writer: &mut impl Write) -> usize {
    let mut total = 0;
    while !queue.is_flushed() {
        let written = {
            let mut slices = [IoSlice::new(&[]); 64];
            let n = queue.io_slices(&mut slices);
            writer
                .write_vectored(&slices[..n])
                .expect("in-memory writer")
        };
        queue.advance(written).expect("what was handed out");
        total += written;
    }
    total
}

/// cleave: push until the queue is full, drain, go on (the bounded queue's
/// real rhythm); a ticket on every push is free, so it is kept.
fn cleave_queue(items: &[Bytes], writer: &mut impl Write) -> usize {
    let mut queue = WriteQueue::new();
    let mut total = 0;
    for item in items {
        let ticket = match queue.push(item.clone()) {
            Ok(ticket) => ticket,
            Err(rejected) => {
                total += drain(&mut queue, writer);
                queue
                    .push(rejected.into_value())
                    .expect("empty queue takes it")
            }
        };
        black_box(ticket);
    }
    total + drain(&mut queue, writer)
}

/// tokio-util: `FramedWrite` + `BytesCodec` (copies into one buffer).
fn tokio_framed(items: &[Bytes]) -> usize {
    let mut framed = FramedWrite::new(tokio::io::sink(), BytesCodec::new());
    block_on(async {
        for item in items {
            framed.feed(item.clone()).await.expect("sink");
        }
        SinkExt::<Bytes>::flush(&mut framed).await.expect("sink");
    });
    items.len()
}

/// The lower bound: one `write_all` per chunk, nothing queued.
fn direct(items: &[Bytes], writer: &mut impl Write) -> usize {
    for item in items {
        writer.write_all(item).expect("in-memory writer");
    }
    items.len()
}

/// bytes-handoff's runtime-free `MessageHandoff`: send until full, drain,
/// write each message.
fn handoff_messages(items: &[Bytes], writer: &mut impl Write) -> usize {
    let config = bytes_handoff::MessageHandoffConfig::new(1024, 128 * 1024);
    let (tx, rx) = bytes_handoff::MessageHandoff::<Bytes>::new(config).expect("valid config");
    let flush = |writer: &mut dyn Write| {
        for message in rx.drain() {
            writer.write_all(&message[..]).expect("in-memory writer");
        }
    };
    for item in items {
        if let Err(full) = tx.try_send(item.clone(), item.len()) {
            flush(writer);
            let item = full.into_value();
            let len = item.len();
            tx.try_send(item, len).expect("empty queue takes it");
        }
    }
    flush(writer);
    items.len()
}

/// Each item its own allocation (a clone and a drop are reference count
/// updates), or, with `stat`, views of one static buffer (clones and drops
/// cost nothing, so the queue's own work per push shows).
fn items(size: usize, stat: bool) -> Vec<Bytes> {
    if stat {
        let all: &'static [u8] = Box::leak(vec![0x5a; size * PUSHES].into_boxed_slice());
        all.chunks(size).map(Bytes::from_static).collect()
    } else {
        (0..PUSHES).map(|_| Bytes::from(vec![0x5a; size])).collect()
    }
}

fn push_and_drain(c: &mut Criterion) {
    for (size, stat) in [(64usize, false), (16 * 1024, false), (64, true)] {
        let items = items(size, stat);
        let kind = if stat { "_static" } else { "" };
        let mut group = c.benchmark_group(format!("push_drain_{size}B{kind}_x10k"));
        group.throughput(Throughput::Elements(PUSHES as u64));
        // Every variant that writes to a counting sink writes every byte.
        let want: usize = items.iter().map(Bytes::len).sum();
        let written = |run: &dyn Fn(&mut Counting) -> usize| {
            let mut check = Counting::default();
            run(&mut check);
            check.bytes
        };
        assert_eq!(written(&|w| cleave_queue(&items, w)), want);
        assert_eq!(written(&|w| handoff_messages(&items, w)), want);
        assert_eq!(written(&|w| direct(&items, w)), want);
        let mut sink = Counting::default();
        group.bench_function("cleave_write_queue", |b| {
            b.iter(|| cleave_queue(&items, &mut sink))
        });
        group.bench_function("tokio_framed_write_bytes_codec", |b| {
            b.iter(|| tokio_framed(&items))
        });
        group.bench_function("handoff_message_queue", |b| {
            b.iter(|| handoff_messages(&items, &mut sink))
        });
        group.bench_function("direct_write_all", |b| b.iter(|| direct(&items, &mut sink)));
        group.finish();
    }
}

/// The old way: `Vec::split_off` moves the rest of the payload each time.
fn split_off_loop(payload: &[u8], piece: usize) -> usize {
    let mut rest = payload.to_vec();
    let mut count = 0;
    while !rest.is_empty() {
        let tail = rest.split_off(piece.min(rest.len()));
        black_box(&rest);
        rest = tail;
        count += 1;
    }
    count
}

fn fragment(c: &mut Criterion) {
    let payload = Bytes::from(vec![0x5a; 1 << 20]);
    let piece = 1420;
    let mut group = c.benchmark_group("fragment_1MiB_into_1420B");
    group.throughput(Throughput::Bytes(1 << 20));
    group.bench_function("cleave_fragments", |b| {
        b.iter(|| fragments(payload.clone(), piece).map(black_box).count())
    });
    group.bench_function("bytes_split_to_loop", |b| {
        b.iter(|| {
            let mut rest = payload.clone();
            let mut count = 0;
            while !rest.is_empty() {
                black_box(rest.split_to(piece.min(rest.len())));
                count += 1;
            }
            count
        })
    });
    group.bench_function("bytes_slice_loop", |b| {
        b.iter(|| {
            let mut count = 0;
            let mut at = 0;
            while at < payload.len() {
                let end = (at + piece).min(payload.len());
                black_box(payload.slice(at..end));
                at = end;
                count += 1;
            }
            count
        })
    });
    group.sample_size(10);
    group.bench_function("vec_split_off_loop", |b| {
        b.iter(|| split_off_loop(&payload, piece))
    });
    group.finish();
}

fn encode_and_drain(c: &mut Criterion) {
    for size in [24usize, 1024] {
        let items: Vec<Bytes> = (0..PUSHES).map(|_| Bytes::from(vec![0x5a; size])).collect();
        let mut group = c.benchmark_group(format!("encode_drain_length_{}B_x10k", size));
        group.throughput(Throughput::Elements(PUSHES as u64));
        let mut sink = Counting::default();
        group.bench_function("cleave_encode_push_frame", |b| {
            b.iter(|| {
                let mut codec = LengthPrefixed::new();
                let mut queue = WriteQueue::new();
                for item in &items {
                    let frame = codec.encode(item.clone()).expect("fits");
                    if let Err(rejected) = queue.push_frame(frame) {
                        drain(&mut queue, &mut sink);
                        queue.push_frame(rejected.into_value()).expect("room");
                    }
                }
                drain(&mut queue, &mut sink)
            })
        });
        group.bench_function("tokio_length_delimited_framed_write", |b| {
            b.iter(|| {
                let mut framed = FramedWrite::new(tokio::io::sink(), LengthDelimitedCodec::new());
                block_on(async {
                    for item in &items {
                        framed.feed(item.clone()).await.expect("sink");
                    }
                    SinkExt::<Bytes>::flush(&mut framed).await.expect("sink");
                })
            })
        });
        group.bench_function("manual_header_copy_write_all", |b| {
            b.iter(|| {
                let mut out = BytesMut::with_capacity(64 * 1024);
                for item in &items {
                    out.extend_from_slice(&(item.len() as u32).to_be_bytes());
                    out.extend_from_slice(item);
                    if out.len() >= 64 * 1024 {
                        sink.write_all(&out).expect("sink");
                        out.clear();
                    }
                }
                sink.write_all(&out).expect("sink");
            })
        });
        group.finish();
    }
}

/// A real socket with a reader thread that throws everything away, so a
/// `writev` pays the kernel's per-`iovec` cost.
struct Drained {
    writer: UnixStream,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drained {
    fn new() -> Self {
        let (writer, mut reader) = UnixStream::pair().expect("socketpair");
        let reader = std::thread::spawn(move || {
            let mut buf = vec![0u8; 256 * 1024];
            while matches!(reader.read(&mut buf), Ok(n) if n > 0) {}
        });
        Self {
            writer,
            reader: Some(reader),
        }
    }
}

impl Drop for Drained {
    fn drop(&mut self) {
        let _ = self.writer.shutdown(std::net::Shutdown::Write);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// Copy small writes into one buffer, or hand each out as its own `iovec`?
/// Both variants write 2048 pushes of one size through `writev` on a real
/// socket; the threshold is where copying stops paying.
fn coalesce_threshold(c: &mut Criterion) {
    let mut socket = Drained::new();
    let mut group = c.benchmark_group("coalesce_threshold_writev_2048_pushes");
    for size in [32usize, 128, 256, 512, 1024, 2048, 4096] {
        let items: Vec<Bytes> = (0..2048).map(|_| Bytes::from(vec![0x5a; size])).collect();
        group.throughput(Throughput::Elements(items.len() as u64));
        for (name, below) in [("iovec_each", 0usize), ("copy_into_run", size + 1)] {
            let config = WriteQueueConfig::default()
                .coalesce_below(below)
                .max_items(4096)
                .expect("valid")
                .max_bytes(16 << 20)
                .expect("valid");
            group.bench_with_input(BenchmarkId::new(name, size), &items, |b, items| {
                b.iter(|| {
                    let mut queue = WriteQueue::with_config(config);
                    for item in items {
                        queue.push(item.clone()).expect("room");
                    }
                    drain(&mut queue, &mut socket.writer)
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = write;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = push_and_drain, fragment, encode_and_drain, coalesce_threshold
}
criterion_main!(write);
