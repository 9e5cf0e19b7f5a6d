//! What a spliced tunnel's pipes cost the kernel while idle: opens
//! `--pipes N` pipes (as `Pipes` does: `pipe2` with `O_NONBLOCK |
//! O_CLOEXEC`, the system's size) and reads the kernel's slab memory
//! (`Slab` in /proc/meminfo) before and after. An idle pipe holds no data
//! pages; a pipe in use holds references to the pages splice(2) moved out
//! of a socket's receive queue, not copies of them. The figure is
//! system-wide: run it on a quiet machine, with a descriptor limit above
//! 2 N, and read it as an estimate (the slab caches move by a few hundred
//! bytes per pipe between runs).
//!
//! Run: `cargo run --release -p cleave-benches --bin pipe_memory -- --pipes 8000`

#[cfg(target_os = "linux")]
fn main() {
    use std::os::fd::OwnedFd;

    use rustix::pipe::{fcntl_getpipe_size, pipe_with, PipeFlags};

    let mut pipes = 8000usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, n] = &args[..] {
        if flag == "--pipes" {
            pipes = n
                .parse()
                .ok()
                .filter(|&n| n > 0)
                .expect("--pipes takes a positive number");
        }
    }
    let before = slab();
    let open: Vec<(OwnedFd, OwnedFd)> = (0..pipes)
        .map(|_| pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK).expect("a pipe"))
        .collect();
    let after = slab();
    let size = fcntl_getpipe_size(&open[0].1).expect("F_GETPIPE_SZ");
    let per_pipe = (after - before) as f64 / pipes as f64;
    println!(
        "{pipes} idle pipes of {} KiB: {per_pipe:.0} B of kernel slab per pipe \
         ({:.0} B per spliced tunnel, one pipe each way)",
        size / 1024,
        2.0 * per_pipe
    );
    drop(open);
}

/// `Slab` of /proc/meminfo, in bytes.
#[cfg(target_os = "linux")]
fn slab() -> i64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    meminfo
        .lines()
        .find_map(|line| line.strip_prefix("Slab:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<i64>().ok())
        .expect("Slab in /proc/meminfo")
        * 1024
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("pipe_memory measures Linux pipes");
}
