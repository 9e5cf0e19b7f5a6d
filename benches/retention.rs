//! Should small frames be copied out instead of split off?
//!
//! A split frame is a view of the block it was read into and keeps that
//! whole block alive; bytes-handoff copies frames of up to 256 bytes for that
//! reason. This program measures both sides of the trade on one stream:
//! 16 MiB of 64-byte lines read in 8 KiB reads (into `spare_mut`, as an
//! adapter does), a consumer that keeps every `k`-th frame and drops the
//! rest. It reports the heap still held once the stream is decoded (per byte
//! of frames kept), the peak, and the decode time per frame.
//!
//! Run: `cargo bench -p cleave-benches --bench retention`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use cleave_benches::lines_input;
use cleave_proto::{Bytes, Decoder, Lines, LinesConfig, RecvBuf, RecvBufConfig};

struct Tracking;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards every call to the system allocator unchanged and only
// updates two counters.
unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(live, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

const READ: usize = 8 * 1024;

struct Outcome {
    kept_bytes: usize,
    held: usize,
    peak: usize,
    ns_per_frame: f64,
}

/// Decodes `input` and keeps every `keep_every`-th frame (0: none).
fn run(input: &[u8], copy_up_to: usize, keep_every: usize) -> Outcome {
    let config = RecvBufConfig::default()
        .read_reserve(READ)
        .expect("valid reserve")
        .copy_frames_up_to(copy_up_to);
    let lines = LinesConfig::default().strip_cr(false);
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut kept: Vec<Bytes> = Vec::with_capacity(input.len() / 64);
    let reserved = LIVE.load(Ordering::Relaxed);
    let start = Instant::now();
    let mut frames = 0usize;
    {
        let mut buf = RecvBuf::with_config(config);
        let mut decoder = Lines::with_config(lines);
        let mut rest = input;
        while !rest.is_empty() {
            let spare = buf.spare_mut().expect("room");
            let n = spare.len().min(rest.len());
            spare[..n].copy_from_slice(&rest[..n]);
            buf.commit(n).expect("within spare");
            rest = &rest[n..];
            while let Some(frame) = decoder.decode(&mut buf).expect("valid lines") {
                frames += 1;
                if keep_every != 0 && frames.is_multiple_of(keep_every) {
                    kept.push(frame);
                } else {
                    black_box(frame);
                }
            }
        }
    }
    let elapsed = start.elapsed();
    let held = LIVE.load(Ordering::Relaxed) - reserved;
    let peak = PEAK.load(Ordering::Relaxed) - reserved;
    let kept_bytes = kept.iter().map(Bytes::len).sum();
    drop(kept);
    Outcome {
        kept_bytes,
        held,
        peak,
        ns_per_frame: elapsed.as_nanos() as f64 / frames as f64,
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let input = lines_input(256 * 1024, 64); // 16 MiB
    println!("16 MiB of 64-byte lines, {READ} B reads; best of 5 runs each");
    println!(
        "{:<22} {:>10} {:>12} {:>14} {:>12} {:>10}",
        "policy", "keep", "kept", "held after", "peak", "ns/frame"
    );
    for keep_every in [0usize, 1024, 64, 1] {
        for (name, copy_up_to) in [("split (default)", 0usize), ("copy frames <= 256 B", 256)] {
            let best = (0..5)
                .map(|_| run(&input, copy_up_to, keep_every))
                .min_by(|a, b| a.ns_per_frame.total_cmp(&b.ns_per_frame))
                .expect("five runs");
            let keep = if keep_every == 0 {
                "none".to_string()
            } else {
                format!("1/{keep_every}")
            };
            println!(
                "{:<22} {:>10} {:>10} B {:>12} B {:>10} B {:>10.1}",
                name, keep, best.kept_bytes, best.held, best.peak, best.ns_per_frame
            );
        }
    }
}
