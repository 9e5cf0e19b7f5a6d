//! Heap allocations per decoded frame in steady state, counted by a global
//! allocator: zero for every codec, whether input is fed from a slice or
//! read into the buffer's spare room.

#[path = "support/counting.rs"]
mod counting;

use counting::{allocations, live_bytes};

use cleave_proto::{
    Bytes, Decoder, Encoder, LengthPrefixed, Lines, LinesConfig, RecvBuf, RecvBufConfig, Varint,
    WriteQueue,
};

const FRAMES: usize = 20_000;
const WARM_UP: usize = 2_000;

#[derive(Clone, Copy)]
enum Input {
    /// `feed` slices of this size.
    Feed(usize),
    /// Read into `spare_mut`, at most this much per read.
    Read(usize),
}

/// Decodes `stream` and returns the allocations made after the first
/// `WARM_UP` frames, and the number of frames decoded after them.
fn steady_allocations<D: Decoder>(
    mut decoder: D,
    config: RecvBufConfig,
    stream: &[u8],
    input: Input,
) -> (u64, usize) {
    let mut buf = RecvBuf::with_config(config);
    let mut decoded = 0;
    let mut start = None;
    let mut rest = stream;
    while !rest.is_empty() {
        let n = match input {
            Input::Feed(size) => {
                let n = size.min(rest.len());
                buf.feed(&rest[..n]).unwrap();
                n
            }
            Input::Read(size) => {
                let spare = buf.spare_mut().unwrap();
                let n = size.min(rest.len()).min(spare.len());
                spare[..n].copy_from_slice(&rest[..n]);
                buf.commit(n).unwrap();
                n
            }
        };
        rest = &rest[n..];
        while let Some(frame) = decoder.decode(&mut buf).unwrap() {
            drop(frame);
            decoded += 1;
            if decoded == WARM_UP {
                start = Some(allocations());
            }
        }
    }
    assert_eq!(decoded, FRAMES);
    (allocations() - start.unwrap(), FRAMES - WARM_UP)
}

fn lines_stream() -> Vec<u8> {
    let line = format!("{}\r\n", "é".repeat(30));
    line.repeat(FRAMES).into_bytes()
}

fn length_stream(body: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..FRAMES {
        out.extend_from_slice(&(body as u32).to_be_bytes());
        out.resize(out.len() + body, 7);
    }
    out
}

fn varint_stream() -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..FRAMES {
        out.extend_from_slice(&[0xac, 0x02]); // 300
        out.resize(out.len() + 300, 7);
    }
    out
}

const INPUTS: [Input; 4] = [
    Input::Feed(64),
    Input::Feed(4096),
    Input::Read(1500),
    Input::Read(64 * 1024),
];

#[test]
fn zero_allocations_per_frame_in_steady_state() {
    let config = RecvBufConfig::default();
    let utf8 = LinesConfig::default().utf8(true);
    for input in INPUTS {
        let cases = [
            (
                "lines",
                steady_allocations(Lines::new(), config, &lines_stream(), input),
            ),
            (
                "lines utf8",
                steady_allocations(Lines::with_config(utf8), config, &lines_stream(), input),
            ),
            (
                "length 24",
                steady_allocations(LengthPrefixed::new(), config, &length_stream(24), input),
            ),
            (
                "length 1024",
                steady_allocations(LengthPrefixed::new(), config, &length_stream(1024), input),
            ),
            (
                "varint 300",
                steady_allocations(Varint::new(), config, &varint_stream(), input),
            ),
        ];
        for (name, (allocs, frames)) in cases {
            assert_eq!(
                allocs, 0,
                "{name}: {allocs} allocations for {frames} frames"
            );
        }
    }
}

#[test]
fn copying_small_frames_costs_one_allocation_each() {
    let config = RecvBufConfig::default().copy_frames_up_to(256);
    let (allocs, frames) = steady_allocations(
        LengthPrefixed::new(),
        config,
        &length_stream(24),
        Input::Read(4096),
    );
    // One per frame, plus now and then a block for the reads.
    let frames = frames as u64;
    assert!(
        allocs >= frames && allocs <= frames + frames / 100,
        "{allocs} for {frames} frames"
    );
}

/// Pushes `count` writes made by `make`, draining as a writer would (all of
/// it, in writes of at most 64 KiB); returns the allocations made after the
/// first `WARM_UP` pushes.
fn queue_allocations(count: usize, mut make: impl FnMut(&mut WriteQueue)) -> u64 {
    let mut queue = WriteQueue::new();
    let mut start = None;
    for i in 0..count {
        if i == WARM_UP {
            start = Some(allocations());
        }
        make(&mut queue);
        if queue.len() >= 32 * 1024 || i + 1 == count {
            while !queue.is_flushed() {
                let n = {
                    let mut slices = [&b""[..]; 64];
                    let n = queue.chunks(&mut slices);
                    slices[..n]
                        .iter()
                        .map(|s| s.len())
                        .sum::<usize>()
                        .min(64 * 1024)
                };
                queue.advance(n).unwrap();
            }
        }
    }
    allocations() - start.unwrap()
}

#[test]
fn zero_allocations_per_push_in_steady_state() {
    let big = Bytes::from(vec![7u8; 16 * 1024]);
    let allocs = queue_allocations(FRAMES, |q| {
        q.push(big.clone()).unwrap();
    });
    assert_eq!(allocs, 0, "16 KiB pushes");

    // Small writes are copied into a staging block of 16 KiB. A block is
    // reused once the runs cut from it are written; one still queued when
    // the block fills costs a new block: at most one per 16 KiB of small
    // writes (one per 256 pushes of 64 bytes), never one per push.
    let small = Bytes::from_static(&[1u8; 64]);
    let allocs = queue_allocations(FRAMES, |q| {
        q.push(small.clone()).unwrap();
    });
    let blocks = ((FRAMES - WARM_UP) * 64 / (16 * 1024)) as u64;
    assert!(
        allocs <= blocks + 1,
        "64-byte pushes: {allocs} allocations, {blocks} blocks"
    );

    // Encoded frames: the header inline, copied into the run buffer; the
    // body as it is.
    let body = Bytes::from(vec![9u8; 1024]);
    let mut codec = LengthPrefixed::new();
    let allocs = queue_allocations(FRAMES, |q| {
        let frame = codec.encode(body.clone()).unwrap();
        q.push_frame(frame).unwrap();
    });
    assert_eq!(allocs, 0, "length-prefixed 1 KiB frames");
}

/// An emptied buffer gives its block back at once, not at the next read:
/// the view's own capacity shrinks as frames are split off, so it cannot
/// be what decides.
#[test]
fn an_emptied_buffer_frees_a_large_block_without_waiting_for_the_next_read() {
    let before = live_bytes();
    let mut buf = RecvBuf::new();
    buf.feed(&vec![1u8; 4 << 20]).unwrap();
    drop(buf.split_to(4 << 20).unwrap()); // the frame ends where the block does
    assert!(
        live_bytes() - before < 64 * 1024,
        "{} bytes still held",
        live_bytes() - before
    );
    assert_eq!(buf.capacity(), 0);

    // Read in full reads with no idle allowance: each emptying frees.
    let config = RecvBufConfig::default().idle_capacity(0);
    let mut buf = RecvBuf::with_config(config);
    let before = live_bytes();
    let n = buf.spare_mut().unwrap().len();
    buf.commit(n).unwrap();
    drop(buf.take_tail());
    assert_eq!(live_bytes() - before, 0);
    assert_eq!(buf.capacity(), 0);
}

#[test]
fn release_if_empty_frees_the_block_whatever_its_size() {
    let config = RecvBufConfig::default().read_reserve(64).unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(&[7; 64]).unwrap(); // fills its block to the end
    let before = live_bytes();
    drop(buf.split_to(64).unwrap());
    assert!(
        buf.capacity() > 0,
        "a small block is kept for the next read"
    );
    assert!(buf.release_if_empty());
    assert!(live_bytes() < before, "the block was freed");
    assert_eq!(buf.capacity(), 0);
    assert!(!buf.release_if_empty(), "nothing left to free");
}
