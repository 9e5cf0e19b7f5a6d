//! Checks that a sniffer is prefix-stable: "need more" until its answer is
//! final, then the same answer for any longer input.
//!
//! Shared by the integration tests and the fuzz targets (`#[path]`).

#![allow(dead_code)]

use cleave_proto::sniff::Sniff;

/// The answer on every prefix of `data`: need more, then one final answer
/// that never changes (a sniffer is a pure function of the bytes so far).
pub fn assert_prefix_stable<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    sniff: impl Fn(&[u8]) -> Sniff<T>,
) -> Sniff<T> {
    let whole = sniff(data);
    let mut settled = false;
    for k in 0..=data.len() {
        let answer = sniff(&data[..k]);
        if settled {
            assert_eq!(answer, whole, "answer changed at {k} bytes");
        } else if !answer.is_need_more() {
            assert_eq!(
                answer, whole,
                "first answer at {k} bytes differs from the whole input's"
            );
            settled = true;
        }
    }
    whole
}

/// [`assert_prefix_stable`] on at most `points` prefixes (every one for
/// short inputs), for inputs too long to try every prefix.
pub fn assert_sampled_prefix_stable<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    points: usize,
    sniff: impl Fn(&[u8]) -> Sniff<T>,
) -> Sniff<T> {
    let whole = sniff(data);
    let step = (data.len() / points.max(1)).max(1);
    let mut settled = false;
    for k in (0..=data.len()).step_by(step).chain([data.len()]) {
        let answer = sniff(&data[..k]);
        if settled {
            assert_eq!(answer, whole, "answer changed at {k} bytes");
        } else if !answer.is_need_more() {
            assert_eq!(
                answer, whole,
                "first answer at {k} bytes differs from the whole input's"
            );
            settled = true;
        }
    }
    whole
}

/// A resumable sniffer (`resumed`, one instance) asked on growing prefixes
/// of `data` — at most `points` of them, every one for short inputs —
/// answers on each as the pure function does.
pub fn assert_resumes_as_pure<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    points: usize,
    mut resumed: impl FnMut(&[u8]) -> Sniff<T>,
    pure: impl Fn(&[u8]) -> Sniff<T>,
) {
    let step = (data.len() / points.max(1)).max(1);
    for k in (0..=data.len()).step_by(step).chain([data.len()]) {
        assert_eq!(resumed(&data[..k]), pure(&data[..k]), "at {k} bytes");
    }
}
