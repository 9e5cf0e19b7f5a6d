//! Lines read in pieces, a fixed number of times, for instruction counts:
//! `valgrind --tool=callgrind` over this binary gives totals that divide
//! by a known number of lines (criterion's `--profile-time` runs an
//! unknown number of iterations). The variants are the read bench's own
//! functions, on its input: 1 MiB of 64-byte lines.
//!
//! ```text
//! cargo build --release -p cleave-benches --bin lines_count
//! valgrind --tool=callgrind --toggle-collect='cleave_benches::cleave_run*' \
//!     target/release/lines_count cleave fragmented 20
//! valgrind --tool=callgrind --toggle-collect='cleave_benches::manual_lines*' \
//!     target/release/lines_count manual fragmented 20
//! ```
//!
//! Then instructions per line = the total / the lines it prints.

use cleave_benches::{cleave_run, lines_input, manual_lines, COALESCED, FRAGMENTED};
use cleave_proto::{Lines, LinesConfig, RecvBufConfig};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: lines_count cleave|manual coalesced|fragmented|straddling RUNS";
    let [variant, mode, runs] = &args[..] else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let runs: usize = runs.parse().unwrap_or_else(|_| panic!("{usage}"));
    let input = lines_input(16 * 1024, 64);
    let (input, piece) = match mode.as_str() {
        "coalesced" => (input, COALESCED),
        "fragmented" => (input, FRAGMENTED),
        "straddling" => {
            // After a 32-byte line, every 64-byte line straddles two reads.
            let mut straddled = lines_input(1, 32);
            straddled.extend_from_slice(&input);
            (straddled, FRAGMENTED)
        }
        _ => panic!("{usage}"),
    };
    let bare = LinesConfig::default().strip_cr(false);
    let mut lines = 0;
    for _ in 0..runs {
        lines += match variant.as_str() {
            "cleave" => cleave_run(
                Lines::with_config(bare),
                RecvBufConfig::default(),
                &input,
                piece,
            ),
            "manual" => manual_lines(&input, piece),
            _ => panic!("{usage}"),
        }
        .0;
    }
    println!("{variant} {mode}: {lines} lines");
}
