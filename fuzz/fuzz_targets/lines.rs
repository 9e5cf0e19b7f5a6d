//! `Lines` on any bytes and any configuration: whole, byte-at-a-time and
//! cut input give the same frames and outcome, errors are final, and every
//! byte ends in a frame, its delimiter or the rest.

#![no_main]

use cleave_proto::{Lines, LinesConfig, RecvBufConfig};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    let Some((&[knobs, max, a, b], input)) = data.split_first_chunk::<4>() else {
        return;
    };
    let config = LinesConfig::default()
        .strip_cr(knobs & 1 != 0)
        .utf8(knobs & 2 != 0)
        .delimiter(if knobs & 4 != 0 { 0 } else { b'\n' })
        .unterminated_last_line(knobs & 8 != 0)
        .max_length(usize::from(max));
    let sizes = [usize::from(a % 64) + 1, usize::from(b % 64) + 1];
    let run = harness::assert_chunking_invariant(
        || Lines::with_config(config),
        RecvBufConfig::default(),
        input,
        &sizes,
        harness::Placement::Head,
    );
    for cut in &run.cuts {
        assert!(cut.frame.len() <= usize::from(max));
    }
});
