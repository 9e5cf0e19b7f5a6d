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
    // A scheme: a letter, then letters, digits, `+`, `-`, `.` (RFC 3986,
    // section 3.1).
    let scheme = &target[..at];
    if !scheme.first().is_some_and(u8::is_ascii_alphabetic)
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

/// Whether `target` has one of the forms a request-target may take
/// (RFC 9112, section 3.2), for `method`: origin-form (`/` first),
/// asterisk-form (`*` alone), absolute-form as `scheme://authority...`
/// (its authority judged with the Host), or, for a CONNECT,
/// authority-form (judged with the Host too).
///
/// What this refuses is what another parser may read with another
/// authority: a URL parser (WHATWG's: browsers, Node, many proxies) takes
/// `http:/evil.example/`, `http:\\evil.example/` and `http:evil.example`
/// as naming `evil.example`, where a parser that looks for `scheme://`
/// finds no authority and checks the Host alone; and a target of no form
/// (`@evil.example/x`) or an absolute-URI without an authority
/// (`a:@evil.example/x`), joined to a backend's `http://backend`, names
/// `evil.example` too. An origin-form target that starts with `//` is
/// valid (empty path segments) and taken: resolved against a base URL as
/// a relative reference, it names an authority of its own; an
/// application that resolves targets that way must refuse it.
pub(crate) fn is_target_form(method: &[u8], target: &[u8]) -> bool {
    match target {
        [b'/', ..] | b"*" => true,
        _ if method == b"CONNECT" => true,
        _ => absolute_authority(target).is_some(),
    }
}

/// The bytes a reg-name (or IPv4 address) may hold besides `%`
/// (RFC 3986, section 3.2.2): unreserved (letters, digits, `-._~`) and
/// sub-delims (`!$&'()*+,;=`).
static NAME_BYTE: [bool; 256] = {
    let mut table = [false; 256];
    let mut b: u8 = 0;
    loop {
        table[b as usize] = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            );
        if b == u8::MAX {
            break;
        }
        b += 1;
    }
    table
};

/// Whether `value` is a `uri-host[:port]` (RFC 9110, section 7.2; RFC
/// 3986, section 3.2.2): an IP literal in brackets (an IPv6 address or
/// an IPvFuture), or a reg-name or IPv4 address (unreserved bytes,
/// sub-delims and `%HH`), then an optional `:` and digits. Empty is
/// allowed (a target without an authority).
pub(crate) fn is_host(value: &[u8]) -> bool {
    if value.first() == Some(&b'[') {
        return is_ip_literal_host(value);
    }
    // Most hosts are name bytes only: looked at without a branch a byte.
    if value
        .iter()
        .fold(true, |all, &b| all & NAME_BYTE[usize::from(b)])
    {
        return true;
    }
    let mut rest = value;
    loop {
        // Name bytes run fast; the first other one decides.
        let Some(i) = rest.iter().position(|&b| !NAME_BYTE[usize::from(b)]) else {
            return true;
        };
        let hex = |h: &[u8]| h.iter().all(u8::is_ascii_hexdigit);
        match rest[i] {
            b':' => return is_port(&rest[i..]),
            b'%' if rest.get(i + 1..i + 3).is_some_and(hex) => rest = &rest[i + 3..],
            _ => return false,
        }
    }
}

/// `[IP-literal]` or `[IP-literal]:port`: an IPv6 address, or
/// `v` HEXDIG+ `.` then unreserved, sub-delims or `:` (IPvFuture).
#[cold]
fn is_ip_literal_host(value: &[u8]) -> bool {
    let Some(end) = value.iter().position(|&b| b == b']') else {
        return false;
    };
    let literal = &value[1..end];
    let valid = match literal.first() {
        Some(b'v' | b'V') => is_ipv_future(&literal[1..]),
        _ => core::str::from_utf8(literal)
            .is_ok_and(|text| text.parse::<core::net::Ipv6Addr>().is_ok()),
    };
    valid && (end + 1 == value.len() || is_port(&value[end + 1..]))
}

/// What follows the `v` of an IPvFuture: HEXDIG+ `.` then one or more
/// unreserved, sub-delims or `:`.
fn is_ipv_future(rest: &[u8]) -> bool {
    let Some(dot) = rest.iter().position(|&b| b == b'.') else {
        return false;
    };
    let (version, tail) = (&rest[..dot], &rest[dot + 1..]);
    !version.is_empty()
        && version.iter().all(u8::is_ascii_hexdigit)
        && !tail.is_empty()
        && tail.iter().all(|&b| b == b':' || NAME_BYTE[usize::from(b)])
}

/// Whether `authority` (a CONNECT's target, or an absolute-form target's
/// authority) names a request's target: a `host[:port]` whose host is not
/// empty (RFC 9110, section 4.2.1: an "http" URI with an empty host is
/// invalid), with, for a CONNECT, a port from 1 to 65535 (section 9.3.6:
/// "there is no default port", and a server "MUST reject a CONNECT
/// request that targets an empty or invalid port number").
pub(crate) fn is_target_authority(authority: &[u8], connect: bool) -> bool {
    if !is_host(authority) {
        return false;
    }
    // A reg-name holds no `:`; an IP literal ends with `]`.
    let host_end = if authority.first() == Some(&b'[') {
        authority
            .iter()
            .position(|&b| b == b']')
            .map_or(authority.len(), |i| i + 1)
    } else {
        authority
            .iter()
            .position(|&b| b == b':')
            .unwrap_or(authority.len())
    };
    let (host, rest) = authority.split_at(host_end);
    let port = rest.strip_prefix(b":");
    let valid_port = |port: &[u8]| {
        !port.is_empty()
            && port.len() <= 5
            && core::str::from_utf8(port)
                .ok()
                .and_then(|p| p.parse::<u32>().ok())
                .is_some_and(|p| (1..=65535).contains(&p))
    };
    !host.is_empty() && (!connect || port.is_some_and(valid_port))
}

/// `:` and digits (maybe none).
fn is_port(value: &[u8]) -> bool {
    value.first() == Some(&b':') && value[1..].iter().all(u8::is_ascii_digit)
}
