//! The chunked coding's own lines, checked strictly: a chunk's size
//! line with its extensions (whole, or resumed as more of it arrives),
//! and the trailer block after the last chunk.

use crate::error::{HttpField, Limit};
use crate::http1::chars::TOKEN;
use crate::http1::config::{Http1Config, MAX_HEADERS};
use crate::http1::lines::{check_field_lines, Bad};

/// Where the check of a size line that has not ended yet stopped: its
/// first `at` bytes are a valid start of a size line, and `state` is
/// where in the grammar the next byte falls. [`resume`](Self::resume)
/// judges the bytes after them as [`size_line`] would judge the whole
/// partial line, at the same places with the same errors.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SizeCheck {
    at: usize,
    state: SizeState,
    size: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum SizeState {
    /// The size's hex digits (none yet at the start).
    #[default]
    Digits,
    /// Whitespace after the size (only where it is allowed).
    Space,
    /// Right after a `;`: an extension's name.
    Semicolon,
    Name,
    /// Right after a `=`: a token or a quoted string.
    Equals,
    Token,
    Quoted,
    /// After a `\` in a quoted string.
    Escape,
    /// After a quoted string's closing quote.
    Closed,
}

impl SizeCheck {
    /// Checks `line[self.at..]`, a line not yet ended (without its line
    /// end, nor a CR at its end that the LF may still follow).
    pub(super) fn resume(&mut self, line: &[u8], config: &Http1Config) -> Result<(), Bad> {
        use SizeState::*;
        let ext = |at| Bad::Field(HttpField::ChunkExtension, at);
        for (at, &b) in line.iter().enumerate().skip(self.at) {
            let token = TOKEN[usize::from(b)];
            self.state = match (self.state, b) {
                (Digits, _) if b.is_ascii_hexdigit() => {
                    let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                    self.size = self
                        .size
                        .checked_mul(16)
                        .and_then(|s| s.checked_add(digit))
                        .ok_or(Bad::Field(HttpField::ChunkSize, 0))?;
                    Digits
                }
                (Digits, _) if at == 0 => return Err(Bad::Field(HttpField::ChunkSize, 0)),
                (Digits | Space, b' ' | b'\t') if config.get_allow_chunk_size_whitespace() => Space,
                (Digits | Space, b';') => Semicolon,
                (Digits | Space, b'\r') => return Err(Bad::Field(HttpField::LineEnding, at)),
                (Digits | Space, _) => return Err(Bad::Field(HttpField::ChunkSize, at)),
                (Semicolon | Name, _) if token => Name,
                (Name | Token | Closed, b';') => Semicolon,
                (Name, b'=') => Equals,
                (Equals, b'"') => Quoted,
                (Equals | Token, _) if token => Token,
                (Quoted, b'"') => Closed,
                (Quoted, b'\\') => Escape,
                (Quoted | Escape, _) if b == b'\t' || (b >= 0x20 && b != 0x7f) => Quoted,
                _ => return Err(ext(at)),
            };
        }
        self.at = self.at.max(line.len());
        Ok(())
    }
}

/// A chunk-size line without its line end: the size, and how many
/// extension bytes it carried. No whitespace anywhere (the grammar's
/// "bad whitespace" around `;` and `=` is what senders must not send,
/// and parsers disagree on it), unless whitespace after the size is
/// allowed.
pub(super) fn size_line(
    line: &[u8],
    config: &Http1Config,
    partial: bool,
) -> Result<(u64, usize), Bad> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        if partial && line.is_empty() {
            return Ok((0, 0));
        }
        return Err(Bad::Field(HttpField::ChunkSize, 0));
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let d = (b as char).to_digit(16).unwrap_or(0);
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(d)))
            .ok_or(Bad::Field(HttpField::ChunkSize, 0))?;
    }
    let mut rest = &line[digits..];
    if config.get_allow_chunk_size_whitespace() {
        while let [b' ' | b'\t', tail @ ..] = rest {
            rest = tail;
        }
    }
    let ext_at = line.len() - rest.len();
    match rest.first() {
        None => return Ok((size, 0)),
        Some(b';') => {}
        Some(b'\r') => return Err(Bad::Field(HttpField::LineEnding, ext_at)),
        Some(_) => return Err(Bad::Field(HttpField::ChunkSize, ext_at)),
    }
    extensions(rest, partial).map_err(|i| Bad::Field(HttpField::ChunkExtension, ext_at + i))?;
    Ok((size, rest.len()))
}

/// `*( ";" token [ "=" ( token / quoted-string ) ] )`: `Err` with the
/// index of the first byte that does not fit. With `partial`, `ext` is
/// what came of the line so far: running out of bytes anywhere is not an
/// error.
pub(super) fn extensions(ext: &[u8], partial: bool) -> Result<(), usize> {
    let token = |from: usize| {
        ext[from..]
            .iter()
            .take_while(|&&b| TOKEN[usize::from(b)])
            .count()
    };
    let mut i = 0;
    while i < ext.len() {
        if ext[i] != b';' {
            return Err(i);
        }
        i += 1;
        let name = token(i);
        i += name;
        if name == 0 && !(partial && i == ext.len()) {
            return Err(i);
        }
        if ext.get(i) != Some(&b'=') {
            continue;
        }
        i += 1;
        if ext.get(i) == Some(&b'"') {
            match quoted_string_end(ext, i + 1) {
                Ok(end) => i = end,
                Err(end) if partial && end == ext.len() => return Ok(()),
                Err(at) => return Err(at),
            }
        } else {
            let value = token(i);
            i += value;
            if value == 0 && !(partial && i == ext.len()) {
                return Err(i);
            }
        }
    }
    Ok(())
}

/// The index past the closing quote of a quoted string whose content
/// starts at `i`.
pub(super) fn quoted_string_end(ext: &[u8], mut i: usize) -> Result<usize, usize> {
    while i < ext.len() {
        match ext[i] {
            b'"' => return Ok(i + 1),
            b'\\' => match ext.get(i + 1) {
                Some(&b) if b == b'\t' || b >= 0x20 && b != 0x7f => i += 2,
                _ => return Err(i + 1),
            },
            b'\t' => i += 1,
            b if b < 0x20 || b == 0x7f => return Err(i),
            _ => i += 1,
        }
    }
    Err(ext.len())
}

/// Checks a whole trailer section (its empty line included): its lines'
/// shape, httparse's verdict, the count, and no field that frames or
/// routes a message. Returns the number of fields.
pub(super) fn trailers(block: &[u8], config: &Http1Config) -> Result<usize, Bad> {
    let end = if block.ends_with(b"\r\n") {
        block.len() - 2
    } else {
        block.len() - 1
    };
    check_field_lines(&block[..end], 0, false).map_err(|bad| match bad {
        Bad::Field(HttpField::ObsFold | HttpField::Whitespace | HttpField::HeaderName, at) => {
            Bad::Field(HttpField::Trailer, at)
        }
        other => other,
    })?;
    let max = config.get_max_headers().min(MAX_HEADERS);
    // Trailers are rare: initialised slots, and httparse's plain call.
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let parsed = httparse::parse_headers(block, &mut slots[..max]);
    let headers = match parsed {
        Ok(httparse::Status::Complete((_, headers))) => headers,
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Bad::Limit(
                Limit::HeaderCount,
                max as u64,
                max as u64 + 1,
                0,
            ))
        }
        Err(httparse::Error::NewLine) => return Err(Bad::Field(HttpField::LineEnding, 0)),
        _ => return Err(Bad::Field(HttpField::Trailer, 0)),
    };
    for h in headers.iter() {
        let name = h.name.as_bytes();
        if [
            &b"content-length"[..],
            b"transfer-encoding",
            b"host",
            b"trailer",
        ]
        .iter()
        .any(|forbidden| name.eq_ignore_ascii_case(forbidden))
        {
            return Err(Bad::Field(HttpField::Trailer, 0));
        }
    }
    Ok(headers.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Bytes a size line is made of, and some it must not hold.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        let byte = prop_oneof![
            4 => prop::sample::select(b"0123456789abcdefABCDEF".to_vec()),
            3 => prop::sample::select(b";=\"\\ \t\rxyz-!".to_vec()),
            1 => prop::sample::select(vec![0x00, 0x01, 0x7f, 0x80, 0xc3, b'\n']),
        ];
        prop::collection::vec(byte, 0..40)
    }

    proptest! {
        /// A line checked piece by piece, from where the last look
        /// stopped, gets the verdict of the whole partial line checked
        /// from its start, at the same place: nothing before the first
        /// error is refused, the first error is the same.
        #[test]
        fn a_resumed_check_judges_as_a_whole_one(
            line in line(),
            cuts in prop::collection::vec(0usize..40, 0..6),
            whitespace in any::<bool>(),
        ) {
            let config = Http1Config::default().allow_chunk_size_whitespace(whitespace);
            let mut ends: Vec<usize> = cuts.into_iter().map(|c| c.min(line.len())).collect();
            ends.push(line.len());
            ends.sort_unstable();
            let mut check = SizeCheck::default();
            for end in ends {
                let prefix = &line[..end];
                let whole = size_line(prefix, &config, true).map(|_| ());
                let resumed = check.resume(prefix, &config);
                prop_assert_eq!(&resumed, &whole, "{:?}", prefix);
                if resumed.is_err() {
                    break;
                }
            }
        }
    }
}
