//! First flights built from the captured fixtures for the trickle tests and
//! the sniff bench: a ClientHello grown with an extension and re-cut into
//! records of any size, a long request head, a PROXY v2 header with a long
//! TLV.
//!
//! Shared by the integration tests and the benches (`#[path]`).

#![allow(dead_code)]

/// curl's ClientHello (one record), captured as `fixtures/README.md` says.
pub const TLS_CURL: &[u8] = include_bytes!("../fixtures/tls_curl.bin");

/// An extension type no client sends (unassigned in the IANA registry),
/// so it never clashes with one the hello already has.
const FILLER_EXTENSION: u16 = 0x4444;

/// The handshake message of a one-record ClientHello, grown with a filler
/// extension to `len` bytes (at least the original's length + 4).
pub fn hello_handshake(record: &[u8], len: usize) -> Vec<u8> {
    let mut hs = record[5..].to_vec();
    // legacy_version, random, session id, cipher suites, compression: the
    // extensions block's length comes after them.
    let mut at = 4 + 2 + 32;
    at += 1 + usize::from(hs[at]);
    at += 2 + usize::from(u16::from_be_bytes([hs[at], hs[at + 1]]));
    at += 1 + usize::from(hs[at]);
    let extensions = at;
    let filler = len - hs.len() - 4;
    hs.extend_from_slice(&FILLER_EXTENSION.to_be_bytes());
    hs.extend_from_slice(&u16::try_from(filler).expect("fits").to_be_bytes());
    hs.resize(len, 0);
    let grow = |bytes: &mut [u8], by: usize, width: usize| {
        let mut n = 0usize;
        for &b in bytes.iter().take(width) {
            n = n << 8 | usize::from(b);
        }
        n += by;
        for (i, b) in bytes.iter_mut().take(width).enumerate() {
            *b = (n >> (8 * (width - 1 - i))) as u8;
        }
    };
    let added = filler + 4;
    grow(&mut hs[extensions..], added, 2);
    grow(&mut hs[1..], added, 3);
    hs
}

/// A handshake message cut into handshake records of at most `size`
/// bytes each (record version 0x0301).
pub fn in_records(handshake: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(handshake.len() + handshake.len().div_ceil(size) * 5);
    for chunk in handshake.chunks(size) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&u16::try_from(chunk.len()).expect("fits").to_be_bytes());
        out.extend_from_slice(chunk);
    }
    out
}

/// The largest ClientHello in one-byte records that fits in `budget`
/// bytes: six bytes on the wire per byte of handshake.
pub fn trickled_hello(budget: usize) -> Vec<u8> {
    in_records(&hello_handshake(TLS_CURL, budget / 6), 1)
}

/// A request head of about `len` bytes: curl's GET, then `x-filler`
/// headers of 200 bytes each.
pub fn long_head(len: usize) -> Vec<u8> {
    let mut head =
        b"GET /index.html HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.5.0\r\n".to_vec();
    let mut i = 0;
    while head.len() + 200 + 2 <= len {
        let line = format!("x-filler-{i:04}: {}\r\n", "v".repeat(200 - 17));
        head.extend_from_slice(line.as_bytes());
        i += 1;
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// A PROXY v2 header (PROXY, TCP over IPv4) with one custom TLV (0xE0) of
/// `tlv` bytes.
pub fn proxy_v2_with_tlv(tlv: usize) -> Vec<u8> {
    let mut header = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    header.extend_from_slice(&[0x21, 0x11]);
    let len = 12 + 3 + tlv;
    header.extend_from_slice(&u16::try_from(len).expect("fits").to_be_bytes());
    header.extend_from_slice(&[192, 0, 2, 1, 198, 51, 100, 1, 0xdc, 0x04, 0x01, 0xbb]);
    header.push(0xE0);
    header.extend_from_slice(&u16::try_from(tlv).expect("fits").to_be_bytes());
    header.resize(header.len() + tlv, b'x');
    header
}
