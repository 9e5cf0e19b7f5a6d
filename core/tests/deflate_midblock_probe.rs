//! permessage-deflate: a compressed message whose payload stops inside a
//! dynamic block's header (its code-length code read, its literal/length
//! lengths not) must be refused. There any bits are taken as more code
//! lengths and nothing comes out, so a probe that only asks "does an empty
//! block go in without output" cannot tell that place from between
//! blocks; under context takeover the next, valid, message would then be
//! read as more code lengths and come out empty.
//!
//! RFC 7692, section 7.2.2: the receiver appends 0x00 0x00 0xff 0xff and
//! inflates; a payload that does not end a block there is not a message
//! (`WsField::Compressed`: "a compressed message that does not inflate").

use std::time::Duration;

use cleave_proto::conn::Conn;
use cleave_proto::websocket::{DeflateConfig, DeflateParams, Kind, WebSocket, WsConfig};

#[path = "support/ws.rs"]
mod ws;
use ws::{frame_rsv, run};

const NOW: Duration = Duration::ZERO;
const KEY: Option<[u8; 4]> = Some([0x11, 0x22, 0x33, 0x44]);

/// DEFLATE bits, least significant first.
struct Bits {
    out: Vec<u8>,
    at: usize,
}

impl Bits {
    fn push(&mut self, value: u32, n: usize) {
        for i in 0..n {
            if self.at % 8 == 0 {
                self.out.push(0);
            }
            if value >> i & 1 == 1 {
                *self.out.last_mut().unwrap() |= 1 << (self.at % 8);
            }
            self.at += 1;
        }
    }
}

/// The start of a dynamic block: 286 literal/length codes, 1 distance
/// code, and a code-length code of two 1-bit codes (symbol 0: length 0,
/// symbol 8: length 8), so that every bit after it reads as one more
/// code length without error. 32 bits, 4 bytes.
fn dynamic_header_start() -> Vec<u8> {
    let mut bits = Bits {
        out: Vec::new(),
        at: 0,
    };
    bits.push(0, 1); // BFINAL 0
    bits.push(2, 2); // BTYPE 10: dynamic Huffman
    bits.push(29, 5); // HLIT: 257 + 29 = 286
    bits.push(0, 5); // HDIST: 1
    bits.push(1, 4); // HCLEN: 4 + 1 = 5 code-length codes
                     // Code-length code lengths, in the order 16, 17, 18, 0, 8.
    for len in [0, 0, 0, 1, 1] {
        bits.push(len, 3);
    }
    assert_eq!(bits.at, 32);
    bits.out
}

fn server(takeover: bool) -> Conn<WebSocket> {
    let params = DeflateParams {
        server_no_context_takeover: !takeover,
        client_no_context_takeover: !takeover,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
        server_window_offered: false,
    };
    Conn::new(
        WebSocket::server(WsConfig::default()).with_deflate(params, &DeflateConfig::default()),
        NOW,
    )
}

/// "Hello", compressed (RFC 7692, section 7.2.3.1).
const HELLO: [u8; 7] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];

#[test]
fn a_payload_ending_inside_a_dynamic_header_is_refused() {
    let bytes = frame_rsv(true, true, 1, &dynamic_header_start(), KEY);
    for takeover in [false, true] {
        let (seen, _) = run(server(takeover), &bytes, &[]);
        assert!(
            matches!(
                seen.error,
                Some(cleave_proto::Error::InvalidInput {
                    kind: cleave_proto::InvalidInput::WebSocket(cleave_proto::WsField::Compressed),
                    ..
                })
            ),
            "a payload that stops inside a block was taken: {seen:?}"
        );
        assert!(seen.messages.is_empty());
    }
}

#[test]
fn a_payload_ending_inside_a_dynamic_header_does_not_swallow_the_next_message() {
    // With context takeover the decompressor would go on from where the
    // first message left it, and read the valid "Hello" after it as more
    // code lengths: the cut message fails instead, before anything of
    // the next is read.
    let bytes = [
        frame_rsv(true, true, 1, &dynamic_header_start(), KEY),
        frame_rsv(true, true, 1, &HELLO, KEY),
    ]
    .concat();
    for cuts in [vec![], vec![3, 9, 12]] {
        let (seen, _) = run(server(true), &bytes, &cuts);
        assert!(
            matches!(
                seen.error,
                Some(cleave_proto::Error::InvalidInput {
                    kind: cleave_proto::InvalidInput::WebSocket(cleave_proto::WsField::Compressed),
                    ..
                })
            ),
            "{seen:?}"
        );
        assert!(seen.messages.is_empty(), "{seen:?}");
    }
}

/// Messages that end between blocks, under context takeover, still
/// read right one after the other (the check ends the stream, and the
/// decompressor starts again primed with the window): "Hello" twice, the
/// second a back-reference into the first (RFC 7692, section 7.2.3.2).
#[test]
fn messages_that_end_between_blocks_read_on_under_context_takeover() {
    let bytes = [
        frame_rsv(true, true, 1, &HELLO, KEY),
        frame_rsv(true, true, 1, &[0xf2, 0x00, 0x11, 0x00, 0x00], KEY),
        frame_rsv(true, true, 1, &HELLO, KEY),
    ]
    .concat();
    for cut in 0..=bytes.len() {
        let (seen, _) = run(server(true), &bytes, &[cut]);
        assert_eq!(seen.error, None, "at {cut}");
        assert_eq!(
            seen.messages,
            vec![(Kind::Text, b"Hello".to_vec()); 3],
            "at {cut}"
        );
    }
}
