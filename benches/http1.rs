//! HTTP/1.1, server side: request heads, bodies and pipelined requests
//! through `Conn<http1::Server>`, beside httparse and hyper.
//!
//! Every variant of a group gets the same bytes in the same reads and is
//! checked before it is timed: the same head (method and target lengths,
//! header count), the same requests and head bytes, the same body tallies,
//! or, for the servers, the same number of requests answered and bytes
//! written (hyper names its field `content-length`, cleave
//! `Content-Length`: the same length):
//!
//! - `head_get_400b`: one browser-like GET head (9 headers, 423 bytes).
//!   httparse parsing it in place into a stack array of borrowed headers
//!   is the peer (the yardstick: it neither copies nor owns);
//!   `lower_bound` is the least an owned result costs: the head copied
//!   into one kept `BytesMut`, parsed by httparse there (its headers left
//!   uninitialised, as cleave leaves them) and split off as `Bytes`,
//!   dropped. cleave feeds it to a connection kept across
//!   iterations (its buffer sized once) and polls `Head` (an owned
//!   `Request`) and `End`; and, for what a first request costs, the same
//!   on a new connection each time.
//! - `body_1mib`: a 1 MiB body, Content-Length and chunked (16 KiB chunks),
//!   in 16 KiB reads, from eight copies in turn, each placed so that every
//!   variant's reads are copied the same distance past their source
//!   within a page (see `COPY_DELTAS`); every `Data` is taken and
//!   dropped. The lower bound does the copy cleave does (each read into one buffer sized once) and
//!   hands out the same `Bytes`, with the least framing work; a bare
//!   memcpy of each read is the floor under both. cleave runs with the
//!   default buffer (which keeps an emptied block of up to 16 KiB).
//! - `pipelined_100k`: 100 000 pipelined 66-byte GETs in 16 KiB reads.
//!   Parsing alone: an httparse loop (the lower bound: each read appended
//!   to one buffer, each head parsed there, its headers left uninitialised,
//!   and split off as `Bytes`, as cleave's heads are) beside cleave's `Head` +
//!   `End` per request. Serving: hyper's server (`server::conn::http1`, a
//!   service answering `hello\n`) beside cleave doing the same work
//!   (parse, encode the same 44-byte response, write it), both over one
//!   in-memory stream that reads 16 KiB at a time and counts what is
//!   written.
//!
//! A counting global allocator prints the allocations per request (and
//! per MiB of body) of each path before its group is timed; it counts
//! only while asked, so the timed runs pay one relaxed load per
//! allocation. Each variant is a function of its own, never inlined, so
//! that `valgrind --tool=callgrind` gives its instructions per call (the
//! repeatable figure on a noisy machine).
//!
//! Run: `cargo bench -p cleave-benches --bench http1`.

use std::cell::Cell;
use std::convert::Infallible;
use std::hint::black_box;
use std::io::{IoSlice, Read, Write};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use cleave_benches::alloc::{allocations, Counting};
use cleave_benches::{at_line_offset, block_on, landing, unseen, LINE, PAGE, SLOW};
use cleave_proto::http1::{response_slice, Body, Server, ServerEvent};
use cleave_proto::{Conn, ConnConfig, RecvBufConfig};
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use http_body_util::Full;

// ----- counting allocator -----

#[global_allocator]
static GLOBAL: Counting<false> = Counting;

// ----- inputs -----

const NOW: Duration = Duration::ZERO;

/// A read: what a busy socket hands over at once.
const READ: usize = 16 * 1024;

/// A browser's GET: 9 headers, 423 bytes.
const HEAD_GET: &[u8] = b"GET /articles/2026/11/sans-io-http?ref=front HTTP/1.1\r\n\
Host: www.example.com\r\n\
User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0\r\n\
Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n\
Accept-Language: en-US,en;q=0.5\r\n\
Accept-Encoding: gzip, deflate, br\r\n\
Referer: https://www.example.com/\r\n\
Connection: keep-alive\r\n\
Cookie: session=9f2c1d7e4b\r\n\
Upgrade-Insecure-Requests: 1\r\n\r\n";

/// `count` pipelined GETs of 66 bytes each.
fn pipelined_input(count: usize) -> Vec<u8> {
    let mut input = Vec::with_capacity(count * 66);
    for i in 0..count {
        let request = format!(
            "GET /api/items/{:06} HTTP/1.1\r\nHost: bench.local\r\nAccept: */*\r\n\r\n",
            i % 1_000_000
        );
        input.extend_from_slice(request.as_bytes());
    }
    input
}

/// A POST with a `len`-byte body: Content-Length, or chunked in `chunk`-byte
/// chunks.
fn body_input(len: usize, chunk: Option<usize>) -> Vec<u8> {
    let mut input = b"POST /upload HTTP/1.1\r\nHost: bench.local\r\n".to_vec();
    let data = vec![0x5a; len];
    match chunk {
        None => {
            input.extend_from_slice(format!("Content-Length: {len}\r\n\r\n").as_bytes());
            input.extend_from_slice(&data);
        }
        Some(size) => {
            input.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for part in data.chunks(size) {
                input.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
                input.extend_from_slice(part);
                input.extend_from_slice(b"\r\n");
            }
            input.extend_from_slice(b"0\r\n\r\n");
        }
    }
    input
}

/// The response both servers write: 38 bytes of head and `hello\n`.
const HELLO: &[u8] = b"hello\n";

// ----- head_get_400b -----

/// What a parsed head says: method and target lengths, header count.
type Parsed = (usize, usize, usize);

/// httparse, as a user calls it: headers borrowed into a stack array.
#[inline(never)]
fn httparse_head(head: &[u8]) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 16];
    let mut request = httparse::Request::new(&mut headers);
    let status = request.parse(head).expect("a valid head");
    assert!(status.is_complete());
    let parsed = (
        request.method.map_or(0, str::len),
        request.path.map_or(0, str::len),
        request.headers.len(),
    );
    black_box(&request);
    parsed
}

/// The least an owned head costs: copied into a kept buffer, parsed there
/// by httparse (into headers left uninitialised, as cleave's), split off
/// as `Bytes` (and dropped).
#[inline(never)]
fn owned_head(buf: &mut BytesMut, head: &[u8]) -> Parsed {
    buf.extend_from_slice(head);
    let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; 16];
    let mut request = httparse::Request::new(&mut []);
    let httparse::Status::Complete(len) = request
        .parse_with_uninit_headers(buf, &mut headers)
        .expect("a valid head")
    else {
        panic!("a partial head");
    };
    let parsed = (
        request.method.map_or(0, str::len),
        request.path.map_or(0, str::len),
        request.headers.len(),
    );
    black_box(&request);
    black_box(buf.split_to(len).freeze());
    parsed
}

/// cleave: feed the head to a connection, take its `Head` and its `End`.
#[inline(never)]
fn cleave_head(conn: &mut Conn<Server>, head: &[u8]) -> Parsed {
    conn.feed(head, NOW).expect("room in the buffer");
    let Ok(Some(ServerEvent::Head(request))) = conn.poll_event() else {
        panic!("no head");
    };
    let parsed = (
        request.method().len(),
        request.target().len(),
        request.headers().len(),
    );
    assert_eq!(conn.poll_event(), Ok(Some(ServerEvent::End)));
    black_box(request);
    parsed
}

fn head_get(c: &mut Criterion) {
    let head = HEAD_GET;
    let mut conn = Conn::new(Server::new(), NOW);
    let mut owned = BytesMut::with_capacity(4096);
    assert_eq!(httparse_head(head), cleave_head(&mut conn, head));
    assert_eq!(httparse_head(head), owned_head(&mut owned, head));
    assert_eq!(httparse_head(head).2, 9);

    let rounds = 10_000;
    let (first, _) = allocations(|| cleave_head(&mut Conn::new(Server::new(), NOW), head));
    let (kept, _) = allocations(|| {
        for _ in 0..rounds {
            cleave_head(&mut conn, head);
        }
    });
    let (peer, _) = allocations(|| {
        for _ in 0..rounds {
            httparse_head(head);
        }
    });
    println!(
        "head_get_400b ({} B), allocations: cleave {:.4}/request on a kept connection \
         ({kept} in {rounds}), {first} for the first request of a new one; httparse {:.4}/request",
        head.len(),
        kept as f64 / rounds as f64,
        peer as f64 / rounds as f64,
    );

    let mut group = c.benchmark_group("head_get_400b");
    group.throughput(Throughput::Elements(1));
    group.bench_function("httparse_borrowed", |b| {
        b.iter(|| httparse_head(black_box(head)))
    });
    group.bench_function("lower_bound", |b| {
        b.iter(|| owned_head(&mut owned, black_box(head)))
    });
    group.bench_function("cleave_conn", |b| {
        b.iter(|| cleave_head(&mut conn, black_box(head)))
    });
    group.bench_function("cleave_conn_new_each_time", |b| {
        b.iter(|| cleave_head(&mut Conn::new(Server::new(), NOW), black_box(head)))
    });
    group.finish();
}

// ----- body_1mib -----

/// What a body gave: heads, `Data` pieces, body bytes, ends.
type BodyTally = (usize, usize, usize, usize);

/// cleave: each read fed to the connection, every event taken. `landed`
/// sees each read and the buffer it was copied to (the timed runs pass
/// [`unseen`], which costs one bounds check a read: the buffer's bytes
/// are still looked up).
///
/// Generic over the hook, the function is in a callgrind profile twice:
/// the timed one is `cleave_body::<fn(&[u8], &[u8]) {unseen}>`.
#[inline(never)]
fn cleave_body<L: FnMut(&[u8], &[u8])>(
    conn: &mut Conn<Server>,
    input: &[u8],
    landed: &mut L,
) -> BodyTally {
    let mut t = (0, 0, 0, 0);
    for read in input.chunks(READ) {
        conn.feed(read, NOW).expect("room in the buffer");
        landed(read, conn.recv_buf().peek());
        while let Some(event) = conn.poll_event().expect("a valid request") {
            match event {
                ServerEvent::Head(_) => t.0 += 1,
                ServerEvent::Data(data) => {
                    t.1 += 1;
                    t.2 += data.len();
                    black_box(data);
                }
                ServerEvent::Trailers(_) => {}
                ServerEvent::End => t.3 += 1,
            }
        }
    }
    t
}

/// Where the hand-written loop is in a message.
#[derive(Clone, Copy)]
enum Step {
    Head,
    /// Body bytes left (Content-Length, or of the current chunk).
    Data(usize),
    /// A chunk size line is next.
    Size,
    /// The CRLF after a chunk's data.
    DataEnd,
    /// The CRLF after the last chunk (no trailers).
    LastEnd,
}

/// The lower bound: the copy cleave does (each read appended to one
/// `BytesMut` sized once, whose room is reclaimed once the pieces are
/// dropped) and the same `Bytes` pieces split off, with the least framing
/// work: the head's end and its Content-Length found, chunk sizes
/// read in hex; no validation, no limits.
///
/// `landed` as for [`cleave_body`].
#[inline(never)]
fn manual_body<L: FnMut(&[u8], &[u8])>(
    buf: &mut BytesMut,
    input: &[u8],
    chunked: bool,
    landed: &mut L,
) -> BodyTally {
    let mut t = (0, 0, 0, 0);
    let mut step = Step::Head;
    for read in input.chunks(READ) {
        buf.extend_from_slice(read);
        landed(read, buf);
        loop {
            match step {
                Step::Head => {
                    let Some(end) = memchr::memmem::find(buf, b"\r\n\r\n") else {
                        break;
                    };
                    let length = content_length(&buf[..end]);
                    buf.advance(end + 4);
                    t.0 += 1;
                    step = if chunked {
                        Step::Size
                    } else {
                        Step::Data(length)
                    };
                }
                Step::Data(0) if !chunked => {
                    t.3 += 1;
                    step = Step::Head;
                }
                Step::Data(0) => step = Step::DataEnd,
                Step::Data(left) => {
                    if buf.is_empty() {
                        break;
                    }
                    let data = buf.split_to(left.min(buf.len())).freeze();
                    t.1 += 1;
                    t.2 += data.len();
                    step = Step::Data(left - data.len());
                    black_box(data);
                }
                Step::Size => {
                    let Some(lf) = memchr::memchr(b'\n', buf) else {
                        break;
                    };
                    let size = buf[..lf - 1].iter().fold(0, |n, &b| {
                        n * 16 + (b as char).to_digit(16).unwrap_or(0) as usize
                    });
                    buf.advance(lf + 1);
                    step = if size == 0 {
                        Step::LastEnd
                    } else {
                        Step::Data(size)
                    };
                }
                Step::DataEnd | Step::LastEnd => {
                    if buf.len() < 2 {
                        break;
                    }
                    buf.advance(2);
                    if matches!(step, Step::LastEnd) {
                        t.3 += 1;
                        step = Step::Head;
                    } else {
                        step = Step::Size;
                    }
                }
            }
        }
    }
    t
}

/// The value of the head's `Content-Length: ` header (0 if none).
fn content_length(head: &[u8]) -> usize {
    let name = b"Content-Length: ";
    let Some(at) = memchr::memmem::find(head, name) else {
        return 0;
    };
    head[at + name.len()..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0, |n, &b| n * 10 + usize::from(b - b'0'))
}

/// The floor: each read copied into one buffer, nothing else.
#[inline(never)]
fn memcpy_body(buf: &mut [u8], input: &[u8]) -> usize {
    let mut n = 0;
    for read in input.chunks(READ) {
        buf[..read.len()].copy_from_slice(read);
        n += black_box(&buf[..read.len()]).len();
    }
    n
}

/// How far past its source each read is copied, modulo a 4 KiB page: the
/// same eight distances for every variant, one for each copy of the body.
///
/// On this project's VM (AMD EPYC, glibc 2.36), `memcpy` moves a 16 KiB
/// read with `rep movsb`, which takes 15 times as long when the
/// destination lies 1 to 15 bytes past the source modulo 4 KiB, and 1.3
/// to 1.7 times as long up to 63 bytes past (`cargo run --release -p
/// cleave-benches --bin copy_distance` shows it: 16 to 25 µs a MiB at
/// other distances, 300 µs in the band). Where a variant's copies
/// land depends on where the allocator put its buffer, so with the inputs
/// at fixed places any variant could lose 2.5x on one unlucky input of
/// eight: runs showed the bare memcpy at 440 µs and cleave at 521 µs,
/// against about 150 and 220 µs otherwise. So each variant gets copies
/// of the body of its own, placed (after a probe run finds where its
/// reads land) at these distances: all outside that band, and at eight
/// alignments within a cache line (a copy between differently aligned
/// addresses costs more), the same for every variant. What stays the
/// allocator's is that each variant reads copies in an allocation of its
/// own. Where each buffer starts within a cache line (and so where the
/// sources start) is the same for all: the bound's and the floor's are
/// chosen to start where cleave's reads land (see `at_line_offset`);
/// left to the allocator, the bound's reads once landed 32 bytes into a
/// line and cleave's at its start, and cleave's Content-Length body beat
/// the bound by 1%.
const COPY_DELTAS: [usize; 8] = [64, 585, 1106, 1627, 2148, 2669, 3190, 3711];

/// The value seen most often.
fn most_often(mut seen: Vec<usize>) -> usize {
    seen.sort_unstable();
    let mut best = (0, 0);
    for run in seen.chunk_by(|a, b| a == b) {
        if run.len() > best.1 {
            best = (run[0], run.len());
        }
    }
    best.0
}

/// Copies of a body, one per entry of [`COPY_DELTAS`], in one allocation.
struct Placed {
    backing: Vec<u8>,
    starts: Vec<usize>,
    len: usize,
}

impl Placed {
    /// Copy `i` starts `COPY_DELTAS[i]` before page offset `dst[i]` (where
    /// the variant's reads of input `i` land), each past a page of its own.
    fn new(body: &[u8], dst: &[usize]) -> Self {
        let stride = body.len().next_multiple_of(PAGE) + 2 * PAGE;
        let mut backing = vec![0u8; PAGE + dst.len() * stride];
        let base = (PAGE - backing.as_ptr() as usize % PAGE) % PAGE;
        let starts: Vec<usize> = dst
            .iter()
            .zip(COPY_DELTAS)
            .enumerate()
            .map(|(i, (&dst, delta))| base + i * stride + (dst + PAGE - delta) % PAGE)
            .collect();
        for &start in &starts {
            backing[start..start + body.len()].copy_from_slice(body);
        }
        Placed {
            backing,
            starts,
            len: body.len(),
        }
    }

    fn inputs(&self) -> Vec<&[u8]> {
        self.starts
            .iter()
            .map(|&start| &self.backing[start..start + self.len])
            .collect()
    }
}

/// Places a variant's inputs: `run` reads every input in turn (as the
/// timed loop does) and reports where each read landed; the inputs are
/// placed where the variant's reads of them land most often, and checked:
/// each input's reads land most often at its distance and `line` bytes
/// into a cache line, and none lands in the slow band (a read can land
/// elsewhere: the hand-written loop's `BytesMut` starts an input where
/// the last one's short read left it, 69 or 589 bytes on).
fn place_for<R>(body: &[u8], variant: &str, line: usize, mut run: R) -> Placed
where
    R: FnMut(&[&[u8]], &mut dyn FnMut(usize, (usize, usize))),
{
    let probe = Placed::new(body, &[0; COPY_DELTAS.len()]);
    let mut dst = vec![Vec::new(); COPY_DELTAS.len()];
    run(&probe.inputs(), &mut |i, (at, _)| dst[i].push(at));
    let dst: Vec<usize> = dst.into_iter().map(most_often).collect();
    for at in &dst {
        assert_eq!(
            at % LINE,
            line,
            "{variant}: reads land {line} bytes into a line"
        );
    }
    let placed = Placed::new(body, &dst);
    let mut deltas = vec![Vec::new(); COPY_DELTAS.len()];
    run(&placed.inputs(), &mut |i, (_, delta)| deltas[i].push(delta));
    let slow = deltas.iter().flatten().filter(|&&d| SLOW.contains(&d));
    assert_eq!(slow.count(), 0, "{variant}: no read lands a slow distance");
    let deltas: Vec<usize> = deltas.into_iter().map(most_often).collect();
    assert_eq!(deltas, COPY_DELTAS, "{variant}: reads land where probed");
    placed
}

fn body(c: &mut Criterion) {
    let len = 1 << 20;
    let mut group = c.benchmark_group("body_1mib");
    group.throughput(Throughput::Bytes((COPY_DELTAS.len() * len) as u64));
    for (mode, chunk) in [("content_length", None), ("chunked_16k", Some(READ))] {
        let body = body_input(len, chunk);
        let chunked = chunk.is_some();
        let mut default = Conn::new(Server::new(), NOW);
        // Where cleave's reads land within a cache line: the bound's and
        // the floor's buffers start there too.
        let mut lines = Vec::new();
        cleave_body(&mut default, &body, &mut |read, buf| {
            lines.push(landing(read, buf).0 % LINE);
        });
        let line = most_often(lines);
        let address = |buf: &[u8]| buf.as_ptr() as usize;
        // One read and a cache line of room: each read lands where the
        // last one did once its pieces are dropped (the bytes a read
        // leaves, fewer than a line, move to the front), as cleave's do
        // in its block. Twice a read, as it was, had the bound alternate
        // between two halves, twice the memory cleave's copies touch:
        // cleave then beat it on Content-Length bodies by 1 to 2%.
        let mut manual = at_line_offset(
            line,
            || BytesMut::with_capacity(READ + LINE),
            |b| address(b),
        );
        let mut floor = at_line_offset(line, || vec![0; READ], |v| address(v));
        let want = manual_body(&mut manual, &body, chunked, &mut unseen);
        assert_eq!(want.2, len);
        assert_eq!(
            cleave_body(&mut default, &body, &mut unseen),
            want,
            "{mode}"
        );
        let (d, _) = allocations(|| cleave_body(&mut default, &body, &mut unseen));
        let (m, _) = allocations(|| manual_body(&mut manual, &body, chunked, &mut unseen));
        println!(
            "body_1mib/{mode} ({} reads, {} Data, each landing {line} bytes into a cache line), allocations per MiB: cleave {d}, hand-written {m}",
            body.len().div_ceil(READ),
            want.1,
        );

        let at = floor.as_ptr() as usize % PAGE;
        assert_eq!(
            at % LINE,
            line,
            "the floor's buffer starts {line} bytes into a line"
        );
        let floor_inputs = Placed::new(&body, &[at; COPY_DELTAS.len()]);
        let manual_inputs = place_for(&body, "hand-written", line, |inputs, seen| {
            for (i, input) in inputs.iter().enumerate() {
                let tally = manual_body(&mut manual, input, chunked, &mut |read, buf| {
                    seen(i, landing(read, buf));
                });
                assert_eq!(tally, want, "{mode}: hand-written");
            }
        });
        let cleave_inputs = place_for(&body, "cleave", line, |inputs, seen| {
            for (i, input) in inputs.iter().enumerate() {
                let tally = cleave_body(&mut default, input, &mut |read, buf| {
                    seen(i, landing(read, buf));
                });
                assert_eq!(tally, want, "{mode}: cleave");
            }
        });

        let inputs = floor_inputs.inputs();
        group.bench_function(BenchmarkId::new("memcpy_floor", mode), |b| {
            b.iter(|| {
                inputs
                    .iter()
                    .map(|input| memcpy_body(&mut floor, black_box(input)))
                    .sum::<usize>()
            })
        });
        let inputs = manual_inputs.inputs();
        group.bench_function(BenchmarkId::new("manual_bytesmut", mode), |b| {
            b.iter(|| {
                inputs
                    .iter()
                    .map(|input| manual_body(&mut manual, black_box(input), chunked, &mut unseen).2)
                    .sum::<usize>()
            })
        });
        let inputs = cleave_inputs.inputs();
        group.bench_function(BenchmarkId::new("cleave_conn", mode), |b| {
            b.iter(|| {
                inputs
                    .iter()
                    .map(|input| cleave_body(&mut default, black_box(input), &mut unseen).2)
                    .sum::<usize>()
            })
        });
    }
    group.finish();
}

// ----- pipelined_100k -----

/// Requests parsed and head bytes seen.
type Requests = (usize, usize);

/// The lower bound of parsing: each read appended to one buffer, httparse
/// over what is buffered (into an array of headers left uninitialised, as
/// cleave's) until a head is partial, each parsed head split off the
/// front as `Bytes` (an owned head, as cleave's) and dropped.
#[inline(never)]
fn httparse_pipelined(input: &[u8]) -> Requests {
    // A read and room for the partial head it leaves (under 66 bytes),
    // which moves to the front: every read lands in the same memory.
    let mut buf = BytesMut::with_capacity(READ + 2 * LINE);
    let mut t = (0, 0);
    for read in input.chunks(READ) {
        buf.extend_from_slice(read);
        loop {
            let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; 16];
            let mut request = httparse::Request::new(&mut []);
            match request
                .parse_with_uninit_headers(&buf, &mut headers)
                .expect("a valid head")
            {
                httparse::Status::Complete(n) => {
                    black_box(&request);
                    let head = buf.split_to(n).freeze();
                    t.0 += 1;
                    t.1 += head.len();
                    black_box(head);
                }
                httparse::Status::Partial => break,
            }
        }
    }
    t
}

/// cleave: each read fed to one connection (new for each run), `Head` and
/// `End` taken.
#[inline(never)]
fn cleave_pipelined(input: &[u8]) -> Requests {
    let mut conn = Conn::new(Server::new(), NOW);
    let mut t = (0, 0);
    for read in input.chunks(READ) {
        conn.feed(read, NOW).expect("room in the buffer");
        while let Some(event) = conn.poll_event().expect("a valid request") {
            if let ServerEvent::Head(request) = event {
                t.0 += 1;
                t.1 += request.as_bytes().len();
                black_box(request);
            }
        }
    }
    t
}

/// One side of an in-memory connection: reads give the input `piece`
/// bytes at a time (then the end of the stream), writes are counted and
/// dropped. Both servers use it, hyper through `hyper::rt`, cleave
/// through `std::io`.
struct Memory<'a> {
    input: &'a [u8],
    piece: usize,
    written: usize,
}

impl<'a> Memory<'a> {
    fn new(input: &'a [u8], piece: usize) -> Self {
        Self {
            input,
            piece,
            written: 0,
        }
    }

    /// The next read, into at most `room` bytes.
    fn next(&mut self, room: usize) -> &'a [u8] {
        let n = self.piece.min(self.input.len()).min(room);
        let (read, rest) = self.input.split_at(n);
        self.input = rest;
        read
    }
}

impl Read for Memory<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.next(buf.len());
        buf[..read.len()].copy_from_slice(read);
        Ok(read.len())
    }
}

impl Write for Memory<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.written += black_box(buf).len();
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let n: usize = black_box(bufs).iter().map(|b| b.len()).sum();
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl hyper::rt::Read for Memory<'_> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        let read = self.next(buf.remaining());
        buf.put_slice(read);
        Poll::Ready(Ok(()))
    }
}

impl hyper::rt::Write for Memory<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Write::write(&mut *self, buf))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(Write::write_vectored(&mut *self, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Requests answered and bytes written.
type Served = (usize, usize);

/// hyper's server: one connection over the in-memory stream, a service
/// that answers `hello\n`. Pipelined responses are flushed together
/// (`pipeline_flush`, hyper's setting for pipelining) and no Date header
/// is written (cleave writes none), so both write the same bytes. The
/// stream ends after the last request, as a pipelining client that shuts
/// its write half would: hyper needs `half_close` to answer what it read
/// before that end (without it, an end read while a response is in
/// flight is a client gone, `IncompleteMessage`).
#[inline(never)]
fn hyper_server(builder: &hyper::server::conn::http1::Builder, input: &[u8]) -> Served {
    let requests = Cell::new(0);
    let mut io = Memory::new(input, READ);
    let service = hyper::service::service_fn(|request: hyper::Request<_>| {
        requests.set(requests.get() + 1);
        black_box(request);
        async { Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(HELLO)))) }
    });
    block_on(builder.serve_connection(&mut io, service)).expect("hyper serves");
    (requests.get(), io.written)
}

/// cleave doing the same work: reads into the connection's spare room
/// (16 KiB, as the reads), each request's `Head` and `End` taken, a
/// response encoded and queued for it, the queue written after each read.
/// Each head is written straight into the queue's run buffer
/// (`response_slice`), and `hello\n`, a small write, is copied after it:
/// hyper too writes its heads, and small bodies, into its kept write
/// buffer.
#[inline(never)]
fn cleave_server(input: &[u8]) -> Served {
    let config = ConnConfig::default().recv_buf(
        RecvBufConfig::default()
            .read_reserve(READ)
            .expect("a valid reserve"),
    );
    let mut conn = Conn::with_config(Server::new(), config, NOW);
    let mut io = Memory::new(input, READ);
    let mut requests = 0;
    loop {
        let n = conn
            .read_with(NOW, |spare| io.read(spare))
            .expect("room in the buffer");
        while let Some(event) = conn.poll_event().expect("a valid request") {
            match event {
                ServerEvent::Head(request) => {
                    black_box(request);
                }
                ServerEvent::End => {
                    let length = Body::Length(HELLO.len() as u64);
                    let head = response_slice(200, "OK", &[], length).expect("a valid response");
                    conn.push(head).expect("room in the queue");
                    conn.push(Bytes::from_static(HELLO))
                        .expect("room in the queue");
                    requests += 1;
                }
                ServerEvent::Data(_) | ServerEvent::Trailers(_) => {}
            }
        }
        while conn
            .write_with(NOW, |slices| io.write_vectored(slices))
            .expect("the sink takes all")
            > 0
        {}
        if n == 0 {
            return (requests, io.written);
        }
    }
}

fn pipelined(c: &mut Criterion) {
    let count = 100_000;
    let input = pipelined_input(count);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .pipeline_flush(true)
        .auto_date_header(false)
        .half_close(true);

    let parsed = httparse_pipelined(&input);
    assert_eq!(parsed, (count, input.len()));
    assert_eq!(cleave_pipelined(&input), parsed);
    let served = hyper_server(&builder, &input);
    assert_eq!(served, (count, count * 44));
    assert_eq!(cleave_server(&input), served);

    let per_request = |n: u64| n as f64 / count as f64;
    let (parse, _) = allocations(|| cleave_pipelined(&input));
    let (serve, _) = allocations(|| cleave_server(&input));
    let (hyper, _) = allocations(|| hyper_server(&builder, &input));
    let (lower, _) = allocations(|| httparse_pipelined(&input));
    println!(
        "pipelined_100k ({} B, {} reads), allocations per request: cleave parse {:.4} ({parse} in all), \
         cleave server {:.4} ({serve}), hyper server {:.4} ({hyper}), httparse loop {:.4} ({lower})",
        input.len(),
        input.len().div_ceil(READ),
        per_request(parse),
        per_request(serve),
        per_request(hyper),
        per_request(lower),
    );

    let mut group = c.benchmark_group("pipelined_100k");
    group.throughput(Throughput::Elements(count as u64));
    group.sample_size(20);
    group.bench_function("httparse_loop", |b| {
        b.iter(|| httparse_pipelined(black_box(&input)))
    });
    group.bench_function("cleave_parse", |b| {
        b.iter(|| cleave_pipelined(black_box(&input)))
    });
    group.bench_function("hyper_server", |b| {
        b.iter(|| hyper_server(&builder, black_box(&input)))
    });
    group.bench_function("cleave_server", |b| {
        b.iter(|| cleave_server(black_box(&input)))
    });
    group.finish();
}

criterion_group! {
    name = http1;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = head_get, body, pipelined
}
criterion_main!(http1);
