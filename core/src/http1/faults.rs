//! Which fault a refused head is charged with: the start line's shape
//! when httparse names only the token it expected, and the fault a reader
//! fed byte by byte meets first (a control byte before the limit, a
//! limit before a fault past it), so the verdict does not depend on how
//! the bytes came.

use crate::error::{HttpField, Limit};
use crate::http1::chars::{is_token, start_line_end, NEVER_IN_HEAD, TOKEN};
use crate::http1::lines::Bad;

/// Which side a head comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// Requests (a server reads them).
    Request,
    /// Responses (a client reads them).
    Response,
}

impl Role {
    pub(crate) fn start_line(self) -> HttpField {
        match self {
            Self::Request => HttpField::RequestLine,
            Self::Response => HttpField::StatusLine,
        }
    }
}

/// Checks, before the whole head is in, what can already be judged: the
/// first bytes of the start line and control bytes, so that garbage (a
/// TLS hello, a NUL) fails at once rather than at the head limit.
pub(crate) fn early_check(buf: &[u8], from: usize, role: Role) -> Result<(), Bad> {
    if buf == b"\r" {
        // The start of a CRLF, or of a bare CR: the next byte decides.
        return Ok(());
    }
    match role {
        Role::Request => {
            if let Some(&b) = buf.first() {
                if !TOKEN[usize::from(b)] {
                    return Err(Bad::Field(HttpField::RequestLine, 0));
                }
            }
        }
        Role::Response => {
            // A CR at the end is undecided: the next byte says whether
            // it ends the line or is a bare CR (a line-ending fault,
            // whichever way the bytes come).
            let seen = buf.strip_suffix(b"\r").unwrap_or(buf);
            let n = seen.len().min(5);
            if seen[..n] != b"HTTP/"[..n] {
                return Err(Bad::Field(HttpField::StatusLine, 0));
            }
        }
    }
    let from = from.min(buf.len());
    if let Some(i) = buf[from..]
        .iter()
        .position(|&b| NEVER_IN_HEAD[usize::from(b)])
    {
        let at = from + i;
        let line_start = memchr::memrchr(b'\n', &buf[..at]).map_or(0, |i| i + 1);
        let field = if line_start == 0 {
            role.start_line()
        } else if memchr::memchr(b':', &buf[line_start..at]).is_none() {
            HttpField::HeaderName
        } else {
            HttpField::HeaderValue
        };
        return Err(Bad::Field(field, at));
    }
    Ok(())
}

/// The fault a reader fed byte by byte meets first, so that the verdict
/// does not depend on how the bytes came. `bad` was found with a head's
/// bytes up to `judged` in view (see [`judged_before`]); a control byte
/// before that point was refused by [`early_check`] as soon as it
/// arrived, before `bad` could be seen, so it wins. `checked` bytes were
/// judged already.
#[cold]
pub(crate) fn first_fault(buf: &[u8], judged: usize, checked: usize, role: Role, bad: Bad) -> Bad {
    early_check(&buf[..judged.min(buf.len())], checked, role)
        .err()
        .unwrap_or(bad)
}

/// How many bytes of a head a reader fed byte by byte had judged early
/// when the search for its end failed with `bad` ([`BlockScan::scan`]'s
/// errors, under `max_line` and `max`): those before a bad line end,
/// those before a line reached its limit, those before the head did.
///
/// [`BlockScan::scan`]: crate::http1::lines::BlockScan::scan
pub(crate) fn judged_before(bad: Bad, max_line: usize, max: usize) -> usize {
    match bad {
        Bad::Field(_, at) => at,
        Bad::Limit(Limit::LineLength, _, _, line) => {
            line.saturating_add(max_line).saturating_sub(1)
        }
        Bad::Limit(..) => max.saturating_sub(1),
    }
}

/// httparse's refusal as cleave's field (or limit). httparse names the
/// token it expected (a version after a target with a space in it, say):
/// a refusal in the start line is judged from the line itself.
#[cold]
pub(crate) fn refused(e: httparse::Error, head: &[u8], role: Role, max_headers: usize) -> Bad {
    let field = match e {
        httparse::Error::HeaderName => HttpField::HeaderName,
        httparse::Error::HeaderValue => HttpField::HeaderValue,
        httparse::Error::TooManyHeaders => {
            return Bad::Limit(
                Limit::HeaderCount,
                max_headers as u64,
                max_headers as u64 + 1,
                0,
            )
        }
        _ => {
            let line_end = memchr::memchr(b'\n', head).map_or(head.len(), |i| i + 1);
            let line = &head[..line_end];
            let start_ok = match role {
                Role::Request => httparse::Request::new(&mut []).parse(line).is_ok(),
                Role::Response => httparse::Response::new(&mut []).parse(line).is_ok(),
            };
            if start_ok {
                HttpField::LineEnding
            } else {
                start_line_field(&head[..start_line_end(head)], role)
            }
        }
    };
    Bad::Field(field, 0)
}

/// Which field a refused start line breaks: its version when the rest of
/// the line is well formed (`method target VERSION`, `HTTP/digits.digits
/// status`) or the version is missing, otherwise the line itself.
fn start_line_field(line: &[u8], role: Role) -> HttpField {
    match role {
        Role::Request => {
            let mut parts = line.split(|&b| b == b' ');
            let (method, target, version, extra) =
                (parts.next(), parts.next(), parts.next(), parts.next());
            let well_formed = |method: &[u8], target: &[u8]| {
                is_token(method)
                    && !target.is_empty()
                    && target.iter().all(|b| (0x21..0x7f).contains(b))
            };
            match (method, target, version, extra) {
                (Some(m), Some(t), None | Some(_), None) if well_formed(m, t) => HttpField::Version,
                _ => HttpField::RequestLine,
            }
        }
        Role::Response => {
            let version = line.split(|&b| b == b' ').next().unwrap_or_default();
            match version.strip_prefix(b"HTTP/") {
                Some(number)
                    if !number.is_empty()
                        && number != b"1.1"
                        && number != b"1.0"
                        && number.iter().all(|b| b.is_ascii_digit() || *b == b'.') =>
                {
                    HttpField::Version
                }
                _ => HttpField::StatusLine,
            }
        }
    }
}
