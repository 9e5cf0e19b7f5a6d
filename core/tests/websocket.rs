//! WebSocket (RFC 6455) on the connection model: generated frame streams
//! in both roles (fragmented, masked, control frames interleaved) split
//! anywhere; every broken rule refused with its typed error and close code
//! at every split point; the close handshake; limits; streaming; the
//! encoders read back. The frames are written by an encoder of this file's
//! own, not cleave's.

use cleave_proto::conn::{Conn, Shutdown};
use cleave_proto::websocket::{close_code_for, Kind, Part, WebSocket, WsConfig, WsEvent};
use cleave_proto::{Bytes, Error, InvalidInput, Limit, WsField};
use proptest::prelude::*;

#[path = "support/ws.rs"]
mod ws;
use ws::{client_with, drain, frame, run, server, server_with, Seen, NOW};

// ----- generated streams -----

#[derive(Clone, Debug)]
enum Item {
    /// A message sent in frames of these sizes (the last takes the
    /// rest), with a ping after each frame where `pings` says.
    Message {
        kind: Kind,
        payload: Vec<u8>,
        frames: Vec<usize>,
        pings: Vec<Option<Vec<u8>>>,
    },
    Ping(Vec<u8>),
    Pong(Vec<u8>),
}

fn payload(kind: Kind) -> BoxedStrategy<Vec<u8>> {
    match kind {
        Kind::Text => prop_oneof![
            "[a-z ]{0,300}",
            "\\PC{0,200}",
            Just("κόσμε\u{1F600}\u{10FFFF}x".repeat(50)),
        ]
        .prop_map(String::into_bytes)
        .boxed(),
        Kind::Binary => prop_oneof![
            prop::collection::vec(any::<u8>(), 0..400),
            prop::collection::vec(any::<u8>(), 60_000..70_000),
        ]
        .boxed(),
    }
}

fn item() -> impl Strategy<Value = Item> {
    let message = prop_oneof![Just(Kind::Text), Just(Kind::Binary)]
        .prop_flat_map(|kind| {
            (
                Just(kind),
                payload(kind),
                prop::collection::vec(0usize..200, 0..4),
                prop::collection::vec(
                    prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
                    0..4,
                ),
            )
        })
        .prop_map(|(kind, payload, frames, pings)| Item::Message {
            kind,
            payload,
            frames,
            pings,
        });
    prop_oneof![
        6 => message,
        1 => prop::collection::vec(any::<u8>(), 0..126).prop_map(Item::Ping),
        1 => prop::collection::vec(any::<u8>(), 0..126).prop_map(Item::Pong),
    ]
}

/// The stream's bytes and what must come out of it.
fn encode(
    items: &[Item],
    masked: bool,
    keys: &mut impl Iterator<Item = [u8; 4]>,
) -> (Vec<u8>, Seen) {
    let mut out = Vec::new();
    let mut want = Seen::default();
    let mut mask = || if masked { keys.next() } else { None };
    for item in items {
        match item {
            Item::Message {
                kind,
                payload,
                frames,
                pings,
            } => {
                let mut rest = &payload[..];
                let count = frames.len() + 1;
                for i in 0..count {
                    let last = i + 1 == count;
                    let take = if last {
                        rest.len()
                    } else {
                        frames.get(i).map_or(0, |&n| n.min(rest.len()))
                    };
                    let (piece, tail) = rest.split_at(take);
                    rest = tail;
                    let opcode = match (i, kind) {
                        (0, Kind::Text) => 1,
                        (0, Kind::Binary) => 2,
                        _ => 0,
                    };
                    out.extend(frame(last, opcode, piece, mask()));
                    if let Some(Some(ping)) = pings.get(i) {
                        out.extend(frame(true, 9, ping, mask()));
                        want.pings.push(ping.clone());
                    }
                }
                want.messages.push((*kind, payload.clone()));
            }
            Item::Ping(p) => {
                out.extend(frame(true, 9, p, mask()));
                want.pings.push(p.clone());
            }
            Item::Pong(p) => {
                out.extend(frame(true, 10, p, mask()));
                want.pongs.push(p.clone());
            }
        }
    }
    (out, want)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Both roles, any split, frames whole or streamed: the messages come
    /// out as sent (assembled from parts), every ping is seen and answered
    /// with a pong carrying its payload, and nothing else is queued.
    #[test]
    fn generated_streams_come_out_as_sent(
        items in prop::collection::vec(item(), 0..8),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
        client in any::<bool>(),
        stream_above in prop_oneof![Just(u64::MAX), 0u64..500],
        seed in any::<u32>(),
    ) {
        let mut n = seed;
        let mut keys = std::iter::from_fn(|| {
            n = n.wrapping_mul(2_654_435_761).wrapping_add(1);
            Some(n.to_be_bytes())
        });
        let (bytes, want) = encode(&items, !client, &mut keys);
        let cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        let config = WsConfig::default().pings(true).stream_above(stream_above);
        let conn = if client { client_with(config) } else { server_with(config) };
        let (seen, mut conn) = run(conn, &bytes, &cuts);
        prop_assert_eq!(&seen, &want);
        // The pongs, read back by the other role.
        let answers = drain(&mut conn);
        let reader = if client { server_with(WsConfig::default().pings(true)) } else { client_with(WsConfig::default().pings(true)) };
        let (back, _) = run(reader, &answers, &[]);
        prop_assert_eq!(back.pongs, want.pings);
        prop_assert!(back.messages.is_empty() && back.pings.is_empty());
    }

    /// Whole frames come out the same events however the bytes are cut.
    #[test]
    fn events_do_not_depend_on_the_cuts(
        items in prop::collection::vec(item(), 0..6),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut keys = std::iter::repeat([7, 0, 255, 3]);
        let (bytes, _) = encode(&items, true, &mut keys);
        let cuts: Vec<usize> = cuts.iter().map(|cut| cut.index(bytes.len() + 1)).collect();
        let events = |cuts: &[usize]| {
            let mut conn = server_with(WsConfig::default().pings(true));
            let mut events = Vec::new();
            let mut at = 0;
            let mut cuts: Vec<usize> = cuts.iter().map(|&c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            cuts.push(bytes.len());
            for cut in cuts {
                conn.feed(&bytes[at..cut], NOW).unwrap();
                at = cut;
                while let Some(event) = conn.poll_event().unwrap() {
                    events.push(event);
                }
            }
            events
        };
        let whole = events(&[]);
        prop_assert_eq!(&events(&cuts), &whole);
        // Byte by byte, for the streams short enough to keep the run brief.
        if bytes.len() <= 16 * 1024 {
            let every: Vec<usize> = (1..bytes.len()).collect();
            prop_assert_eq!(&events(&every), &whole);
        }
    }

    /// What the encoders make reads back: a server's frames (unmasked, the
    /// payload not copied) by a client, a client's (masked) by a server.
    #[test]
    fn encoded_messages_read_back(
        messages in prop::collection::vec((any::<bool>(), prop::collection::vec(any::<u8>(), 0..70_000)), 0..5),
        from_client in any::<bool>(),
    ) {
        let mut sender = if from_client { client_with(WsConfig::default()) } else { server_with(WsConfig::default()) };
        let mut want = Vec::new();
        let mut bytes = Vec::new();
        for (text, data) in messages {
            let (kind, data) = if text {
                (Kind::Text, String::from_utf8_lossy(&data).into_owned().into_bytes())
            } else {
                (Kind::Binary, data)
            };
            let payload = Bytes::from(data.clone());
            let frame = sender.protocol_mut().message(kind, payload.clone()).unwrap();
            if !from_client {
                prop_assert_eq!(frame.body().as_ptr(), payload.as_ptr(), "a server's payload is not copied");
            }
            sender.push(frame).unwrap();
            bytes.extend(drain(&mut sender));
            want.push((kind, data));
        }
        let reader = if from_client { server_with(WsConfig::default()) } else { client_with(WsConfig::default()) };
        let (seen, _) = run(reader, &bytes, &[]);
        prop_assert_eq!(seen.messages, want);
    }
}

// ----- broken rules -----

fn invalid(field: WsField) -> InvalidInput {
    InvalidInput::WebSocket(field)
}

/// The close frame a connection queued: its code.
fn queued_close_code(conn: &mut Conn<WebSocket>) -> Option<u16> {
    let out = drain(conn);
    // The server's frames are unmasked: 0x88, a length, the code.
    let at = out.windows(2).position(|w| w[0] == 0x88 && w[1] >= 2)?;
    Some(u16::from_be_bytes([out[at + 2], out[at + 3]]))
}

const KEY: Option<[u8; 4]> = Some([0x11, 0x22, 0x33, 0x44]);

/// Vectors a server must refuse: a good message first (it still comes
/// out), then the bad frames, then a good message that must not. The
/// error's offset is the bad frame's: 12, after the good one, unless the
/// vector says otherwise (a first fragment that was handed out).
fn broken() -> Vec<(&'static str, Vec<u8>, InvalidInput, u16)> {
    let good = frame(true, 1, b"before", KEY);
    let with = |bad: Vec<u8>| [good.clone(), bad, frame(true, 1, b"after", KEY)].concat();
    let mut reserved = frame(true, 1, b"x", KEY);
    reserved[0] |= 0x20;
    let mut rsv1 = frame(true, 2, b"x", KEY);
    rsv1[0] |= 0x40;
    vec![
        ("RSV2", with(reserved), invalid(WsField::Reserved), 1002),
        (
            "RSV1 without deflate",
            with(rsv1),
            invalid(WsField::Reserved),
            1002,
        ),
        (
            "opcode 3",
            with(frame(true, 3, b"", KEY)),
            invalid(WsField::OpCode),
            1002,
        ),
        (
            "opcode 11",
            with(frame(true, 11, b"", KEY)),
            invalid(WsField::OpCode),
            1002,
        ),
        (
            "unmasked",
            with(frame(true, 1, b"x", None)),
            invalid(WsField::Mask),
            1002,
        ),
        (
            "fragmented ping",
            with(frame(false, 9, b"", KEY)),
            invalid(WsField::Control),
            1002,
        ),
        (
            "long ping",
            with(frame(true, 9, &[0; 126], KEY)),
            invalid(WsField::Control),
            1002,
        ),
        (
            "continuation first",
            with(frame(true, 0, b"x", KEY)),
            invalid(WsField::Continuation),
            1002,
        ),
        (
            "text inside a message",
            with([frame(false, 1, b"a", KEY), frame(true, 1, b"b", KEY)].concat()),
            invalid(WsField::Continuation),
            1002,
        ),
        (
            "close of one byte",
            with(frame(true, 8, b"\x03", KEY)),
            invalid(WsField::Close),
            1002,
        ),
        (
            "close code 1005",
            with(frame(true, 8, b"\x03\xed", KEY)),
            invalid(WsField::Close),
            1002,
        ),
        (
            "close code 999",
            with(frame(true, 8, b"\x03\xe7", KEY)),
            invalid(WsField::Close),
            1002,
        ),
        (
            "close code 5000",
            with(frame(true, 8, b"\x13\x88", KEY)),
            invalid(WsField::Close),
            1002,
        ),
        (
            "close reason not UTF-8",
            with(frame(true, 8, b"\x03\xe8\xff", KEY)),
            InvalidInput::Utf8,
            1007,
        ),
        (
            "text not UTF-8",
            with(frame(true, 1, b"ok\xc0\xaf", KEY)),
            InvalidInput::Utf8,
            1007,
        ),
        (
            "second fragment not UTF-8",
            with(
                [
                    frame(false, 1, "κό".as_bytes(), KEY),
                    frame(true, 0, b"\xed\xa0\x80", KEY),
                ]
                .concat(),
            ),
            InvalidInput::Utf8,
            1007,
        ),
        (
            "text ends inside a code point",
            with(frame(true, 1, b"ok\xe2\x82", KEY)),
            InvalidInput::Utf8,
            1007,
        ),
        (
            "64-bit length with its top bit",
            with(b"\x82\xff\x80\0\0\0\0\0\0\0\x11\x22\x33\x44".to_vec()),
            invalid(WsField::Length),
            1002,
        ),
    ]
}

#[test]
fn every_broken_rule_is_refused_at_every_split_point() {
    for (name, bytes, kind, code) in broken() {
        for cut in 0..=bytes.len() {
            let (seen, mut conn) = run(server(), &bytes, &[cut]);
            let Some(Error::InvalidInput { kind: got, offset }) = &seen.error else {
                panic!("{name} cut at {cut}: {seen:?}");
            };
            assert_eq!(*got, kind, "{name} cut at {cut}");
            let bad_frame = match name {
                "text inside a message" => 12 + 7,
                "second fragment not UTF-8" => 12 + 10,
                _ => 12,
            };
            assert_eq!(*offset, bad_frame, "{name} cut at {cut}");
            // Nothing lost: the buffer holds the bytes from the bad frame
            // on, as they came (masked), up to where feeding stopped.
            let left = conn.recv_buf().peek();
            let from = usize::try_from(*offset).unwrap();
            assert!(
                [cut, bytes.len()].contains(&(from + left.len()))
                    && bytes[from..].starts_with(left),
                "{name} cut at {cut}: the bytes left are not those that came: {left:?} vs {:?}",
                &bytes[from..]
            );
            assert_eq!(
                seen.messages,
                [(Kind::Text, b"before".to_vec())],
                "{name} cut at {cut}: only the message before"
            );
            assert_eq!(
                queued_close_code(&mut conn),
                Some(code),
                "{name} cut at {cut}"
            );
            assert_eq!(close_code_for(seen.error.as_ref().unwrap()), code);
            assert_eq!(
                conn.poll_shutdown(),
                Some(Shutdown::Write),
                "{name}: the close goes out, then a FIN"
            );
        }
    }
}

#[test]
fn a_client_masks_a_payload_it_alone_holds_in_place_and_copies_a_shared_one() {
    let text = b"masked where it lies".to_vec();
    let mut conn = client_with(WsConfig::default());
    // The only handle: masked in its own memory, no copy.
    let alone = Bytes::from(text.clone());
    let at = alone.as_ptr();
    let frame = conn.protocol_mut().message(Kind::Text, alone).unwrap();
    assert_eq!(frame.body().as_ptr(), at);
    let in_place = frame.to_bytes();
    // Shared: the caller's bytes stay as they were.
    let kept = Bytes::from(text.clone());
    let frame = conn
        .protocol_mut()
        .message(Kind::Text, kept.clone())
        .unwrap();
    assert_ne!(frame.body().as_ptr(), kept.as_ptr());
    assert_eq!(&kept[..], &text[..]);
    // Both read back as the text, with the keys the entropy gave.
    for wire in [in_place, frame.to_bytes()] {
        let mut server = server();
        server.feed(&wire, NOW).unwrap();
        assert_eq!(
            server.poll_event(),
            Ok(Some(WsEvent::Text(Bytes::from(text.clone()))))
        );
    }
}

#[test]
fn a_server_frame_to_a_client_must_not_be_masked() {
    let (seen, mut conn) = run(
        client_with(WsConfig::default()),
        &frame(true, 1, b"x", KEY),
        &[],
    );
    assert!(matches!(
        seen.error,
        Some(Error::InvalidInput {
            kind: InvalidInput::WebSocket(WsField::Mask),
            ..
        })
    ));
    // The client's own close is masked: its second byte has the mask bit.
    let out = drain(&mut conn);
    assert_eq!((out[0], out[1]), (0x88, 0x82));
}

#[test]
fn invalid_text_fails_before_its_frame_is_complete() {
    // A 100-byte text frame whose 6th byte cannot be UTF-8 (Autobahn
    // 6.4.3): refused once that byte is in, the rest never sent.
    let mut payload = b"abcde\xff".to_vec();
    payload.resize(100, b'a');
    let whole = frame(true, 1, &payload, KEY);
    let mut conn = server();
    conn.feed(&whole[..6 + 5], NOW).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    conn.feed(&whole[11..12], NOW).unwrap();
    assert!(matches!(
        conn.poll_event(),
        Err(Error::InvalidInput {
            kind: InvalidInput::Utf8,
            ..
        })
    ));
}

#[test]
fn invalid_text_with_a_16_bit_length_fails_alike_and_leaves_the_bytes_as_they_came() {
    // 300 bytes (a 16-bit length), bad at byte 200, all in one read: the
    // whole-frame path must give way to the long one, fail as byte by
    // byte does, and leave the frame in the buffer as it came (masked).
    let mut payload = vec![b'a'; 300];
    payload[200] = 0xff;
    let whole = frame(true, 1, &payload, KEY);
    assert_eq!(whole[1] & 0x7f, 126);
    let mut trickled = server();
    let mut by_byte = Ok(None);
    let mut fed = 0;
    for byte in whole.chunks(1) {
        trickled.feed(byte, NOW).unwrap();
        fed += 1;
        by_byte = trickled.poll_event();
        if by_byte.is_err() {
            break;
        }
    }
    // Refused at the bad byte, the bytes fed so far left as they came.
    assert_eq!(fed, 2 + 2 + 4 + 201);
    assert_eq!(trickled.recv_buf().peek(), &whole[..fed]);
    assert!(matches!(
        by_byte,
        Err(Error::InvalidInput {
            kind: InvalidInput::Utf8,
            ..
        })
    ));
    let mut conn = server();
    conn.feed(&whole, NOW).unwrap();
    assert_eq!(conn.poll_event(), by_byte);
    assert_eq!(conn.recv_buf().peek(), &whole[..]);
    // A good one of the same size in the same read comes out whole.
    payload[200] = b'b';
    let mut conn = server();
    conn.feed(&frame(true, 1, &payload, KEY), NOW).unwrap();
    assert_eq!(
        conn.poll_event(),
        Ok(Some(WsEvent::Text(Bytes::from(payload))))
    );
}

#[test]
fn a_streamed_text_frame_ending_inside_a_code_point_leaves_its_last_piece() {
    // Frames above 8 bytes come out in pieces; this one's text ends in
    // the middle of a euro sign, which only its last piece can tell.
    let whole = frame(true, 1, b"0123456789ab\xe2\x82", KEY);
    let mut conn = server_with(WsConfig::default().stream_above(8));
    conn.feed(&whole[..6 + 10], NOW).unwrap();
    let Ok(Some(WsEvent::Part(first))) = conn.poll_event() else {
        panic!("the first piece");
    };
    assert_eq!(&first.data[..], b"0123456789");
    conn.feed(&whole[6 + 10..], NOW).unwrap();
    assert!(matches!(
        conn.poll_event(),
        Err(Error::InvalidInput {
            kind: InvalidInput::Utf8,
            ..
        })
    ));
    // The refused piece stays, as it came (masked: the key goes on from
    // where the first piece stopped).
    assert_eq!(conn.recv_buf().peek(), &whole[6 + 10..]);
}

#[test]
fn limits_are_closes_with_1009() {
    let config = WsConfig::default()
        .max_frame(100)
        .unwrap()
        .max_message(150)
        .unwrap();
    let (seen, mut conn) = run(
        server_with(config.clone()),
        &frame(true, 2, &[0; 101], KEY),
        &[],
    );
    assert!(matches!(
        seen.error,
        Some(Error::LimitExceeded {
            limit: Limit::FrameLength,
            max: 100,
            attempted: 101,
            ..
        })
    ));
    assert_eq!(queued_close_code(&mut conn), Some(1009));
    // Fragments of 100 each: the second passes the message's limit.
    let fragments = [
        frame(false, 2, &[0; 100], KEY),
        frame(true, 0, &[0; 100], KEY),
    ]
    .concat();
    let (seen, mut conn) = run(server_with(config), &fragments, &[]);
    assert!(matches!(
        seen.error,
        Some(Error::LimitExceeded {
            limit: Limit::MessageLength,
            max: 150,
            attempted: 200,
            ..
        })
    ));
    assert_eq!(queued_close_code(&mut conn), Some(1009));
}

// ----- the close handshake -----

#[test]
fn the_peers_close_is_echoed_and_ends_the_stream() {
    let bytes = [
        frame(true, 8, b"\x03\xe8bye", KEY),
        frame(true, 1, b"ignored", KEY),
    ]
    .concat();
    let (seen, mut conn) = run(server(), &bytes, &[]);
    let close = seen.close.expect("the close came out");
    assert_eq!((close.code, &close.reason[..]), (Some(1000), &b"bye"[..]));
    assert!(seen.messages.is_empty() && seen.error.is_none());
    // The echo: the same code, no reason.
    assert_eq!(drain(&mut conn), b"\x88\x02\x03\xe8");
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
    conn.handle_shutdown();
    assert!(conn.is_finished());
}

#[test]
fn an_empty_close_is_answered_with_an_empty_close() {
    let (seen, mut conn) = run(server(), &frame(true, 8, b"", KEY), &[]);
    assert_eq!(seen.close.map(|c| c.code), Some(None));
    assert_eq!(drain(&mut conn), b"\x88\x00");
}

#[test]
fn a_close_this_side_started_is_not_answered_again() {
    let mut conn = server();
    let close = conn.protocol_mut().close(1001, "going").unwrap();
    conn.push(close).unwrap();
    assert!(conn.protocol().is_closing());
    assert_eq!(drain(&mut conn), b"\x88\x07\x03\xe9going");
    let (seen, mut conn) = run(conn, &frame(true, 8, b"\x03\xe9", KEY), &[]);
    assert_eq!(seen.close.and_then(|c| c.code), Some(1001));
    assert!(drain(&mut conn).is_empty(), "no second close");
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
}

#[test]
fn a_stream_cut_inside_a_frame_gives_its_bytes_back() {
    let bytes = frame(true, 2, &[9; 50], KEY);
    let (seen, _) = run(server(), &bytes[..30], &[]);
    let Some(Error::Truncated { partial, offset: 0 }) = seen.error else {
        panic!("{seen:?}");
    };
    assert_eq!(&partial[..], &bytes[..30]);
    // Between frames the end is clean.
    let (seen, conn) = run(server(), &frame(true, 2, b"x", KEY), &[]);
    assert!(seen.error.is_none());
    assert!(conn.is_read_done());
}

// ----- streaming and memory -----

#[test]
fn a_large_frame_streams_in_pieces_and_leaves_no_buffer() {
    let payload: Vec<u8> = (0..3 << 20).map(|i: u32| (i % 251) as u8).collect();
    let bytes = frame(true, 2, &payload, KEY);
    let mut conn = server_with(WsConfig::default().stream_above(1 << 20));
    let mut got = Vec::new();
    let mut last = false;
    let mut peak = 0;
    for read in bytes.chunks(64 << 10) {
        conn.feed(read, NOW).unwrap();
        peak = peak.max(conn.recv_buf().capacity());
        while let Some(event) = conn.poll_event().unwrap() {
            let WsEvent::Part(Part {
                kind: Kind::Binary,
                data,
                last: is_last,
            }) = event
            else {
                panic!("{event:?}");
            };
            assert!(!last);
            got.extend_from_slice(&data);
            last = is_last;
        }
    }
    assert!(last && got == payload);
    assert!(
        peak <= 256 << 10,
        "the buffer held {peak} bytes, not one read"
    );
    conn.release_idle();
    assert_eq!(conn.recv_buf().capacity(), 0);
}

/// A whole message of at most 125 bytes is read from its first two bytes
/// (the short way); at each of the short way's edges the long way must
/// give what it gives: a frame over `stream_above` streams in parts, a
/// client takes unmasked frames, invalid text fails at its byte, and a
/// 126-byte message (a 16-bit length) comes out whole too.
#[test]
fn short_messages_at_the_edges_of_the_short_way() {
    // Over `stream_above`: parts, the last one last.
    let text: Vec<u8> = (0..40u8).map(|i| b'a' + i % 26).collect();
    let bytes = frame(true, 1, &text, KEY);
    let mut conn = server_with(WsConfig::default().stream_above(16));
    conn.feed(&bytes, NOW).unwrap();
    let mut got = Vec::new();
    while let Some(event) = conn.poll_event().unwrap() {
        let WsEvent::Part(part) = event else {
            panic!("{event:?}");
        };
        assert_eq!(part.kind, Kind::Text);
        got.extend_from_slice(&part.data);
        if part.last {
            break;
        }
    }
    assert_eq!(got, text);

    // A client: a server's frame is not masked, and comes out whole.
    let mut conn = client_with(WsConfig::default());
    conn.feed(&frame(true, 2, &[7; 125], None), NOW).unwrap();
    let Ok(Some(WsEvent::Binary(data))) = conn.poll_event() else {
        panic!("no message");
    };
    assert_eq!(&data[..], &[7; 125][..]);

    // Invalid text: refused as the long way refuses it, at its frame.
    let bad = frame(true, 1, b"ab\xffcd", KEY);
    let mut conn = server();
    conn.feed(&bad, NOW).unwrap();
    assert_eq!(
        conn.poll_event(),
        Err(Error::InvalidInput {
            kind: InvalidInput::Utf8,
            offset: 0,
        })
    );

    // 125 and 126 bytes, back to back: both whole.
    let bytes = [
        frame(true, 2, &[1; 125], KEY),
        frame(true, 2, &[2; 126], KEY),
    ]
    .concat();
    let (seen, _) = run(server(), &bytes, &[]);
    assert_eq!(
        seen.messages,
        [(Kind::Binary, vec![1; 125]), (Kind::Binary, vec![2; 126])]
    );
    assert!(seen.error.is_none());
}

#[test]
fn a_whole_message_is_one_view_of_the_buffer() {
    let bytes = frame(true, 2, &[5; 1000], KEY);
    let mut conn = server();
    conn.feed(&bytes, NOW).unwrap();
    let buffered = conn.recv_buf().peek().as_ptr();
    let Ok(Some(WsEvent::Binary(data))) = conn.poll_event() else {
        panic!("no message");
    };
    // Unmasked where it arrived: the payload starts after the 8-byte header.
    assert_eq!(data.as_ptr(), buffered.wrapping_add(8));
    assert_eq!(&data[..], &[5; 1000][..]);
}

// ----- answers that wait for room -----

#[test]
fn pongs_and_the_close_wait_for_room_and_are_never_dropped() {
    use cleave_proto::{ConnConfig, WriteQueueConfig};
    let queue = WriteQueueConfig::default().urgent_max_items(2).unwrap();
    let config = ConnConfig::default().write_queue(queue);
    let mut conn = Conn::with_config(WebSocket::server(WsConfig::default()), config, NOW);
    let mut bytes = Vec::new();
    for i in 0..5u8 {
        bytes.extend(frame(true, 9, &[i], KEY));
    }
    bytes.extend(frame(true, 8, b"\x03\xe8", KEY));
    conn.feed(&bytes, NOW).unwrap();
    let mut written = Vec::new();
    let mut closes = 0;
    // The driver's loop: poll, write, poll again while writing made room.
    for _ in 0..10 {
        while let Some(event) = conn.poll_event().unwrap() {
            assert!(matches!(event, WsEvent::Close(_)));
            closes += 1;
        }
        written.extend(drain(&mut conn));
    }
    assert_eq!(closes, 1);
    let (back, _) = run(client_with(WsConfig::default().pings(true)), &written, &[]);
    assert_eq!(
        back.pongs,
        (0..5u8).map(|i| vec![i]).collect::<Vec<_>>(),
        "every pong, in order"
    );
    assert_eq!(
        back.close.and_then(|c| c.code),
        Some(1000),
        "then the close"
    );
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
}

#[test]
fn an_error_in_the_first_frame_is_at_offset_zero() {
    for bytes in [frame(true, 8, b"\x03", KEY), frame(true, 1, b"\xce", KEY)] {
        let (seen, _) = run(server(), &bytes, &[]);
        assert!(
            matches!(seen.error, Some(Error::InvalidInput { offset: 0, .. })),
            "{seen:?}"
        );
    }
}
