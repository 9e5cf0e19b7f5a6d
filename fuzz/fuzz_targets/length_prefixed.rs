//! `LengthPrefixed` on any bytes and any layout: whole, byte-at-a-time and
//! cut input give the same frames and outcome, errors are final, and every
//! byte ends in a frame, its header or the rest.

#![no_main]

use cleave_proto::{Endian, LengthConfig, LengthPrefixed, RecvBufConfig};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;

fuzz_target!(|data: &[u8]| {
    let Some((&[knobs, adjustment, skip, max, a, b], input)) = data.split_first_chunk::<6>() else {
        return;
    };
    let width = [1, 2, 3, 4, 8][usize::from(knobs >> 2) % 5];
    let Ok(config) = LengthConfig::default().field_width(width) else {
        return;
    };
    let config = config
        .field_offset(usize::from(knobs & 3))
        .endian(if knobs & 0x80 != 0 {
            Endian::Little
        } else {
            Endian::Big
        })
        .adjustment(i64::from(adjustment as i8))
        .max_frame_length(u64::from(max) * 4);
    let config = if knobs & 0x40 != 0 {
        config.skip(usize::from(skip % 16))
    } else {
        config
    };
    // Out-of-range configurations are refused with an error, never a panic.
    let Ok(decoder) = LengthPrefixed::with_config(config) else {
        return;
    };
    let sizes = [usize::from(a % 64) + 1, usize::from(b % 64) + 1];
    let run = harness::assert_chunking_invariant(
        || decoder.clone(),
        RecvBufConfig::default(),
        input,
        &sizes,
        harness::Placement::Tail,
    );
    let skip = if knobs & 0x40 != 0 {
        usize::from(skip % 16)
    } else {
        config.header_len()
    };
    for cut in &run.cuts {
        assert_eq!((cut.end - cut.start) as usize - cut.frame.len(), skip);
    }
});
