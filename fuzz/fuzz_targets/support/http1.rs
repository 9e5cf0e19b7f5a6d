//! What the two HTTP/1.1 fuzz targets share: offsets, line ends, chunk
//! lines and the framing fields, read the simple way to check the parser.

use cleave_proto::http1::{Headers, Http1Config};

/// The index of a stream offset in the input.
pub(crate) fn ix(offset: u64) -> usize {
    usize::try_from(offset).expect("an offset in memory")
}

pub(crate) fn len64(bytes: &[u8]) -> u64 {
    u64::try_from(bytes.len()).expect("a length in range")
}

/// `rest` without a leading line end: CRLF, or a bare LF if allowed.
pub(crate) fn strip_eol(rest: &[u8], bare_lf: bool) -> Option<&[u8]> {
    match rest {
        [b'\r', b'\n', tail @ ..] => Some(tail),
        [b'\n', tail @ ..] if bare_lf => Some(tail),
        _ => None,
    }
}

/// A chunk-size line at the start of `gap` (after the line end of the
/// previous chunk's data unless `first`): its size, its extension bytes,
/// and the bytes it took. The extensions' grammar is left to the parser:
/// here only their count matters.
pub(crate) fn chunk_line(
    gap: &[u8],
    first: bool,
    config: &Http1Config,
) -> Option<(u64, u64, usize)> {
    let bare_lf = config.get_allow_bare_lf();
    let line = if first { gap } else { strip_eol(gap, bare_lf)? };
    let lf = line.iter().position(|&b| b == b'\n')?;
    let taken = gap.len() - line.len() + lf + 1;
    let line = match line[..lf].strip_suffix(b"\r") {
        Some(line) => line,
        None if bare_lf => &line[..lf],
        None => return None,
    };
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return None;
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let d = u64::from(char::from(b).to_digit(16)?);
        size = size.checked_mul(16)?.checked_add(d)?;
    }
    let mut rest = &line[digits..];
    if config.get_allow_chunk_size_whitespace() {
        while let [b' ' | b'\t', tail @ ..] = rest {
            rest = tail;
        }
    }
    if !(rest.is_empty() || rest[0] == b';') || rest.contains(&b'\r') {
        return None;
    }
    Some((size, len64(rest), taken))
}

pub(crate) fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

/// The comma-separated elements of every field `name`, trimmed; empty
/// ones kept when `empty`.
pub(crate) fn elements<'h>(headers: &'h Headers, name: &'h str, empty: bool) -> Vec<&'h [u8]> {
    headers
        .get_all(name)
        .flat_map(|v| v.split(|&b| b == b','))
        .map(trim)
        .filter(|e| empty || !e.is_empty())
        .collect()
}

pub(crate) fn has_element(headers: &Headers, name: &str, token: &[u8]) -> bool {
    elements(headers, name, false)
        .iter()
        .any(|e| e.eq_ignore_ascii_case(token))
}

/// Every Content-Length element as a number (`None`: not digits).
pub(crate) fn content_lengths(headers: &Headers) -> Vec<Option<u64>> {
    elements(headers, "content-length", true)
        .into_iter()
        .map(|e| {
            let digits = !e.is_empty() && e.iter().all(u8::is_ascii_digit);
            digits.then(|| std::str::from_utf8(e).ok()?.parse().ok())?
        })
        .collect()
}

/// A head's own shape: its line ends, its bytes, its lines against the
/// limits, its empty line.
pub(crate) fn check_head_lines(head: &[u8], config: &Http1Config) {
    assert!(head.len() <= config.get_max_head(), "a head over max_head");
    for line in head.split_inclusive(|&b| b == b'\n') {
        assert!(line.len() <= config.get_max_line(), "a line over max_line");
        let text = line.strip_suffix(b"\n").expect("a line without its end");
        let crlf = text.strip_suffix(b"\r");
        assert!(crlf.is_some() || config.get_allow_bare_lf(), "a bare LF");
        let text = crlf.unwrap_or(text);
        let control = |&b: &u8| (b < 0x20 && b != b'\t') || b == 0x7f;
        assert!(
            !text.iter().any(control),
            "a control byte in {:?}",
            text.escape_ascii().to_string()
        );
    }
    let last = head.split_inclusive(|&b| b == b'\n').next_back();
    assert!(
        matches!(last, Some(b"\r\n" | b"\n")),
        "a head without its empty line"
    );
}
