//! How long the platform's `memcpy` takes to copy 16 KiB reads (the
//! reads of the `http1` body bench) into one buffer, by how far the
//! destination lies past the source within a 4 KiB page.
//!
//! The body bench places its inputs by this: on some machines a band of
//! distances is many times slower than the rest (on the AMD EPYC VM this
//! project measures on, with glibc 2.36, 1 to 15 bytes past is 15 times
//! slower, because `memcpy` uses `rep movsb` there), so where the
//! allocator happens to put a variant's buffer could decide its time.
//!
//! Run: `cargo run --release -p cleave-benches --bin copy_distance`.
//! It prints the time per MiB at every distance from 0 to 127 bytes, then
//! at every 64 bytes across the page: the best of five runs over an
//! 8 MiB source (so from the last-level cache, not from memory). It
//! takes about a second.

use std::hint::black_box;
use std::time::Instant;

use cleave_benches::PAGE;

const READ: usize = 16 * 1024;
const SOURCE: usize = 8 << 20;

fn main() {
    let source = vec![0x5au8; SOURCE + 2 * PAGE];
    let mut dest = vec![0u8; READ + 2 * PAGE];
    let src_at = (PAGE - source.as_ptr() as usize % PAGE) % PAGE + 512;
    let dst_page = (PAGE - dest.as_ptr() as usize % PAGE) % PAGE;
    let src = &source[src_at..src_at + SOURCE];
    let mut time = |distance: usize| {
        let at = dst_page + (512 + distance) % PAGE;
        let dst = &mut dest[at..at + READ];
        let mut best = f64::MAX;
        for _ in 0..5 {
            let start = Instant::now();
            for read in src.chunks(READ) {
                dst.copy_from_slice(black_box(read));
                black_box(&mut *dst);
            }
            best = best.min(start.elapsed().as_secs_f64());
        }
        best * 1e6 / (SOURCE >> 20) as f64
    };
    println!("distance (bytes past the source, modulo a page) -> µs per MiB");
    let near: Vec<String> = (0..128).map(|d| format!("{d}:{:.1}", time(d))).collect();
    println!("{}", near.join(" "));
    let across: Vec<String> = (0..PAGE)
        .step_by(64)
        .map(|d| format!("{d}:{:.1}", time(d)))
        .collect();
    println!("{}", across.join(" "));
}
