//! The tls sniffer on any bytes, with any budget: no panic, "need more"
//! until the answer is final and the same answer for any longer input (so
//! any split of the input gives the same answer), and a match never longer
//! than the input or the budget; a resumable sniffer over growing prefixes
//! answers as the pure function. Seed it with the fixtures (the first
//! directory is the one libFuzzer writes to):
//! `cargo fuzz run sniff_tls corpus/sniff_tls ../core/tests/fixtures`.

#![no_main]

use cleave_proto::sniff::{tls, Sniff};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/sniff_model.rs"]
mod sniff_model;

fuzz_target!(|data: &[u8]| {
    // The last byte picks a budget: often the default, sometimes tight.
    let Some((&knob, data)) = data.split_last() else {
        return;
    };
    let budget = if knob < 200 {
        tls::DEFAULT_MAX_HELLO
    } else {
        usize::from(knob - 200) * 8
    };
    let sniff = |d: &[u8]| tls::sniff(d, budget);
    let answer = sniff_model::assert_sampled_prefix_stable(data, 64, sniff);
    // One resumable sniffer over growing prefixes answers as the pure one.
    let mut s = tls::Sniffer::new();
    sniff_model::assert_resumes_as_pure(data, 64, |d| s.sniff(d, budget).clone(), sniff);
    if let Sniff::Match { len, .. } = answer {
        assert!(
            len <= data.len() && len <= budget,
            "{} of {} bytes, budget {}",
            len,
            data.len(),
            budget
        );
    }
});
