//! `Varint` on any bytes: whole, byte-at-a-time and cut input give the same
//! frames and outcome, errors are final, and every byte ends in a frame, its
//! length prefix or the rest.

#![no_main]

use cleave_proto::{RecvBufConfig, Varint, VarintConfig};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    let Some((&[knobs, max, a, b], input)) = data.split_first_chunk::<4>() else {
        return;
    };
    let config = VarintConfig::default()
        .allow_non_minimal(knobs & 1 != 0)
        .max_frame_length(u64::from(max) * 8);
    let sizes = [usize::from(a % 64) + 1, usize::from(b % 64) + 1];
    let run = harness::assert_chunking_invariant(
        || Varint::with_config(config),
        RecvBufConfig::default(),
        input,
        &sizes,
        harness::Placement::Tail,
    );
    for cut in &run.cuts {
        let head = (cut.end - cut.start) as usize - cut.frame.len();
        assert!((1..=cleave_proto::MAX_VARINT_LEN).contains(&head));
    }
});
