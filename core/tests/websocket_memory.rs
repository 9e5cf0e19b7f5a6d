//! Memory held by the compressed frames the encoder makes: about their
//! length, since the write queue bounds what it holds by length.
#![cfg(feature = "deflate")]

#[path = "support/counting.rs"]
mod counting;
use counting::live_bytes;

use cleave_proto::websocket::{DeflateConfig, DeflateParams, Kind, WebSocket, WsConfig};
use cleave_proto::Bytes;

/// A very compressible 4 MiB message compresses to about 4 KB; the frame
/// that carries it keeps about that, not the 2 MiB the compressor had
/// room for.
#[test]
fn compressed_frame_holds_about_its_length() {
    let params = no_takeover();
    let mut ws =
        WebSocket::server(WsConfig::default()).with_deflate(params, &DeflateConfig::default());
    // Warm the compressor up so its own memory is not counted below.
    drop(
        ws.message(Kind::Binary, Bytes::from_static(b"warm up"))
            .unwrap(),
    );
    let payload = Bytes::from(vec![0u8; 4 << 20]);
    let before = live_bytes() - (4 << 20);
    let frame = ws.message(Kind::Binary, payload).unwrap(); // payload dropped inside
    let held = live_bytes() - before;
    eprintln!("frame.len() = {}, bytes held = {}", frame.len(), held);
    assert!(
        held < (frame.len() as i64) * 2 + (64 << 10),
        "a {}-byte frame keeps {} bytes allocated",
        frame.len(),
        held
    );
}

/// The write queue bounds what it holds by frame length (128 KiB by
/// default): a queue full of compressed frames of very compressible
/// messages holds about that, not the half of each input the compressor
/// had room for (8 MiB for 16 frames of 1 MiB messages, before).
#[test]
fn a_bounded_write_queue_of_compressed_frames_holds_about_its_bound() {
    use cleave_proto::conn::Conn;
    let params = no_takeover();
    let mut conn = Conn::new(
        WebSocket::server(WsConfig::default()).with_deflate(params, &DeflateConfig::default()),
        std::time::Duration::ZERO,
    );
    drop(
        conn.protocol_mut()
            .message(Kind::Binary, Bytes::from_static(b"warm up"))
            .unwrap(),
    );
    let before = live_bytes();
    let mut pushed = 0;
    loop {
        let payload = Bytes::from(vec![0u8; 1 << 20]);
        let frame = conn.protocol_mut().message(Kind::Binary, payload).unwrap();
        if conn.push(frame).is_err() {
            break;
        }
        pushed += 1;
        if pushed == 16 {
            break;
        }
    }
    let held = live_bytes() - before;
    eprintln!(
        "frames queued {pushed}, queue len {} bytes, heap held {held} bytes",
        conn.queue().len()
    );
    assert!(
        held < 4 * (conn.queue().len() as i64) + (1 << 20),
        "{pushed} frames, queue accounts {} bytes, {held} bytes held",
        conn.queue().len()
    );
}

/// permessage-deflate without context takeover, 15-bit windows.
fn no_takeover() -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
        server_window_offered: false,
    }
}
