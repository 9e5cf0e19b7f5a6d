//! Checked frames and prost messages, beside the peers and lower bounds.
//!
//! - **Decode**: the same frames of 64 B and 16 KiB for each checksum, fed
//!   in 64 KiB reads, cut by `Checked` and by a hand-written `BytesMut` loop
//!   that calls the same checksum crate (the lower bound); and the frames
//!   without a checksum cut by `LengthPrefixed` (flatstream's layout), so
//!   the checksum's cost shows as a ratio.
//! - **Encode**: a payload becomes a frame (header and checksum, payload
//!   untouched), by `Checked` and by hand.
//! - **prost**: messages behind a varint length decoded by `ProstCodec` and
//!   by protosocket-prost's `ProstDecoder` over the same reads, and encoded
//!   by both.
//!
//! Run: `cargo bench -p cleave-benches --bench checked`.

use std::hint::black_box;
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use cleave_benches::COALESCED;
use cleave_proto::codec::message::ProstCodec;
use cleave_proto::{
    Checked, Checksum, Decoder, Encoder, LengthConfig, LengthPrefixed, RecvBuf, RecvBufConfig,
};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

const ALGORITHMS: [Checksum; 4] = [
    Checksum::None,
    Checksum::Crc16,
    Checksum::Crc32,
    Checksum::Xxh3,
];

/// Frames and payload bytes, to check every variant cut the same.
type Tally = (usize, usize);

static CRC16: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// `count` frames of `len`-byte payloads with `checksum`.
fn input(checksum: Checksum, count: usize, len: usize) -> Vec<u8> {
    let payload: Bytes = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    let frame = Checked::new(checksum).unwrap().encode(payload).unwrap();
    [frame.head(), frame.body()].concat().repeat(count)
}

fn cleave_run<D: Decoder<Item = Bytes>>(mut decoder: D, input: &[u8]) -> Tally {
    let mut buf = RecvBuf::with_config(RecvBufConfig::default());
    let mut t = (0, 0);
    for chunk in input.chunks(COALESCED) {
        buf.feed(chunk).unwrap();
        while let Some(frame) = decoder.decode(&mut buf).unwrap() {
            t.0 += 1;
            t.1 += frame.len();
            black_box(frame);
        }
    }
    t
}

/// The lower bound: a `BytesMut` the reads are appended to; the length,
/// the `W`-byte checksum from the same crate over the payload in place,
/// split, freeze. No limits, and a mismatch is only counted. The checksum
/// and its width are fixed at compile time, as a hand-written reader for
/// one format has them.
fn manual_run<const W: usize>(input: &[u8], sum: impl Fn(&[u8]) -> u64) -> Tally {
    let head = 4 + W;
    // Sized once: room for a read and the frame it may finish.
    let mut buf = BytesMut::with_capacity(2 * COALESCED);
    let mut t = (0, 0);
    for chunk in input.chunks(COALESCED) {
        buf.extend_from_slice(chunk);
        while buf.len() >= head {
            let n = u32::from_le_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
            if buf.len() < head + n {
                break;
            }
            let mut field = [0u8; 8];
            field[..W].copy_from_slice(&buf[4..head]);
            if W > 0 && u64::from_le_bytes(field) != sum(&buf[head..head + n]) {
                t.0 += 1 << 40;
            }
            buf.advance(head);
            let frame = buf.split_to(n).freeze();
            t.0 += 1;
            t.1 += frame.len();
            black_box(frame);
        }
    }
    t
}

/// [`manual_run`] for `checksum`, monomorphised.
fn manual(checksum: Checksum, input: &[u8]) -> Tally {
    match checksum {
        Checksum::Crc16 => manual_run::<2>(input, |d| u64::from(CRC16.checksum(d))),
        Checksum::Crc32 => manual_run::<4>(input, |d| u64::from(crc32fast::hash(d))),
        Checksum::Xxh3 => manual_run::<8>(input, xxhash_rust::xxh3::xxh3_64),
        _ => manual_run::<0>(input, |_| 0),
    }
}

/// A hand-written encoder's head for one format: length and `W`-byte
/// checksum, fixed at compile time.
#[inline(always)]
fn manual_head<const W: usize>(p: &Bytes, sum: impl Fn(&[u8]) -> u64) -> ([u8; 12], usize) {
    let mut head = [0u8; 12];
    head[..4].copy_from_slice(&(p.len() as u32).to_le_bytes());
    if W > 0 {
        head[4..12].copy_from_slice(&sum(p).to_le_bytes());
    }
    (head, 4 + W)
}

fn manual_encode(checksum: Checksum, payloads: &[Bytes]) -> usize {
    fn run<const W: usize>(payloads: &[Bytes], sum: impl Fn(&[u8]) -> u64 + Copy) -> usize {
        encode_all(payloads, |p| {
            let (head, len) = manual_head::<W>(&p, sum);
            black_box((head, p));
            len
        })
    }
    match checksum {
        Checksum::Crc16 => run::<2>(payloads, |d| u64::from(CRC16.checksum(d))),
        Checksum::Crc32 => run::<4>(payloads, |d| u64::from(crc32fast::hash(d))),
        Checksum::Xxh3 => run::<8>(payloads, xxhash_rust::xxh3::xxh3_64),
        _ => run::<0>(payloads, |_| 0),
    }
}

fn decode(c: &mut Criterion) {
    for (len, count) in [(64usize, 16 * 1024), (16 * 1024, 256)] {
        let mut group = c.benchmark_group(format!("checked_decode_{len}B_x{count}"));
        group.throughput(Throughput::Elements(count as u64));
        let unchecked = input(Checksum::None, count, len);
        let flatstream = LengthConfig::flatstream();
        let expected = (count, count * len);
        assert_eq!(manual(Checksum::None, &unchecked), expected);
        assert_eq!(
            cleave_run(LengthPrefixed::with_config(flatstream).unwrap(), &unchecked),
            expected
        );
        group.bench_function(BenchmarkId::new("cleave_length_prefixed", "none"), |b| {
            b.iter(|| cleave_run(LengthPrefixed::with_config(flatstream).unwrap(), &unchecked))
        });
        for checksum in ALGORITHMS {
            let input = input(checksum, count, len);
            assert_eq!(manual(checksum, &input), expected);
            assert_eq!(
                cleave_run(Checked::new(checksum).unwrap(), &input),
                expected
            );
            let name = checksum.name();
            group.bench_function(BenchmarkId::new("manual_bytesmut", name), |b| {
                b.iter(|| manual(checksum, &input))
            });
            group.bench_function(BenchmarkId::new("cleave_checked", name), |b| {
                b.iter(|| cleave_run(Checked::new(checksum).unwrap(), &input))
            });
        }
        group.finish();
    }
}

/// Frames `count` payloads with `encode`, keeping the frames alive as a
/// write queue would until they are written.
fn encode_all<F: FnMut(Bytes) -> usize>(payloads: &[Bytes], mut encode: F) -> usize {
    payloads.iter().map(|p| encode(p.clone())).sum()
}

fn encode(c: &mut Criterion) {
    for (len, count) in [(64usize, 16 * 1024), (16 * 1024, 256)] {
        let mut group = c.benchmark_group(format!("checked_encode_{len}B_x{count}"));
        group.throughput(Throughput::Elements(count as u64));
        let payload: Bytes = (0..len).map(|i| (i * 7 + 3) as u8).collect();
        let payloads = vec![payload; count];
        let mut unchecked = LengthPrefixed::with_config(LengthConfig::flatstream()).unwrap();
        group.bench_function(BenchmarkId::new("cleave_length_prefixed", "none"), |b| {
            b.iter(|| {
                encode_all(&payloads, |p| {
                    black_box(unchecked.encode(p).unwrap()).head().len()
                })
            })
        });
        for checksum in ALGORITHMS {
            let name = checksum.name();
            let mut codec = Checked::new(checksum).unwrap();
            assert_eq!(
                manual_encode(checksum, &payloads),
                encode_all(&payloads, |p| codec.encode(p).unwrap().head().len())
            );
            // Without a checksum, the unchecked `LengthPrefixed` above is
            // the reference: a hand-written head alone measured slower
            // than either (its loop is two atomic reference-count updates
            // back to back), which no bound may be.
            if checksum != Checksum::None {
                group.bench_function(BenchmarkId::new("manual", name), |b| {
                    b.iter(|| manual_encode(checksum, &payloads))
                });
            }
            group.bench_function(BenchmarkId::new("cleave_checked", name), |b| {
                b.iter(|| {
                    encode_all(&payloads, |p| {
                        black_box(codec.encode(p).unwrap()).head().len()
                    })
                })
            });
        }
        group.finish();
    }
}

/// A request such as an RPC service would send: an id, a method and a
/// payload.
#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    method: String,
    #[prost(bytes = "bytes", tag = "3")]
    payload: Bytes,
}

fn request(id: u64, len: usize) -> Request {
    Request {
        id,
        method: "kv.get".into(),
        payload: (0..len).map(|i| i as u8).collect(),
    }
}

fn cleave_prost(input: &[u8]) -> Tally {
    let mut codec = ProstCodec::<Request>::new();
    let mut buf = RecvBuf::with_config(RecvBufConfig::default());
    let mut t = (0, 0);
    for chunk in input.chunks(COALESCED) {
        buf.feed(chunk).unwrap();
        while let Some(m) = codec.decode(&mut buf).unwrap() {
            t.0 += 1;
            t.1 += m.payload.len();
            black_box(m);
        }
    }
    t
}

/// protosocket's connection loop, as its `Connection` drives a decoder:
/// reads appended to a `BytesMut`, `decode` until it asks for more, the
/// bytes it used advanced over.
fn protosocket_prost(input: &[u8]) -> Tally {
    use protosocket::{Decoder as _, DeserializeError};
    let mut decoder = protosocket_prost::ProstDecoder::<Request>::default();
    let mut buf = BytesMut::with_capacity(2 * COALESCED);
    let mut t = (0, 0);
    for chunk in input.chunks(COALESCED) {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&buf[..]) {
                Ok((n, m)) => {
                    buf.advance(n);
                    t.0 += 1;
                    t.1 += m.payload.len();
                    black_box(m);
                }
                Err(DeserializeError::IncompleteBuffer { .. }) => break,
                Err(e) => panic!("{e:?}"),
            }
        }
    }
    t
}

fn prost_messages(c: &mut Criterion) {
    let count = 16 * 1024;
    for len in [48usize, 16 * 1024] {
        let count = if len > 1024 { 256 } else { count };
        let mut group = c.benchmark_group(format!("prost_{len}B_x{count}"));
        group.throughput(Throughput::Elements(count as u64));
        let messages: Vec<Request> = (0..count as u64).map(|id| request(id, len)).collect();
        let mut input = Vec::new();
        for m in &messages {
            prost::Message::encode_length_delimited(m, &mut input).unwrap();
        }
        assert_eq!(cleave_prost(&input), (count, count * len));
        assert_eq!(protosocket_prost(&input), (count, count * len));
        group.bench_function(BenchmarkId::new("decode", "cleave_prost_codec"), |b| {
            b.iter(|| cleave_prost(&input))
        });
        group.bench_function(BenchmarkId::new("decode", "protosocket_prost"), |b| {
            b.iter(|| protosocket_prost(&input))
        });
        let mut codec = ProstCodec::<Request>::new();
        group.bench_function(BenchmarkId::new("encode", "cleave_prost_codec"), |b| {
            b.iter(|| {
                messages
                    .iter()
                    .map(|m| black_box(codec.encode(m.clone()).unwrap()).len())
                    .sum::<usize>()
            })
        });
        // protosocket's `PooledEncoder`, as its README has a connection
        // use it: each buffer goes back to the pool once sent (here at
        // once), so a message reuses the room of one before it.
        let mut pooled = protosocket::PooledEncoder::new(protosocket_prost::ProstSerializer::<
            Request,
        >::default());
        let mut pooled_encode = |m: &Request| {
            let out = protosocket::Encoder::encode(&mut pooled, m.clone());
            let len = black_box(&out).remaining();
            protosocket::Encoder::return_buffer(&mut pooled, out);
            len
        };
        // protosocket's default `Encoder` for a `Serialize`: a new `Vec`
        // per message, handed to the connection to write (its docs point
        // to the pooled one where speed matters).
        let mut serializer = protosocket_prost::ProstSerializer::<Request>::default();
        let mut default_encode = |m: &Request| {
            let out = protosocket::Encoder::encode(&mut serializer, m.clone());
            black_box(out).remaining()
        };
        let ours: usize = messages
            .iter()
            .map(|m| codec.encode(m.clone()).unwrap().len())
            .sum();
        assert_eq!(messages.iter().map(&mut pooled_encode).sum::<usize>(), ours);
        assert_eq!(
            messages.iter().map(&mut default_encode).sum::<usize>(),
            ours
        );
        group.bench_function(
            BenchmarkId::new("encode", "protosocket_prost_pooled"),
            |b| b.iter(|| messages.iter().map(&mut pooled_encode).sum::<usize>()),
        );
        group.bench_function(BenchmarkId::new("encode", "protosocket_prost"), |b| {
            b.iter(|| messages.iter().map(&mut default_encode).sum::<usize>())
        });
        group.finish();
    }
}

criterion_group! {
    name = checked;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = decode, encode, prost_messages
}
criterion_main!(checked);
