//! The prefix sniffer on any bytes and any prefix: no panic, prefix-stable,
//! and a match exactly when the bytes start with the prefix.

#![no_main]

use cleave_proto::sniff::{prefix, Sniff};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/sniff_model.rs"]
mod sniff_model;

fuzz_target!(|data: &[u8]| {
    let Some((&n, data)) = data.split_first() else {
        return;
    };
    let (magic, input) = data.split_at(usize::from(n % 8).min(data.len()));
    let answer = sniff_model::assert_sampled_prefix_stable(input, 64, |d| prefix::sniff(d, magic));
    let starts = input.starts_with(magic);
    assert_eq!(matches!(answer, Sniff::Match { .. }), starts);
});
