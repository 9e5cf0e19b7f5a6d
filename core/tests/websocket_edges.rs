//! The WebSocket codec at its edges, as a hostile or broken peer (or a
//! hasty application) meets them: permessage-deflate's limits and framing
//! (the message limit counts inflated bytes, a frame the buffer cannot
//! hold is a 1009, a payload that stops inside a DEFLATE block is
//! refused), its negotiation (an offered server window is answered, even
//! at 15), the close handshake (one close per side, never ahead of the
//! messages queued before it, a close 1001 on a timeout), pings that can
//! never be answered, and random input in both roles (no panic).

use std::time::Duration;

use cleave_proto::conn::{Conn, Shutdown};
use cleave_proto::http1::{Client, ClientEvent, Request, Server, ServerEvent};
use cleave_proto::websocket::{
    accept, AcceptConfig, Assembler, ClientHandshake, ConnectConfig, DeflateConfig, DeflateParams,
    Kind, WebSocket, WsConfig, WsEvent,
};
use cleave_proto::{Bytes, ConnConfig, Error, InvalidInput, Limit, Misuse, Unencodable, WsField};

const KEY: Option<[u8; 4]> = Some([0x11, 0x22, 0x33, 0x44]);

#[path = "support/events.rs"]
mod events;
#[path = "support/ws.rs"]
mod ws;
use ws::{drain, frame, frame_rsv, poll_all, run, server, server_with, Seen, NOW};

fn params(takeover: bool) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: !takeover,
        client_no_context_takeover: !takeover,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
        server_window_offered: false,
    }
}

fn deflate_server(config: WsConfig, takeover: bool) -> Conn<WebSocket> {
    Conn::new(
        WebSocket::server(config).with_deflate(params(takeover), &DeflateConfig::default()),
        NOW,
    )
}

/// The close code of the first close frame in `out` (server frames, unmasked).
fn close_code_in(out: &[u8]) -> Option<u16> {
    let at = out.windows(2).position(|w| w[0] == 0x88 && w[1] >= 2)?;
    Some(u16::from_be_bytes([out[at + 2], out[at + 3]]))
}

/// Raw DEFLATE, sync-flushed, tail removed (RFC 7692, section 7.2.1).
fn compress(data: &[u8]) -> Vec<u8> {
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(6), false);
    let mut out = Vec::with_capacity(data.len() + 1024);
    c.compress_vec(data, &mut out, FlushCompress::Sync).unwrap();
    while (c.total_in() as usize) < data.len() || out.len() == out.capacity() {
        out.reserve(out.capacity() + 1024);
        let taken = c.total_in() as usize;
        c.compress_vec(&data[taken..], &mut out, FlushCompress::Sync)
            .unwrap();
    }
    assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
    out.truncate(out.len() - 4);
    out
}

/// One stored DEFLATE block, not final.
fn stored(data: &[u8]) -> Vec<u8> {
    let len = data.len() as u16;
    let mut out = vec![0x00];
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&(!len).to_le_bytes());
    out.extend_from_slice(data);
    out
}

fn is_limit(e: &Option<Error>, which: Limit) -> bool {
    matches!(e, Some(Error::LimitExceeded { limit, .. }) if *limit == which)
}

// =====================================================================
// permessage-deflate: limits
// =====================================================================

/// The message limit counts inflated bytes (WsConfig::max_message doc):
/// a compressed message of two frames that inflates to exactly the limit
/// must come out. The second frame's *compressed* length is added to the
/// inflated length so far.
#[test]
fn deflate_fragmented_message_at_exact_inflated_limit_is_taken() {
    let config = WsConfig::default().max_message(100).unwrap();
    let first = stored(&[b'a'; 95]); // 100 bytes on the wire, 95 inflated
                                     // 10 bytes on the wire, 5 inflated, then the sync flush's empty
                                     // stored block less the tail the receiver puts back (RFC 7692,
                                     // section 7.2.1).
    let mut second = stored(&[b'b'; 5]);
    second.push(0x00);
    let bytes = [
        frame_rsv(false, true, 2, &first, KEY),
        frame_rsv(true, false, 0, &second, KEY),
    ]
    .concat();
    let (seen, _) = run(deflate_server(config, true), &bytes, &[]);
    assert_eq!(seen.error, None, "{seen:?}");
    let mut want = vec![b'a'; 95];
    want.extend_from_slice(&[b'b'; 5]);
    assert_eq!(seen.messages, vec![(Kind::Binary, want)]);
}

/// Same, with real compression: incompressible data compresses to
/// slightly more than itself; fragmented, the message at the limit is refused.
#[test]
fn deflate_fragmented_incompressible_message_under_limit_is_taken() {
    // Pseudo-random bytes: deflate makes stored blocks (a few bytes more).
    let mut x = 0x12345678u32;
    let data: Vec<u8> = (0..1000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    let compressed = compress(&data);
    assert!(compressed.len() > data.len());
    let config = WsConfig::default().max_message(1000).unwrap();
    // Split the compressed bytes in two frames.
    let (a, b) = compressed.split_at(compressed.len() / 2);
    let bytes = [
        frame_rsv(false, true, 2, a, KEY),
        frame_rsv(true, false, 0, b, KEY),
    ]
    .concat();
    let (seen, _) = run(deflate_server(config, true), &bytes, &[]);
    assert_eq!(seen.error, None, "{seen:?}");
    assert_eq!(seen.messages, vec![(Kind::Binary, data)]);
}

/// Exactly the limit and one over, whole and in two fragments split at
/// every point of the compressed payload, with a ping between.
#[test]
fn deflate_limit_exact_and_one_over_at_every_split() {
    let mut failures = Vec::new();
    for takeover in [true, false] {
        let config = WsConfig::default().max_message(1000).unwrap();
        let ok = compress(&[b'z'; 1000]);
        let over = compress(&[b'z'; 1001]);
        for (payload, good) in [(&ok, true), (&over, false)] {
            for cut in 0..=payload.len() {
                let (a, b) = payload.split_at(cut);
                let bytes = [
                    frame_rsv(false, true, 1, a, KEY),
                    frame(true, 9, b"p", KEY),
                    frame_rsv(true, false, 0, b, KEY),
                ]
                .concat();
                let (seen, mut conn) = run(deflate_server(config.clone(), takeover), &bytes, &[]);
                if good {
                    if seen.error.is_some() || seen.messages != vec![(Kind::Text, vec![b'z'; 1000])]
                    {
                        failures.push((takeover, cut, payload.len(), seen.error.clone()));
                    }
                } else {
                    assert!(
                        is_limit(&seen.error, Limit::MessageLength),
                        "cut {cut} {seen:?}"
                    );
                    assert_eq!(close_code_in(&drain(&mut conn)), Some(1009));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "exact-limit message refused at (takeover, cut, compressed len, error): {failures:?}"
    );
}

/// A bomb: 50 MB of zeros in ~50 KB; the limit must hold per message,
/// also when the window carries over from an earlier message.
#[test]
fn deflate_bomb_with_context_takeover_is_1009() {
    let config = WsConfig::default().max_message(1 << 20).unwrap();
    // One compressor for both messages (context takeover).
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(9), false);
    let mut m1 = Vec::with_capacity(1 << 16);
    c.compress_vec(&[0u8; 1000], &mut m1, FlushCompress::Sync)
        .unwrap();
    m1.truncate(m1.len() - 4);
    let big = vec![0u8; 50 << 20];
    let mut m2 = Vec::with_capacity(1 << 20);
    c.compress_vec(&big, &mut m2, FlushCompress::Sync).unwrap();
    assert_eq!(c.total_in() as usize, 1000 + big.len());
    m2.truncate(m2.len() - 4);
    let bytes = [
        frame_rsv(true, true, 2, &m1, KEY),
        frame_rsv(true, true, 2, &m2, KEY),
    ]
    .concat();
    let mut conn = Conn::with_config(
        WebSocket::server(config).with_deflate(params(true), &DeflateConfig::default()),
        ConnConfig::default().recv_buf(
            cleave_proto::RecvBufConfig::default()
                .max_buffered(4 << 20)
                .unwrap(),
        ),
        NOW,
    );
    conn.feed(&bytes, NOW).unwrap();
    let mut seen = Seen::default();
    poll_all(&mut conn, &mut seen, &mut Assembler::new());
    assert_eq!(seen.messages, vec![(Kind::Binary, vec![0u8; 1000])]);
    assert!(is_limit(&seen.error, Limit::MessageLength), "{seen:?}");
    // The bomb's frame stays in the buffer as it came.
    let first = frame_rsv(true, true, 2, &m1, KEY).len();
    assert_eq!(conn.recv_buf().peek(), &bytes[first..]);
    assert_eq!(close_code_in(&drain(&mut conn)), Some(1009));
}

// =====================================================================
// permessage-deflate: framing
// =====================================================================

#[test]
fn deflate_empty_message_and_context_takeover_after_it() {
    let bytes = [
        frame_rsv(true, true, 1, &[0x00], KEY),
        frame_rsv(true, true, 1, &compress(b"hello"), KEY),
    ]
    .concat();
    for cut in 0..=bytes.len() {
        let (seen, _) = run(deflate_server(WsConfig::default(), true), &bytes, &[cut]);
        assert_eq!(seen.error, None, "cut {cut}");
        assert_eq!(
            seen.messages,
            vec![(Kind::Text, vec![]), (Kind::Text, b"hello".to_vec())]
        );
    }
}

/// An RSV1 frame with an empty payload is not a valid compressed message:
/// the `00 00 ff ff` a receiver appends (RFC 7692, section 7.2.2) is the
/// end of a sync flush, the length fields of an empty stored block whose
/// header bits the payload should have held; alone, they read as the
/// header of a stored block that is cut short. So it is refused, as
/// `Compressed`, with nothing taken from it: were it accepted, the
/// decompressor would be left inside that block and the next message
/// misread. (An empty message compressed is the single byte `00`.)
#[test]
fn deflate_empty_payload_does_not_poison_the_next_message() {
    // Two messages from one compressor with context takeover.
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(6), false);
    let mut m = Vec::with_capacity(256);
    c.compress_vec(b"hello hello", &mut m, FlushCompress::Sync)
        .unwrap();
    m.truncate(m.len() - 4);
    let bytes = [
        frame_rsv(true, true, 1, b"", KEY),
        frame_rsv(true, true, 1, &m, KEY),
    ]
    .concat();
    let (seen, _) = run(deflate_server(WsConfig::default(), true), &bytes, &[]);
    assert_eq!(seen.error, Some(invalid_compressed()), "{seen:?}");
    assert_eq!(seen.messages, vec![]);
}

/// The error of a payload that does not inflate.
fn invalid_compressed() -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(WsField::Compressed),
        offset: 0,
    }
}

#[test]
fn deflate_rsv1_on_continuation_and_control_is_1002() {
    let c = compress(b"hello");
    let cases = [
        // RSV1 on a continuation of a compressed message
        [
            frame_rsv(false, true, 1, &c[..2], KEY),
            frame_rsv(true, true, 0, &c[2..], KEY),
        ]
        .concat(),
        // RSV1 on a continuation of an uncompressed message
        [
            frame_rsv(false, false, 1, b"he", KEY),
            frame_rsv(true, true, 0, b"llo", KEY),
        ]
        .concat(),
        // RSV1 on a ping
        frame_rsv(true, true, 9, b"", KEY),
        // RSV1 on a close
        frame_rsv(true, true, 8, b"\x03\xe8", KEY),
    ];
    for bytes in cases {
        for cut in 0..=bytes.len() {
            let (seen, mut conn) = run(deflate_server(WsConfig::default(), true), &bytes, &[cut]);
            assert!(
                matches!(
                    seen.error,
                    Some(Error::InvalidInput {
                        kind: InvalidInput::WebSocket(WsField::Reserved),
                        ..
                    })
                ),
                "{seen:?}"
            );
            assert_eq!(close_code_in(&drain(&mut conn)), Some(1002));
        }
    }
}

/// A compressed message whose final block has BFINAL set; then, with
/// context takeover, another message.
#[test]
fn deflate_bfinal_message_then_next() {
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(6), false);
    let mut m = Vec::with_capacity(256);
    c.compress_vec(b"final block", &mut m, FlushCompress::Finish)
        .unwrap();
    let bytes = [
        frame_rsv(true, true, 1, &m, KEY),
        frame_rsv(true, true, 1, &compress(b"next"), KEY),
    ]
    .concat();
    for cut in 0..=bytes.len() {
        let (seen, _) = run(deflate_server(WsConfig::default(), true), &bytes, &[cut]);
        assert_eq!(seen.error, None, "cut {cut}");
        assert_eq!(
            seen.messages,
            vec![
                (Kind::Text, b"final block".to_vec()),
                (Kind::Text, b"next".to_vec())
            ]
        );
    }
}

/// Invalid UTF-8 inside a compressed text message is 1007.
#[test]
fn deflate_invalid_utf8_is_1007() {
    let bytes = frame_rsv(true, true, 1, &compress(b"ok\xc0\xaf"), KEY);
    let (seen, mut conn) = run(deflate_server(WsConfig::default(), true), &bytes, &[]);
    assert!(matches!(
        seen.error,
        Some(Error::InvalidInput {
            kind: InvalidInput::Utf8,
            ..
        })
    ));
    // Refused whole, the frame stays in the buffer as it came.
    assert_eq!(conn.recv_buf().peek(), &bytes[..]);
    assert_eq!(close_code_in(&drain(&mut conn)), Some(1007));
}

// =====================================================================
// permessage-deflate: negotiation
// =====================================================================

fn negotiate(offer: &str) -> Option<DeflateParams> {
    DeflateParams::negotiate([offer.as_bytes()], &DeflateConfig::default())
}

#[test]
fn deflate_negotiation_window_values() {
    assert_eq!(
        negotiate("permessage-deflate; server_max_window_bits=7"),
        None
    );
    assert_eq!(
        negotiate("permessage-deflate; server_max_window_bits=16"),
        None
    );
    assert_eq!(
        negotiate("permessage-deflate; server_max_window_bits=08"),
        None
    );
    assert_eq!(
        negotiate("permessage-deflate; server_max_window_bits"),
        None
    );
    assert_eq!(
        negotiate("permessage-deflate; server_max_window_bits=10; server_max_window_bits=10"),
        None
    );
    assert_eq!(
        negotiate("permessage-deflate; server_no_context_takeover; server_no_context_takeover"),
        None
    );
    let p = negotiate("permessage-deflate; server_max_window_bits=\"10\"").unwrap();
    assert_eq!(p.server_max_window_bits, 10);
    let p = negotiate("permessage-deflate; server_max_window_bits=8").unwrap();
    assert_eq!(p.server_max_window_bits, 8);
    assert_eq!(
        p.to_header(),
        "permessage-deflate; server_max_window_bits=8"
    );
    let p = negotiate("permessage-deflate; client_max_window_bits").unwrap();
    assert_eq!(p.client_max_window_bits, 15);
    // Fallback: the first acceptable offer.
    let p = negotiate(
        "permessage-deflate; server_max_window_bits=16, permessage-deflate; client_max_window_bits=9",
    )
    .unwrap();
    assert_eq!(p.client_max_window_bits, 9);
    // client_no_context_takeover with a value is malformed
    assert_eq!(
        negotiate("permessage-deflate; client_no_context_takeover=1"),
        None
    );
}

#[test]
fn deflate_client_checks_response() {
    let cfg = DeflateConfig::default();
    let ok = |s: &str| DeflateParams::from_response(s.as_bytes(), &cfg);
    assert!(ok("permessage-deflate").is_ok());
    assert!(ok("permessage-deflate; client_max_window_bits").is_err());
    assert!(ok("permessage-deflate; client_max_window_bits=10").is_ok());
    assert!(ok("permessage-deflate; server_max_window_bits=8").is_ok());
    assert!(ok("permessage-deflate; server_max_window_bits=7").is_err());
    assert!(ok("permessage-deflate; foo").is_err());
    assert!(ok("permessage-deflate, permessage-deflate").is_err());
    assert!(ok("x-webkit-deflate-frame").is_err());
    let strict = DeflateConfig::default().peer_no_context_takeover(true);
    assert!(DeflateParams::from_response(b"permessage-deflate", &strict).is_err());
}

// =====================================================================
// control frames, close
// =====================================================================

#[test]
fn close_codes() {
    let bad = [
        0u16, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
    ];
    let good = [
        1000u16, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999,
        4000, 4999,
    ];
    for code in bad {
        let (seen, mut conn) = run(server(), &frame(true, 8, &code.to_be_bytes(), KEY), &[]);
        assert!(seen.error.is_some(), "{code} accepted");
        assert_eq!(close_code_in(&drain(&mut conn)), Some(1002), "{code}");
    }
    for code in good {
        let (seen, mut conn) = run(server(), &frame(true, 8, &code.to_be_bytes(), KEY), &[]);
        assert_eq!(seen.close.and_then(|c| c.code), Some(code));
        assert_eq!(close_code_in(&drain(&mut conn)), Some(code));
    }
}

#[test]
fn control_frame_length_126_via_16_bit_is_refused() {
    // A ping whose 7-bit length says 126 (a 16-bit length follows), value 5
    let mut bytes = vec![0x89, 0x80 | 126, 0, 5];
    bytes.extend_from_slice(&KEY.unwrap());
    bytes.extend(
        b"hello"
            .iter()
            .enumerate()
            .map(|(i, b)| b ^ KEY.unwrap()[i % 4]),
    );
    let (seen, _) = run(server(), &bytes, &[]);
    assert!(matches!(
        seen.error,
        Some(Error::InvalidInput {
            kind: InvalidInput::WebSocket(WsField::Control),
            ..
        })
    ));
}

#[test]
fn unsolicited_pong_is_fine_and_ping_is_answered() {
    let bytes = [
        frame(true, 10, b"unasked", KEY),
        frame(true, 9, &[7u8; 125], KEY),
        frame(true, 1, b"x", KEY),
    ]
    .concat();
    let (seen, mut conn) = run(server(), &bytes, &[]);
    assert_eq!(seen.error, None);
    assert_eq!(seen.pongs, vec![b"unasked".to_vec()]);
    let out = drain(&mut conn);
    let mut want = vec![0x8A, 125];
    want.extend_from_slice(&[7u8; 125]);
    assert_eq!(out, want);
}

/// Text whose invalid sequence straddles a fragment boundary, a ping
/// between: 1007 at every split.
#[test]
fn invalid_utf8_straddling_fragments_with_ping_between() {
    let bytes = [
        frame(false, 1, b"ok\xe2", KEY),
        frame(true, 9, b"p", KEY),
        frame(true, 0, b"\x28\xa1", KEY),
    ]
    .concat();
    for cut in 0..=bytes.len() {
        let (seen, mut conn) = run(server(), &bytes, &[cut]);
        assert!(
            matches!(
                seen.error,
                Some(Error::InvalidInput {
                    kind: InvalidInput::Utf8,
                    ..
                })
            ),
            "cut {cut} {seen:?}"
        );
        assert_eq!(close_code_in(&drain(&mut conn)), Some(1007));
    }
}

/// Data after the peer's close: nothing more comes out, no error.
#[test]
fn nothing_after_close() {
    let bytes = [
        frame(true, 8, b"\x03\xe8", KEY),
        frame(true, 1, b"late", KEY),
        vec![0xff, 0xff, 0xff],
    ]
    .concat();
    for cut in 0..=bytes.len() {
        let (seen, _) = run(server(), &bytes, &[cut]);
        assert!(seen.messages.is_empty());
        assert_eq!(seen.error, None, "cut {cut}");
        assert_eq!(seen.close.and_then(|c| c.code), Some(1000));
    }
}

/// A ping flood while the peer does not read: the queue stays bounded.
#[test]
fn ping_flood_with_blocked_writes_is_bounded() {
    let mut conn = server_with(WsConfig::default());
    let ping = frame(true, 9, &[1u8; 125], KEY);
    let mut fed = 0usize;
    for _ in 0..100_000 {
        if conn.feed(&ping, NOW).is_err() {
            break;
        }
        fed += 1;
        while let Ok(Some(_)) = conn.poll_event() {}
    }
    let queued = conn.queue().len();
    assert!(queued <= 64 << 10, "queued {queued} after {fed} pings");
    assert!(conn.recv_buf().capacity() <= 16 << 20);
}

// =====================================================================
// lengths and limits
// =====================================================================

/// Non-minimal lengths: accepted or refused, but the same at every split.
#[test]
fn non_minimal_lengths_are_split_independent() {
    let payload = b"hello";
    let mk = |code: u8, ext: &[u8]| {
        let mut v = vec![0x82, 0x80 | code];
        v.extend_from_slice(ext);
        v.extend_from_slice(&KEY.unwrap());
        v.extend(
            payload
                .iter()
                .enumerate()
                .map(|(i, b)| b ^ KEY.unwrap()[i % 4]),
        );
        v
    };
    for bytes in [mk(126, &[0, 5]), mk(127, &[0, 0, 0, 0, 0, 0, 0, 5])] {
        let (whole, _) = run(server(), &bytes, &[]);
        for cut in 0..=bytes.len() {
            let (seen, _) = run(server(), &bytes, &[cut]);
            assert_eq!(seen, whole, "cut {cut}");
        }
        let cuts: Vec<usize> = (0..bytes.len()).collect();
        let (seen, _) = run(server(), &bytes, &cuts);
        assert_eq!(seen, whole);
    }
}

#[test]
fn max_message_exact_and_one_over_across_fragments() {
    for stream_above in [1u64 << 20, 10] {
        let config = WsConfig::default()
            .max_message(150)
            .unwrap()
            .stream_above(stream_above);
        let ok = [
            frame(false, 2, &[1; 100], KEY),
            frame(true, 9, b"", KEY),
            frame(true, 0, &[2; 50], KEY),
        ]
        .concat();
        let over = [
            frame(false, 2, &[1; 100], KEY),
            frame(true, 9, b"", KEY),
            frame(true, 0, &[2; 51], KEY),
        ]
        .concat();
        for cut in 0..=ok.len() {
            let (seen, _) = run(server_with(config.clone()), &ok, &[cut]);
            assert_eq!(seen.error, None);
            assert_eq!(seen.messages.len(), 1);
            let (seen, mut conn) = run(server_with(config.clone()), &over, &[cut]);
            assert!(is_limit(&seen.error, Limit::MessageLength), "{seen:?}");
            assert_eq!(close_code_in(&drain(&mut conn)), Some(1009));
        }
    }
}

/// Configuration edges do not panic.
#[test]
fn config_edges_do_not_panic() {
    let configs = [
        WsConfig::default().stream_above(0),
        WsConfig::default()
            .max_frame(u64::MAX)
            .unwrap()
            .max_message(u64::MAX)
            .unwrap()
            .stream_above(u64::MAX),
        WsConfig::default()
            .max_frame(1)
            .unwrap()
            .max_message(1)
            .unwrap(),
    ];
    let bytes = [
        frame(false, 1, "κ".as_bytes(), KEY),
        frame(true, 9, b"", KEY),
        frame(true, 0, b"", KEY),
        frame(true, 2, b"", KEY),
        b"\x82\xff\x7f\xff\xff\xff\xff\xff\xff\xff\x01\x02\x03\x04".to_vec(),
    ]
    .concat();
    for config in configs {
        for cut in 0..=bytes.len() {
            let _ = run(server_with(config.clone()), &bytes, &[cut]);
        }
    }
}

// =====================================================================
// timeouts
// =====================================================================

/// A WebSocket that times out sends a close (1001, as close_code_for
/// maps a timeout) before shutting its write side.
#[test]
fn idle_timeout_sends_close_1001() {
    let timeouts = cleave_proto::Timeouts::default().idle(Some(Duration::from_secs(1)));
    let mut conn = Conn::with_config(
        WebSocket::server(WsConfig::default()),
        ConnConfig::default().timeouts(timeouts),
        NOW,
    );
    conn.handle_timeout(Duration::from_secs(2));
    assert!(matches!(conn.poll_event(), Err(Error::TimedOut(_))));
    let out = drain(&mut conn);
    assert_eq!(close_code_in(&out), Some(1001), "wrote {out:x?}");
}

// =====================================================================
// handshake
// =====================================================================

const WSKEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn parse_request(bytes: &[u8]) -> Option<Request> {
    let mut conn = Conn::new(Server::new(), NOW);
    conn.feed(bytes, NOW).unwrap();
    match conn.poll_event() {
        Ok(Some(ServerEvent::Head(request))) => Some(request),
        _ => None,
    }
}

fn req(version: &str, extra: &str) -> String {
    format!(
        "GET /chat {version}\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Version: 13\r\n{extra}\r\n"
    )
}

#[test]
fn server_handshake_edges() {
    let accepts = |text: String| {
        parse_request(text.as_bytes())
            .map(|r| accept(&r, &AcceptConfig::default()).is_ok())
            .unwrap_or(false)
    };
    assert!(accepts(req(
        "HTTP/1.1",
        &format!("Sec-WebSocket-Key: {WSKEY}\r\n")
    )));
    // Connection: keep-alive, Upgrade
    assert!(accepts(
        req("HTTP/1.1", &format!("Sec-WebSocket-Key: {WSKEY}\r\n"))
            .replace("Connection: Upgrade", "Connection: keep-alive, Upgrade")
    ));
    // Key of the wrong length
    assert!(!accepts(req(
        "HTTP/1.1",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ\r\n"
    )));
    assert!(!accepts(req(
        "HTTP/1.1",
        "Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\n"
    )));
    // Duplicate key
    assert!(!accepts(req(
        "HTTP/1.1",
        &format!("Sec-WebSocket-Key: {WSKEY}\r\nSec-WebSocket-Key: {WSKEY}\r\n")
    )));
    // HTTP/1.0
    assert!(!accepts(req(
        "HTTP/1.0",
        &format!("Sec-WebSocket-Key: {WSKEY}\r\n")
    )));
    // A body
    assert!(!accepts(req(
        "HTTP/1.1",
        &format!("Sec-WebSocket-Key: {WSKEY}\r\nContent-Length: 5\r\n")
    )));
    assert!(!accepts(req(
        "HTTP/1.1",
        &format!("Sec-WebSocket-Key: {WSKEY}\r\nTransfer-Encoding: chunked\r\n")
    )));
}

#[test]
fn client_bytes_after_101_are_the_first_frame() {
    let mut entropy = |buf: &mut [u8]| buf.fill(7);
    let (handshake, _request) = ClientHandshake::new(
        "example.com",
        "/chat",
        &ConnectConfig::default(),
        &mut entropy,
    )
    .unwrap();
    let mut client = Client::new();
    client.expect_upgrade("GET");
    let mut conn = Conn::new(client, NOW);
    let mut bytes =
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
        Sec-WebSocket-Accept: CdXSYUsvsaMthlEXWDNURGWA/1o=\r\n\r\n"
            .to_vec();
    bytes.extend(frame(true, 1, b"first", None));
    conn.feed(&bytes, NOW).unwrap();
    let Some(ClientEvent::Head(response)) = conn.poll_event().unwrap() else {
        panic!()
    };
    handshake.check(&response).unwrap();
    // Drain the response's end (as the example does).
    let _ = conn.poll_event();
    let mut ws = conn.switch(|_| WebSocket::client(WsConfig::default(), |b: &mut [u8]| b.fill(1)));
    assert_eq!(
        ws.poll_event().unwrap(),
        Some(WsEvent::Text(Bytes::from_static(b"first")))
    );
}

/// An RSV1 frame with an empty payload, then a compressed message made
/// of one stored block: the first is refused (see
/// `deflate_empty_payload_does_not_poison_the_next_message`), so the
/// second is never read from inside a block the first left open.
#[test]
fn deflate_empty_payload_then_stored_block_is_not_misread() {
    let bytes = [
        frame_rsv(true, true, 2, b"", KEY),
        frame_rsv(true, true, 2, &stored(b"hi"), KEY),
    ]
    .concat();
    let (seen, _) = run(deflate_server(WsConfig::default(), true), &bytes, &[]);
    assert_eq!(seen.error, Some(invalid_compressed()), "{seen:?}");
    assert_eq!(seen.messages, vec![]);
}

/// With the default buffer (8 MiB + 16 KiB) and the default max_frame
/// (16 MiB), a compressed frame of 9 MiB (not streamed: inflated whole)
/// can never fit: it must be refused with 1009, not wait for ever with a
/// full buffer (an adapter stops reading when `wants_read` is false).
#[test]
fn deflate_frame_larger_than_the_buffer_is_1009_not_a_stall() {
    let mut conn = deflate_server(WsConfig::default(), true);
    let len = 9usize << 20;
    // A header announcing 9 MiB, masked, then stored-block bytes.
    let mut head = vec![0xC2, 0x80 | 127];
    head.extend_from_slice(&(len as u64).to_be_bytes());
    head.extend_from_slice(&[0, 0, 0, 0]); // zero mask: payload as is
    let mut wire = head;
    wire.extend(std::iter::repeat_n(0u8, len));
    let mut at = 0;
    let mut seen = Seen::default();
    // An adapter's loop: read while it wants to, poll.
    for _ in 0..100_000 {
        poll_all(&mut conn, &mut seen, &mut Assembler::new());
        if seen.error.is_some() || !conn.wants_read() || at == wire.len() {
            break;
        }
        let spare = conn.spare_mut().unwrap();
        let n = spare.len().min(wire.len() - at);
        spare[..n].copy_from_slice(&wire[at..at + n]);
        conn.handle_read(n, NOW).unwrap();
        at += n;
    }
    poll_all(&mut conn, &mut seen, &mut Assembler::new());
    assert!(
        seen.error.is_some(),
        "stalled: read {at} of {} bytes, wants_read {}, buffered {}, error {:?}",
        wire.len(),
        conn.wants_read(),
        conn.recv_buf().len(),
        seen.error
    );
    assert_eq!(close_code_in(&drain(&mut conn)), Some(1009));
}

/// The write side failed (a reset while writing): a ping's pong can never
/// be queued. Reading must not wait for it for ever: the messages after
/// the ping still come, and the end of the stream ends the connection.
#[test]
fn a_pong_that_can_never_be_queued_does_not_block_reading() {
    let mut conn = server_with(WsConfig::default());
    conn.handle_write_error(NOW);
    let bytes = [frame(true, 9, b"p", KEY), frame(true, 1, b"after", KEY)].concat();
    conn.feed(&bytes, NOW).unwrap();
    let mut seen = Seen::default();
    poll_all(&mut conn, &mut seen, &mut Assembler::new());
    conn.handle_eof(NOW);
    poll_all(&mut conn, &mut seen, &mut Assembler::new());
    let done = conn.is_read_done();
    let finished = conn.is_finished();
    assert!(
        seen.messages == vec![(Kind::Text, b"after".to_vec())] && done,
        "{seen:?}, read done {done}, finished {finished}, poll_timeout {:?}",
        conn.poll_timeout()
    );
}

/// Same when the application shut the write side (Conn::close) without a
/// WebSocket close: the peer's ping cannot be answered.
#[test]
fn a_ping_after_the_write_side_is_shut_does_not_block_reading() {
    let mut conn = server_with(WsConfig::default());
    conn.close();
    let bytes = [frame(true, 9, b"p", KEY), frame(true, 1, b"after", KEY)].concat();
    conn.feed(&bytes, NOW).unwrap();
    let mut seen = Seen::default();
    poll_all(&mut conn, &mut seen, &mut Assembler::new());
    conn.handle_eof(NOW);
    poll_all(&mut conn, &mut seen, &mut Assembler::new());
    let done = conn.is_read_done();
    let finished = conn.is_finished();
    assert!(
        seen.messages == vec![(Kind::Text, b"after".to_vec())] && done,
        "{seen:?}, read done {done}, finished {finished}, poll_timeout {:?}",
        conn.poll_timeout()
    );
}

/// An idle deflate connection (no context takeover) holds no read buffer.
#[test]
fn idle_after_a_compressed_message_holds_no_buffer() {
    let mut conn = deflate_server(WsConfig::default(), false);
    let msg = vec![b'q'; 200_000];
    conn.feed(&frame_rsv(true, true, 2, &compress(&msg), KEY), NOW)
        .unwrap();
    let ev = conn.poll_event().unwrap();
    assert_eq!(ev, Some(WsEvent::Binary(Bytes::from(msg))));
    drop(ev);
    assert_eq!(conn.poll_event().unwrap(), None);
    conn.release_idle();
    assert_eq!(conn.recv_buf().capacity(), 0);
}

/// Count the close frames in server output (unmasked frames, walk them).
fn close_frames(out: &[u8]) -> usize {
    let mut at = 0;
    let mut n = 0;
    while at + 2 <= out.len() {
        let op = out[at] & 0x0f;
        let (len, h) = match out[at + 1] & 0x7f {
            126 => (u16::from_be_bytes([out[at + 2], out[at + 3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(out[at + 2..at + 10].try_into().unwrap()) as usize,
                10,
            ),
            l => (l as usize, 2),
        };
        if op == 8 {
            n += 1;
        }
        at += h + len;
    }
    n
}

/// An application that answers the peer's close with a close of its own
/// (the usual "on close: close" handler): only one close frame may go
/// out (RFC 6455, section 5.5.1), the protocol already answers it.
#[test]
fn close_after_the_peers_close_does_not_send_a_second_close() {
    let mut conn = server_with(WsConfig::default());
    conn.feed(&frame(true, 8, b"\x03\xe8", KEY), NOW).unwrap();
    let ev = conn.poll_event().unwrap();
    assert!(matches!(ev, Some(WsEvent::Close(_))));
    let refused = conn.protocol_mut().close(1000, "bye");
    assert_eq!(
        refused.unwrap_err(),
        Error::Misuse(Misuse::Unencodable(Unencodable::WsClosed))
    );
    let out = drain(&mut conn);
    assert_eq!(close_frames(&out), 1, "wrote {out:x?}");
}

/// After the protocol failed the connection (its close 1002 is the
/// farewell), an application close must not add a second close frame.
#[test]
fn close_after_a_protocol_error_does_not_send_a_second_close() {
    let mut conn = server_with(WsConfig::default());
    conn.feed(&frame(true, 3, b"", KEY), NOW).unwrap();
    assert!(conn.poll_event().is_err());
    let refused = conn.protocol_mut().close(1001, "going away");
    assert_eq!(
        refused.unwrap_err(),
        Error::Misuse(Misuse::Unencodable(Unencodable::WsClosed))
    );
    let out = drain(&mut conn);
    assert_eq!(close_frames(&out), 1, "wrote {out:x?}");
}

#[test]
fn close_reason_utf8_split_across_reads() {
    let mut payload = b"\x03\xe8".to_vec();
    payload.extend("é€😀".repeat(10).as_bytes());
    payload.truncate(125);
    while std::str::from_utf8(&payload[2..]).is_err() {
        payload.pop();
    }
    let bytes = frame(true, 8, &payload, KEY);
    let cuts: Vec<usize> = (0..bytes.len()).collect();
    let (seen, _) = run(server(), &bytes, &cuts);
    assert_eq!(seen.error, None);
    assert_eq!(
        seen.close.map(|c| c.reason.to_vec()),
        Some(payload[2..].to_vec())
    );
    // Valid start, invalid end.
    let mut bad = b"\x03\xe8ok\xe2\x82".to_vec();
    bad.push(b'x');
    let bytes = frame(true, 8, &bad, KEY);
    for cut in 0..=bytes.len() {
        let (seen, _) = run(server(), &bytes, &[cut]);
        assert!(matches!(
            seen.error,
            Some(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                ..
            })
        ));
    }
}

#[test]
fn deflate_stream_is_chunking_invariant() {
    use flate2::{Compress, Compression, FlushCompress};
    let mut c = Compress::new(Compression::new(6), false);
    let mut comp = |d: &[u8]| {
        let mut m = Vec::with_capacity(d.len() + 64);
        c.compress_vec(d, &mut m, FlushCompress::Sync).unwrap();
        m.truncate(m.len() - 4);
        m
    };
    let m1 = comp("κόσμε hello hello hello".as_bytes());
    let m2 = comp("κόσμε hello hello hello again".as_bytes());
    let m3 = comp(&[9u8; 300]);
    let (a, b) = m2.split_at(m2.len() / 2);
    let bytes = [
        frame_rsv(true, true, 1, &m1, KEY),
        frame_rsv(false, true, 1, a, KEY),
        frame(true, 9, b"ping", KEY),
        frame_rsv(true, false, 0, b, KEY),
        frame(true, 2, b"plain", KEY),
        frame_rsv(false, true, 2, &m3, KEY),
        frame_rsv(true, false, 0, b"", KEY),
        frame(true, 8, b"\x03\xe8", KEY),
    ]
    .concat();
    let (whole, _) = run(
        deflate_server(WsConfig::default().pings(true), true),
        &bytes,
        &[],
    );
    assert_eq!(whole.error, None);
    assert_eq!(whole.messages.len(), 4);
    for cut in 0..=bytes.len() {
        let (seen, _) = run(
            deflate_server(WsConfig::default().pings(true), true),
            &bytes,
            &[cut],
        );
        assert_eq!(seen, whole, "cut {cut}");
    }
    let cuts: Vec<usize> = (0..bytes.len()).collect();
    let (seen, _) = run(
        deflate_server(WsConfig::default().pings(true), true),
        &bytes,
        &cuts,
    );
    assert_eq!(seen, whole);
}

/// A compressed message whose last frame is empty: the tail alone ends it.
#[test]
fn deflate_compressed_message_split_at_every_point_with_empty_last_frame() {
    let data = "hello κόσμε ".repeat(20);
    let comp = compress(data.as_bytes());
    for cut in 0..=comp.len() {
        let (a, b) = comp.split_at(cut);
        let bytes = [
            frame_rsv(false, true, 1, a, KEY),
            frame_rsv(false, false, 0, b, KEY),
            frame(true, 10, b"", KEY),
            frame_rsv(true, false, 0, b"", KEY),
        ]
        .concat();
        let (seen, _) = run(deflate_server(WsConfig::default(), true), &bytes, &[]);
        assert_eq!(seen.error, None, "cut {cut}");
        assert_eq!(seen.messages, vec![(Kind::Text, data.as_bytes().to_vec())]);
    }
}

/// RFC 7692, section 7.1.2.1: a server accepts an offer with
/// server_max_window_bits "by including the server_max_window_bits
/// extension parameter in the extension negotiation response ... with
/// the same or smaller value". An offer of 15 must be answered with it
/// (a client that offered it, e.g. Python websockets, fails the
/// handshake otherwise: "expected server_max_window_bits").
#[test]
fn deflate_offered_server_window_15_is_answered() {
    let p = negotiate("permessage-deflate; server_max_window_bits=15").unwrap();
    assert!(
        p.to_header().contains("server_max_window_bits"),
        "answer: {}",
        p.to_header()
    );
}

/// Random frames (valid-looking headers, random payloads, RSV1, masks),
/// random splits, both roles, with and without deflate and odd limits:
/// no panic.
#[test]
fn random_input_never_panics() {
    let mut x = 0x9E3779B97F4A7C15u64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..6000 {
        let mut bytes = Vec::new();
        let frames = next() % 6 + 1;
        for _ in 0..frames {
            let op = [0u8, 1, 2, 8, 9, 10, 3][(next() % 7) as usize];
            let fin = next() % 3 != 0;
            let rsv1 = next() % 3 == 0;
            let len = match next() % 4 {
                0 => 0,
                1 => (next() % 10) as usize,
                2 => (next() % 130) as usize,
                _ => (next() % 400) as usize,
            };
            let mut payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if next() % 2 == 0 && op == 8 && len >= 2 {
                payload[0] = 0x03;
                payload[1] = 0xe8;
            }
            if rsv1 && next() % 2 == 0 {
                payload = compress(&payload);
            }
            let mask = if round % 2 == 0 {
                Some([next() as u8, 1, 2, 3])
            } else {
                None
            };
            bytes.extend(frame_rsv(fin, rsv1, op, &payload, mask));
        }
        if next() % 5 == 0 {
            let n = bytes.len();
            let i = (next() as usize) % n.max(1);
            if n > 0 {
                bytes[i] = next() as u8;
            }
        }
        let config = match next() % 4 {
            0 => WsConfig::default(),
            1 => WsConfig::default().stream_above(0),
            2 => WsConfig::default()
                .max_message(50)
                .unwrap()
                .max_frame(30)
                .unwrap()
                .stream_above(10),
            _ => WsConfig::default().max_message(1).unwrap(),
        }
        .pings(next() % 2 == 0);
        let deflate = next() % 2 == 0;
        let ws = if round % 2 == 0 {
            WebSocket::server(config)
        } else {
            WebSocket::client(config, |b: &mut [u8]| b.fill(5))
        };
        let ws = if deflate {
            ws.with_deflate(params(next() % 2 == 0), &DeflateConfig::default())
        } else {
            ws
        };
        let conn = Conn::new(ws, NOW);
        let cuts: Vec<usize> = (0..(next() % 4))
            .map(|_| (next() as usize) % (bytes.len() + 1))
            .collect();
        let _ = run(conn, &bytes, &cuts);
    }
}

/// Split server output into (opcode, payload) frames.
fn frames_of(out: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut at = 0;
    let mut v = Vec::new();
    while at + 2 <= out.len() {
        let op = out[at] & 0x0f;
        let (len, h) = match out[at + 1] & 0x7f {
            126 => (u16::from_be_bytes([out[at + 2], out[at + 3]]) as usize, 4),
            127 => (
                u64::from_be_bytes(out[at + 2..at + 10].try_into().unwrap()) as usize,
                10,
            ),
            l => (l as usize, 2),
        };
        v.push((op, out[at + h..at + h + len].to_vec()));
        at += h + len;
    }
    v
}

/// The bulk lane is full of messages the application queued before the
/// peer's close arrived (a slow peer). The close answer must still go
/// after them: no data frame after a close (RFC 6455, section 5.5.1;
/// README: "a close with a close, after the messages queued before it").
#[test]
fn close_echo_does_not_overtake_queued_messages_when_bulk_is_full() {
    use cleave_proto::WriteQueueConfig;
    let queue = WriteQueueConfig::default().max_items(2).unwrap();
    let mut conn = Conn::with_config(
        WebSocket::server(WsConfig::default()),
        ConnConfig::default().write_queue(queue),
        NOW,
    );
    for i in 0..2u8 {
        let m = conn
            .protocol_mut()
            .message(Kind::Binary, Bytes::from(vec![i; 10]))
            .unwrap();
        conn.push(m).unwrap();
    }
    conn.feed(&frame(true, 8, b"\x03\xe8", KEY), NOW).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    let out = drain(&mut conn);
    let ops: Vec<u8> = frames_of(&out).iter().map(|f| f.0).collect();
    assert_eq!(ops, vec![2, 2, 8], "wrote {out:x?}");
}

/// Same for a close the protocol sends on an error.
#[test]
fn error_close_does_not_overtake_queued_messages_when_bulk_is_full() {
    use cleave_proto::WriteQueueConfig;
    let queue = WriteQueueConfig::default().max_items(2).unwrap();
    let mut conn = Conn::with_config(
        WebSocket::server(WsConfig::default()),
        ConnConfig::default().write_queue(queue),
        NOW,
    );
    for i in 0..2u8 {
        let m = conn
            .protocol_mut()
            .message(Kind::Binary, Bytes::from(vec![i; 10]))
            .unwrap();
        conn.push(m).unwrap();
    }
    conn.feed(&frame(true, 3, b"", KEY), NOW).unwrap();
    assert!(conn.poll_event().is_err());
    let out = drain(&mut conn);
    let ops: Vec<u8> = frames_of(&out).iter().map(|f| f.0).collect();
    assert_eq!(ops, vec![2, 2, 8], "wrote {out:x?}");
}

/// Default queue: the application fills the bulk lane until a push is
/// refused (backpressure, the peer reads slowly); then the peer's close.
#[test]
fn close_echo_does_not_overtake_queued_messages_default_queue() {
    let mut conn = server_with(WsConfig::default());
    let mut pushed = 0;
    loop {
        let m = conn
            .protocol_mut()
            .message(Kind::Binary, Bytes::from(vec![7u8; 16 << 10]))
            .unwrap();
        if conn.push(m).is_err() {
            break;
        }
        pushed += 1;
    }
    conn.feed(&frame(true, 8, b"\x03\xe8", KEY), NOW).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    let out = drain(&mut conn);
    let ops: Vec<u8> = frames_of(&out).iter().map(|f| f.0).collect();
    let mut want = vec![2u8; pushed];
    want.push(8);
    assert_eq!(ops, want, "{pushed} messages pushed");
}

/// Default queue, many small messages (a broadcast to a slow reader)
/// until the item limit refuses a push; then the peer's close.
#[test]
fn close_echo_does_not_overtake_small_messages_default_queue() {
    let mut conn = server_with(WsConfig::default());
    let mut pushed = 0;
    loop {
        let m = conn
            .protocol_mut()
            .message(Kind::Text, Bytes::from_static(b"tick"))
            .unwrap();
        if conn.push(m).is_err() {
            break;
        }
        pushed += 1;
    }
    conn.feed(&frame(true, 8, b"\x03\xe8", KEY), NOW).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    let out = drain(&mut conn);
    let ops: Vec<u8> = frames_of(&out).iter().map(|f| f.0).collect();
    let closes_at = ops.iter().position(|&o| o == 8);
    assert_eq!(
        closes_at,
        Some(pushed),
        "{pushed} messages pushed; close at {closes_at:?} of {}",
        ops.len()
    );
}

/// Default queue, 128 KiB of one message queued (3 bytes of room left).
#[test]
fn close_echo_does_not_overtake_a_large_message_default_queue() {
    let mut conn = server_with(WsConfig::default());
    let m = conn
        .protocol_mut()
        .message(Kind::Binary, Bytes::from(vec![7u8; 131_059]))
        .unwrap();
    conn.push(m).unwrap();
    conn.feed(&frame(true, 8, b"\x03\xe8", KEY), NOW).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    let out = drain(&mut conn);
    let ops: Vec<u8> = frames_of(&out).iter().map(|f| f.0).collect();
    assert_eq!(ops, vec![2, 8]);
}

/// The application closed its write side (the queue takes nothing more)
/// with an answer still queued; the peer's close comes before the FIN:
/// the protocol's echo of it goes out after the answer and before the
/// FIN, not dropped by the closed queue.
#[test]
fn a_close_echo_after_the_applications_close_goes_out_before_the_fin() {
    let mut conn = server_with(WsConfig::default());
    let answer = conn
        .protocol_mut()
        .message(Kind::Binary, Bytes::from_static(b"answer"))
        .unwrap();
    conn.push(answer).unwrap();
    conn.close();
    conn.feed(&frame(true, 8, b"\x03\xe8", KEY), NOW).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    assert_eq!(conn.poll_shutdown(), None, "the echo is not out yet");
    let out = drain(&mut conn);
    let frames = frames_of(&out);
    assert_eq!(
        frames,
        vec![(2, b"answer".to_vec()), (8, b"\x03\xe8".to_vec())],
        "wrote {out:x?}"
    );
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
}

/// A pong owed from before the application's close (the urgent lane was
/// full when its ping came) still goes, after the close if need be: only
/// data may not follow a close (RFC 6455, section 5.5.1), and a ping gets
/// its pong unless the peer closed (section 5.5.2).
#[test]
fn an_owed_pong_still_goes_after_our_close() {
    let mut conn = server_with(WsConfig::default());
    // Pings until a pong finds no room (it is owed, and reading waits).
    let ping = frame(true, 9, &[7u8; 125], KEY);
    for _ in 0..200 {
        conn.feed(&ping, NOW).unwrap();
        while let Ok(Some(_)) = conn.poll_event() {}
    }
    let close = conn.protocol_mut().close(1000, "bye").unwrap();
    conn.push(close).unwrap();
    let mut out = drain(&mut conn);
    while let Ok(Some(_)) = conn.poll_event() {}
    out.extend(drain(&mut conn));
    let frames = frames_of(&out);
    let close_at = frames.iter().position(|(op, _)| *op == 8).expect("a close");
    let after: Vec<u8> = frames[close_at + 1..].iter().map(|(op, _)| *op).collect();
    assert!(!after.is_empty(), "the owed pong did not go");
    assert!(
        after.iter().all(|&op| op == 10),
        "opcodes after our close: {after:?}"
    );
    assert!(
        frames[..close_at].iter().any(|(op, _)| *op == 10),
        "pongs before it"
    );
}

/// With auto-pong off, pings come out as events (whatever `pings` says)
/// and the application answers with `pong`.
#[test]
fn without_auto_pong_the_application_sees_pings_and_answers_them() {
    let mut conn = server_with(WsConfig::default().auto_pong(false));
    conn.feed(&frame(true, 9, b"keepalive", KEY), NOW).unwrap();
    let Ok(Some(WsEvent::Ping(payload))) = conn.poll_event() else {
        panic!("no Ping event")
    };
    assert_eq!(payload, "keepalive");
    assert!(drain(&mut conn).is_empty(), "no pong of the protocol's own");
    let pong = conn.protocol_mut().pong(payload).unwrap();
    conn.push_urgent(pong).unwrap();
    assert_eq!(
        frames_of(&drain(&mut conn)),
        vec![(10, b"keepalive".to_vec())]
    );
    assert!(conn.protocol_mut().pong(Bytes::from(vec![0; 126])).is_err());
}

/// A control frame is read whole: one the receive buffer cannot hold is
/// refused with 1009 (`Limit::Buffer`) as soon as its header arrives, as a
/// data frame read whole is, and so is a header longer than the buffer. It
/// used to wait for ever, with nothing written.
#[test]
fn a_control_frame_or_a_header_larger_than_the_buffer_is_a_1009_at_once() {
    let small = |max_buffered: usize| {
        let recv = cleave_proto::RecvBufConfig::default()
            .max_buffered(max_buffered)
            .unwrap();
        Conn::with_config(
            WebSocket::server(WsConfig::default().stream_above(0)),
            ConnConfig::default().recv_buf(recv),
            NOW,
        )
    };
    let mask = Some([1, 2, 3, 4]);
    let mut conn = small(64);
    let ping = frame(true, 0x9, &[7u8; 100], mask);
    conn.feed(&ping[..8], NOW).unwrap();
    let e = conn.poll_event().unwrap_err();
    assert!(
        matches!(
            e,
            Error::LimitExceeded {
                limit: Limit::Buffer,
                offset: 0,
                ..
            }
        ),
        "{e:?}"
    );
    let written = drain(&mut conn);
    assert_eq!(
        &written[..4],
        &[0x88, 0x02, 0x03, 0xf1],
        "a close 1009: {written:x?}"
    );
    assert_eq!(conn.recv_buf().peek(), &ping[..8], "the frame stays");

    // A 64-bit length's header is 14 bytes: more than a 10-byte buffer.
    let mut conn = small(10);
    let mut big = vec![0x82, 0xff];
    big.extend_from_slice(&(1u64 << 20).to_be_bytes());
    big.extend_from_slice(&[1, 2, 3, 4]);
    conn.feed(&big[..10], NOW).unwrap();
    let e = conn.poll_event().unwrap_err();
    assert!(
        matches!(
            e,
            Error::LimitExceeded {
                limit: Limit::Buffer,
                ..
            }
        ),
        "{e:?}"
    );
}

/// A request with the same fields as `req`, `line` as its request line
/// and `host` as its Host value.
fn req_at(line: &str, host: &str) -> String {
    format!(
        "{line}\r\nHost:{host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {WSKEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// RFC 6455, section 4.2.1: a Host with the server's authority (an empty
/// one is none), and a target that names a resource (a path, or an
/// absolute http/https URI with one): not `*`, not an authority alone,
/// not another scheme. Each refused request gets a 400.
#[test]
fn an_empty_host_or_a_target_that_names_no_resource_is_refused() {
    use cleave_proto::websocket::refusal;
    let verdict = |text: String| {
        let request = parse_request(text.as_bytes()).expect("a valid HTTP request");
        (
            accept(&request, &AcceptConfig::default()).is_ok(),
            refusal(&request),
        )
    };
    for (line, host) in [
        ("GET /chat HTTP/1.1", ""),
        ("GET * HTTP/1.1", " a"),
        ("GET ftp://a/x HTTP/1.1", " a"),
    ] {
        let (accepted, refusal) = verdict(req_at(line, host));
        assert!(!accepted, "{line} / Host:{host}: accepted");
        assert!(refusal.starts_with(b"HTTP/1.1 400 "), "{line}");
    }
    // An authority alone on a GET is no request-target form: the HTTP
    // server refuses it before the handshake is judged.
    assert!(parse_request(req_at("GET a:80 HTTP/1.1", " a:80").as_bytes()).is_none());
    for line in [
        "GET /chat HTTP/1.1",
        "GET /?q=1 HTTP/1.1",
        "GET http://a/chat HTTP/1.1",
        "GET HTTPS://a/ HTTP/1.1",
    ] {
        assert!(verdict(req_at(line, " a")).0, "{line}: refused");
    }
}

/// A ping that came in the same read as the upgrade request is answered
/// by the WebSocket as soon as it starts, on the urgent lane; the 101
/// pushed before the switch still goes out first (`Conn::switch` fences
/// the bulk lane), so the client sees the handshake before any frame.
#[test]
fn the_101_goes_out_before_the_pong_for_a_ping_that_came_with_the_request() {
    let mut bytes = req_at("GET /chat HTTP/1.1", " a").into_bytes();
    bytes.extend(frame(true, 9, b"p", KEY));
    for cut in 0..=bytes.len() {
        let mut conn = Conn::new(Server::new(), NOW);
        conn.feed(&bytes[..cut], NOW).unwrap();
        let Ok(Some(ServerEvent::Head(request))) = conn.poll_event() else {
            continue; // the head is not whole yet at this cut
        };
        assert_eq!(conn.poll_event(), Ok(Some(ServerEvent::End)));
        let accepted = accept(&request, &AcceptConfig::default()).unwrap();
        conn.push(accepted.response().clone()).unwrap();
        let mut ws = conn.switch(|_| WebSocket::server(WsConfig::default()));
        ws.feed(&bytes[cut..], NOW).unwrap();
        while ws.poll_event().unwrap().is_some() {}
        let mut out = Vec::new();
        while let Some(chunk) = ws.poll_transmit_chunk() {
            out.extend_from_slice(&chunk);
            ws.handle_written(chunk.len(), NOW).unwrap();
        }
        let head = accepted.response();
        assert!(
            out.starts_with(head),
            "cut {cut}: {:?}",
            String::from_utf8_lossy(&out)
        );
        assert_eq!(
            &out[head.len()..],
            b"\x8a\x01p",
            "cut {cut}: the pong after"
        );
    }
}

/// A peer that ends a compressed message with a BFINAL block (RFC 7692,
/// section 7.2.3.4) and keeps its window: its next message may refer to
/// the last one's bytes (section 7.2.2), and is read. Without context
/// takeover the same reference is refused (no window to refer to).
#[test]
fn the_window_survives_a_message_that_ended_with_bfinal() {
    // "Hello" in a block with BFINAL set (section 7.2.3.4), then "Hello"
    // again as a back-reference (section 7.2.3.2).
    let first = frame_rsv(
        true,
        true,
        1,
        &[0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00],
        KEY,
    );
    let second = frame_rsv(true, true, 1, &[0xf2, 0x00, 0x11, 0x00, 0x00], KEY);
    let input = [first, second].concat();
    for takeover in [true, false] {
        for cut in 0..=input.len() {
            let mut conn = Conn::new(
                WebSocket::server(WsConfig::default())
                    .with_deflate(params(takeover), &DeflateConfig::default()),
                NOW,
            );
            let (events, failed) = events::feed_pieces(&mut conn, [&input[..cut], &input[cut..]]);
            let hello = WsEvent::Text(Bytes::from_static(b"Hello"));
            if takeover {
                assert_eq!(failed, None, "cut {cut}");
                assert_eq!(events, [hello.clone(), hello], "cut {cut}");
            } else {
                assert_eq!(events, [hello], "cut {cut}");
                assert!(
                    matches!(
                        failed,
                        Some(Error::InvalidInput {
                            kind: InvalidInput::WebSocket(WsField::Compressed),
                            ..
                        })
                    ),
                    "cut {cut}: {failed:?}"
                );
            }
        }
    }
}

/// RFC 7692, section 7.2.2, through a connection: the message after one
/// that ended its DEFLATE stream with BFINAL is read with the window that
/// read that one, earlier messages included (it was refused as
/// `Compressed`, a 1002).
mod window_after_bfinal {
    use std::time::Duration;

    use cleave_proto::conn::Conn;
    use cleave_proto::websocket::{DeflateConfig, DeflateParams, WebSocket, WsConfig, WsEvent};
    use flate2::{Compress, Compression, FlushCompress};

    const NOW: Duration = Duration::ZERO;
    const KEY: [u8; 4] = [0x11, 0x22, 0x33, 0x44];

    fn masked_frame(rsv1: bool, opcode: u8, payload: &[u8]) -> Vec<u8> {
        assert!(payload.len() < 126);
        let mut out = vec![
            0x80 | (u8::from(rsv1) << 6) | opcode,
            0x80 | payload.len() as u8,
        ];
        out.extend_from_slice(&KEY);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ KEY[i % 4]));
        out
    }

    /// Sync-flushed raw DEFLATE of `data`, the 0x00 0x00 0xff 0xff tail removed.
    fn sync_flushed(c: &mut Compress, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + 1024);
        c.compress_vec(data, &mut out, FlushCompress::Sync).unwrap();
        assert_eq!(c.total_in() as usize, data.len());
        assert!(out.ends_with(&[0, 0, 0xff, 0xff]));
        out.truncate(out.len() - 4);
        out
    }

    #[test]
    fn window_after_a_bfinal_message_still_holds_earlier_messages() {
        let params = DeflateParams {
            server_no_context_takeover: false,
            client_no_context_takeover: false,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
            server_window_offered: false,
        };
        let mut conn = Conn::new(
            WebSocket::server(WsConfig::default()).with_deflate(params, &DeflateConfig::default()),
            NOW,
        );

        // Message 1: "abcdefghij", an ordinary sync-flushed message.
        let first = b"abcdefghij";
        let m1 = sync_flushed(&mut Compress::new(Compression::default(), false), first);
        // Message 2: "Hello" flushed with a BFINAL block: RFC 7692 7.2.3.4's
        // own example bytes.
        let m2 = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
        // Message 3: "abcdefghij" again, pointing back into message 1 (15
        // bytes back, well inside the 32 KiB window): a compressor primed
        // with the history both ends share.
        let mut c = Compress::new(Compression::default(), false);
        c.set_dictionary(b"abcdefghijHello").unwrap();
        let m3 = sync_flushed(&mut c, first);
        // It is a back reference, not literals.
        assert!(m3.len() < 8, "{m3:x?}");

        let mut bytes = masked_frame(true, 0x2, &m1);
        bytes.extend(masked_frame(true, 0x2, &m2));
        bytes.extend(masked_frame(true, 0x2, &m3));
        conn.feed(&bytes, NOW).unwrap();

        let mut got: Vec<Result<Vec<u8>, cleave_proto::Error>> = Vec::new();
        loop {
            match conn.poll_event() {
                Ok(Some(WsEvent::Binary(b))) => got.push(Ok(b.to_vec())),
                Ok(Some(other)) => panic!("{other:?}"),
                Ok(None) => break,
                Err(e) => {
                    got.push(Err(e));
                    break;
                }
            }
        }
        assert_eq!(
            got,
            vec![
                Ok(first.to_vec()),
                Ok(b"Hello".to_vec()),
                Ok(first.to_vec())
            ]
        );
    }
}

/// What the application sends keeps RFC 6455's order (sections 5.4 and
/// 5.5.1): no data frame after this side's close, no
/// continuation with no message started, no new message inside one sent
/// in parts. Each is a typed refusal that queues nothing and changes
/// nothing: the right frame after it still goes.
#[test]
fn the_send_side_keeps_the_order_of_frames() {
    let fragment = Error::Misuse(Misuse::Unencodable(Unencodable::WsFragment));
    let closed = Error::Misuse(Misuse::Unencodable(Unencodable::WsClosed));
    let mut conn = server();
    let ws = conn.protocol_mut();

    // A continuation first.
    let lone = ws.part(Kind::Binary, Bytes::from_static(b"x"), false, true);
    assert_eq!(lone.unwrap_err(), fragment);

    // A message sent in parts: nothing else starts until its last.
    let first = ws
        .part(Kind::Text, Bytes::from_static(b"ab"), true, false)
        .unwrap();
    assert_eq!(
        ws.message(Kind::Text, Bytes::from_static(b"no"))
            .unwrap_err(),
        fragment
    );
    assert_eq!(ws.message_slice(Kind::Binary, b"no").unwrap_err(), fragment);
    assert_eq!(
        ws.part(Kind::Text, Bytes::from_static(b"no"), true, true)
            .unwrap_err(),
        fragment
    );
    let ping = ws.ping(Bytes::from_static(b"p")).unwrap(); // control frames may come between
    let middle = ws
        .part(Kind::Text, Bytes::from_static(b"cd"), false, false)
        .unwrap();
    let last = ws
        .part(Kind::Text, Bytes::from_static(b"ef"), false, true)
        .unwrap();
    // After the last, messages again.
    let after = ws.message_slice(Kind::Binary, b"ok").unwrap();
    for frame in [first, ping, middle, last] {
        conn.push(frame).unwrap();
    }
    conn.push(after).unwrap();
    let wire = drain(&mut conn);
    let want = [
        frame(false, 0x1, b"ab", None),
        frame(true, 0x9, b"p", None),
        frame(false, 0x0, b"cd", None),
        frame(true, 0x0, b"ef", None),
        frame(true, 0x2, b"ok", None),
    ]
    .concat();
    assert_eq!(wire, want);

    // This side's close: no data frame after it, in any form.
    let ws = conn.protocol_mut();
    let unfinished = ws
        .part(Kind::Binary, Bytes::from_static(b"1"), true, false)
        .unwrap();
    drop(unfinished);
    let _close = ws.close(1000, "bye").unwrap();
    assert_eq!(
        ws.message(Kind::Text, Bytes::from_static(b"late"))
            .unwrap_err(),
        closed
    );
    assert_eq!(ws.message_slice(Kind::Text, b"late").unwrap_err(), closed);
    assert_eq!(
        ws.part(Kind::Binary, Bytes::from_static(b"2"), false, true)
            .unwrap_err(),
        closed
    );
    assert!(ws.ping(Bytes::new()).is_ok(), "control frames are not data");

    // The peer's close, after a message: an adapter that hands events out
    // in batches answers the message after the close was read, and the
    // protocol's echo of the close goes after that answer; then the queue
    // takes nothing more.
    let mut conn = server();
    let came = [
        frame(true, 0x1, b"a", KEY),
        frame(true, 0x8, &[0x03, 0xe8], KEY),
    ]
    .concat();
    conn.feed(&came, NOW).unwrap();
    let Ok(Some(WsEvent::Text(a))) = conn.poll_event() else {
        panic!("no text");
    };
    assert!(matches!(conn.poll_event(), Ok(Some(WsEvent::Close(_)))));
    let answer = conn.protocol_mut().message(Kind::Text, a).unwrap();
    conn.push(answer).unwrap();
    let wire = drain(&mut conn);
    let want = [
        frame(true, 0x1, b"a", None),
        frame(true, 0x8, &[0x03, 0xe8], None),
    ]
    .concat();
    assert_eq!(wire, want, "the answer, then the echo of the close");
    let late = conn
        .protocol_mut()
        .message(Kind::Text, Bytes::from_static(b"late"))
        .unwrap();
    assert!(
        conn.push(late).is_err(),
        "the queue is closed after the echo"
    );
}
