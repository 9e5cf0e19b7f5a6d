//! The read side: input to owned frames, beside the peers.
//!
//! Every variant gets the same bytes in the same pieces (64 KiB reads:
//! "coalesced"; 64-byte reads: "fragmented"; for lines also "straddling":
//! 64-byte reads with every line split between two of them) and must
//! produce each frame as an owned value without its framing. The lower
//! bound is a hand-written `BytesMut` loop that does the least work that
//! still yields owned `Bytes` frames (a buffer sized once, no limits, no
//! error handling). One group runs the same lines
//! through a connection (`Conn<Framed<Lines>>`) beside the bare decoder
//! loop, so the cost of the connection layer shows.
//!
//! Run: `cargo bench -p cleave-benches --bench read`.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use cleave_benches::{
    block_on, cleave_run, length_input, lines_input, manual_lines, pieces_of, tally, varint_input,
    Pieces, Tally, COALESCED, FRAGMENTED,
};
use cleave_proto::conn::{Conn, Framed};
use cleave_proto::{Decoder, LengthPrefixed, Lines, LinesConfig, RecvBuf, RecvBufConfig, Varint};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

fn tokio_run<C>(mut codec: C, input: &[u8], piece: usize, len: impl Fn(&C::Item) -> usize) -> Tally
where
    C: tokio_util::codec::Decoder,
    C::Error: std::fmt::Debug,
{
    let mut buf = BytesMut::new();
    let mut t = (0, 0);
    for chunk in pieces_of(input, piece) {
        buf.extend_from_slice(chunk);
        while let Some(frame) = codec.decode(&mut buf).unwrap() {
            t.0 += 1;
            t.1 += len(&frame);
            black_box(frame);
        }
    }
    t
}

/// bytes-handoff's `HandoffBuffer`, as its README shows: read what is
/// available, find the newline, `split_prefix` (default policy: frames up to
/// 256 bytes are copied out).
fn handoff_lines(input: &[u8], piece: usize) -> Tally {
    let mut reader = Pieces::new(input, piece);
    let mut buf = bytes_handoff::HandoffBuffer::new(8 << 20);
    let mut t = (0, 0);
    while !reader.is_empty() {
        block_on(buf.read_available(&mut reader)).unwrap();
        while let Some(i) = memchr::memchr(b'\n', buf.peek()) {
            let mut line = buf.split_prefix(i + 1).unwrap();
            line.truncate(i);
            tally(&mut t, &line);
            black_box(line);
        }
    }
    t
}

/// Lower bound for length-prefixed frames: one buffer sized once.
fn manual_length(input: &[u8], piece: usize) -> Tally {
    let mut buf = BytesMut::with_capacity(2 * COALESCED);
    let mut t = (0, 0);
    for chunk in pieces_of(input, piece) {
        buf.extend_from_slice(chunk);
        while buf.len() >= 4 {
            let n = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() < 4 + n {
                break;
            }
            buf.advance(4);
            let frame = buf.split_to(n).freeze();
            tally(&mut t, &frame);
            black_box(frame);
        }
    }
    t
}

/// Lower bound for varint frames: inline LEB128, split, freeze; one
/// buffer sized once.
fn manual_varint(input: &[u8], piece: usize) -> Tally {
    let mut buf = BytesMut::with_capacity(2 * COALESCED);
    let mut t = (0, 0);
    for chunk in pieces_of(input, piece) {
        buf.extend_from_slice(chunk);
        loop {
            let mut n = 0u64;
            let mut head = 0;
            for (i, &b) in buf.iter().take(10).enumerate() {
                n |= u64::from(b & 0x7f) << (7 * i);
                if b & 0x80 == 0 {
                    head = i + 1;
                    break;
                }
            }
            if head == 0 || buf.len() < head + n as usize {
                break;
            }
            buf.advance(head);
            let frame = buf.split_to(n as usize).freeze();
            tally(&mut t, &frame);
            black_box(frame);
        }
    }
    t
}

/// prost's length-delimiter helpers around the same split.
fn prost_varint(input: &[u8], piece: usize) -> Tally {
    let mut buf = BytesMut::new();
    let mut t = (0, 0);
    for chunk in pieces_of(input, piece) {
        buf.extend_from_slice(chunk);
        while let Ok(n) = prost::decode_length_delimiter(&buf[..]) {
            let head = prost::length_delimiter_len(n);
            if buf.len() < head + n {
                break;
            }
            buf.advance(head);
            let frame = buf.split_to(n).freeze();
            tally(&mut t, &frame);
            black_box(frame);
        }
    }
    t
}

const MODES: [(&str, usize); 2] = [("coalesced", COALESCED), ("fragmented", FRAGMENTED)];

/// Checks that every variant decodes the same frames before timing them.
fn agree(name: &str, results: &[(&str, Tally)]) {
    for (variant, t) in results {
        assert_eq!(
            *t, results[0].1,
            "{name}: {variant} disagrees with {}",
            results[0].0
        );
    }
}

fn lines(c: &mut Criterion) {
    let input = lines_input(16 * 1024, 64); // 1 MiB of 64-byte lines
                                            // The same lines after a 32-byte one: in 64-byte pieces, every 64-byte
                                            // line straddles two feeds.
    let mut straddled = lines_input(1, 32);
    straddled.extend_from_slice(&input);
    let config = RecvBufConfig::default();
    let bare = LinesConfig::default().strip_cr(false);
    let mut group = c.benchmark_group("lines_64B_1MiB");
    group.throughput(Throughput::Elements(16 * 1024));
    let modes = [
        ("coalesced", COALESCED, &input),
        ("fragmented", FRAGMENTED, &input),
        ("straddling", FRAGMENTED, &straddled),
    ];
    for (mode, piece, input) in modes {
        agree(
            "lines",
            &[
                ("manual", manual_lines(input, piece)),
                (
                    "cleave",
                    cleave_run(Lines::with_config(bare), config, input, piece),
                ),
                ("handoff", handoff_lines(input, piece)),
                (
                    "LinesCodec",
                    tokio_run(
                        tokio_util::codec::LinesCodec::new(),
                        input,
                        piece,
                        String::len,
                    ),
                ),
                // No line of the input ends in `\r` or is not UTF-8: the
                // other configurations give the same lines.
                (
                    "cleave strip_cr",
                    cleave_run(Lines::new(), config, input, piece),
                ),
                (
                    "cleave utf8",
                    cleave_run(Lines::with_config(bare.utf8(true)), config, input, piece),
                ),
                (
                    "AnyDelimiterCodec",
                    tokio_run(
                        tokio_util::codec::AnyDelimiterCodec::new(b"\n".to_vec(), b"\n".to_vec()),
                        input,
                        piece,
                        Bytes::len,
                    ),
                ),
            ],
        );
        group.bench_function(BenchmarkId::new("manual_bytesmut", mode), |b| {
            b.iter(|| manual_lines(input, piece))
        });
        group.bench_function(BenchmarkId::new("cleave_lines", mode), |b| {
            b.iter(|| cleave_run(Lines::with_config(bare), config, input, piece))
        });
        group.bench_function(BenchmarkId::new("cleave_lines_strip_cr", mode), |b| {
            b.iter(|| cleave_run(Lines::new(), config, input, piece))
        });
        group.bench_function(BenchmarkId::new("cleave_lines_utf8", mode), |b| {
            b.iter(|| cleave_run(Lines::with_config(bare.utf8(true)), config, input, piece))
        });
        group.bench_function(BenchmarkId::new("handoff_buffer", mode), |b| {
            b.iter(|| handoff_lines(input, piece))
        });
        group.bench_function(BenchmarkId::new("tokio_lines_codec", mode), |b| {
            b.iter(|| {
                tokio_run(
                    tokio_util::codec::LinesCodec::new(),
                    input,
                    piece,
                    String::len,
                )
            })
        });
        group.bench_function(BenchmarkId::new("tokio_any_delimiter", mode), |b| {
            b.iter(|| {
                let codec =
                    tokio_util::codec::AnyDelimiterCodec::new(b"\n".to_vec(), b"\n".to_vec());
                tokio_run(codec, input, piece, Bytes::len)
            })
        });
    }
    group.finish();
}

fn length_prefixed(c: &mut Criterion) {
    for body in [24usize, 1024] {
        let count = 100_000;
        let input = length_input(count, body);
        let config = RecvBufConfig::default();
        let mut group = c.benchmark_group(format!("length_{body}B_x100k"));
        group.throughput(Throughput::Elements(count as u64));
        if body > 100 {
            group.sample_size(10);
        }
        for (mode, piece) in MODES {
            let tokio_codec = tokio_util::codec::LengthDelimitedCodec::new;
            agree(
                "length",
                &[
                    ("manual", manual_length(&input, piece)),
                    (
                        "cleave",
                        cleave_run(LengthPrefixed::new(), config, &input, piece),
                    ),
                    (
                        "tokio",
                        tokio_run(tokio_codec(), &input, piece, BytesMut::len),
                    ),
                ],
            );
            group.bench_function(BenchmarkId::new("manual_bytesmut", mode), |b| {
                b.iter(|| manual_length(&input, piece))
            });
            group.bench_function(BenchmarkId::new("cleave_length_prefixed", mode), |b| {
                b.iter(|| cleave_run(LengthPrefixed::new(), config, &input, piece))
            });
            group.bench_function(BenchmarkId::new("tokio_length_delimited", mode), |b| {
                b.iter(|| tokio_run(tokio_codec(), &input, piece, BytesMut::len))
            });
        }
        group.finish();
    }
}

fn varint(c: &mut Criterion) {
    let count = 100_000;
    let input = varint_input(count, 24);
    let config = RecvBufConfig::default();
    let mut group = c.benchmark_group("varint_24B_x100k");
    group.throughput(Throughput::Elements(count as u64));
    for (mode, piece) in MODES {
        agree(
            "varint",
            &[
                ("manual", manual_varint(&input, piece)),
                ("cleave", cleave_run(Varint::new(), config, &input, piece)),
                ("prost", prost_varint(&input, piece)),
            ],
        );
        group.bench_function(BenchmarkId::new("manual_bytesmut", mode), |b| {
            b.iter(|| manual_varint(&input, piece))
        });
        group.bench_function(BenchmarkId::new("cleave_varint", mode), |b| {
            b.iter(|| cleave_run(Varint::new(), config, &input, piece))
        });
        group.bench_function(BenchmarkId::new("prost_delimiter", mode), |b| {
            b.iter(|| prost_varint(&input, piece))
        });
    }
    group.finish();
}

/// Reads `input` into the buffer's spare room in reads of at most `piece`
/// bytes, as an adapter does, and decodes lines after each; with `idle`,
/// each read is a burst after which the connection goes idle: the buffer
/// gives back what it does not need (`shrink_to_fit`), as the adapters do
/// when the next read finds nothing.
fn cleave_read_lines(input: &[u8], piece: usize, idle: bool) -> Tally {
    let mut buf = RecvBuf::new();
    let mut lines = Lines::new();
    let mut t = (0, 0);
    for chunk in input.chunks(piece) {
        let mut chunk = chunk;
        while !chunk.is_empty() {
            let spare = buf.spare_mut().unwrap();
            let n = spare.len().min(chunk.len());
            spare[..n].copy_from_slice(&chunk[..n]);
            buf.commit(n).unwrap();
            chunk = &chunk[n..];
        }
        while let Some(frame) = lines.decode(&mut buf).unwrap() {
            tally(&mut t, &frame);
            black_box(frame);
        }
        if idle {
            buf.shrink_to_fit();
        }
    }
    t
}

/// What giving memory back when idle costs: a burst of lines then idle,
/// every read, beside the same reads with the block kept.
fn idle_release(c: &mut Criterion) {
    let input = lines_input(16 * 1024, 64);
    let mut group = c.benchmark_group("lines_64B_1MiB_idle_after_each_read");
    group.throughput(Throughput::Elements(16 * 1024));
    for (mode, piece) in [
        ("reads_8K", 8 * 1024),
        ("reads_1460B", 1460),
        ("reads_64B", FRAGMENTED),
    ] {
        let kept = cleave_read_lines(&input, piece, false);
        assert_eq!(kept, cleave_read_lines(&input, piece, true));
        assert_eq!(kept, manual_lines(&input, piece));
        group.bench_function(BenchmarkId::new("block_kept", mode), |b| {
            b.iter(|| cleave_read_lines(black_box(&input), piece, false))
        });
        group.bench_function(
            BenchmarkId::new("shrink_to_fit_after_each_read", mode),
            |b| b.iter(|| cleave_read_lines(black_box(&input), piece, true)),
        );
    }
    group.finish();
}

/// The lines through a connection, as a Sans-IO driver reads them: each
/// read `feed` into a `Conn<Framed<Lines>>`, then `poll_event` until it
/// needs more.
fn conn_lines(config: LinesConfig, input: &[u8], piece: usize) -> Tally {
    let now = Duration::ZERO;
    let mut conn = Conn::new(Framed::new(Lines::with_config(config)), now);
    let mut t = (0, 0);
    for chunk in pieces_of(input, piece) {
        conn.feed(chunk, now).unwrap();
        while let Some(frame) = conn.poll_event().unwrap() {
            tally(&mut t, &frame);
            black_box(frame);
        }
    }
    t
}

/// What the connection layer costs: the decoder loop over a bare
/// `RecvBuf` beside the same lines through `Conn::feed` + `poll_event`.
fn through_conn(c: &mut Criterion) {
    let input = lines_input(16 * 1024, 64);
    let bare = LinesConfig::default().strip_cr(false);
    let mut group = c.benchmark_group("lines_64B_1MiB_conn");
    group.throughput(Throughput::Elements(16 * 1024));
    for (mode, piece) in MODES {
        let decoder = || Lines::with_config(bare);
        let config = RecvBufConfig::default();
        agree(
            "conn",
            &[
                ("decoder", cleave_run(decoder(), config, &input, piece)),
                ("conn", conn_lines(bare, &input, piece)),
            ],
        );
        group.bench_function(BenchmarkId::new("decoder_recv_buf", mode), |b| {
            b.iter(|| cleave_run(decoder(), config, &input, piece))
        });
        group.bench_function(BenchmarkId::new("conn_feed_poll_event", mode), |b| {
            b.iter(|| conn_lines(bare, &input, piece))
        });
    }
    group.finish();
}

criterion_group! {
    name = read;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = lines, length_prefixed, varint, idle_release, through_conn
}
criterion_main!(read);
