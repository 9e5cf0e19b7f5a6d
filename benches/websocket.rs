//! WebSocket (RFC 6455): messages read by a server and written by either
//! side, through `Conn<WebSocket>` beside tungstenite and a hand-written
//! lower bound.
//!
//! Every variant of a group gets the same messages and is checked (before
//! timing) to read the same messages or to write the same bytes:
//!
//! - `parse_40b`, `parse_128b`, `parse_16k`: 10 000 masked text messages
//!   of 40 or 128 bytes (JSON-like, some two-byte characters), or 1 000
//!   masked binary messages of 16 KiB, as a client sends them (a fresh
//!   mask per message), in 16 KiB reads. cleave feeds each read to a
//!   server connection kept across iterations and polls every event:
//!   `cleave_conn` with the default receive buffer, `cleave_conn_128k_block`
//!   with one that keeps a block of eight reads, as the lower bound's;
//!   `cleave_read` reads them instead through `Conn::read_with` from an
//!   in-memory stream, as its adapters read a socket (the room it hands
//!   out is zeroed whenever the buffer takes its block back: safe code
//!   reads into initialised memory). tungstenite reads them with
//!   `WebSocket::read` over the same in-memory stream, 16 KiB per read
//!   (its default configuration, kept across iterations too); it zeroes
//!   its free read space, up to 128 KiB, before each read, so
//!   `tungstenite_large_reads` gives it as much per read as it asks for
//!   (a socket with a backlog), which costs it less. The lower bound is
//!   the least a loop can do for the same result: each read appended to
//!   one `BytesMut` sized once
//!   (eight reads), the header read (2 bytes, the extended length, the
//!   mask), the payload unmasked in place 8 bytes at a time and split off
//!   as `Bytes` (the buffer's room reclaimed once they are dropped, as
//!   cleave's is), text checked with simdutf8; no limits, no rules checked.
//!   Each variant reads a copy of the input of its own, placed within a
//!   page so that the fewest of its reads are copied a distance past their
//!   source at which this machine's `memcpy` is slow (see `SLOW`); the
//!   bench prints how many still are. Unplaced, the lower bound's buffer
//!   and the input both came from `mmap` at the same page offset, and 85
//!   of its 87 reads of the 40-byte messages landed 1 to 63 bytes past
//!   their source.
//! - `encode_40b`, `encode_128b`, `encode_16k`: the same messages written
//!   by a server (unmasked), in bursts of 32 (a turn of a server's event
//!   loop), into an in-memory socket that copies what it is given into one
//!   reused `Vec` (the kernel's copy into the socket buffer, which every
//!   variant pays: a queue that hands out the payload without copying it
//!   is not credited with a copy the kernel makes anyway). cleave builds
//!   each frame with `WebSocket::message` (the header inline, the payload
//!   not copied), pushes it on its connection's queue and drains the queue
//!   with vectored writes after each burst, or when the queue is full, as
//!   the adapters do; `cleave_slice` the same with
//!   `WebSocket::message_slice`, which copies each header and payload
//!   straight into the queue's run buffer (no `Bytes` cloned and dropped
//!   per message); tungstenite `write`s each message and `flush`es
//!   after each burst; the lower bound writes each header (a copy of a
//!   constant length for 7- and 16-bit lengths: a two-byte copy of a
//!   length known only at run time is a call to `memcpy`, and writing
//!   headers that way made the bound twice as slow for 40-byte messages)
//!   and copies each payload after it into a buffer of its own, and hands
//!   the burst to the socket in one write; payloads of 1 KiB or more it
//!   hands over by reference, in the same write (a vectored one).
//! - `encode_client_128b`: the 128-byte messages written by a client,
//!   masked: cleave masks each payload into a copy of its own (the one
//!   copy it makes on purpose), `cleave_slice` copies it into the queue's
//!   run buffer and masks it there; tungstenite copies it into its write
//!   buffer and masks it there; the lower bound copies it into its
//!   buffer and masks it there, and writes each burst as for a server.
//!   All draw their masks alike, from rand's thread-local generator
//!   (`rand::random`, tungstenite's source).
//!
//! After each group, the variants run again in turns and a summary gives
//! the median time per message of each and cleave's ratios. A counting
//! global allocator prints the allocations per message of each variant
//! before its group is timed; it counts only while asked, so the timed
//! runs pay one relaxed load per allocation.
//!
//! Instructions, the repeatable figure on a noisy machine: each variant
//! runs in a function of its own, never inlined (the readers set up only
//! the selected variants; the writers set up and check all), so that
//!
//! ```text
//! valgrind --tool=callgrind --toggle-collect='websocket::cleave_parse' \
//!     target/release/deps/websocket-* --bench --profile-time 1 '^parse_40b/cleave_conn$'
//! ```
//!
//! collects that variant alone; the bench prints how many calls it made
//! (the profiled ones and those before timing: two, and a reader's
//! passes that placed its input), and the total over calls and messages
//! is the count per message.
//!
//! Run: `cargo bench -p cleave-benches --bench websocket`.

use std::cell::RefCell;
use std::hint::black_box;
use std::io::{IoSlice, Read, Write};
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use cleave_benches::alloc::{allocations, Counting};
use cleave_benches::{landing, unseen, PAGE, SLOW};
use cleave_proto::websocket::{Entropy, Kind, WebSocket, WsConfig, WsEvent};
use cleave_proto::write::Push;
use cleave_proto::{Conn, ConnConfig, RecvBufConfig, Refusal};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tungstenite::protocol::{Role, WebSocket as Tungstenite};
use tungstenite::Message;

// ----- counting allocator -----

#[global_allocator]
static GLOBAL: Counting<false> = Counting;

// ----- inputs -----

const NOW: Duration = Duration::ZERO;

/// A read: what a busy socket hands over at once.
const READ: usize = 16 * 1024;

/// Messages a server writes per turn of its event loop.
const BURST: usize = 32;

/// Samples per variant.
const SAMPLES: usize = 20;

/// Runs of each variant, in turns, for the summary.
const ROUNDS: usize = 40;

/// Calls of each variant before its group is timed, on the state kept for
/// timing: the check and the count of allocations.
const BEFORE: u64 = 2;

/// One workload: `count` messages of `len` bytes.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    kind: Kind,
    len: usize,
    count: usize,
}

const CASES: [Case; 3] = [
    Case {
        name: "40b",
        kind: Kind::Text,
        len: 40,
        count: 10_000,
    },
    Case {
        name: "128b",
        kind: Kind::Text,
        len: 128,
        count: 10_000,
    },
    Case {
        name: "16k",
        kind: Kind::Binary,
        len: 16 * 1024,
        count: 1_000,
    },
];

/// Message `i` of a case: JSON-like text with two-byte characters, or
/// varied bytes.
fn payload(case: Case, i: usize) -> Vec<u8> {
    if case.kind == Kind::Binary {
        return (0..case.len).map(|j| (i * 131 + j * 7) as u8).collect();
    }
    let mut text = format!("{{\"seq\":{:06},\"text\":\"", i % 1_000_000);
    for c in "héllo wörld, κόσμε; ".chars().cycle() {
        if text.len() + c.len_utf8() + 2 > case.len {
            break;
        }
        text.push(c);
    }
    while text.len() + 2 < case.len {
        text.push('.');
    }
    text.push_str("\"}");
    assert_eq!(text.len(), case.len);
    text.into_bytes()
}

fn payloads(case: Case) -> Vec<Bytes> {
    (0..case.count).map(|i| payload(case, i).into()).collect()
}

fn opcode(kind: Kind) -> u8 {
    match kind {
        Kind::Text => 0x1,
        Kind::Binary => 0x2,
    }
}

/// Writes a final frame's header (masked with `key` if given) into `out`;
/// returns its length.
fn write_head(out: &mut [u8; 14], opcode: u8, len: usize, key: Option<[u8; 4]>) -> usize {
    let masked = if key.is_some() { 0x80 } else { 0 };
    out[0] = 0x80 | opcode;
    let mut at = if len < 126 {
        out[1] = masked | len as u8;
        2
    } else if len <= 0xFFFF {
        out[1] = masked | 126;
        out[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        4
    } else {
        out[1] = masked | 127;
        out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
        10
    };
    if let Some(key) = key {
        out[at..at + 4].copy_from_slice(&key);
        at += 4;
    }
    at
}

/// Appends a final frame's header to `buf`: for 7- and 16-bit lengths
/// as a copy of a constant length, which is a move where a length known
/// only at run time is a call (what cleave's encoders do too).
#[inline(always)]
fn put_head(buf: &mut Vec<u8>, opcode: u8, len: usize, key: Option<[u8; 4]>) {
    let first = 0x80 | opcode;
    match (u8::try_from(len), u16::try_from(len), key) {
        (Ok(short @ 0..=125), _, None) => buf.extend_from_slice(&[first, short]),
        (Ok(short @ 0..=125), _, Some([k0, k1, k2, k3])) => {
            buf.extend_from_slice(&[first, 0x80 | short, k0, k1, k2, k3]);
        }
        (_, Ok(mid), None) => {
            let [l0, l1] = mid.to_be_bytes();
            buf.extend_from_slice(&[first, 126, l0, l1]);
        }
        (_, Ok(mid), Some([k0, k1, k2, k3])) => {
            let [l0, l1] = mid.to_be_bytes();
            buf.extend_from_slice(&[first, 0x80 | 126, l0, l1, k0, k1, k2, k3]);
        }
        _ => {
            let mut head = [0; 14];
            let n = write_head(&mut head, opcode, len, key);
            buf.extend_from_slice(&head[..n]);
        }
    }
}

/// XORs `data` with `key`, 8 bytes at a time.
#[inline(always)]
fn mask(data: &mut [u8], key: [u8; 4]) {
    let wide = u64::from(u32::from_ne_bytes(key)) * 0x1_0000_0001;
    let mut words = data.chunks_exact_mut(8);
    for word in &mut words {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        word.copy_from_slice(&(u64::from_ne_bytes(bytes) ^ wide).to_ne_bytes());
    }
    for (i, byte) in words.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i % 4];
    }
}

/// The messages as frames: masked as a client sends them (a fresh key per
/// message, from a fixed seed), or unmasked as a server does.
fn frames(kind: Kind, payloads: &[Bytes], masked: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    for payload in payloads {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let key = masked.then(|| (seed as u32).to_ne_bytes());
        let mut head = [0; 14];
        let n = write_head(&mut head, opcode(kind), payload.len(), key);
        out.extend_from_slice(&head[..n]);
        let at = out.len();
        out.extend_from_slice(payload);
        if let Some(key) = key {
            mask(&mut out[at..], key);
        }
    }
    out
}

// ----- the summary -----

/// Whether criterion's filter (its command line) may select the bench
/// `id` (`group/variant`): the setup of a variant filtered out (its check,
/// its count of allocations) is skipped, so that a profile of one variant
/// holds no calls from the others. A filter that is more of a regex than
/// `^id$` selects everything.
fn selected(id: &str) -> bool {
    const VALUED: &[&str] = &[
        "-c",
        "--color",
        "--save-baseline",
        "--baseline",
        "--baseline-lenient",
        "--format",
        "--profile-time",
        "--load-baseline",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--confidence-level",
        "--significance-level",
        "--plotting-backend",
        "--output-format",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let mut filter = None;
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        if VALUED.contains(&arg.as_str()) {
            i += 1;
        } else if !arg.starts_with('-') {
            filter = Some(arg.as_str());
        }
        i += 1;
    }
    let Some(filter) = filter else {
        return true;
    };
    let (start, filter) = match filter.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (exact, filter),
    };
    let (end, filter) = match filter.strip_suffix('$') {
        Some(rest) => (true, rest),
        None => (exact, filter),
    };
    if filter.contains(|c| "\\.+*?()|[]{}".contains(c)) {
        return true;
    }
    match (start, end) {
        (true, true) => id == filter,
        (true, false) => id.starts_with(filter),
        (false, true) => id.ends_with(filter),
        (false, false) => id.contains(filter),
    }
}

/// Whether any variant of `group` is selected.
fn wanted(group: &str) -> bool {
    [
        "cleave_conn",
        BIG_BLOCK,
        "cleave_slice",
        "tungstenite",
        "lower_bound",
    ]
    .iter()
    .any(|variant| selected(&format!("{group}/{variant}")))
}

/// A variant under test: one run over all the messages, its result
/// through `black_box`.
type Run<'a> = (&'static str, Box<dyn FnMut() + 'a>);

/// Times each variant of `group` with criterion, then prints a summary:
/// the variants run again in turns, `ROUNDS` times, and each one's median
/// time per message and cleave's ratios come from those runs (taking
/// turns keeps a change in the machine's load from favouring the variant
/// that ran while it was quiet). Under `--profile-time`, the calls of each
/// variant instead: the instructions per message are a callgrind total
/// over `(calls + before) * messages`, `before` being `BEFORE` and the
/// passes `probed` gives for the variant (those that placed its input).
fn measure(
    c: &mut Criterion,
    group: &str,
    messages: usize,
    runs: &mut [Run<'_>],
    probed: &[(&str, u64)],
) {
    let mut timed = c.benchmark_group(group);
    timed.throughput(Throughput::Elements(messages as u64));
    let mut calls = vec![0_u64; runs.len()];
    for ((variant, run), calls) in runs.iter_mut().zip(&mut calls) {
        timed.bench_function(*variant, |b| {
            b.iter_custom(|iters| {
                *calls += iters;
                let start = Instant::now();
                for _ in 0..iters {
                    run();
                }
                start.elapsed()
            })
        });
    }
    timed.finish();
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--profile-time") {
        for ((variant, _), calls) in runs.iter().zip(&calls) {
            let before = BEFORE
                + probed
                    .iter()
                    .find(|(v, _)| v == variant)
                    .map_or(0, |&(_, n)| n);
            println!(
                "{group}/{variant} profiled: {calls} calls, and {before} before timing \
                 ({messages} messages each)"
            );
        }
        return;
    }
    if args.iter().any(|a| a == "--test" || a == "--list") {
        return;
    }
    let mut nanos = vec![Vec::with_capacity(ROUNDS); runs.len()];
    for _ in 0..ROUNDS {
        for ((_, run), nanos) in runs.iter_mut().zip(&mut nanos) {
            let start = Instant::now();
            run();
            nanos.push(start.elapsed().as_nanos() as f64 / messages as f64);
        }
    }
    let median = |variant: &str| {
        let at = runs.iter().position(|(v, _)| *v == variant)?;
        let mut n = nanos[at].clone();
        n.sort_by(f64::total_cmp);
        Some(n[n.len() / 2])
    };
    let mut line = format!("{group} summary ({ROUNDS} runs each in turns, median per message):");
    for (variant, _) in runs.iter() {
        line += &format!(" {variant} {:.1} ns;", median(variant).unwrap_or(f64::NAN));
    }
    for (cleave, _) in runs.iter().filter(|(v, _)| v.starts_with("cleave")) {
        for other in ["tungstenite", "tungstenite_large_reads", "lower_bound"] {
            if let (Some(t), Some(o)) = (median(cleave), median(other)) {
                line += &format!(" {cleave}/{other} {:.2};", t / o);
            }
        }
    }
    println!("{}", line.trim_end_matches(';'));
}

// ----- where reads land -----

/// Reads that would land in the slow band were the input `shift` bytes
/// further on.
fn slow_reads(landings: &[usize], shift: usize) -> usize {
    landings
        .iter()
        .filter(|&&d| SLOW.contains(&((d + PAGE - shift % PAGE) % PAGE)))
        .count()
}

/// The passes over the input that probe and check a placement: more than
/// one, since a buffer may start a pass where the last one left it.
const PASSES: usize = 3;

/// How far to move a variant's input so that the fewest of its reads
/// land in the slow band, from where its reads landed over [`PASSES`]
/// passes: (shift, reads, slow reads then).
fn best_shift(landings: &[usize]) -> (usize, usize, usize) {
    let shift = (0..PAGE)
        .min_by_key(|&shift| (slow_reads(landings, shift), shift))
        .unwrap_or(0);
    (shift, landings.len(), slow_reads(landings, shift))
}

/// A copy of the input at a chosen offset within a page.
struct Placed {
    backing: Vec<u8>,
    start: usize,
    len: usize,
}

impl Placed {
    fn new(input: &[u8], offset: usize) -> Self {
        let mut placed = Self {
            backing: vec![0; input.len() + 2 * PAGE],
            start: 0,
            len: input.len(),
        };
        placed.start = placed.page() + offset % PAGE;
        let start = placed.start;
        placed.backing[start..start + input.len()].copy_from_slice(input);
        placed
    }

    /// Where the first page of the backing starts.
    fn page(&self) -> usize {
        (PAGE - self.backing.as_ptr() as usize % PAGE) % PAGE
    }

    /// Moves the input `shift` bytes on, modulo a page.
    fn shift(&mut self, shift: usize) {
        let offset = (self.start - self.page() + shift) % PAGE;
        let to = self.page() + offset;
        self.backing
            .copy_within(self.start..self.start + self.len, to);
        self.start = to;
    }

    fn get(&self) -> &[u8] {
        &self.backing[self.start..self.start + self.len]
    }
}

/// Places a variant's input where its reads avoid the slow band: `pass`
/// reads the whole input once and gives where its reads landed, `shift`
/// moves the input. Returns what to print: the slow reads of the passes
/// after the move and before it. Where a reader's buffer is not where it
/// was a few passes before, or its reads not the same size, as
/// tungstenite's may not be, the move may do less than the probe says,
/// or worse than no move: then the input goes back.
fn place(
    variant: &'static str,
    mut pass: impl FnMut() -> Vec<usize>,
    mut shift: impl FnMut(usize),
    probed: &mut Vec<(&'static str, u64)>,
) -> String {
    let before: Vec<usize> = (0..PASSES).flat_map(|_| pass()).collect();
    let (by, _, _) = best_shift(&before);
    shift(by);
    let mut passes = 2 * PASSES;
    let mut placed: Vec<usize> = (0..PASSES).flat_map(|_| pass()).collect();
    if slow_reads(&placed, 0) > slow_reads(&before, 0) {
        // The probe did not hold: back to where the input was.
        shift(PAGE - by);
        placed = (0..PASSES).flat_map(|_| pass()).collect();
        passes += PASSES;
    }
    probed.push((variant, passes as u64));
    format!(
        " {variant} {} of {} (before: {} of {});",
        slow_reads(&placed, 0),
        placed.len(),
        slow_reads(&before, 0),
        before.len()
    )
}

// ----- parse -----

/// A message as read: whether it is text, and its payload.
type Msg = (bool, Bytes);

/// What a parse saw: messages and payload bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Seen {
    messages: usize,
    bytes: usize,
}

/// The messages a check expects, compared as they come and dropped, so
/// that the run that checks holds on to no more memory than a timed one.
struct Expect<'a> {
    want: &'a [Msg],
    next: usize,
    /// The first message that differed.
    wrong: Option<usize>,
}

impl<'a> Expect<'a> {
    fn new(want: &'a [Msg]) -> Self {
        Self {
            want,
            next: 0,
            wrong: None,
        }
    }

    /// Whether exactly the expected messages came.
    fn met(&self) -> bool {
        self.wrong.is_none() && self.next == self.want.len()
    }
}

/// Counts a message and drops it, after comparing it with the expected
/// one in a check.
#[inline(always)]
fn see(seen: &mut Seen, expect: &mut Option<&mut Expect<'_>>, text: bool, payload: Bytes) {
    seen.messages += 1;
    seen.bytes += payload.len();
    if let Some(expect) = expect {
        let want = expect.want.get(expect.next);
        let same = want.is_some_and(|(t, p)| *t == text && *p == payload);
        if !same && expect.wrong.is_none() {
            expect.wrong = Some(expect.next);
        }
        expect.next += 1;
    }
    black_box(payload);
}

/// Every event the connection has, each a whole message, counted.
#[inline(always)]
fn take_messages(
    conn: &mut Conn<WebSocket>,
    seen: &mut Seen,
    expect: &mut Option<&mut Expect<'_>>,
) {
    while let Some(event) = conn.poll_event().expect("a valid message") {
        match event {
            WsEvent::Text(text) => see(seen, expect, true, text),
            WsEvent::Binary(data) => see(seen, expect, false, data),
            other => panic!("not a whole message: {other:?}"),
        }
    }
}

/// cleave: each read fed to a server connection, every event taken.
/// `landed` sees each read and the buffered bytes it was copied to (the
/// timed runs pass [`unseen`], which costs one bounds check a read: the
/// buffer's bytes are still looked up). Generic over the hook, the
/// function is in a callgrind profile twice: the timed one is
/// `cleave_parse::<fn(&[u8], &[u8]) {unseen}>`, and `--toggle-collect`
/// takes both (the bench counts the probe's passes among the calls
/// before timing).
#[inline(never)]
fn cleave_parse<L: FnMut(&[u8], &[u8])>(
    conn: &mut Conn<WebSocket>,
    input: &[u8],
    mut expect: Option<&mut Expect<'_>>,
    landed: &mut L,
) -> Seen {
    let mut seen = Seen::default();
    for read in input.chunks(READ) {
        conn.feed(read, NOW).expect("room in the buffer");
        landed(read, conn.recv_buf().peek());
        take_messages(conn, &mut seen, &mut expect);
    }
    seen
}

/// One side of an in-memory connection: reads give the input at most
/// `cap` bytes at a time (`READ`, or as much as the reader asks for: a
/// socket with a backlog), then the end of the stream; writes are
/// dropped.
///
/// The stream holds its own copy of the input, which [`Reads::place`]
/// moves within a page (see [`Placed`]), and can note where each read
/// was copied to (see [`landing`]).
struct Reads {
    input: Placed,
    at: usize,
    cap: usize,
    landings: Option<Vec<usize>>,
}

impl Reads {
    fn new(input: &[u8], cap: usize) -> Self {
        Self {
            input: Placed::new(input, 0),
            at: 0,
            cap,
            landings: None,
        }
    }

    fn rewind(&mut self) {
        self.at = 0;
    }

    fn is_done(&self) -> bool {
        self.at == self.input.len
    }
}

impl Read for Reads {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let input = self.input.get();
        let n = self.cap.min(input.len() - self.at).min(buf.len());
        let read = &input[self.at..self.at + n];
        buf[..n].copy_from_slice(read);
        if let Some(landings) = &mut self.landings {
            landings.push(landing(read, &buf[..n]).1);
        }
        self.at += n;
        Ok(n)
    }
}

impl Write for Reads {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        Ok(black_box(buf).len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// cleave through the read path of its adapters: each read made into the
/// connection's spare room (`read_with`, which zeroes the room it hands
/// out whenever it takes a block back), every event taken. The stream is
/// read to its last byte, never to its end, so the connection is kept.
#[inline(never)]
fn cleave_read(
    conn: &mut Conn<WebSocket>,
    reads: &mut Reads,
    mut expect: Option<&mut Expect<'_>>,
) -> Seen {
    reads.rewind();
    let mut seen = Seen::default();
    while !reads.is_done() {
        conn.read_with(NOW, |spare| reads.read(spare))
            .expect("room in the buffer");
        take_messages(conn, &mut seen, &mut expect);
    }
    seen
}

/// tungstenite: `count` messages read from the start of the stream.
#[inline(never)]
fn tungstenite_parse(
    ws: &mut Tungstenite<Reads>,
    count: usize,
    mut expect: Option<&mut Expect<'_>>,
) -> Seen {
    ws.get_mut().rewind();
    let mut seen = Seen::default();
    for _ in 0..count {
        match ws.read().expect("a valid message") {
            Message::Text(text) => see(&mut seen, &mut expect, true, text.into()),
            Message::Binary(data) => see(&mut seen, &mut expect, false, data),
            other => panic!("not a data message: {other:?}"),
        }
    }
    seen
}

/// The lower bound's buffer: eight reads (tungstenite's 128 KiB), so that
/// the bytes of a frame cut by a read move to the front of the buffer
/// once every few reads rather than at every read. Of 2, 3, 4 and 8 reads,
/// the fastest for 16 KiB messages, and as fast as the others for small
/// ones.
const LOWER_BOUND_BUFFER: usize = 8 * READ;

/// The second cleave variant of the readers: a receive buffer that keeps
/// a block of eight reads, as the lower bound's. The default block holds
/// about two reads, so the start of a frame that a read cut moves to the
/// front of the block at every read; and a block above 16 KiB is given
/// back whenever the buffer empties.
const BIG_BLOCK: &str = "cleave_conn_128k_block";

fn big_block() -> ConnConfig {
    let recv = RecvBufConfig::default()
        .read_reserve(LOWER_BOUND_BUFFER - READ)
        .expect("a valid reserve")
        .idle_capacity(LOWER_BOUND_BUFFER);
    ConnConfig::default().recv_buf(recv)
}

/// The lower bound: each read appended to one `BytesMut`, the header read,
/// the payload unmasked in place and split off, text checked.
/// `landed` as for [`cleave_parse`].
#[inline(never)]
fn lower_bound_parse<L: FnMut(&[u8], &[u8])>(
    buf: &mut BytesMut,
    input: &[u8],
    mut expect: Option<&mut Expect<'_>>,
    landed: &mut L,
) -> Seen {
    let mut seen = Seen::default();
    for read in input.chunks(READ) {
        buf.extend_from_slice(read);
        landed(read, buf);
        while let Some(&[b0, b1]) = buf.get(..2) {
            let (len, at) = match b1 & 0x7F {
                126 => match buf.get(2..4) {
                    Some(&[a, b]) => (usize::from(u16::from_be_bytes([a, b])), 4),
                    _ => break,
                },
                127 => match buf.get(2..10) {
                    Some(bytes) => {
                        let bytes = <[u8; 8]>::try_from(bytes).expect("eight bytes");
                        (u64::from_be_bytes(bytes) as usize, 10)
                    }
                    None => break,
                },
                short => (usize::from(short), 2),
            };
            if buf.len() < at + 4 + len {
                break;
            }
            let key = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
            buf.advance(at + 4);
            mask(&mut buf[..len], key);
            let payload = buf.split_to(len).freeze();
            let text = b0 & 0x0F == 0x1;
            if text {
                simdutf8::basic::from_utf8(&payload).expect("UTF-8");
            }
            see(&mut seen, &mut expect, text, payload);
        }
    }
    seen
}

/// A reader under test: reads the whole input once, checking what it
/// read or not.
type Reader<'a> = Box<dyn FnMut(Option<&mut Expect<'_>>) -> Seen + 'a>;

fn parse(c: &mut Criterion) {
    for case in CASES {
        let name = format!("parse_{}", case.name);
        if !wanted(&name) {
            continue;
        }
        let payloads = payloads(case);
        let input = frames(case.kind, &payloads, true);
        let count = case.count;
        let text = case.kind == Kind::Text;
        let want: Vec<Msg> = payloads.iter().map(|p| (text, p.clone())).collect();
        let want_seen = Seen {
            messages: count,
            bytes: count * case.len,
        };

        let server =
            |config| Conn::with_config(WebSocket::server(WsConfig::default()), config, NOW);
        let mut conn = server(ConnConfig::default());
        let mut big = server(big_block());
        let mut read_conn = server(ConnConfig::default());
        let mut cleave_reads = Reads::new(&input, READ);
        let mut ws = Tungstenite::from_raw_socket(Reads::new(&input, READ), Role::Server, None);
        let mut ws_large =
            Tungstenite::from_raw_socket(Reads::new(&input, usize::MAX), Role::Server, None);
        let mut buf = BytesMut::with_capacity(LOWER_BOUND_BUFFER);

        // Each variant reads its own copy of the input, placed so that the
        // fewest of its reads are copied a slow distance past their source
        // (see `SLOW`): where that falls depends on where the allocator
        // put the variant's buffer, luck that would otherwise weigh on one
        // variant's time and not on another's.
        let mut conn_input = Placed::new(&input, 0);
        let mut big_input = Placed::new(&input, 0);
        let mut bound_input = Placed::new(&input, 0);
        let mut slow = String::new();
        let mut probed = Vec::new();
        let chosen = |variant: &str| selected(&format!("{name}/{variant}"));
        let feeds = |variant: &'static str,
                     conn: &mut Conn<WebSocket>,
                     input: &mut Placed,
                     probed: &mut Vec<(&'static str, u64)>| {
            if !chosen(variant) {
                return String::new();
            }
            let input = RefCell::new(input);
            place(
                variant,
                || {
                    let mut landings = Vec::new();
                    let input = input.borrow();
                    cleave_parse(conn, input.get(), None, &mut |read, buffered| {
                        landings.push(landing(read, buffered).1);
                    });
                    landings
                },
                |by| input.borrow_mut().shift(by),
                probed,
            )
        };
        slow += &feeds("cleave_conn", &mut conn, &mut conn_input, &mut probed);
        slow += &feeds(BIG_BLOCK, &mut big, &mut big_input, &mut probed);
        let reads_of = |reads: &mut Reads| reads.landings.replace(Vec::new()).unwrap_or_default();
        if chosen("cleave_read") {
            let reads = RefCell::new(&mut cleave_reads);
            reads.borrow_mut().landings = Some(Vec::new());
            slow += &place(
                "cleave_read",
                || {
                    cleave_read(&mut read_conn, &mut reads.borrow_mut(), None);
                    reads_of(&mut reads.borrow_mut())
                },
                |by| reads.borrow_mut().input.shift(by),
                &mut probed,
            );
            reads.borrow_mut().landings = None;
        }
        for (variant, ws) in [
            ("tungstenite", &mut ws),
            ("tungstenite_large_reads", &mut ws_large),
        ] {
            if !chosen(variant) {
                continue;
            }
            let ws = RefCell::new(ws);
            ws.borrow_mut().get_mut().landings = Some(Vec::new());
            slow += &place(
                variant,
                || {
                    let mut ws = ws.borrow_mut();
                    tungstenite_parse(&mut ws, count, None);
                    reads_of(ws.get_mut())
                },
                |by| ws.borrow_mut().get_mut().input.shift(by),
                &mut probed,
            );
            ws.borrow_mut().get_mut().landings = None;
        }
        if chosen("lower_bound") {
            let bound_input = RefCell::new(&mut bound_input);
            slow += &place(
                "lower_bound",
                || {
                    let mut landings = Vec::new();
                    lower_bound_parse(
                        &mut buf,
                        bound_input.borrow().get(),
                        None,
                        &mut |read, buffered| {
                            landings.push(landing(read, buffered).1);
                        },
                    );
                    landings
                },
                |by| bound_input.borrow_mut().shift(by),
                &mut probed,
            );
        }
        println!(
            "{name}, reads copied a slow distance (see `SLOW`), placed:{}",
            slow.trim_end_matches(';')
        );

        let mut readers: Vec<(&'static str, Reader<'_>)> = vec![
            (
                "cleave_conn",
                Box::new(|expect| {
                    cleave_parse(&mut conn, black_box(conn_input.get()), expect, &mut unseen)
                }),
            ),
            (
                BIG_BLOCK,
                Box::new(|expect| {
                    cleave_parse(&mut big, black_box(big_input.get()), expect, &mut unseen)
                }),
            ),
            (
                "cleave_read",
                Box::new(|expect| cleave_read(&mut read_conn, &mut cleave_reads, expect)),
            ),
            (
                "tungstenite",
                Box::new(|expect| tungstenite_parse(&mut ws, count, expect)),
            ),
            (
                "tungstenite_large_reads",
                Box::new(|expect| tungstenite_parse(&mut ws_large, count, expect)),
            ),
            (
                "lower_bound",
                Box::new(|expect| {
                    lower_bound_parse(&mut buf, black_box(bound_input.get()), expect, &mut unseen)
                }),
            ),
        ];
        readers.retain(|(variant, _)| selected(&format!("{name}/{variant}")));

        // The check: the same messages, whole, in order, from each; then
        // the allocations of a second run on the state kept from the first
        // (as when timed), which must see the same again (so the first
        // left nothing behind).
        let mut allocs = String::new();
        for (variant, read) in &mut readers {
            let mut expect = Expect::new(&want);
            assert_eq!(read(Some(&mut expect)), want_seen, "{name}/{variant}");
            assert!(expect.met(), "{name}/{variant} read other messages");
            let (n, seen) = allocations(|| read(None));
            assert_eq!(seen, want_seen, "{name}/{variant}, again");
            allocs += &format!(" {variant} {:.4} ({n} in all);", n as f64 / count as f64);
        }
        println!(
            "{name} ({count} messages, {} B in {} reads), allocations per message:{}",
            input.len(),
            input.len().div_ceil(READ),
            allocs.trim_end_matches(';'),
        );

        let mut runs: Vec<Run<'_>> = readers
            .iter_mut()
            .map(|(variant, read)| -> Run<'_> {
                (
                    *variant,
                    Box::new(|| {
                        black_box(read(None));
                    }),
                )
            })
            .collect();
        measure(c, &name, count, &mut runs, &probed);
    }
}

// ----- encode -----

/// The other side of an in-memory connection: what is written is copied
/// into one reused `Vec` (the kernel's copy into the socket buffer) and
/// counted; after each burst the bytes are gone (`sent`), unless the
/// check keeps them. Reads find nothing.
struct Sink {
    buf: Vec<u8>,
    written: usize,
    keep: bool,
}

impl Sink {
    fn new(keep: bool) -> Self {
        Self {
            buf: Vec::with_capacity(2 << 20),
            written: 0,
            keep,
        }
    }

    /// From now on, what went out is dropped.
    fn forget(&mut self) {
        self.keep = false;
        self.buf.clear();
    }

    /// The burst went out.
    #[inline(always)]
    fn sent(&mut self) {
        if !self.keep {
            black_box(&mut self.buf).clear();
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(buf);
        self.written += buf.len();
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> std::io::Result<usize> {
        let mut n = 0;
        for b in bufs {
            self.buf.extend_from_slice(b);
            n += b.len();
        }
        self.written += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Read for Sink {
    fn read(&mut self, _buf: &mut [u8]) -> std::io::Result<usize> {
        Ok(0)
    }
}

/// Writes all that `conn` has queued into `sink`, as an adapter does.
fn drain(conn: &mut Conn<WebSocket>, sink: &mut Sink) {
    while conn
        .write_with(NOW, |slices| sink.write_vectored(slices))
        .expect("the sink takes all")
        > 0
    {}
}

/// Pushes `frame`, draining the queue into `sink` while it is full.
#[inline(always)]
fn push_or_drain<I: Push>(conn: &mut Conn<WebSocket>, mut frame: I, sink: &mut Sink) {
    loop {
        match conn.push(frame) {
            Ok(ticket) => {
                black_box(ticket);
                return;
            }
            Err(full) => {
                assert!(!matches!(full.error(), Refusal::Closed), "closed");
                frame = full.into_value();
                drain(conn, sink);
            }
        }
    }
}

/// cleave: each message a frame pushed on the connection's queue; the
/// queue drained after each burst (or when full). The same for a client,
/// whose `message` masks the payload into a copy.
#[inline(never)]
fn cleave_encode(
    conn: &mut Conn<WebSocket>,
    kind: Kind,
    payloads: &[Bytes],
    sink: &mut Sink,
) -> usize {
    let before = sink.written;
    for burst in payloads.chunks(BURST) {
        for payload in burst {
            let frame = conn
                .protocol_mut()
                .message(kind, payload.clone())
                .expect("open");
            push_or_drain(conn, frame, sink);
        }
        drain(conn, sink);
        sink.sent();
    }
    sink.written - before
}

/// cleave from borrowed payloads: each message a `message_slice` frame,
/// its header and payload copied (a client's masked) into the queue's
/// run buffer as it is pushed; drained as `cleave_encode`.
#[inline(never)]
fn cleave_encode_slice(
    conn: &mut Conn<WebSocket>,
    kind: Kind,
    payloads: &[Bytes],
    sink: &mut Sink,
) -> usize {
    let before = sink.written;
    for burst in payloads.chunks(BURST) {
        for payload in burst {
            let frame = conn
                .protocol_mut()
                .message_slice(kind, payload)
                .expect("open");
            push_or_drain(conn, frame, sink);
        }
        drain(conn, sink);
        sink.sent();
    }
    sink.written - before
}

/// tungstenite: each message written, a flush after each burst.
#[inline(never)]
fn tungstenite_encode(ws: &mut Tungstenite<Sink>, messages: &[Message]) -> usize {
    let before = ws.get_ref().written;
    for burst in messages.chunks(BURST) {
        for message in burst {
            ws.write(message.clone()).expect("the sink takes all");
        }
        ws.flush().expect("the sink takes all");
        ws.get_mut().sent();
    }
    ws.get_ref().written - before
}

/// Payloads from this size on, the lower bound hands to the socket by
/// reference rather than copying them into its buffer first: a copy
/// cleave does not make either (its queue keeps payloads from
/// `coalesce_below`, 512 bytes, by reference). The groups' payloads are
/// 40 and 128 bytes or 16 KiB, so where between the two the line falls
/// changes nothing.
const BY_REFERENCE: usize = 1024;

/// The lower bound: each header written (at a constant length, as cleave
/// writes it) and each small payload copied after it into one buffer,
/// sized once and reused; each burst handed to the socket in one write
/// (the copy into the kernel, which every variant pays: the lower bound
/// used to write straight into the sink's buffer, as no program outside
/// the kernel can). Large payloads go out by reference in the same
/// write: a vectored one, of the buffer's pieces between them and the
/// payloads.
#[inline(never)]
fn lower_bound_encode(
    sink: &mut Sink,
    staged: &mut Vec<u8>,
    kind: Kind,
    payloads: &[Bytes],
) -> usize {
    let before = sink.written;
    let opcode = opcode(kind);
    for burst in payloads.chunks(BURST) {
        // Where the buffer stood when each large payload came.
        let mut cuts = [0; BURST];
        let mut large = 0;
        for payload in burst {
            put_head(staged, opcode, payload.len(), None);
            if payload.len() < BY_REFERENCE {
                staged.extend_from_slice(payload);
            } else {
                cuts[large] = staged.len();
                large += 1;
            }
        }
        if large == 0 {
            sink.write_all(staged).expect("the sink takes all");
        } else {
            let mut slices = [IoSlice::new(&[]); 2 * BURST + 1];
            let (mut n, mut from) = (0, 0);
            let mut payloads = burst.iter().filter(|p| p.len() >= BY_REFERENCE);
            for (&cut, payload) in cuts[..large].iter().zip(&mut payloads) {
                slices[n] = IoSlice::new(&staged[from..cut]);
                slices[n + 1] = IoSlice::new(payload);
                (n, from) = (n + 2, cut);
            }
            slices[n] = IoSlice::new(&staged[from..]);
            let want: usize = slices[..=n].iter().map(|s| s.len()).sum();
            let wrote = sink
                .write_vectored(&slices[..=n])
                .expect("the sink takes all");
            assert_eq!(wrote, want, "the sink takes all");
        }
        staged.clear();
        sink.sent();
    }
    sink.written - before
}

/// Masks as tungstenite draws them (`rand::random`): rand's thread-local
/// generator, in the process, for cleave and the lower bound alike. (The
/// adapters' `OsEntropy` asks the kernel for 64 masks at a time: a system
/// call that would weigh the same on cleave and its bound, and on neither
/// of tungstenite's messages.)
fn masks(buf: &mut [u8]) {
    rand::RngCore::fill_bytes(&mut rand::rng(), buf);
}

/// The lower bound of a client: the header with a mask from `entropy`,
/// the payload copied into the bound's buffer and masked there; each
/// burst written as [`lower_bound_encode`]'s.
#[inline(never)]
fn lower_bound_encode_masked(
    sink: &mut Sink,
    staged: &mut Vec<u8>,
    entropy: &mut impl Entropy,
    kind: Kind,
    payloads: &[Bytes],
) -> usize {
    let before = sink.written;
    let opcode = opcode(kind);
    for burst in payloads.chunks(BURST) {
        for payload in burst {
            let mut key = [0; 4];
            entropy.fill(&mut key);
            put_head(staged, opcode, payload.len(), Some(key));
            let at = staged.len();
            staged.extend_from_slice(payload);
            mask(&mut staged[at..], key);
        }
        sink.write_all(staged).expect("the sink takes all");
        staged.clear();
        sink.sent();
    }
    sink.written - before
}

fn tungstenite_messages(kind: Kind, payloads: &[Bytes]) -> Vec<Message> {
    payloads
        .iter()
        .map(|p| match kind {
            Kind::Text => Message::Text(p.clone().try_into().expect("UTF-8")),
            Kind::Binary => Message::Binary(p.clone()),
        })
        .collect()
}

fn encode(c: &mut Criterion) {
    for case in CASES {
        let name = format!("encode_{}", case.name);
        if !wanted(&name) {
            continue;
        }
        let payloads = payloads(case);
        let messages = tungstenite_messages(case.kind, &payloads);
        let kind = case.kind;
        let count = case.count;
        let want = frames(kind, &payloads, false);

        // The check, on the state kept for timing: the same bytes from
        // all three. From then on the socket drops what went out.
        let mut conn = Conn::new(WebSocket::server(WsConfig::default()), NOW);
        let mut sink = Sink::new(true);
        let mut slice_conn = Conn::new(WebSocket::server(WsConfig::default()), NOW);
        let mut slice_sink = Sink::new(true);
        let mut ws = Tungstenite::from_raw_socket(Sink::new(true), Role::Server, None);
        let mut lower = Sink::new(true);
        let mut staged = Vec::with_capacity(BURST * (case.len + 14));
        let wrote = [
            cleave_encode(&mut conn, kind, &payloads, &mut sink),
            cleave_encode_slice(&mut slice_conn, kind, &payloads, &mut slice_sink),
            tungstenite_encode(&mut ws, &messages),
            lower_bound_encode(&mut lower, &mut staged, kind, &payloads),
        ];
        assert_eq!(wrote, [want.len(); 4], "{name}");
        for (variant, socket) in [
            ("cleave_conn", &mut sink),
            ("cleave_slice", &mut slice_sink),
            ("tungstenite", ws.get_mut()),
            ("lower_bound", &mut lower),
        ] {
            assert!(socket.buf == want, "{name}/{variant} wrote other bytes");
            socket.forget();
        }

        let (cleave, _) = allocations(|| cleave_encode(&mut conn, kind, &payloads, &mut sink));
        let (slice, _) =
            allocations(|| cleave_encode_slice(&mut slice_conn, kind, &payloads, &mut slice_sink));
        let (tung, _) = allocations(|| tungstenite_encode(&mut ws, &messages));
        let (lower_allocs, _) =
            allocations(|| lower_bound_encode(&mut lower, &mut staged, kind, &payloads));
        let per = |n: u64| n as f64 / count as f64;
        println!(
            "{name} ({count} messages, {} B), allocations per message: cleave_conn {:.4} \
             ({cleave} in all), cleave_slice {:.4} ({slice}), tungstenite {:.4} ({tung}), \
             lower_bound {:.4} ({lower_allocs})",
            want.len(),
            per(cleave),
            per(slice),
            per(tung),
            per(lower_allocs),
        );

        let mut runs: Vec<Run<'_>> = vec![
            (
                "cleave_conn",
                Box::new(|| {
                    black_box(cleave_encode(
                        &mut conn,
                        kind,
                        black_box(&payloads),
                        &mut sink,
                    ));
                }),
            ),
            (
                "cleave_slice",
                Box::new(|| {
                    black_box(cleave_encode_slice(
                        &mut slice_conn,
                        kind,
                        black_box(&payloads),
                        &mut slice_sink,
                    ));
                }),
            ),
            (
                "tungstenite",
                Box::new(|| {
                    black_box(tungstenite_encode(&mut ws, black_box(&messages)));
                }),
            ),
            (
                "lower_bound",
                Box::new(|| {
                    black_box(lower_bound_encode(
                        &mut lower,
                        &mut staged,
                        kind,
                        black_box(&payloads),
                    ));
                }),
            ),
        ];
        measure(c, &name, count, &mut runs, &[]);
    }
}

fn encode_client(c: &mut Criterion) {
    let case = CASES[1];
    let name = format!("encode_client_{}", case.name);
    if !wanted(&name) {
        return;
    }
    let payloads = payloads(case);
    let messages = tungstenite_messages(case.kind, &payloads);
    let kind = case.kind;
    let count = case.count;
    let text = kind == Kind::Text;
    let want: Vec<Msg> = payloads.iter().map(|p| (text, p.clone())).collect();
    let wire_len = frames(kind, &payloads, true).len();

    // The check, on the state kept for timing: each output, unmasked,
    // gives the messages back. From then on the socket drops what went
    // out.
    let mut conn = Conn::new(WebSocket::client(WsConfig::default(), masks), NOW);
    let mut sink = Sink::new(true);
    let mut slice_conn = Conn::new(WebSocket::client(WsConfig::default(), masks), NOW);
    let mut slice_sink = Sink::new(true);
    let mut ws = Tungstenite::from_raw_socket(Sink::new(true), Role::Client, None);
    let mut lower = Sink::new(true);
    let mut staged = Vec::with_capacity(BURST * (case.len + 14));
    let mut entropy = masks;
    let wrote = [
        cleave_encode(&mut conn, kind, &payloads, &mut sink),
        cleave_encode_slice(&mut slice_conn, kind, &payloads, &mut slice_sink),
        tungstenite_encode(&mut ws, &messages),
        lower_bound_encode_masked(&mut lower, &mut staged, &mut entropy, kind, &payloads),
    ];
    assert_eq!(wrote, [wire_len; 4], "{name}");
    for (variant, socket) in [
        ("cleave_conn", &mut sink),
        ("cleave_slice", &mut slice_sink),
        ("tungstenite", ws.get_mut()),
        ("lower_bound", &mut lower),
    ] {
        let mut expect = Expect::new(&want);
        lower_bound_parse(
            &mut BytesMut::new(),
            &socket.buf,
            Some(&mut expect),
            &mut unseen,
        );
        assert!(expect.met(), "{name}/{variant} wrote other messages");
        socket.forget();
    }

    let (cleave, _) = allocations(|| cleave_encode(&mut conn, kind, &payloads, &mut sink));
    let (slice, _) =
        allocations(|| cleave_encode_slice(&mut slice_conn, kind, &payloads, &mut slice_sink));
    let (tung, _) = allocations(|| tungstenite_encode(&mut ws, &messages));
    let (lower_allocs, _) = allocations(|| {
        lower_bound_encode_masked(&mut lower, &mut staged, &mut entropy, kind, &payloads)
    });
    let per = |n: u64| n as f64 / count as f64;
    println!(
        "{name} ({count} messages, {wire_len} B), allocations per message: cleave_conn {:.4} \
         ({cleave} in all), cleave_slice {:.4} ({slice}), tungstenite {:.4} ({tung}), \
         lower_bound {:.4} ({lower_allocs})",
        per(cleave),
        per(slice),
        per(tung),
        per(lower_allocs),
    );

    let mut runs: Vec<Run<'_>> = vec![
        (
            "cleave_conn",
            Box::new(|| {
                black_box(cleave_encode(
                    &mut conn,
                    kind,
                    black_box(&payloads),
                    &mut sink,
                ));
            }),
        ),
        (
            "cleave_slice",
            Box::new(|| {
                black_box(cleave_encode_slice(
                    &mut slice_conn,
                    kind,
                    black_box(&payloads),
                    &mut slice_sink,
                ));
            }),
        ),
        (
            "tungstenite",
            Box::new(|| {
                black_box(tungstenite_encode(&mut ws, black_box(&messages)));
            }),
        ),
        (
            "lower_bound",
            Box::new(|| {
                let n = lower_bound_encode_masked(
                    &mut lower,
                    &mut staged,
                    &mut entropy,
                    kind,
                    black_box(&payloads),
                );
                black_box(n);
            }),
        ),
    ];
    measure(c, &name, count, &mut runs, &[]);
}

criterion_group! {
    name = websocket;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(SAMPLES);
    targets = parse, encode, encode_client
}
criterion_main!(websocket);
