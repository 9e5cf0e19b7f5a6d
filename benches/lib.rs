//! Shared inputs and helpers for cleave's benches.
//!
//! Each bench group runs cleave beside the peer users would pick instead and
//! a hand-written lower bound, on the same input cut into the same pieces,
//! so one run gives the ratios.

pub mod alloc;
pub mod process;

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use cleave_proto::{Decoder, RecvBuf, RecvBufConfig};

/// Size of a "coalesced" read: what one socket read of a busy stream gives.
pub const COALESCED: usize = 64 * 1024;
/// Size of a "fragmented" read: a stream that trickles in.
pub const FRAGMENTED: usize = 64;

/// `count` lines of `len - 1` bytes plus `\n`.
pub fn lines_input(count: usize, len: usize) -> Vec<u8> {
    let mut line = vec![b'x'; len - 1];
    line.push(b'\n');
    line.repeat(count)
}

/// `count` frames of a 4-byte big-endian length and a `body`-byte body.
pub fn length_input(count: usize, body: usize) -> Vec<u8> {
    let mut frame = (body as u32).to_be_bytes().to_vec();
    frame.resize(4 + body, 0x5a);
    frame.repeat(count)
}

/// `count` frames of a LEB128 length and a `body`-byte body.
pub fn varint_input(count: usize, body: usize) -> Vec<u8> {
    let mut frame = Vec::new();
    let mut n = body as u64;
    while n >= 0x80 {
        frame.push((n as u8) | 0x80);
        n >>= 7;
    }
    frame.push(n as u8);
    frame.resize(frame.len() + body, 0x5a);
    frame.repeat(count)
}

/// Runs a future that never waits (its I/O is an in-memory slice) to
/// completion on the current thread.
pub fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

/// A `tokio::io::AsyncRead` over a slice that gives at most `piece` bytes per
/// read, the way a socket hands over what has arrived.
#[derive(Debug)]
pub struct Pieces<'a> {
    data: &'a [u8],
    piece: usize,
}

impl<'a> Pieces<'a> {
    /// Reads `data` in pieces of at most `piece` bytes.
    pub fn new(data: &'a [u8], piece: usize) -> Self {
        Self { data, piece }
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl tokio::io::AsyncRead for Pieces<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let n = self.piece.min(self.data.len()).min(buf.remaining());
        let (head, tail) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = tail;
        Poll::Ready(Ok(()))
    }
}

/// An in-memory writer that takes everything and only counts it; the count
/// goes through `black_box`, so no write is optimized away.
#[derive(Debug, Default)]
pub struct Counting {
    /// Bytes written so far.
    pub bytes: usize,
}

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += black_box(buf).len();
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
        let n = black_box(bufs).iter().map(|b| b.len()).sum();
        self.bytes += n;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The project README's examples (the core's and the adapters'), compiled
/// and run as doctests here, in the workspace where every crate is in
/// reach (this crate is not published).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// What a variant reports: frames and payload bytes, to check all agree.
pub type Tally = (usize, usize);

/// Counts a frame and its bytes.
pub fn tally(t: &mut Tally, frame: &[u8]) {
    t.0 += 1;
    t.1 += frame.len();
}

/// `input` cut into `piece`-byte reads.
pub fn pieces_of(input: &[u8], piece: usize) -> impl Iterator<Item = &[u8]> {
    input.chunks(piece)
}

/// cleave: each piece fed to a [`RecvBuf`], every frame taken with
/// `decoder` (the read bench's variant, and `lines_count`'s).
#[inline(never)]
pub fn cleave_run<D: Decoder<Item = Bytes>>(
    mut decoder: D,
    config: RecvBufConfig,
    input: &[u8],
    piece: usize,
) -> Tally {
    let mut buf = RecvBuf::with_config(config);
    let mut t = (0, 0);
    for chunk in pieces_of(input, piece) {
        buf.feed(chunk).unwrap();
        while let Some(frame) = decoder.decode(&mut buf).unwrap() {
            tally(&mut t, &frame);
            black_box(frame);
        }
    }
    t
}

/// Lower bound for lines: a buffer sized once, memchr over the unsearched
/// part only, split the line off, freeze, skip the delimiter. (Splitting
/// the delimiter off with the line and truncating the frozen `Bytes`
/// afterwards takes the same instructions and, here, half again the time.)
#[inline(never)]
pub fn manual_lines(input: &[u8], piece: usize) -> Tally {
    let mut buf = BytesMut::with_capacity(2 * COALESCED);
    let mut t = (0, 0);
    let mut searched = 0;
    for chunk in pieces_of(input, piece) {
        buf.extend_from_slice(chunk);
        // Search only bytes not searched yet: none when the last line
        // ended the read.
        while searched < buf.len() {
            let Some(i) = memchr::memchr(b'\n', &buf[searched..]) else {
                break;
            };
            let line = buf.split_to(searched + i).freeze();
            buf.advance(1);
            searched = 0;
            tally(&mut t, &line);
            black_box(line);
        }
        searched = buf.len();
    }
    t
}

// ----- where reads land -----

/// A page: where a copy lands is looked at modulo this.
pub const PAGE: usize = 4096;

/// The distances past the source, modulo a page, at which this machine's
/// `memcpy` of a 16 KiB read is slow: 15 times slower at 1 to 15 bytes,
/// 1.3 to 1.7 times up to 63 (`cargo run --release -p cleave-benches
/// --bin copy_distance`). The benches that copy such reads place their
/// inputs to keep each variant's reads out of it.
pub const SLOW: core::ops::Range<usize> = 1..64;

/// A cache line: a 16 KiB read copied to the start of one is faster than
/// one copied to its middle, so the benches that copy such reads start
/// every variant's buffer at the same offset into a line.
pub const LINE: usize = 64;

/// The first of `make`'s values whose memory (at `ptr`) starts `offset`
/// bytes into a cache line, or the 64th made: where an allocation starts
/// within a line is the allocator's choice, and a bound whose buffer
/// starts elsewhere than the code's under test measures that luck too.
/// The values made before it are dropped after it is chosen.
pub fn at_line_offset<T>(
    offset: usize,
    mut make: impl FnMut() -> T,
    ptr: impl Fn(&T) -> usize,
) -> T {
    let mut tried = Vec::new();
    loop {
        let made = make();
        if ptr(&made) % LINE == offset || tried.len() == 63 {
            return made;
        }
        tried.push(made);
    }
}

/// A `landed` hook (a bench loop's look at where each read was copied)
/// that looks at nothing: inlined, so the timed loops pay nothing for it.
#[inline(always)]
pub fn unseen(_: &[u8], _: &[u8]) {}

/// Where a read's copy landed: its page offset, and how far past its
/// source it lies (modulo a page). `buffered` ends with the copy.
#[inline]
pub fn landing(read: &[u8], buffered: &[u8]) -> (usize, usize) {
    let dst = buffered[buffered.len() - read.len()..].as_ptr() as usize;
    (dst % PAGE, dst.wrapping_sub(read.as_ptr() as usize) % PAGE)
}
