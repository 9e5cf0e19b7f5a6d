use bytes::{Bytes, BytesMut};
use flate2::{Compress, Compression, FlushCompress};

use super::codec::{
    invalid_compressed, stored, sync_flushed, Window, DEFLATE_FIXED, EMPTY, INFLATE_MEMORY, PROBE,
    TAIL,
};
use super::*;
use crate::websocket::Role;
use crate::Limit;
use std::io::Write as _;

const PLAIN: DeflateParams = DeflateParams {
    server_no_context_takeover: false,
    client_no_context_takeover: false,
    server_max_window_bits: 15,
    client_max_window_bits: 15,
    server_window_offered: false,
};

fn params(snct: bool, cnct: bool, server_bits: u8, client_bits: u8) -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: snct,
        client_no_context_takeover: cnct,
        server_max_window_bits: server_bits,
        client_max_window_bits: client_bits,
        server_window_offered: false,
    }
}

fn answer(offers: &[&str], config: &DeflateConfig) -> Option<String> {
    DeflateParams::negotiate(offers.iter().map(|offer| offer.as_bytes()), config)
        .map(|params| params.to_header())
}

/// A deterministic, incompressible byte stream (xorshift).
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed.to_le_bytes()[3]
        })
        .collect()
}

fn inflate_all(deflate: &mut Deflate, payload: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = BytesMut::new();
    deflate.inflate(payload, true, &mut out, usize::MAX)?;
    Ok(out.to_vec())
}

fn pair(params: DeflateParams) -> (Deflate, Deflate) {
    let config = DeflateConfig::new();
    (
        Deflate::new(Role::Server, params, &config),
        Deflate::new(Role::Client, params, &config),
    )
}

// ----- configuration -----

#[test]
fn config_checks_its_ranges() {
    let config = DeflateConfig::default();
    assert_eq!(config, DeflateConfig::new());
    assert_eq!(config.get_level(), 6);
    assert_eq!(config.get_max_window_bits(), 15);
    assert_eq!(config.get_min_size(), 0);
    for bits in [0, 7, 16, 255] {
        assert!(matches!(
            DeflateConfig::new().max_window_bits(bits),
            Err(Error::Misuse(_))
        ));
        assert!(DeflateConfig::new().peer_max_window_bits(bits).is_err());
    }
    assert!(DeflateConfig::new().level(10).is_err());
    let config = DeflateConfig::new()
        .max_window_bits(8)
        .unwrap()
        .peer_max_window_bits(12)
        .unwrap()
        .level(0)
        .unwrap()
        .no_context_takeover(true)
        .peer_no_context_takeover(true)
        .min_size(100);
    assert_eq!(config.get_max_window_bits(), 8);
    assert_eq!(config.get_peer_max_window_bits(), 12);
    assert_eq!(config.get_level(), 0);
    assert!(config.get_no_context_takeover());
    assert!(config.get_peer_no_context_takeover());
    assert_eq!(config.get_min_size(), 100);
}

// ----- server negotiation -----

#[test]
fn autobahn_13_offers_are_answered() {
    let default = DeflateConfig::new();
    // (offer, answer with the default configuration), after Autobahn's
    // cases 13.1 to 13.7 (its offers: client_no_context_takeover,
    // client_max_window_bits, and what it asks of the server).
    let cases: &[(&str, &str)] = &[
        ("permessage-deflate", "permessage-deflate"),
        (
            "permessage-deflate; client_max_window_bits",
            "permessage-deflate",
        ),
        (
            "permessage-deflate; client_no_context_takeover; client_max_window_bits",
            "permessage-deflate; client_no_context_takeover",
        ),
        (
            "permessage-deflate; client_max_window_bits; server_no_context_takeover",
            "permessage-deflate; server_no_context_takeover",
        ),
        (
            "permessage-deflate; client_max_window_bits; server_max_window_bits=8",
            "permessage-deflate; server_max_window_bits=8",
        ),
        // An offered server window is answered, even at 15.
        (
            "permessage-deflate; client_max_window_bits; server_max_window_bits=15",
            "permessage-deflate; server_max_window_bits=15",
        ),
        (
            "permessage-deflate; client_no_context_takeover; client_max_window_bits; \
             server_no_context_takeover; server_max_window_bits=8",
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
             server_max_window_bits=8",
        ),
        (
            "permessage-deflate; client_max_window_bits=10",
            "permessage-deflate; client_max_window_bits=10",
        ),
        (
            "permessage-deflate; client_max_window_bits=15",
            "permessage-deflate",
        ),
    ];
    for (offer, expected) in cases {
        assert_eq!(
            answer(&[offer], &default).as_deref(),
            Some(*expected),
            "{offer}"
        );
    }
    for bits in 8..=15u8 {
        let offer =
            format!("permessage-deflate; client_max_window_bits; server_max_window_bits={bits}");
        let params = DeflateParams::negotiate([offer.as_bytes()], &default).unwrap();
        assert_eq!(params, params_with_server_bits(bits), "{offer}");
    }
    // 13.7: several offers in one value, the first acceptable wins.
    let offer = "permessage-deflate; client_no_context_takeover; client_max_window_bits; \
                 server_no_context_takeover; server_max_window_bits=8, \
                 permessage-deflate; client_no_context_takeover; client_max_window_bits; \
                 server_no_context_takeover, permessage-deflate";
    assert_eq!(
        DeflateParams::negotiate([offer.as_bytes()], &default),
        Some(offered(params(true, true, 8, 15)))
    );
}

/// An offer (or an answer) that carried `server_max_window_bits`.
fn offered(params: DeflateParams) -> DeflateParams {
    DeflateParams {
        server_window_offered: true,
        ..params
    }
}

fn params_with_server_bits(bits: u8) -> DeflateParams {
    offered(DeflateParams {
        server_max_window_bits: bits,
        ..PLAIN
    })
}

#[test]
fn server_config_shapes_the_answer() {
    let config = DeflateConfig::new()
        .no_context_takeover(true)
        .peer_no_context_takeover(true)
        .max_window_bits(10)
        .unwrap()
        .peer_max_window_bits(9)
        .unwrap();
    // The client can be limited: both limits and both takeovers.
    assert_eq!(
        answer(&["permessage-deflate; client_max_window_bits"], &config).as_deref(),
        Some(
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
             server_max_window_bits=10; client_max_window_bits=9"
        )
    );
    // It cannot: its window stays 15, the offer is still taken.
    assert_eq!(
        DeflateParams::negotiate([&b"permessage-deflate"[..]], &config),
        Some(params(true, true, 10, 15))
    );
    // The smaller of the offer's and the configuration's limits.
    assert_eq!(
        DeflateParams::negotiate(
            [&b"permessage-deflate; server_max_window_bits=12; client_max_window_bits=8"[..]],
            &config
        ),
        Some(offered(params(true, true, 10, 8)))
    );
    assert_eq!(
        DeflateParams::negotiate(
            [&b"permessage-deflate; server_max_window_bits=9"[..]],
            &config
        ),
        Some(offered(params(true, true, 9, 15)))
    );
}

#[test]
fn malformed_offers_are_declined() {
    let config = DeflateConfig::new();
    let declined = [
        "",
        "x-webkit-deflate-frame",
        "permessage-deflate; foo",
        "permessage-deflate; foo=1",
        "permessage-deflate; server_max_window_bits",
        "permessage-deflate; server_max_window_bits=7",
        "permessage-deflate; server_max_window_bits=16",
        "permessage-deflate; server_max_window_bits=08",
        "permessage-deflate; server_max_window_bits=1O",
        "permessage-deflate; server_max_window_bits=\"\"",
        "permessage-deflate; client_max_window_bits=abc",
        "permessage-deflate; client_max_window_bits=",
        "permessage-deflate; client_max_window_bits=100",
        "permessage-deflate; server_no_context_takeover=1",
        "permessage-deflate; client_no_context_takeover=\"\"",
        "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        "permessage-deflate; client_no_context_takeover; Client_No_Context_Takeover",
        "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
        "permessage-deflate; client_max_window_bits; client_max_window_bits=10",
        "permessage-deflate; server_max_window_bits=\"10",
        "permessage-deflate;",
        "permessage-deflate; ; client_max_window_bits",
        "permessage-deflate client_max_window_bits",
        "permessage-deflate; =10",
        "permessage-deflate; server_max_window_bits==10",
        "permessage-deflate/1",
        "permessage-deflate; server_max_window_bits=\"1\x015\"",
    ];
    for offer in declined {
        assert_eq!(answer(&[offer], &config), None, "{offer:?}");
    }
    // Declined offers are skipped, acceptable ones after them taken.
    assert_eq!(
        answer(
            &["x-webkit-deflate-frame, permessage-deflate; foo, \
               permessage-deflate; server_max_window_bits=10"],
            &config
        )
        .as_deref(),
        Some("permessage-deflate; server_max_window_bits=10")
    );
    // A syntax error ends its value, not the other values.
    assert_eq!(
        answer(
            &[
                "permessage-deflate; server_max_window_bits=\"10, permessage-deflate",
                "foo; bar=\"baz\", , permessage-deflate; server_max_window_bits=11",
            ],
            &config
        )
        .as_deref(),
        Some("permessage-deflate; server_max_window_bits=11")
    );
}

#[test]
fn offer_syntax_is_read_leniently() {
    let config = DeflateConfig::new();
    let accepted = [
        ("permessage-deflate; server_max_window_bits=\"10\"", 10),
        ("permessage-deflate; server_max_window_bits=\"1\\1\"", 11),
        ("  permessage-deflate\t;server_max_window_bits = 12 , ", 12),
        (", ,permessage-deflate;SERVER_MAX_WINDOW_BITS=13", 13),
        ("Permessage-Deflate; server_max_window_bits=9", 9),
    ];
    for (offer, bits) in accepted {
        assert_eq!(
            DeflateParams::negotiate([offer.as_bytes()], &config),
            Some(params_with_server_bits(bits)),
            "{offer:?}"
        );
    }
    assert_eq!(
        DeflateParams::negotiate(
            [&b"permessage-deflate; client_max_window_bits=\"9\""[..]],
            &config
        ),
        Some(DeflateParams {
            client_max_window_bits: 9,
            ..PLAIN
        })
    );
    assert_eq!(DeflateParams::negotiate(core::iter::empty(), &config), None);
}

// ----- client negotiation -----

#[test]
fn client_offer_says_what_the_config_wants() {
    assert_eq!(
        DeflateParams::offer(&DeflateConfig::new()),
        "permessage-deflate; client_max_window_bits"
    );
    let config = DeflateConfig::new()
        .no_context_takeover(true)
        .peer_no_context_takeover(true)
        .max_window_bits(9)
        .unwrap()
        .peer_max_window_bits(10)
        .unwrap();
    let offer = DeflateParams::offer(&config);
    assert_eq!(
        offer,
        "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
         server_max_window_bits=10; client_max_window_bits=9"
    );
    // A server with the default configuration grants all of it.
    let server = DeflateParams::negotiate([offer.as_bytes()], &DeflateConfig::new()).unwrap();
    assert_eq!(server, offered(params(true, true, 10, 9)));
    let client = DeflateParams::from_response(server.to_header().as_bytes(), &config).unwrap();
    assert_eq!(client, server);
}

#[test]
fn responses_are_checked_against_the_offer() {
    let plain = DeflateConfig::new();
    let asking = DeflateConfig::new()
        .peer_no_context_takeover(true)
        .peer_max_window_bits(10)
        .unwrap()
        .max_window_bits(12)
        .unwrap()
        .no_context_takeover(true);
    let ok: &[(&DeflateConfig, &str, DeflateParams)] = &[
        (&plain, "permessage-deflate", PLAIN),
        (
            &plain,
            "permessage-deflate; server_no_context_takeover",
            params(true, false, 15, 15),
        ),
        (
            &plain,
            "permessage-deflate; client_no_context_takeover; client_max_window_bits=8",
            params(false, true, 15, 8),
        ),
        (
            &plain,
            "permessage-deflate; server_max_window_bits=11",
            offered(params(false, false, 11, 15)),
        ),
        (
            &asking,
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=10",
            offered(params(true, true, 10, 12)),
        ),
        (
            &asking,
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=8; \
             client_max_window_bits=9",
            offered(params(true, true, 8, 9)),
        ),
    ];
    for (config, response, expected) in ok {
        assert_eq!(
            DeflateParams::from_response(response.as_bytes(), config).ok(),
            Some(*expected),
            "{response}"
        );
    }
    let failing: &[(&DeflateConfig, &str)] = &[
        (&plain, ""),
        (&plain, "x-webkit-deflate-frame"),
        (&plain, "permessage-deflate, permessage-deflate"),
        (&plain, "permessage-deflate; foo"),
        (&plain, "permessage-deflate; client_max_window_bits"),
        (&plain, "permessage-deflate; client_max_window_bits=16"),
        (&plain, "permessage-deflate; server_max_window_bits"),
        (&plain, "permessage-deflate; server_max_window_bits=7"),
        (
            &plain,
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
        ),
        (&plain, "permessage-deflate; server_max_window_bits=\"9"),
        // Asked for and not granted, or granted too large.
        (&asking, "permessage-deflate; server_max_window_bits=10"),
        (&asking, "permessage-deflate; server_no_context_takeover"),
        (
            &asking,
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=11",
        ),
        (
            &asking,
            "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; \
             client_max_window_bits=13",
        ),
    ];
    for (config, response) in failing {
        assert_eq!(
            DeflateParams::from_response(response.as_bytes(), config),
            Err(negotiation()),
            "{response}"
        );
    }
}

// ----- compressing and inflating -----

#[test]
fn rfc_7692_examples_inflate() {
    let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
    let (_, mut client) = pair(PLAIN);
    // 7.2.3.1: one message.
    assert_eq!(inflate_all(&mut client, &hello).unwrap(), b"Hello");
    // 7.2.3.2: the same message again, pointing back into the first.
    assert_eq!(
        inflate_all(&mut client, &[0xf2, 0x00, 0x11, 0x00, 0x00]).unwrap(),
        b"Hello"
    );
    let others: [&[u8]; 3] = [
        // 7.2.3.3: a stored block.
        &[
            0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
        ],
        // 7.2.3.4: a block with BFINAL set.
        &[0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00],
        // 7.2.3.5: two blocks.
        &[
            0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
        ],
    ];
    for payload in others {
        let (_, mut client) = pair(PLAIN);
        assert_eq!(inflate_all(&mut client, payload).unwrap(), b"Hello");
        // And the stream goes on for the next message.
        assert_eq!(inflate_all(&mut client, &hello).unwrap(), b"Hello");
    }
    // 7.2.3.6: an empty message.
    assert_eq!(inflate_all(&mut client, &[0x00]).unwrap(), b"");
    // The example split into frames (7.2.3.1's message, fragmented).
    let mut out = BytesMut::new();
    client.inflate(&hello[..3], false, &mut out, 100).unwrap();
    client.inflate(&[], false, &mut out, 100).unwrap();
    client.inflate(&hello[3..], true, &mut out, 100).unwrap();
    assert_eq!(&out[..], b"Hello");
}

/// The window keeps the last `size` bytes of everything pushed, in
/// order, however the pushes fall.
#[test]
fn the_window_keeps_the_last_bytes_of_the_stream() {
    for size in [1, 7, 512] {
        for seed in 1..40u64 {
            let mut window = Window::default();
            let mut all = Vec::new();
            let mut rng = seed;
            for _ in 0..30 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let len = usize::try_from(rng % (2 * size as u64 + 3)).unwrap();
                let piece = noise(len, rng);
                window.push(&piece, size);
                all.extend_from_slice(&piece);
                assert_eq!(window.bytes(), all[all.len().saturating_sub(size)..]);
                assert!(window.ring.capacity() <= size.max(8));
            }
        }
    }
}

/// A sync-flushed raw DEFLATE segment of `data`, its tail removed.
fn segment(compressor: &mut Compress, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 64);
    compressor
        .compress_vec(data, &mut out, FlushCompress::Sync)
        .unwrap();
    assert!(out.ends_with(&TAIL));
    out.truncate(out.len() - TAIL.len());
    out
}

/// RFC 7692, section 7.2.2: with context takeover, the message after
/// one that ended its stream with BFINAL (section 7.2.3.4) is read
/// with the window that read that one, earlier messages included.
#[test]
fn after_a_bfinal_message_the_window_still_holds_earlier_ones() {
    let first = b"abcdefghij";
    let (_, mut client) = pair(PLAIN);
    let mut fresh = Compress::new(Compression::default(), false);
    assert_eq!(
        inflate_all(&mut client, &segment(&mut fresh, first)).unwrap(),
        first
    );
    // "Hello" with BFINAL: 7.2.3.4's bytes.
    let hello = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
    assert_eq!(inflate_all(&mut client, &hello).unwrap(), b"Hello");
    // A new stream primed with both messages, pointing 15 bytes back,
    // into the first.
    let mut primed = Compress::new(Compression::default(), false);
    primed.set_dictionary(b"abcdefghijHello").unwrap();
    let third = segment(&mut primed, first);
    assert!(third.len() < 8, "a back reference: {third:x?}");
    assert_eq!(inflate_all(&mut client, &third).unwrap(), first);
    // Without context takeover nothing is kept.
    let (_, mut plain) = pair(params(true, true, 15, 15));
    assert_eq!(inflate_all(&mut plain, &hello).unwrap(), b"Hello");
    assert!(plain.window.ring.capacity() == 0);
}

#[test]
fn messages_round_trip() {
    let messages: Vec<Vec<u8>> = (0..40usize)
        .map(|i| match i % 5 {
            0 => b"{\"type\":\"update\",\"id\":42,\"value\":\"hello world\"}".to_vec(),
            1 => noise(300 + i * 37, i as u64 + 1),
            2 => Vec::new(),
            3 => b"abc".repeat(2000 + i),
            _ => {
                let mut mixed = noise(5000, i as u64);
                mixed.extend_from_slice(&mixed.clone());
                mixed
            }
        })
        .collect();
    for bits in [8, 9, 11, 15] {
        for no_context_takeover in [false, true] {
            let params = params(no_context_takeover, no_context_takeover, bits, bits);
            let (mut server, mut client) = pair(params);
            for message in &messages {
                let compressed = server.compress(message);
                assert_eq!(&inflate_all(&mut client, &compressed).unwrap(), message);
                let compressed = client.compress(message);
                assert_eq!(&inflate_all(&mut server, &compressed).unwrap(), message);
            }
        }
    }
}

#[test]
fn every_level_round_trips() {
    let message = [&b"level, level, level; "[..], &noise(3000, 17)].concat();
    for level in [0, 1, 5, 9] {
        let config = DeflateConfig::new().level(level).unwrap();
        let mut server = Deflate::new(Role::Server, PLAIN, &config);
        let (_, mut client) = pair(PLAIN);
        for _ in 0..3 {
            let compressed = server.compress(&message);
            assert!(
                inflate_all(&mut client, &compressed).unwrap() == message,
                "{level}"
            );
        }
    }
}

#[test]
fn context_takeover_shrinks_repeats_and_its_absence_does_not() {
    let message = noise(2000, 7);
    for (no_context_takeover, shrinks) in [(false, true), (true, false)] {
        let (mut server, mut client) = pair(params(no_context_takeover, false, 15, 15));
        let first = server.compress(&message);
        let second = server.compress(&message);
        assert_eq!(second.len() < first.len() / 10, shrinks);
        assert_eq!(inflate_all(&mut client, &first).unwrap(), message);
        assert_eq!(inflate_all(&mut client, &second).unwrap(), message);
    }
    // The configuration alone resets our compressor too.
    let config = DeflateConfig::new().no_context_takeover(true);
    let mut server = Deflate::new(Role::Server, PLAIN, &config);
    let first = server.compress(&message);
    assert_eq!(server.compress(&message), first);
}

#[test]
fn a_window_of_8_never_reaches_past_256_bytes() {
    // A block repeated 300 bytes later: a 9-bit zlib window (what 8
    // becomes) must not match it, a 10-bit one does.
    let block = noise(300, 3);
    let message = [&block[..], &block[..]].concat();
    for (bits, matched) in [(8, false), (9, false), (10, true)] {
        let (mut server, mut client) = pair(params(false, false, bits, 15));
        let compressed = server.compress(&message);
        assert_eq!(compressed.len() < 400, matched, "{bits} bits");
        assert_eq!(inflate_all(&mut client, &compressed).unwrap(), message);
    }
}

#[test]
fn a_message_in_any_pieces_inflates_the_same() {
    let messages = [
        b"Hello, Hello, Hello, Hello!".to_vec(),
        noise(3000, 11),
        b"xyz".repeat(5000),
    ];
    let (mut server, _) = pair(PLAIN);
    let compressed: Vec<Bytes> = messages.iter().map(|m| server.compress(m)).collect();
    // Every split into two pieces, and a few into many.
    let first = &compressed[0];
    for at in 0..=first.len() {
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::new();
        client.inflate(&first[..at], false, &mut out, 1000).unwrap();
        client.inflate(&first[at..], true, &mut out, 1000).unwrap();
        assert_eq!(&out[..], &messages[0][..], "split at {at}");
    }
    for piece in [1, 2, 7, 100, 4096] {
        let (_, mut client) = pair(PLAIN);
        for (message, compressed) in messages.iter().zip(&compressed) {
            let mut out = BytesMut::new();
            let mut pieces = compressed.chunks(piece).peekable();
            while let Some(chunk) = pieces.next() {
                let last = pieces.peek().is_none();
                client.inflate(chunk, last, &mut out, usize::MAX).unwrap();
            }
            assert_eq!(&out[..], &message[..], "pieces of {piece}");
        }
    }
}

/// `mib` MiB of zeros as one compressed message: 1 MiB compressed,
/// then the same 1 MiB again, whose segment (pointing back into
/// zeros) repeats as is.
fn bomb(mib: usize) -> Vec<u8> {
    let mut compressor = Compress::new(Compression::best(), false);
    let zeros = vec![0u8; 1 << 20];
    let mut first = sync_flushed(&mut compressor, &zeros).unwrap();
    let mut next = sync_flushed(&mut compressor, &zeros).unwrap();
    first.extend_from_slice(&TAIL);
    next.extend_from_slice(&TAIL);
    let mut bomb = first;
    for _ in 1..mib {
        bomb.extend_from_slice(&next);
    }
    bomb.truncate(bomb.len() - TAIL.len());
    bomb
}

#[test]
fn a_compression_bomb_is_refused_early() {
    let payload = bomb(100);
    assert!(payload.len() < 1 << 20, "{} bytes", payload.len());
    let max = 1 << 20;
    // Whole.
    let (_, mut client) = pair(PLAIN);
    let mut out = BytesMut::new();
    let error = client.inflate(&payload, true, &mut out, max).unwrap_err();
    let Error::LimitExceeded {
        limit,
        max: limit_max,
        attempted,
        offset,
    } = error
    else {
        panic!("{error:?}");
    };
    assert_eq!(
        (limit, limit_max, offset),
        (Limit::MessageLength, max as u64, 0)
    );
    assert!(attempted > max as u64 && attempted <= (max + PROBE) as u64);
    assert_eq!(out.len(), max);
    assert_eq!(client.memory(), 0, "the decompressor is dropped");
    // In frames.
    let (_, mut client) = pair(PLAIN);
    let mut out = BytesMut::new();
    let mut result = Ok(());
    let mut chunks = payload.chunks(1000).peekable();
    while let Some(chunk) = chunks.next() {
        result = client.inflate(chunk, chunks.peek().is_none(), &mut out, max);
        assert!(out.len() <= max);
        if result.is_err() {
            break;
        }
    }
    assert!(matches!(
        result,
        Err(Error::LimitExceeded {
            limit: Limit::MessageLength,
            ..
        })
    ));
    // The whole bomb inflates where the limit allows it.
    let (_, mut client) = pair(PLAIN);
    let mut out = BytesMut::new();
    client.inflate(&bomb(3), true, &mut out, 3 << 20).unwrap();
    assert_eq!(out.len(), 3 << 20);
    assert!(out.iter().all(|&byte| byte == 0));
}

#[test]
fn the_limit_is_exact() {
    let message = b"0123456789".repeat(1000);
    let (mut server, _) = pair(PLAIN);
    let compressed = server.compress(&message);
    let (_, mut client) = pair(PLAIN);
    let mut out = BytesMut::new();
    client
        .inflate(&compressed, true, &mut out, message.len())
        .unwrap();
    assert_eq!(&out[..], &message[..]);
    let (_, mut client) = pair(PLAIN);
    let mut out = BytesMut::new();
    assert_eq!(
        client.inflate(&compressed, true, &mut out, message.len() - 1),
        Err(Error::LimitExceeded {
            limit: Limit::MessageLength,
            max: message.len() as u64 - 1,
            attempted: message.len() as u64,
            offset: 0,
        })
    );
    // What `out` held before counts.
    let (_, mut client) = pair(PLAIN);
    let mut out = BytesMut::from(&b"ab"[..]);
    assert!(client
        .inflate(&compressed, true, &mut out, message.len() + 1)
        .is_err());
}

#[test]
fn garbage_does_not_inflate() {
    let garbage: [&[u8]; 3] = [
        &[0xff; 16],                           // BTYPE 11 is reserved
        &[0x00, 0x05, 0x00, 0x00, 0x00, b'a'], // stored block, NLEN wrong
        &[0x1a, 0x03],                         // fixed block, length code 286
    ];
    for payload in garbage {
        let (_, mut client) = pair(PLAIN);
        assert_eq!(
            inflate_all(&mut client, payload),
            Err(invalid_compressed()),
            "{payload:x?}"
        );
        assert_eq!(client.memory(), 0);
    }
    // A reference before the start of the stream: RFC 7692 7.2.3.2's
    // second message, without the first.
    let (_, mut client) = pair(PLAIN);
    assert_eq!(
        inflate_all(&mut client, &[0xf2, 0x00, 0x11, 0x00, 0x00]),
        Err(invalid_compressed())
    );
}

#[test]
fn independent_deflate_streams_interoperate() {
    // flate2's raw deflate writer, sync-flushed per message.
    let messages = [
        b"first message, first message".to_vec(),
        noise(1000, 9),
        b"first".to_vec(),
    ];
    let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), Compression::fast());
    let (_, mut client) = pair(PLAIN);
    for message in &messages {
        encoder.write_all(message).unwrap();
        encoder.flush().unwrap();
        let segment = core::mem::take(encoder.get_mut());
        assert_eq!(segment[segment.len() - 4..], TAIL);
        let payload = &segment[..segment.len() - 4];
        assert_eq!(&inflate_all(&mut client, payload).unwrap(), message);
    }
    // And the other way: our messages into flate2's raw deflate reader.
    let (mut server, _) = pair(PLAIN);
    let mut decoder = flate2::write::DeflateDecoder::new(Vec::new());
    for message in &messages {
        decoder.write_all(&server.compress(message)).unwrap();
        decoder.write_all(&TAIL).unwrap();
        decoder.flush().unwrap();
        assert_eq!(&core::mem::take(decoder.get_mut()), message);
    }
}

#[test]
fn stored_blocks_inflate() {
    for len in [0, 1, 65_535, 65_536, 140_000] {
        let message = noise(len, 13);
        let (_, mut client) = pair(PLAIN);
        assert_eq!(
            inflate_all(&mut client, &stored(&message)).unwrap(),
            message
        );
        // Twice: the first one left the stream where a message ends.
        assert_eq!(
            inflate_all(&mut client, &stored(&message)).unwrap(),
            message
        );
    }
    let (mut server, _) = pair(PLAIN);
    assert_eq!(&server.compress(&[])[..], &EMPTY);
}

#[test]
fn memory_is_held_only_while_needed() {
    let message = b"some text, some text".to_vec();
    // Context takeover both ways: both are kept.
    let (mut server, mut client) = pair(PLAIN);
    assert_eq!(server.memory(), 0);
    let compressed = server.compress(&message);
    assert_eq!(server.memory(), (4 << 15) + DEFLATE_FIXED);
    inflate_all(&mut client, &compressed).unwrap();
    assert_eq!(client.memory(), INFLATE_MEMORY);
    server.release_idle();
    client.release_idle();
    assert_eq!(server.memory(), (4 << 15) + DEFLATE_FIXED);
    assert_eq!(client.memory(), INFLATE_MEMORY);
    // No context takeover both ways, small windows.
    let (mut server, mut client) = pair(params(true, true, 9, 9));
    let compressed = server.compress(&message);
    assert_eq!(server.memory(), (4 << 9) + DEFLATE_FIXED);
    server.release_idle();
    assert_eq!(server.memory(), 0);
    // Not while a message is half inflated.
    let mut out = BytesMut::new();
    client
        .inflate(&compressed[..2], false, &mut out, usize::MAX)
        .unwrap();
    client.release_idle();
    assert_eq!(client.memory(), INFLATE_MEMORY);
    client
        .inflate(&compressed[2..], true, &mut out, usize::MAX)
        .unwrap();
    assert_eq!(&out[..], &message[..]);
    client.release_idle();
    assert_eq!(client.memory(), 0);
    // Made again on next use.
    let compressed = server.compress(&message);
    assert_eq!(inflate_all(&mut client, &compressed).unwrap(), message);
    assert!(format!("{client:?}").contains("Deflate"));
}

#[test]
fn roles_pick_their_direction() {
    // The server's window 9 with no context takeover, the client's 12.
    let params = params(true, false, 9, 12);
    let config = DeflateConfig::new();
    let server = Deflate::new(Role::Server, params, &config);
    let client = Deflate::new(Role::Client, params, &config);
    assert_eq!(
        (server.ours.window_bits, server.ours.no_context_takeover),
        (9, true)
    );
    assert_eq!(
        (server.theirs.window_bits, server.theirs.no_context_takeover),
        (12, false)
    );
    assert_eq!(
        (client.ours.window_bits, client.ours.no_context_takeover),
        (12, false)
    );
    assert_eq!(
        (client.theirs.window_bits, client.theirs.no_context_takeover),
        (9, true)
    );
    // The configuration narrows our own side only; 8 is worked as 9.
    let config = DeflateConfig::new()
        .max_window_bits(8)
        .unwrap()
        .no_context_takeover(true);
    let client = Deflate::new(Role::Client, params, &config);
    assert_eq!(
        (client.ours.window_bits, client.ours.no_context_takeover),
        (9, true)
    );
    assert_eq!(client.theirs.window_bits, 9);
    // Out-of-range parameters built by hand do not panic.
    let odd = Deflate::new(Role::Server, self::params(false, false, 0, 200), &config);
    assert_eq!((odd.ours.window_bits, odd.theirs.window_bits), (9, 15));
}
