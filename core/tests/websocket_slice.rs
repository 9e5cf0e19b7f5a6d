//! `WebSocket::message_slice`: a message from a borrowed payload, built
//! straight into the write queue. It must put on the wire exactly what
//! `message` does (same header, same mask, same compression), keep the
//! queue's order and tickets, and come back whole when refused.

use std::time::Duration;

use cleave_proto::conn::Conn;
use cleave_proto::websocket::{Kind, SliceFrame, WebSocket, WsConfig};
use cleave_proto::write::{Lane, Push};
use cleave_proto::{Bytes, ConnConfig, Refusal, WriteQueueConfig};

#[path = "support/ws.rs"]
mod ws;
use ws::{client_with, drain, frame, run, server_with};

const NOW: Duration = Duration::ZERO;

/// Lengths at every header boundary (7-bit, 16-bit and 64-bit lengths)
/// and around the queue's coalescing thresholds.
const LENGTHS: [usize; 12] = [
    0, 1, 40, 125, 126, 127, 1000, 4096, 16_384, 65_535, 65_536, 70_000,
];

fn payload(len: usize, seed: usize) -> Vec<u8> {
    // Text-safe bytes, so that either kind is valid.
    (0..len)
        .map(|i| b'a' + ((i * 7 + seed) % 26) as u8)
        .collect()
}

fn opcode(kind: Kind) -> u8 {
    match kind {
        Kind::Text => 1,
        Kind::Binary => 2,
    }
}

/// Pushes every message on `conn`, the slice way or the `Bytes` way, and
/// drains the queue after each.
fn send_all(conn: &mut Conn<WebSocket>, messages: &[(Kind, Vec<u8>)], slice: bool) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, payload) in messages {
        let ticket = if slice {
            let frame = conn.protocol_mut().message_slice(*kind, payload).unwrap();
            conn.push(frame).expect("room")
        } else {
            let frame = conn
                .protocol_mut()
                .message(*kind, Bytes::copy_from_slice(payload))
                .unwrap();
            conn.push(frame).expect("room")
        };
        assert!(!conn.queue().is_written(ticket) || payload.is_empty() && out.is_empty());
        out.extend(drain(conn));
        assert!(conn.queue().is_written(ticket));
    }
    out
}

fn all_messages() -> Vec<(Kind, Vec<u8>)> {
    let mut messages = Vec::new();
    for (i, &len) in LENGTHS.iter().enumerate() {
        for kind in [Kind::Text, Kind::Binary] {
            messages.push((kind, payload(len, i)));
        }
    }
    messages
}

#[test]
fn a_server_slice_frame_is_the_reference_frame() {
    let messages = all_messages();
    let mut conn = server_with(WsConfig::default());
    let wire = send_all(&mut conn, &messages, true);
    let expected: Vec<u8> = messages
        .iter()
        .flat_map(|(kind, payload)| frame(true, opcode(*kind), payload, None))
        .collect();
    assert_eq!(wire, expected);
}

#[test]
fn a_client_slice_frame_is_masked_as_message_masks_it() {
    let messages = all_messages();
    let by_slice = send_all(&mut client_with(WsConfig::default()), &messages, true);
    let by_bytes = send_all(&mut client_with(WsConfig::default()), &messages, false);
    assert_eq!(by_slice, by_bytes);
    // And a server reads the messages back, whole, cut anywhere.
    let big = WsConfig::default().max_message(1 << 20).unwrap();
    for cuts in [vec![], vec![1, 2, 3, 100, 5000, 70_000]] {
        let (seen, _) = run(server_with(big.clone()), &by_slice, &cuts);
        assert_eq!(seen.error, None);
        assert_eq!(seen.messages, messages);
    }
}

#[test]
fn the_caller_keeps_its_payload_unmasked() {
    let mut conn = client_with(WsConfig::default());
    let mut scratch = b"hello".to_vec();
    let frame = conn
        .protocol_mut()
        .message_slice(Kind::Text, &scratch)
        .unwrap();
    assert_eq!(frame.wire_len(), 2 + 4 + 5);
    conn.push(frame).expect("room");
    assert_eq!(scratch, b"hello");
    // The scratch buffer is the caller's again at once.
    scratch.clear();
    scratch.extend_from_slice(b"again");
    let frame = conn
        .protocol_mut()
        .message_slice(Kind::Text, &scratch)
        .unwrap();
    conn.push(frame).expect("room");
    let wire = drain(&mut conn);
    let (seen, _) = run(server_with(WsConfig::default()), &wire, &[]);
    assert_eq!(
        seen.messages,
        [
            (Kind::Text, b"hello".to_vec()),
            (Kind::Text, b"again".to_vec())
        ]
    );
}

#[test]
fn slice_frames_keep_their_place_among_other_pushes() {
    // A small run buffer, so that runs are sealed between and around
    // slice frames; a ping on the urgent lane goes between pushes.
    let queue = WriteQueueConfig::default()
        .coalesce_below(64)
        .coalesce_limit(100)
        .unwrap();
    let config = ConnConfig::default().write_queue(queue);
    let mut conn = Conn::with_config(WebSocket::server(WsConfig::default()), config, NOW);
    let mut expected = Vec::new();
    let mut tickets = Vec::new();
    for i in 0..40 {
        let body = payload(i * 13 % 300, i);
        let kind = if i % 2 == 0 { Kind::Text } else { Kind::Binary };
        expected.extend(frame(true, opcode(kind), &body, None));
        let ticket = if i % 3 == 0 {
            let frame = conn
                .protocol_mut()
                .message(kind, Bytes::from(body))
                .unwrap();
            conn.push(frame).expect("room")
        } else {
            let frame = conn.protocol_mut().message_slice(kind, &body).unwrap();
            conn.push(frame).expect("room")
        };
        tickets.push(ticket);
    }
    let wire = drain(&mut conn);
    assert_eq!(wire, expected);
    for ticket in tickets {
        assert!(conn.queue().is_written(ticket));
    }
}

#[test]
fn a_refused_slice_frame_comes_back_whole() {
    let queue = WriteQueueConfig::default().max_items(1).unwrap();
    let config = ConnConfig::default().write_queue(queue);
    let mut conn = Conn::with_config(WebSocket::server(WsConfig::default()), config, NOW);
    let first = b"first".to_vec();
    let second = b"second".to_vec();
    let frame_one = conn
        .protocol_mut()
        .message_slice(Kind::Text, &first)
        .unwrap();
    conn.push(frame_one).expect("room");
    let frame_two = conn
        .protocol_mut()
        .message_slice(Kind::Binary, &second)
        .unwrap();
    let refused = conn.push(frame_two).unwrap_err();
    assert_eq!(*refused.error(), Refusal::Full(Lane::Bulk));
    let frame_two: SliceFrame<'_> = refused.into_value();
    assert_eq!(frame_two.wire_len(), 2 + 6);
    // Nothing of the refused frame was queued.
    let mut wire = drain(&mut conn);
    assert_eq!(wire, frame(true, 1, b"first", None));
    conn.push(frame_two).expect("room after the drain");
    wire.extend(drain(&mut conn));
    let mut expected = frame(true, 1, b"first", None);
    expected.extend(frame(true, 2, b"second", None));
    assert_eq!(wire, expected);

    // A closed queue refuses it too, and gives it back.
    conn.queue_mut().close();
    let frame_three = conn
        .protocol_mut()
        .message_slice(Kind::Text, b"third")
        .unwrap();
    let refused = conn.push(frame_three).unwrap_err();
    assert_eq!(*refused.error(), Refusal::Closed);
    assert_eq!(refused.into_value().wire_len(), 2 + 5);
    assert!(drain(&mut conn).is_empty());
}

#[test]
fn a_slice_frame_goes_on_the_urgent_lane_too() {
    let mut conn = server_with(WsConfig::default());
    let bulk = payload(300, 1);
    let frame_bulk = conn
        .protocol_mut()
        .message_slice(Kind::Binary, &bulk)
        .unwrap();
    conn.push(frame_bulk).expect("room");
    let frame_urgent = conn
        .protocol_mut()
        .message_slice(Kind::Text, b"now")
        .unwrap();
    let ticket = conn.push_urgent(frame_urgent).expect("room");
    let wire = drain(&mut conn);
    let mut expected = frame(true, 1, b"now", None);
    expected.extend(frame(true, 2, &bulk, None));
    assert_eq!(wire, expected);
    assert!(conn.queue().is_written(ticket));
}

#[cfg(feature = "deflate")]
mod deflate {
    use super::*;
    use cleave_proto::websocket::{DeflateConfig, DeflateParams};

    fn params(takeover: bool) -> DeflateParams {
        DeflateParams {
            server_no_context_takeover: !takeover,
            client_no_context_takeover: !takeover,
            server_max_window_bits: 15,
            client_max_window_bits: 15,
            server_window_offered: false,
        }
    }

    fn server(takeover: bool) -> Conn<WebSocket> {
        let ws = WebSocket::server(WsConfig::default())
            .with_deflate(params(takeover), &DeflateConfig::default());
        Conn::new(ws, NOW)
    }

    #[test]
    fn a_compressed_slice_message_is_the_compressed_message() {
        for takeover in [true, false] {
            let messages = all_messages();
            let by_slice = send_all(&mut server(takeover), &messages, true);
            let by_bytes = send_all(&mut server(takeover), &messages, false);
            assert_eq!(by_slice, by_bytes, "takeover {takeover}");
            // Compressed (RSV1 set), and the messages shrink.
            assert_eq!(by_slice[0], 0xC1);
            let plain: usize = messages
                .iter()
                .map(|(kind, p)| frame(true, opcode(*kind), p, None).len())
                .sum();
            assert!(by_slice.len() < plain / 4, "{} of {plain}", by_slice.len());
        }
    }
}
