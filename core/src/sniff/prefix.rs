//! A literal prefix: magic bytes, a banner (`SSH-`), a protocol greeting.

use crate::sniff::Sniff;

/// Sniffs `prefix` at the start of `data`: `Match` (with `len` the
/// prefix's length) once it is all there, `NeedMore` while `data` is a
/// shorter piece of it, `NoMatch` as soon as a byte differs.
///
/// ```
/// use cleave_proto::sniff::{prefix, Sniff};
///
/// assert_eq!(prefix::sniff(b"SSH-2.0-OpenSSH_9.2\r\n", b"SSH-"), Sniff::Match { facts: (), len: 4 });
/// assert_eq!(prefix::sniff(b"SS", b"SSH-"), Sniff::NeedMore);
/// assert_eq!(prefix::sniff(b"GET /", b"SSH-"), Sniff::NoMatch);
/// ```
#[must_use]
pub fn sniff(data: &[u8], prefix: &[u8]) -> Sniff<()> {
    let n = data.len().min(prefix.len());
    if data[..n] != prefix[..n] {
        Sniff::NoMatch
    } else if n < prefix.len() {
        Sniff::NeedMore
    } else {
        Sniff::Match {
            facts: (),
            len: prefix.len(),
        }
    }
}
