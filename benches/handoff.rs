//! The cross-task write hand-off: cleave-tokio's `WriteHandle` beside
//! bytes-handoff's `WriteHandoff`, on the same discarding writer, with the
//! same shape as bytes-handoff's own bench (a current-thread runtime, a
//! producer task that pushes everything, a queue large enough for all of
//! it, then a barrier). The same-task `Writer` and a direct `write_all` are
//! the lower bounds. A second group runs the fire-and-forget hand-offs on a
//! two-worker runtime, where the producer and the writer run on different
//! threads and contend for the queue.
//!
//! Run: `cargo bench -p cleave-benches --bench handoff`.

use std::hint::black_box;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use bytes_handoff::{WriteHandoff, WriteHandoffConfig};
use cleave_proto::WriteQueueConfig;
use cleave_tokio::{spawn_writer, Writer};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::runtime::{Builder, Runtime};

const PUSHES: usize = 10_000;

/// Takes everything, counts it (atomically, as bytes-handoff's bench
/// writer does), supports vectored writes.
#[derive(Clone, Default)]
struct Discard(Arc<AtomicUsize>);

impl Discard {
    fn written(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

impl AsyncWrite for Discard {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.fetch_add(buf.len(), Ordering::AcqRel);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let n = bufs.iter().map(|b| b.len()).sum();
        self.0.fetch_add(n, Ordering::AcqRel);
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

#[derive(Clone, Copy)]
enum Completion {
    FireAndForget,
    TicketEach,
}

fn runtime() -> Runtime {
    Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// A queue that holds every push: the bench measures the hand-off, not
/// backpressure.
fn roomy(size: usize) -> WriteQueueConfig {
    WriteQueueConfig::default()
        .max_items(PUSHES + 1)
        .and_then(|c| c.max_bytes((PUSHES + 1) * size))
        .expect("valid limits")
}

fn cleave_handle(rt: &Runtime, chunk: &Bytes, completion: Completion) -> usize {
    rt.block_on(async {
        let sink = Discard::default();
        let (handle, task) = spawn_writer(sink.clone(), roomy(chunk.len()));
        let producer = {
            let (handle, chunk) = (handle.clone(), chunk.clone());
            tokio::spawn(async move {
                match completion {
                    Completion::FireAndForget => {
                        for _ in 0..PUSHES {
                            handle.try_send(chunk.clone()).expect("room for all");
                        }
                    }
                    Completion::TicketEach => {
                        let mut tickets = Vec::with_capacity(PUSHES);
                        for _ in 0..PUSHES {
                            tickets.push(handle.send(chunk.clone()).await.expect("open"));
                        }
                        for ticket in tickets {
                            handle.written(ticket).await.expect("written");
                        }
                    }
                }
            })
        };
        producer.await.expect("producer");
        // The barrier: everything pushed is out.
        handle.flush().await.expect("flushed");
        handle.close().await.expect("closed");
        task.await.expect("writer task").expect("writer");
        black_box(sink.written())
    })
}

fn handoff(rt: &Runtime, chunk: &Bytes, completion: Completion) -> usize {
    rt.block_on(async {
        let sink = Discard::default();
        let handoff = WriteHandoff::spawn(
            sink.clone(),
            WriteHandoffConfig::new(PUSHES + 2, (PUSHES + 1) * chunk.len()),
        );
        let producer = {
            let (handoff, chunk) = (handoff.clone(), chunk.clone());
            tokio::spawn(async move {
                match completion {
                    Completion::FireAndForget => {
                        for _ in 0..PUSHES {
                            handoff
                                .try_write_fire_and_forget(chunk.clone())
                                .expect("room for all");
                        }
                    }
                    Completion::TicketEach => {
                        let mut tickets = Vec::with_capacity(PUSHES);
                        for _ in 0..PUSHES {
                            tickets.push(handoff.write(chunk.clone()).await.expect("open"));
                        }
                        for ticket in tickets {
                            ticket.wait().await.expect("written");
                        }
                    }
                }
            })
        };
        producer.await.expect("producer");
        // The barrier bytes-handoff's own bench uses.
        let barrier = handoff.write(Bytes::new()).await.expect("open");
        barrier.wait().await.expect("written");
        handoff.close();
        black_box(sink.written())
    })
}

fn cleave_same_task(rt: &Runtime, chunk: &Bytes) -> usize {
    rt.block_on(async {
        let sink = Discard::default();
        let mut writer = Writer::with_config(sink.clone(), roomy(chunk.len()));
        for _ in 0..PUSHES {
            writer.push(chunk.clone()).expect("room for all");
        }
        writer.flush().await.expect("flushed");
        black_box(sink.written())
    })
}

fn direct(rt: &Runtime, chunk: &Bytes) -> usize {
    rt.block_on(async {
        let mut sink = Discard::default();
        for _ in 0..PUSHES {
            sink.write_all(chunk).await.expect("discard");
        }
        black_box(sink.written())
    })
}

fn multi_thread() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

fn cross_task(c: &mut Criterion) {
    let mt = multi_thread();
    for size in [64usize, 16 * 1024] {
        let chunk = Bytes::from(vec![7u8; size]);
        let mut group = c.benchmark_group(format!("cross_task_2_workers_{size}B_x10k"));
        group.throughput(Throughput::Elements(PUSHES as u64));
        group.bench_function("cleave_handle_fire_and_forget", |b| {
            b.iter(|| cleave_handle(&mt, &chunk, Completion::FireAndForget))
        });
        group.bench_function("handoff_fire_and_forget", |b| {
            b.iter(|| handoff(&mt, &chunk, Completion::FireAndForget))
        });
        group.finish();
    }
    let rt = runtime();
    for size in [64usize, 16 * 1024] {
        let chunk = Bytes::from(vec![7u8; size]);
        let mut group = c.benchmark_group(format!("cross_task_{size}B_x10k"));
        group.throughput(Throughput::Elements(PUSHES as u64));
        group.bench_function("cleave_handle_fire_and_forget", |b| {
            b.iter(|| cleave_handle(&rt, &chunk, Completion::FireAndForget))
        });
        group.bench_function("handoff_fire_and_forget", |b| {
            b.iter(|| handoff(&rt, &chunk, Completion::FireAndForget))
        });
        group.bench_function("cleave_handle_ticket_each", |b| {
            b.iter(|| cleave_handle(&rt, &chunk, Completion::TicketEach))
        });
        group.bench_function("handoff_ticket_each", |b| {
            b.iter(|| handoff(&rt, &chunk, Completion::TicketEach))
        });
        group.bench_function("cleave_writer_same_task", |b| {
            b.iter(|| cleave_same_task(&rt, &chunk))
        });
        group.bench_function("direct_write_all", |b| b.iter(|| direct(&rt, &chunk)));
        group.finish();
    }
}

criterion_group!(handoff_benches, cross_task);
criterion_main!(handoff_benches);
