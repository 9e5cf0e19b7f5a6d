//! The fields that frame and route a message (Content-Length,
//! Transfer-Encoding, Host, Connection, Upgrade, Expect), read in one
//! pass over httparse's headers, and the body's framing they decide
//! (RFC 9112, section 6.3).

use crate::error::HttpField;
use crate::http1::config::Http1Config;
use crate::http1::head::{Body, Span, Version};
use crate::http1::lines::Bad;

/// What the framing headers said, read in one pass.
#[derive(Default)]
pub(crate) struct Framing<'h> {
    pub(crate) content_length: Option<u64>,
    /// Transfer-Encoding was present (even if empty).
    pub(crate) te: bool,
    /// `chunked` was the last coding.
    pub(crate) chunked_last: bool,
    /// `chunked` came (once: twice is a `te_error`).
    chunked: bool,
    /// A coding other than `chunked`.
    pub(crate) other_coding: bool,
    /// Where the Transfer-Encoding list went wrong: an empty element, or
    /// `chunked` again.
    pub(crate) te_error: Option<usize>,
    /// Where a coding came after `chunked`: refused in a request; a
    /// response's length is then unknown, and its body runs to the close.
    pub(crate) after_chunked: Option<usize>,
    pub(crate) host: Option<&'h [u8]>,
    pub(crate) hosts: u32,
    pub(crate) close: bool,
    pub(crate) keep_alive: bool,
    pub(crate) upgrade_token: bool,
    pub(crate) upgrade: bool,
    pub(crate) expect_continue: bool,
}

/// The comma-separated elements of a list value, without whitespace;
/// empty elements are skipped (RFC 9110, section 5.6.1).
pub(crate) fn elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|&b| b == b',')
        .map(crate::http1::head::trim_ows)
        .filter(|e| !e.is_empty())
}

/// Whether `bytes` (a header name, or an element of a field value) is
/// `lower` (lower-case letters, digits and `-`), case aside, eight bytes
/// at a time. Setting the 0x20 bit of each byte turns an upper-case letter
/// into its lower-case one, and no other byte a head may hold becomes a
/// letter, a digit or `-`: only CR would become `-` and the controls
/// 0x10 to 0x19 digits, and httparse takes none of them in a name or a
/// value.
#[inline]
fn is_name(name: &[u8], lower: &[u8]) -> bool {
    if name.len() != lower.len() {
        return false;
    }
    let word = |b: &[u8]| u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
    let (mut name, mut lower) = (name, lower);
    while name.len() >= 8 {
        if word(&name[..8]) | 0x2020_2020_2020_2020 != word(&lower[..8]) {
            return false;
        }
        (name, lower) = (&name[8..], &lower[8..]);
    }
    name.iter().zip(lower).all(|(&a, &b)| a | 0x20 == b)
}

/// A Content-Length value: digits only, no overflow.
fn parse_length(value: &[u8]) -> Option<u64> {
    if value.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in value {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

impl<'h> Framing<'h> {
    /// Reads the fields that frame and route a message; the framing ones
    /// (Content-Length, Transfer-Encoding) only if `framed`: a response
    /// that has no body whatever its fields say (to HEAD, 1xx, 204, 304,
    /// a 2xx to CONNECT) ignores them (RFC 9112, section 6.3, rules 1
    /// and 2), values included.
    #[inline(always)]
    pub(crate) fn read(
        headers: &[httparse::Header<'h>],
        config: &Http1Config,
        head: &[u8],
        framed: bool,
    ) -> Result<Self, Bad> {
        let mut f = Framing::default();
        for h in headers {
            let name = h.name.as_bytes();
            // httparse took the whitespace around the value off.
            debug_assert_eq!(crate::http1::head::trim_ows(h.value), h.value);
            let value = h.value;
            let at = || Span::of(h.value, head).at as usize;
            match name.len() {
                4 if is_name(name, b"host") => {
                    f.hosts += 1;
                    f.host = Some(value);
                }
                6 if is_name(name, b"expect") => {
                    f.expect_continue |= is_name(value, b"100-continue");
                }
                7 if is_name(name, b"upgrade") => f.upgrade = true,
                10 if is_name(name, b"connection") => {
                    for token in elements(value) {
                        if is_name(token, b"close") {
                            f.close = true;
                        } else if is_name(token, b"keep-alive") {
                            f.keep_alive = true;
                        } else if is_name(token, b"upgrade") {
                            f.upgrade_token = true;
                        }
                    }
                }
                14 if framed && is_name(name, b"content-length") => {
                    let mut any = false;
                    for element in value.split(|&b| b == b',') {
                        let element = crate::http1::head::trim_ows(element);
                        let n = parse_length(element)
                            .ok_or_else(|| Bad::Field(HttpField::ContentLength, at()))?;
                        any = true;
                        match f.content_length {
                            None => f.content_length = Some(n),
                            Some(m) if m == n && config.get_allow_equal_content_lengths() => {}
                            Some(_) => return Err(Bad::Field(HttpField::ContentLength, at())),
                        }
                    }
                    if !any {
                        return Err(Bad::Field(HttpField::ContentLength, at()));
                    }
                }
                17 if framed && is_name(name, b"transfer-encoding") => {
                    f.te = true;
                    // Every element, empty ones too: `chunked,` is not
                    // `chunked` to every parser a message may cross.
                    let codings = value.split(|&b| b == b',');
                    // Refused once the message's framing is known: with
                    // a Content-Length too, that comes first.
                    for coding in codings.map(crate::http1::head::trim_ows) {
                        if coding.is_empty() || (f.chunked && is_name(coding, b"chunked")) {
                            f.te_error.get_or_insert(at());
                            break;
                        }
                        if is_name(coding, b"chunked") {
                            (f.chunked, f.chunked_last) = (true, true);
                        } else {
                            if f.chunked_last {
                                f.after_chunked.get_or_insert(at());
                            }
                            (f.chunked_last, f.other_coding) = (false, true);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(f)
    }

    pub(crate) fn keep_alive(&self, version: Version) -> bool {
        match version {
            Version::Http11 => !self.close,
            Version::Http10 => self.keep_alive && !self.close,
        }
    }
}

#[inline]
pub(crate) fn request_body(f: &Framing<'_>, version: Version) -> Result<Body, Bad> {
    if f.te {
        if f.content_length.is_some() {
            return Err(Bad::Field(HttpField::BothFraming, 0));
        }
        if let Some(at) = f.te_error.into_iter().chain(f.after_chunked).min() {
            return Err(Bad::Field(HttpField::TransferEncoding, at));
        }
        if version == Version::Http10 {
            return Err(Bad::Field(HttpField::TransferEncoding, 0));
        }
        // Chunked not last: the length cannot be known, a 400 (RFC 9112,
        // section 6.3, rule 4) whatever the codings. Only a coding not
        // understood before a final chunked is a 501 (section 6.1).
        if !f.chunked_last {
            return Err(Bad::Field(HttpField::TransferEncoding, 0));
        }
        if f.other_coding {
            return Err(Bad::Field(HttpField::TransferCoding, 0));
        }
        return Ok(Body::Chunked);
    }
    Ok(match f.content_length {
        Some(0) | None => Body::Empty,
        Some(n) => Body::Length(n),
    })
}

/// A framed response's body when it has Transfer-Encoding (RFC 9112,
/// section 6.3): chunked if that is its last coding, whatever came before
/// it (codings are the application's to undo); else it runs to the close
/// (rule 4). Refused: Content-Length too (rule 3: a response split), in
/// HTTP/1.0 (section 6.1: faulty framing), and a list with an empty
/// element or chunked twice.
pub(crate) fn response_body(f: &Framing<'_>, version: Version) -> Result<Body, Bad> {
    if f.content_length.is_some() {
        return Err(Bad::Field(HttpField::BothFraming, 0));
    }
    if let Some(at) = f.te_error {
        return Err(Bad::Field(HttpField::TransferEncoding, at));
    }
    if version == Version::Http10 {
        return Err(Bad::Field(HttpField::TransferEncoding, 0));
    }
    Ok(if f.chunked_last {
        Body::Chunked
    } else {
        Body::UntilClose
    })
}

#[cfg(test)]
mod tests {
    use super::is_name;

    /// Every byte a name or a value may hold, at every place of every
    /// word matched: the same verdict as comparing without case.
    #[test]
    fn names_match_as_without_case() {
        // httparse's field bytes: HTAB, visible ASCII, space, obs-text.
        let field = |b: u8| b == b'\t' || (0x20..0x7f).contains(&b) || b >= 0x80;
        for lower in [
            &b"host"[..],
            b"expect",
            b"upgrade",
            b"connection",
            b"content-length",
            b"transfer-encoding",
            b"100-continue",
            b"close",
            b"keep-alive",
            b"chunked",
        ] {
            assert!(is_name(&lower.to_ascii_uppercase(), lower));
            assert!(!is_name(&lower[1..], lower));
            for at in 0..lower.len() {
                for b in (0..=u8::MAX).filter(|&b| field(b)) {
                    let mut name = lower.to_vec();
                    name[at] = b;
                    assert_eq!(
                        is_name(&name, lower),
                        name.eq_ignore_ascii_case(lower),
                        "{:?}",
                        name.escape_ascii().to_string()
                    );
                }
            }
        }
    }
}
