//! The Host checks a server and the routing sniffer share: a request is
//! routed where a server would take it.

/// The authority of an absolute-form target (`scheme://authority/...`),
/// or `None` for origin-form (`/`), asterisk-form and a target without a
/// scheme.
pub(crate) fn absolute_authority(target: &[u8]) -> Option<&[u8]> {
    if matches!(target.first(), None | Some(b'/' | b'*')) {
        return None;
    }
    let at = target.windows(3).position(|w| w == b"://")?;
    let scheme = &target[..at];
    if scheme.is_empty()
        || !scheme
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(b))
    {
        return None;
    }
    let rest = &target[at + 3..];
    let end = rest
        .iter()
        .position(|b| b"/?#".contains(b))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

/// The bytes a host name (or IPv4 address) may hold: visible ASCII but
/// `@ / ? # [ ] : \`.
static NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b: u8 = 0x21;
    while b < 0x7f {
        table[b as usize] = !matches!(b, b'@' | b'/' | b'?' | b'#' | b'[' | b']' | b':' | b'\\');
        b += 1;
    }
    table
};

/// Whether `value` is a `host[:port]` (RFC 9110, section 7.2): an IPv6
/// literal in brackets or a name or IPv4 address without `:`, `@`, `/`,
/// brackets or spaces, then an optional `:` and digits. Empty is allowed
/// (a target without an authority).
pub(crate) fn is_host(value: &[u8]) -> bool {
    if value.first() == Some(&b'[') {
        return is_ip_literal_host(value);
    }
    for (i, &b) in value.iter().enumerate() {
        if b == b':' {
            return is_port(&value[i..]);
        }
        if !NAME_BYTE[usize::from(b)] {
            return false;
        }
    }
    true
}

/// `[v6]` or `[v6]:port`.
#[cold]
fn is_ip_literal_host(value: &[u8]) -> bool {
    let Some(end) = value.iter().position(|&b| b == b']') else {
        return false;
    };
    value[1..end]
        .iter()
        .all(|b| b.is_ascii_hexdigit() || b":.".contains(b))
        && (end + 1 == value.len() || is_port(&value[end + 1..]))
}

/// `:` and digits (maybe none).
fn is_port(value: &[u8]) -> bool {
    value.first() == Some(&b':') && value[1..].iter().all(u8::is_ascii_digit)
}
