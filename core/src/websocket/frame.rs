//! The frame header (RFC 6455, section 5.2): parsing it, checking it,
//! writing it, and the masking.

use crate::encoder::INLINE_FRAMING;
use crate::error::{Error, InvalidInput, WsField};

/// A frame's opcode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpCode {
    /// A further frame of a fragmented message (0x0).
    Continuation,
    /// The first frame of a text message (0x1).
    Text,
    /// The first frame of a binary message (0x2).
    Binary,
    /// Close (0x8).
    Close,
    /// Ping (0x9).
    Ping,
    /// Pong (0xA).
    Pong,
}

impl OpCode {
    fn from_bits(bits: u8) -> Option<Self> {
        Some(match bits {
            0x0 => Self::Continuation,
            0x1 => Self::Text,
            0x2 => Self::Binary,
            0x8 => Self::Close,
            0x9 => Self::Ping,
            0xA => Self::Pong,
            _ => return None,
        })
    }

    /// The four bits on the wire.
    #[must_use]
    #[inline]
    pub fn bits(self) -> u8 {
        match self {
            Self::Continuation => 0x0,
            Self::Text => 0x1,
            Self::Binary => 0x2,
            Self::Close => 0x8,
            Self::Ping => 0x9,
            Self::Pong => 0xA,
        }
    }

    /// Close, ping or pong: at most 125 bytes, never fragmented, allowed
    /// between the frames of a message.
    #[must_use]
    pub fn is_control(self) -> bool {
        matches!(self, Self::Close | Self::Ping | Self::Pong)
    }
}

/// Longest header: 2 bytes, an 8-byte length, a 4-byte mask.
pub(crate) const MAX_HEAD: usize = 14;
const _: () = assert!(MAX_HEAD <= INLINE_FRAMING);

/// A parsed frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Head {
    pub(crate) fin: bool,
    /// RSV1: a compressed message's first frame, with permessage-deflate.
    pub(crate) rsv1: bool,
    pub(crate) opcode: OpCode,
    pub(crate) mask: Option<[u8; 4]>,
    /// The payload's length.
    pub(crate) len: u64,
    /// The header's length: where the payload starts.
    pub(crate) head_len: usize,
}

fn bad(field: WsField) -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(field),
        offset: 0,
    }
}

/// Parses the header at the start of `buf`: `Ok(None)` until it is all
/// there. Checks what the header alone says: reserved bits (RSV1 only
/// where `rsv1_allowed`), opcode, control frames (FIN, at most 125
/// bytes), the 64-bit length's top bit. Offsets are from the frame's
/// start; the caller shifts them.
#[inline]
pub(crate) fn parse(buf: &[u8], rsv1_allowed: bool) -> Result<Option<Head>, Error> {
    let (Some(&b0), Some(&b1)) = (buf.first(), buf.get(1)) else {
        return Ok(None);
    };
    let fin = b0 & 0x80 != 0;
    let rsv1 = b0 & 0x40 != 0;
    if b0 & 0x30 != 0 || (rsv1 && !rsv1_allowed) {
        return Err(bad(WsField::Reserved));
    }
    let opcode = OpCode::from_bits(b0 & 0x0F).ok_or_else(|| bad(WsField::OpCode))?;
    let masked = b1 & 0x80 != 0;
    let code = b1 & 0x7F;
    if opcode.is_control() {
        if !fin || code > 125 {
            return Err(bad(WsField::Control));
        }
        if rsv1 {
            return Err(bad(WsField::Reserved));
        }
    }
    let (len, at) = match code {
        126 => match buf.get(2..4) {
            Some(&[a, b]) => (u64::from(u16::from_be_bytes([a, b])), 4),
            _ => return Ok(None),
        },
        127 => match buf.get(2..10).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
            Some(bytes) => {
                let len = u64::from_be_bytes(bytes);
                if len >> 63 != 0 {
                    return Err(bad(WsField::Length));
                }
                (len, 10)
            }
            None => return Ok(None),
        },
        short => (u64::from(short), 2),
    };
    let (mask, head_len) = if masked {
        match buf
            .get(at..at + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
        {
            Some(key) => (Some(key), at + 4),
            None => return Ok(None),
        }
    } else {
        (None, at)
    };
    Ok(Some(Head {
        fin,
        rsv1,
        opcode,
        mask,
        len,
        head_len,
    }))
}

/// Writes a header into `out` and returns its length (at most
/// [`MAX_HEAD`], which fits in an inline part of a `Frame`).
#[inline]
pub(crate) fn write(
    out: &mut [u8; INLINE_FRAMING],
    fin: bool,
    rsv1: bool,
    opcode: OpCode,
    len: usize,
    mask: Option<[u8; 4]>,
) -> usize {
    out[0] = u8::from(fin) << 7 | u8::from(rsv1) << 6 | opcode.bits();
    let masked = u8::from(mask.is_some()) << 7;
    let mut at = match (u8::try_from(len), u16::try_from(len)) {
        (Ok(short), _) if short <= 125 => {
            out[1] = masked | short;
            2
        }
        (_, Ok(mid)) => {
            out[1] = masked | 126;
            out[2..4].copy_from_slice(&mid.to_be_bytes());
            4
        }
        _ => {
            out[1] = masked | 127;
            out[2..10].copy_from_slice(&(len as u64).to_be_bytes());
            10
        }
    };
    if let Some(key) = mask {
        out[at..at + 4].copy_from_slice(&key);
        at += 4;
    }
    at
}

/// The length of the header [`write`] makes for a `len`-byte payload.
#[inline]
pub(crate) fn head_len(len: usize, masked: bool) -> usize {
    let n = match len {
        0..=125 => 2,
        126..=0xFFFF => 4,
        _ => 10,
    };
    if masked {
        n + 4
    } else {
        n
    }
}

/// XORs `data` with the masking key, starting `offset` bytes into the
/// payload (so a payload unmasked in pieces comes out the same as whole).
/// Eight bytes at a time.
#[inline]
pub(crate) fn apply_mask(data: &mut [u8], key: [u8; 4], offset: u64) {
    #[allow(clippy::cast_possible_truncation)] // below 4
    let shift = (offset % 4) as usize;
    let key = [
        key[shift % 4],
        key[(shift + 1) % 4],
        key[(shift + 2) % 4],
        key[(shift + 3) % 4],
    ];
    let wide = u64::from_ne_bytes([
        key[0], key[1], key[2], key[3], key[0], key[1], key[2], key[3],
    ]);
    let mut words = data.chunks_exact_mut(8);
    for word in &mut words {
        let mut bytes = [0; 8];
        bytes.copy_from_slice(word);
        word.copy_from_slice(&(u64::from_ne_bytes(bytes) ^ wide).to_ne_bytes());
    }
    for (i, byte) in words.into_remainder().iter_mut().enumerate() {
        *byte ^= key[i % 4];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_examples_parse() {
        // RFC 6455, section 5.7: "Hello", unmasked and masked.
        let head = parse(b"\x81\x05Hello", false).unwrap().unwrap();
        assert_eq!(
            (head.fin, head.opcode, head.len, head.head_len),
            (true, OpCode::Text, 5, 2)
        );
        let mut masked = *b"\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58";
        let head = parse(&masked, false).unwrap().unwrap();
        assert_eq!(head.mask, Some([0x37, 0xfa, 0x21, 0x3d]));
        apply_mask(&mut masked[6..], [0x37, 0xfa, 0x21, 0x3d], 0);
        assert_eq!(&masked[6..], b"Hello");
        // 256 bytes and 64 KiB binary, unmasked.
        assert_eq!(parse(b"\x82\x7E\x01\x00", false).unwrap().unwrap().len, 256);
        let big = parse(b"\x82\x7F\0\0\0\0\0\x01\0\0", false)
            .unwrap()
            .unwrap();
        assert_eq!((big.len, big.head_len), (65536, 10));
    }

    #[test]
    fn a_header_cut_anywhere_waits() {
        let whole = b"\x82\xFF\0\0\0\0\0\x01\0\0\x01\x02\x03\x04";
        for cut in 0..whole.len() {
            assert_eq!(parse(&whole[..cut], false), Ok(None), "cut at {cut}");
        }
        assert_eq!(parse(whole, false).unwrap().unwrap().head_len, 14);
    }

    #[test]
    fn header_rules() {
        let field = |bytes: &[u8], rsv1| match parse(bytes, rsv1) {
            Err(Error::InvalidInput {
                kind: InvalidInput::WebSocket(field),
                ..
            }) => Some(field),
            _ => None,
        };
        assert_eq!(field(b"\xA1\x00", false), Some(WsField::Reserved)); // RSV2
        assert_eq!(field(b"\xC1\x00", false), Some(WsField::Reserved)); // RSV1, no extension
        assert_eq!(field(b"\xC1\x00", true), None);
        assert_eq!(field(b"\xC9\x00", true), Some(WsField::Reserved)); // RSV1 on a ping
        assert_eq!(field(b"\x83\x00", false), Some(WsField::OpCode));
        assert_eq!(field(b"\x8B\x00", false), Some(WsField::OpCode));
        assert_eq!(field(b"\x09\x00", false), Some(WsField::Control)); // fragmented ping
        assert_eq!(field(b"\x89\x7E\x00\x7E", false), Some(WsField::Control)); // 126 bytes
        assert_eq!(
            field(b"\x82\x7F\x80\0\0\0\0\0\0\0", false),
            Some(WsField::Length)
        );
    }

    #[test]
    fn written_headers_parse_back() {
        for len in [0, 1, 124, 125, 126, 127, 65535, 65536, 1 << 40] {
            for mask in [None, Some([1, 2, 3, 4])] {
                let mut out = [0; INLINE_FRAMING];
                let n = write(&mut out, true, false, OpCode::Binary, len, mask);
                let head = parse(&out[..n], false).unwrap().unwrap();
                assert_eq!((head.len, head.mask, head.head_len), (len as u64, mask, n));
                assert_eq!(head_len(len, mask.is_some()), n, "{len} bytes");
            }
        }
    }

    #[test]
    fn masking_in_pieces_equals_masking_whole() {
        let key = [0xA1, 0x02, 0xF3, 0x44];
        let data: Vec<u8> = (0..100u8).collect();
        let mut whole = data.clone();
        apply_mask(&mut whole, key, 0);
        // RFC 6455, section 5.3: byte i is XORed with key byte i mod 4.
        let reference: Vec<u8> = data
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ key[i % 4])
            .collect();
        assert_eq!(whole, reference);
        for cut in 0..data.len() {
            let mut pieces = data.clone();
            let (a, b) = pieces.split_at_mut(cut);
            apply_mask(a, key, 0);
            apply_mask(b, key, cut as u64);
            assert_eq!(pieces, whole, "cut at {cut}");
        }
        let mut back = whole.clone();
        apply_mask(&mut back, key, 0);
        assert_eq!(back, data);
    }
}
