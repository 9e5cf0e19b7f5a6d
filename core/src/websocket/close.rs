//! Close frames (RFC 6455, sections 5.5.1 and 7.4): the codes an endpoint
//! may send, and which code answers which error.

use bytes::Bytes;

use crate::error::{Error, InvalidInput, Limit, WsField};

/// A close frame's content: its status code, if any, and its reason
/// (UTF-8, checked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseFrame {
    /// The status code; `None` when the frame had no payload (answered by
    /// a close with none, and read as 1005).
    pub code: Option<u16>,
    /// The reason, a view of the receive buffer (valid UTF-8).
    pub reason: Bytes,
}

/// The close codes of RFC 6455, section 7.4.1 (and 1012-1014,
/// registered since, are sendable too).
pub mod close_code {
    /// Normal closure.
    pub const NORMAL: u16 = 1000;
    /// The endpoint is going away (a server shutting down, a timeout).
    pub const GOING_AWAY: u16 = 1001;
    /// A protocol error.
    pub const PROTOCOL_ERROR: u16 = 1002;
    /// Data of a type the endpoint does not accept.
    pub const UNSUPPORTED: u16 = 1003;
    /// A text message (or a close reason) that is not UTF-8.
    pub const INVALID_PAYLOAD: u16 = 1007;
    /// A message that breaks the endpoint's policy.
    pub const POLICY: u16 = 1008;
    /// A frame or message too big to take.
    pub const TOO_BIG: u16 = 1009;
    /// An extension the client needs that the server did not take.
    pub const MANDATORY_EXTENSION: u16 = 1010;
    /// An unexpected condition in the endpoint.
    pub const INTERNAL_ERROR: u16 = 1011;
}

/// Whether `code` may be sent in a close frame: 1000-1003, 1007-1011
/// (and 1012-1014, registered since), 3000-4999; never 1004-1006, 1015
/// or anything below 1000.
#[must_use]
pub fn is_sendable(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// The close code an endpoint answers `error` with: 1007 for text that is
/// not UTF-8, 1009 for a frame or message over its limit (or a buffer
/// that cannot hold it), 1002 for any other broken rule, 1001 for a
/// timeout, 1011 otherwise.
#[must_use]
pub fn close_code_for(error: &Error) -> u16 {
    match error {
        Error::InvalidInput {
            kind: InvalidInput::Utf8,
            ..
        } => close_code::INVALID_PAYLOAD,
        Error::InvalidInput {
            kind: InvalidInput::WebSocket(WsField::Compressed),
            ..
        } => close_code::PROTOCOL_ERROR,
        Error::InvalidInput { .. } | Error::Truncated { .. } => close_code::PROTOCOL_ERROR,
        Error::LimitExceeded {
            limit: Limit::FrameLength | Limit::MessageLength | Limit::Buffer,
            ..
        } => close_code::TOO_BIG,
        Error::TimedOut(_) => close_code::GOING_AWAY,
        _ => close_code::INTERNAL_ERROR,
    }
}

/// Checks a close frame's payload: empty, or a sendable code and a UTF-8
/// reason. Returns the code.
pub(crate) fn check(payload: &[u8]) -> Result<Option<u16>, Error> {
    let bad = |kind| Error::InvalidInput { kind, offset: 0 };
    match *payload {
        [] => Ok(None),
        [_] => Err(bad(InvalidInput::WebSocket(WsField::Close))),
        [c0, c1, ref reason @ ..] => {
            let code = u16::from_be_bytes([c0, c1]);
            if !is_sendable(code) {
                return Err(bad(InvalidInput::WebSocket(WsField::Close)));
            }
            if simdutf8::basic::from_utf8(reason).is_err() {
                return Err(bad(InvalidInput::Utf8));
            }
            Ok(Some(code))
        }
    }
}

/// Reads a close frame's payload (see [`check`]).
pub(crate) fn parse(payload: &Bytes) -> Result<CloseFrame, Error> {
    let code = check(payload)?;
    Ok(CloseFrame {
        code,
        reason: if code.is_some() {
            payload.slice(2..)
        } else {
            Bytes::new()
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        for code in [
            1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 3000, 3999, 4000, 4999,
        ] {
            assert!(is_sendable(code), "{code}");
        }
        for code in [
            0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
        ] {
            assert!(!is_sendable(code), "{code}");
        }
    }

    #[test]
    fn payloads() {
        assert_eq!(parse(&Bytes::new()).unwrap().code, None);
        assert!(parse(&Bytes::from_static(b"\x03")).is_err());
        let ok = parse(&Bytes::from_static(b"\x03\xe8bye")).unwrap();
        assert_eq!((ok.code, &ok.reason[..]), (Some(1000), &b"bye"[..]));
        assert_eq!(
            parse(&Bytes::from_static(b"\x03\xe8\xff")),
            Err(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                offset: 0
            })
        );
        assert!(parse(&Bytes::from_static(b"\x03\xed")).is_err()); // 1005
    }
}
