//! The byte classes of a head (RFC 9110's tokens, the bytes never in a
//! head) and where its start line ends: what the parser and the fault
//! finder both read, apart from either.

/// Bytes that are never in a head: control bytes other than HTAB, CR and
/// LF, and DEL. (Bytes past ASCII may be in values and reasons.)
pub(crate) static NEVER_IN_HEAD: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        table[b] = (b < 0x20 && !matches!(b, 0x09 | 0x0a | 0x0d)) || b == 0x7f;
        b += 1;
    }
    table
};

/// The bytes of a token (RFC 9110, section 5.6.2).
pub(crate) static TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b: u8 = 0;
    while b < 128 {
        table[b as usize] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'!' | b'#'
                    | b'$'
                    | b'%'
                    | b'&'
                    | b'\''
                    | b'*'
                    | b'+'
                    | b'-'
                    | b'.'
                    | b'^'
                    | b'_'
                    | b'`'
                    | b'|'
                    | b'~'
            );
        b += 1;
    }
    table
};

/// Whether `bytes` is a token.
pub(crate) fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty() && bytes.iter().all(|&b| TOKEN[usize::from(b)])
}

/// The start line's end: the index of its CR (or bare LF).
pub(crate) fn start_line_end(head: &[u8]) -> usize {
    let lf = memchr::memchr(b'\n', head).unwrap_or(head.len());
    if lf > 0 && head[lf - 1] == b'\r' {
        lf - 1
    } else {
        lf
    }
}
