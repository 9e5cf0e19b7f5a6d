//! The `Sec-WebSocket-Extensions` syntax (RFC 6455, section 9.1) and the
//! parameters of a permessage-deflate offer or answer (RFC 7692, section
//! 7.1): a value that breaks either is [`Malformed`].

use alloc::borrow::Cow;
use alloc::vec::Vec;

/// A value that breaks the header's syntax or the extension's rules.
#[derive(Debug)]
pub(super) struct Malformed;

/// One extension of a `Sec-WebSocket-Extensions` value.
pub(super) struct Extension<'a> {
    pub(super) name: &'a [u8],
    pub(super) params: Vec<Param<'a>>,
}

/// One `;`-separated parameter of an extension.
pub(super) struct Param<'a> {
    name: &'a [u8],
    /// The value, a token or an unescaped quoted string.
    value: Option<Cow<'a, [u8]>>,
}

/// The extensions of one header value, in order. After a syntax error it
/// yields that error once and stops: where the next extension would start
/// is unknown then.
pub(super) struct Extensions<'a> {
    rest: &'a [u8],
}

impl<'a> Extensions<'a> {
    pub(super) fn new(value: &'a [u8]) -> Self {
        Self { rest: value }
    }
}

impl<'a> Iterator for Extensions<'a> {
    type Item = Result<Extension<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        // A list may hold empty elements (RFC 9110, section 5.6.1.2).
        loop {
            skip_ows(&mut self.rest);
            match self.rest.split_first() {
                None => return None,
                Some((b',', rest)) => self.rest = rest,
                Some(_) => break,
            }
        }
        let extension = extension(&mut self.rest);
        if extension.is_err() {
            self.rest = &[];
        }
        Some(extension)
    }
}

/// `extension-token *( ";" extension-param )`, and the `,` after it.
fn extension<'a>(s: &mut &'a [u8]) -> Result<Extension<'a>, Malformed> {
    let name = token(s)?;
    let mut params = Vec::new();
    loop {
        skip_ows(s);
        match s.split_first() {
            None => break,
            Some((b',', rest)) => {
                *s = rest;
                break;
            }
            Some((b';', rest)) => {
                *s = rest;
                params.push(param(s)?);
            }
            Some(_) => return Err(Malformed),
        }
    }
    Ok(Extension { name, params })
}

/// `token [ "=" ( token / quoted-string ) ]`.
fn param<'a>(s: &mut &'a [u8]) -> Result<Param<'a>, Malformed> {
    skip_ows(s);
    let name = token(s)?;
    skip_ows(s);
    let value = match s.split_first() {
        Some((b'=', rest)) => {
            *s = rest;
            skip_ows(s);
            Some(match s.split_first() {
                Some((b'"', rest)) => {
                    *s = rest;
                    Cow::Owned(quoted(s)?)
                }
                _ => Cow::Borrowed(token(s)?),
            })
        }
        _ => None,
    };
    Ok(Param { name, value })
}

/// The rest of a quoted string after its opening quote, unescaped.
fn quoted(s: &mut &[u8]) -> Result<Vec<u8>, Malformed> {
    let mut value = Vec::new();
    loop {
        let (&byte, rest) = s.split_first().ok_or(Malformed)?;
        *s = rest;
        match byte {
            b'"' => return Ok(value),
            b'\\' => {
                let (&escaped, rest) = s.split_first().ok_or(Malformed)?;
                if !(escaped == b'\t' || escaped >= b' ') || escaped == 0x7f {
                    return Err(Malformed);
                }
                value.push(escaped);
                *s = rest;
            }
            // qdtext: HTAB, SP, visible characters but `"` and `\`, obs-text.
            b'\t' | b' '..=0x7e | 0x80..=0xff => value.push(byte),
            _ => return Err(Malformed),
        }
    }
}

/// One or more token characters (RFC 9110, section 5.6.2).
fn token<'a>(s: &mut &'a [u8]) -> Result<&'a [u8], Malformed> {
    let len = s.iter().take_while(|&&byte| is_tchar(byte)).count();
    if len == 0 {
        return Err(Malformed);
    }
    let (token, rest) = s.split_at(len);
    *s = rest;
    Ok(token)
}

fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn skip_ows(s: &mut &[u8]) {
    let len = s
        .iter()
        .take_while(|&&byte| byte == b' ' || byte == b'\t')
        .count();
    *s = s.get(len..).unwrap_or_default();
}

/// Extension and parameter names are compared ignoring ASCII case.
pub(super) fn is(name: &[u8], expected: &str) -> bool {
    name.eq_ignore_ascii_case(expected.as_bytes())
}

/// The parameters of a permessage-deflate offer or answer, each at most
/// once, with a valid value (RFC 7692, section 7.1).
#[derive(Debug, Default)]
pub(super) struct Requested {
    pub(super) server_no_context_takeover: bool,
    pub(super) client_no_context_takeover: bool,
    pub(super) server_max_window_bits: Option<u8>,
    /// `Some(None)`: the parameter without a value (in an offer: the
    /// client can be limited).
    pub(super) client_max_window_bits: Option<Option<u8>>,
}

impl Requested {
    pub(super) fn parse(params: &[Param<'_>]) -> Result<Self, Malformed> {
        let mut requested = Self::default();
        for param in params {
            let value = param.value.as_deref();
            if is(param.name, "server_no_context_takeover") {
                flag(&mut requested.server_no_context_takeover, value)?;
            } else if is(param.name, "client_no_context_takeover") {
                flag(&mut requested.client_no_context_takeover, value)?;
            } else if is(param.name, "server_max_window_bits") {
                if requested.server_max_window_bits.is_some() {
                    return Err(Malformed);
                }
                requested.server_max_window_bits = Some(window_bits(value.ok_or(Malformed)?)?);
            } else if is(param.name, "client_max_window_bits") {
                if requested.client_max_window_bits.is_some() {
                    return Err(Malformed);
                }
                requested.client_max_window_bits = Some(value.map(window_bits).transpose()?);
            } else {
                return Err(Malformed);
            }
        }
        Ok(requested)
    }
}

/// Sets a parameter that takes no value, once.
fn flag(seen: &mut bool, value: Option<&[u8]>) -> Result<(), Malformed> {
    if *seen || value.is_some() {
        return Err(Malformed);
    }
    *seen = true;
    Ok(())
}

/// A window size: a decimal 8 to 15 without leading zeros (RFC 7692,
/// section 7.1.2).
fn window_bits(value: &[u8]) -> Result<u8, Malformed> {
    match *value {
        [digit @ b'8'..=b'9'] => Ok(digit - b'0'),
        [b'1', digit @ b'0'..=b'5'] => Ok(10 + digit - b'0'),
        _ => Err(Malformed),
    }
}
