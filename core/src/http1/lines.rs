//! Lines of a head or a trailer section: where the block ends, with every
//! line end checked as it is found (CRLF only, unless bare LF is allowed),
//! and the line-shape rules httparse leaves open.

use crate::error::{Error, HttpField, InvalidInput, Limit};

/// What is wrong, and where, relative to the start of the bytes looked
/// at: the protocol adds the stream offset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    /// Malformed input.
    Field(HttpField, usize),
    /// A limit: which, its value, what was attempted.
    Limit(Limit, u64, u64, usize),
}

impl Bad {
    /// The error, with `base` the stream offset of the bytes looked at.
    #[cold]
    pub(crate) fn into_error(self, base: u64) -> Error {
        match self {
            Self::Field(field, at) => Error::InvalidInput {
                kind: InvalidInput::Http(field),
                offset: base + at as u64,
            },
            Self::Limit(limit, max, attempted, at) => Error::LimitExceeded {
                limit,
                max,
                attempted,
                offset: base + at as u64,
            },
        }
    }
}

/// A resumable search for the empty line that ends a block of lines:
/// each call looks only at the bytes the previous one did not judge.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BlockScan {
    /// Where the search goes on.
    at: usize,
    /// Where the current line starts.
    line: usize,
}

impl BlockScan {
    /// Whether nothing was looked at yet.
    pub(crate) fn is_fresh(&self) -> bool {
        self.at == 0 && self.line == 0
    }

    /// The length of the block (its empty line included) once it is in
    /// `buf`, `None` while it is not. Fails on a bare CR, a bare LF (unless
    /// `bare_lf`), a line longer than `max_line` (CRLF included), or a
    /// block longer than `max` (reported as `over`).
    ///
    /// The verdict is the one a reader fed byte by byte reaches: a limit
    /// fails at the first byte that cannot fit (a line or a block that
    /// cannot end in time), before any fault past it is looked at, and
    /// its `attempted` is the limit plus one, however many bytes came.
    pub(crate) fn scan(
        &mut self,
        buf: &[u8],
        bare_lf: bool,
        max_line: usize,
        max: usize,
        over: Limit,
    ) -> Result<Option<usize>, Bad> {
        loop {
            // The last index a byte may have without breaking a limit
            // unless it ends the line (or the block) there.
            let line_last = self.line.saturating_add(max_line).saturating_sub(1);
            let last = line_last.min(max.saturating_sub(1));
            let fail = || {
                if line_last <= last {
                    line_too_long(max_line, self.line)
                } else {
                    Bad::Limit(over, max as u64, max as u64 + 1, 0)
                }
            };
            // A position past the buffer (one swapped under the protocol)
            // searches from its end rather than panic.
            self.at = self.at.min(buf.len());
            let Some(p) = memchr::memchr2(b'\r', b'\n', &buf[self.at..]).map(|i| self.at + i)
            else {
                self.at = buf.len();
                return if buf.len() > last {
                    Err(fail())
                } else {
                    Ok(None)
                };
            };
            if p > last {
                return Err(fail());
            }
            let next = if buf[p] == b'\r' {
                if p == last {
                    // Its LF would be one byte too many.
                    return Err(fail());
                }
                match buf.get(p + 1) {
                    None => {
                        self.at = p;
                        return Ok(None);
                    }
                    Some(b'\n') => p + 2,
                    Some(_) => return Err(Bad::Field(HttpField::LineEnding, p)),
                }
            } else if bare_lf {
                p + 1
            } else {
                return Err(Bad::Field(HttpField::LineEnding, p));
            };
            if p == self.line {
                return Ok(Some(next));
            }
            self.line = next;
            self.at = next;
        }
    }
}

#[cold]
fn line_too_long(max: usize, at: usize) -> Bad {
    Bad::Limit(Limit::LineLength, max as u64, max as u64 + 1, at)
}

/// The rules on header lines httparse does not enforce: no line after the
/// start line may begin with a space or a tab (obsolete folding, or
/// whitespace before the first header), and no whitespace may come
/// between a name and its colon. `block` is the header lines, each with
/// its line end; `first` says whether the first of them follows a start
/// line (a head) or not (trailers).
pub(crate) fn check_field_lines(
    block: &[u8],
    base: usize,
    first_follows_start: bool,
) -> Result<(), Bad> {
    let mut start = 0;
    let mut index = 0usize;
    while start < block.len() {
        let end = memchr::memchr(b'\n', &block[start..]).map_or(block.len(), |i| start + i + 1);
        let line = &block[start..end];
        if matches!(line.first(), Some(b' ' | b'\t')) {
            let field = if index == 0 && first_follows_start {
                HttpField::Whitespace
            } else {
                HttpField::ObsFold
            };
            return Err(Bad::Field(field, base + start));
        }
        match memchr::memchr(b':', line) {
            None | Some(0) => return Err(Bad::Field(HttpField::HeaderName, base + start)),
            Some(colon) if matches!(line[colon - 1], b' ' | b'\t') => {
                return Err(Bad::Field(HttpField::Whitespace, base + start + colon - 1));
            }
            Some(_) => {}
        }
        start = end;
        index += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_all(input: &[u8], bare_lf: bool) -> Result<Option<usize>, Bad> {
        BlockScan::default().scan(input, bare_lf, 64, 1024, Limit::HeadLength)
    }

    #[test]
    fn finds_the_empty_line() {
        assert_eq!(
            scan_all(b"GET / HTTP/1.1\r\nA: b\r\n\r\nrest", false),
            Ok(Some(24))
        );
        assert_eq!(scan_all(b"GET / HTTP/1.1\r\nA: b\r\n", false), Ok(None));
        assert_eq!(
            scan_all(b"GET / HTTP/1.1\nA: b\n\nrest", true),
            Ok(Some(21))
        );
    }

    #[test]
    fn refuses_bare_line_ends() {
        assert_eq!(
            scan_all(b"GET / HTTP/1.1\nA: b\r\n\r\n", false),
            Err(Bad::Field(HttpField::LineEnding, 14))
        );
        assert_eq!(
            scan_all(b"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", false),
            Err(Bad::Field(HttpField::LineEnding, 20))
        );
    }

    #[test]
    fn resumes_where_it_stopped() {
        let input = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        for split in 0..input.len() {
            let mut scan = BlockScan::default();
            let first = scan.scan(&input[..split], false, 64, 1024, Limit::HeadLength);
            assert_eq!(first, Ok(None), "split {split}");
            let end = scan.scan(input, false, 64, 1024, Limit::HeadLength);
            assert_eq!(end, Ok(Some(input.len())), "split {split}");
        }
    }

    #[test]
    fn bounds_lines_and_blocks() {
        let long = [b'a'; 100];
        assert!(matches!(
            BlockScan::default().scan(&long, false, 64, 1024, Limit::HeadLength),
            Err(Bad::Limit(Limit::LineLength, 64, _, 0))
        ));
        let mut many = Vec::new();
        for _ in 0..40 {
            many.extend_from_slice(b"A: b\r\n");
        }
        assert!(matches!(
            BlockScan::default().scan(&many, false, 64, 100, Limit::HeadLength),
            Err(Bad::Limit(Limit::HeadLength, 100, _, 0))
        ));
    }

    #[test]
    fn field_line_shapes() {
        assert_eq!(check_field_lines(b"A: b\r\n", 0, true), Ok(()));
        assert_eq!(
            check_field_lines(b" A: b\r\n", 10, true),
            Err(Bad::Field(HttpField::Whitespace, 10))
        );
        assert_eq!(
            check_field_lines(b"A: b\r\n c\r\n", 0, true),
            Err(Bad::Field(HttpField::ObsFold, 6))
        );
        assert_eq!(
            check_field_lines(b"A : b\r\n", 0, true),
            Err(Bad::Field(HttpField::Whitespace, 1))
        );
    }
}
