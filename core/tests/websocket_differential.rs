//! WebSocket, differential: random frame streams (both roles, deflate on
//! and off, fragmented and compressed messages with control frames
//! between, forced 16- and 64-bit length codes, broken rules, cut-off
//! ends) under random limits, fed whole, byte by byte and at random cuts.
//! The same messages and (without streaming) the same events and error
//! come out; every error comes back again; the bytes left after it are
//! those that came from the error's offset on, masked as on the wire.
//! Then the states where the small-message fast path must give way.
//!
//! `WS_DIFF_SEED=<u64>` runs another sequence.

use cleave_proto::conn::Conn;
use cleave_proto::websocket::{Assembler, Kind, WebSocket, WsConfig, WsEvent};
#[cfg(feature = "deflate")]
use cleave_proto::websocket::{DeflateConfig, DeflateParams};
use cleave_proto::{ConnConfig, Error, WriteQueueConfig};

#[path = "support/ws.rs"]
mod ws;
use ws::{frame_rsv, NOW};

#[cfg(feature = "deflate")]
fn params() -> DeflateParams {
    DeflateParams {
        server_no_context_takeover: true,
        client_no_context_takeover: true,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
        server_window_offered: false,
    }
}

#[cfg(not(feature = "deflate"))]
fn compress(_: &[u8]) -> Vec<u8> {
    unreachable!()
}

#[cfg(feature = "deflate")]
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
    out.truncate(out.len() - 4);
    out
}

#[derive(Clone, Copy, Debug)]
struct Setup {
    client: bool,
    deflate: bool,
    urgent: Option<usize>,
    max_frame: u64,
    max_message: u64,
    stream_above: u64,
    pings: bool,
    max_buffered: usize,
    copy_up_to: usize,
    drain: bool,
}

fn conn(s: Setup) -> Conn<WebSocket> {
    let mut config = WsConfig::default()
        .pings(s.pings)
        .stream_above(s.stream_above)
        .max_frame(s.max_frame)
        .unwrap()
        .max_message(s.max_message)
        .unwrap();
    config = config.pings(s.pings);
    let ws = if s.client {
        WebSocket::client(config, |b: &mut [u8]| b.fill(5))
    } else {
        WebSocket::server(config)
    };
    #[cfg(feature = "deflate")]
    let ws = if s.deflate {
        ws.with_deflate(params(), &DeflateConfig::default())
    } else {
        ws
    };
    let mut cc = ConnConfig::default().recv_buf(
        cleave_proto::RecvBufConfig::default()
            .max_buffered(s.max_buffered)
            .unwrap()
            .copy_frames_up_to(s.copy_up_to),
    );
    if let Some(n) = s.urgent {
        cc = cc.write_queue(WriteQueueConfig::default().urgent_max_items(n).unwrap());
    }
    Conn::with_config(ws, cc, NOW)
}

#[derive(Debug, PartialEq)]
struct Out {
    events: Vec<String>,
    messages: Vec<(Kind, Vec<u8>)>,
    error: Option<Error>,
    /// The buffer after an error, as `(offset, bytes)`.
    left: Option<(u64, Vec<u8>)>,
    fed: usize,
}

/// Feeds `bytes` cut at `cuts`, polling after each piece, then the end.
fn drive(s: Setup, bytes: &[u8], cuts: &[usize]) -> Out {
    let mut c = conn(s);
    let mut out = Out {
        events: vec![],
        messages: vec![],
        error: None,
        left: None,
        fed: 0,
    };
    let mut asm = Assembler::new();
    let mut cuts: Vec<usize> = cuts.iter().map(|&x| x.min(bytes.len())).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    let mut at = 0;
    let mut poll = |c: &mut Conn<WebSocket>, out: &mut Out| loop {
        match c.poll_event() {
            Ok(Some(e)) => {
                out.events.push(format!("{e:?}"));
                match e {
                    WsEvent::Text(t) => out.messages.push((Kind::Text, t.to_vec())),
                    WsEvent::Binary(t) => out.messages.push((Kind::Binary, t.to_vec())),
                    WsEvent::Part(p) => {
                        if let Some((k, w)) = asm.push(p) {
                            out.messages.push((k, w.to_vec()));
                        }
                    }
                    _ => {}
                }
            }
            Ok(None) => {
                // The driver writes what is queued, and polls again if
                // that made room for an owed pong.
                if s.drain && !ws::drain(c).is_empty() {
                    continue;
                }
                return;
            }
            Err(e) => {
                assert_eq!(c.poll_event(), Err(e.clone()), "the same error again");
                if out.error.is_none() {
                    out.left = Some((c.recv_buf().offset(), c.recv_buf().peek().to_vec()));
                    out.error = Some(e);
                }
                return;
            }
        }
    };
    for cut in cuts {
        if cut > at && out.error.is_none() {
            // What fits, polling between.
            while at < cut && out.error.is_none() {
                let room = c.recv_buf().remaining();
                if room == 0 {
                    break;
                }
                let end = cut.min(at + room);
                c.feed(&bytes[at..end], NOW).unwrap();
                at = end;
                out.fed = at;
                poll(&mut c, &mut out);
            }
        }
        poll(&mut c, &mut out);
    }
    c.handle_eof(NOW);
    poll(&mut c, &mut out);
    out
}

fn offset_of(e: &Error) -> Option<u64> {
    match e {
        Error::InvalidInput { offset, .. } | Error::LimitExceeded { offset, .. } => Some(*offset),
        Error::Truncated { offset, .. } => Some(*offset),
        _ => None,
    }
}

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

/// A frame, with the length code chosen: minimal, 126 or 127.
fn frame_coded(
    fin: bool,
    rsv: u8,
    opcode: u8,
    payload: &[u8],
    mask: Option<[u8; 4]>,
    code: u8,
) -> Vec<u8> {
    let mut f = frame_rsv(fin, false, opcode, payload, mask);
    f[0] |= rsv << 4;
    let minimal_at = match payload.len() {
        n if n < 126 => 2,
        n if n < 65536 => 4,
        _ => 10,
    };
    let m = f[1] & 0x80;
    let mut head = vec![f[0]];
    match code {
        126 if payload.len() < 65536 => {
            head.push(m | 126);
            head.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        }
        127 => {
            head.push(m | 127);
            head.extend_from_slice(&(payload.len() as u64).to_be_bytes());
        }
        _ => return f,
    }
    head.extend_from_slice(&f[minimal_at..]);
    head
}

fn random_stream(r: &mut Rng, s: Setup) -> Vec<u8> {
    let mut bytes = Vec::new();
    let frames = r.below(6) + 1;
    let mut in_msg = false;
    for _ in 0..frames {
        if s.deflate && !in_msg && r.below(4) == 0 {
            // A compressed message over several frames, pings between.
            let len = [10usize, 300, 5000][r.below(3) as usize];
            let text = r.below(2) == 0;
            let mut data: Vec<u8> = (0..len)
                .map(|i| {
                    if text {
                        b'a' + (i % 26) as u8
                    } else {
                        r.next() as u8
                    }
                })
                .collect();
            if text && r.below(4) == 0 {
                data[len / 2] = 0xff;
            }
            let mut z = compress(&data);
            if r.below(8) == 0 {
                let i = r.below(z.len() as u64) as usize;
                z[i] ^= 0x55;
            }
            let k = (r.below(4) + 1) as usize;
            let step = z.len() / k + 1;
            let chunks: Vec<&[u8]> = z.chunks(step).collect();
            let n = chunks.len().max(1);
            for i in 0..n {
                let piece = chunks.get(i).copied().unwrap_or(&[]);
                let op = if i == 0 {
                    if text {
                        1
                    } else {
                        2
                    }
                } else {
                    0
                };
                let rsv = if i == 0 { 4 } else { 0 };
                let mask = (!s.client).then(|| [r.next() as u8, 0x5a, r.next() as u8, 0xa5]);
                bytes.extend(frame_coded(i + 1 == n, rsv, op, piece, mask, 0));
                if r.below(3) == 0 && i + 1 < n {
                    let mask = (!s.client).then(|| [r.next() as u8, 1, 2, 3]);
                    let cp: &[u8] = if r.below(5) == 0 { b"\x03" } else { b"pp" };
                    bytes.extend(frame_coded(
                        true,
                        0,
                        [9u8, 10, 8][r.below(3) as usize],
                        cp,
                        mask,
                        0,
                    ));
                }
            }
            continue;
        }
        let op = if r.below(8) == 0 {
            [0u8, 1, 2, 8, 9, 10, 3][r.below(7) as usize]
        } else if in_msg {
            [0u8, 0, 0, 9, 10, 8][r.below(6) as usize]
        } else {
            [1u8, 1, 2, 2, 9, 10, 8][r.below(7) as usize]
        };
        let fin = op >= 8 || r.below(3) != 0;
        let len = match r.below(5) {
            0 => 0,
            1 => r.below(10) as usize,
            2 => r.below(130) as usize,
            3 => r.below(400) as usize,
            _ => 100 + r.below(70_000) as usize,
        };
        let len = if op >= 8 { len.min(125) } else { len };
        let mut payload: Vec<u8> = if r.below(2) == 0 {
            (0..len).map(|i| b'a' + (i % 26) as u8).collect()
        } else {
            (0..len).map(|_| r.next() as u8).collect()
        };
        if r.below(6) == 0 && !payload.is_empty() {
            let i = r.below(payload.len() as u64) as usize;
            payload[i] = [0xff, 0xc3, 0xe2, 0x80][r.below(4) as usize];
        }
        if op == 8 && len >= 2 && r.below(2) == 0 {
            payload[0] = 0x03;
            payload[1] = 0xe8;
        }
        let mut rsv = 0;
        if s.deflate && (op == 1 || op == 2) && r.below(2) == 0 {
            payload = compress(&payload);
            rsv = 4;
        }
        if r.below(20) == 0 {
            rsv |= 1 << r.below(3);
        }
        let masked = (!s.client) ^ (r.below(25) == 0);
        let mask = masked.then(|| [r.next() as u8, 0x5a, r.next() as u8, 0xa5]);
        let code = if op >= 8 && r.below(30) != 0 {
            0
        } else {
            [0u8, 0, 126, 127][r.below(4) as usize]
        };
        bytes.extend(frame_coded(fin, rsv, op, &payload, mask, code));
        if op == 1 || op == 2 || op == 0 {
            in_msg = !fin;
        }
    }
    for _ in 0..r.below(3) {
        if r.below(3) == 0 && !bytes.is_empty() {
            let i = r.below(bytes.len().min(40) as u64) as usize;
            bytes[i] = r.next() as u8;
        }
    }
    if r.below(6) == 0 && !bytes.is_empty() {
        let n = bytes.len() as u64;
        bytes.truncate(r.below(n) as usize);
    }
    bytes
}

fn check(s: Setup, bytes: &[u8], out: &Out, what: &str) {
    let Some(e) = &out.error else { return };
    let Some(off) = offset_of(e) else { return };
    let off = off as usize;
    assert!(
        off <= bytes.len(),
        "{what}: offset {off} past the stream: {e:?}"
    );
    if let Error::Truncated { partial, .. } = e {
        assert_eq!(
            &partial[..],
            &bytes[off..out.fed],
            "{what}: truncated partial ({s:?})"
        );
        return;
    }
    let (boff, left) = out.left.as_ref().unwrap();
    assert_eq!(
        *boff as usize, off,
        "{what}: buffer offset vs error offset {e:?} ({s:?})"
    );
    assert_eq!(
        &left[..],
        &bytes[off..out.fed],
        "{what}: bytes left not as they came, {e:?} ({s:?})"
    );
}

#[test]
fn differential_whole_vs_trickled() {
    let mut r = Rng(std::env::var("WS_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15));
    let mut stats = std::collections::BTreeMap::new();
    for round in 0..3000 {
        let s = Setup {
            client: r.below(3) == 0,
            deflate: cfg!(feature = "deflate") && r.below(2) == 0,
            urgent: [None, None, Some(1), Some(2)][r.below(4) as usize],
            max_frame: [u64::MAX, 300, 70_000][r.below(3) as usize],
            max_message: [u64::MAX, 500, 60_000][r.below(3) as usize],
            stream_above: [u64::MAX, u64::MAX, 200, 0][r.below(4) as usize],
            pings: r.below(2) == 0,
            max_buffered: [8 << 20, 8 << 20, 1000, 30_000][r.below(4) as usize],
            copy_up_to: [0, 64, 100_000][r.below(3) as usize],
            drain: r.below(2) == 0,
        };
        let bytes = random_stream(&mut r, s);
        let whole = drive(s, &bytes, &[]);
        *stats
            .entry(format!(
                "{:?}",
                whole.error.as_ref().map(|e| format!("{e:?}")
                    .split([',', '('])
                    .take(2)
                    .collect::<String>())
            ))
            .or_insert(0) += 1;
        check(s, &bytes, &whole, &format!("round {round} whole"));
        let step = if bytes.len() > 2000 { 997 } else { 1 };
        let all: Vec<usize> = (0..bytes.len()).step_by(step).collect();
        let trickled = drive(s, &bytes, &all);
        check(s, &bytes, &trickled, &format!("round {round} trickled"));
        let cuts: Vec<usize> = (0..r.below(4))
            .map(|_| r.below(bytes.len() as u64 + 1) as usize)
            .collect();
        let cut = drive(s, &bytes, &cuts);
        check(s, &bytes, &cut, &format!("round {round} cut"));
        for (name, other) in [("trickled", &trickled), ("cut", &cut)] {
            assert_eq!(
                whole.messages, other.messages,
                "round {round} {name}: messages {s:?}"
            );
            if s.stream_above == u64::MAX {
                assert_eq!(whole.events, other.events, "round {round} {name} {s:?}");
                assert_eq!(
                    whole.error, other.error,
                    "round {round} {name} {s:?} {bytes:?}"
                );
            } else {
                assert_eq!(
                    whole.error.as_ref().map(std::mem::discriminant),
                    other.error.as_ref().map(std::mem::discriminant),
                    "round {round} {name} {s:?}"
                );
            }
        }
    }
    for (k, v) in &stats {
        eprintln!("{v:6} {k}");
    }
    // The streams must exercise both sides: clean ones and refused ones.
    let clean = stats.get("None").copied().unwrap_or(0);
    assert!(clean > 100 && clean < 2900, "{stats:?}");
}

const KEY: Option<[u8; 4]> = Some([0x11, 0x22, 0x33, 0x44]);

fn plain() -> Setup {
    Setup {
        client: false,
        deflate: false,
        urgent: None,
        max_frame: u64::MAX,
        max_message: u64::MAX,
        stream_above: u64::MAX,
        pings: true,
        max_buffered: 8 << 20,
        copy_up_to: 0,
        drain: false,
    }
}

/// The states where the fast path must give way, each fed whole and byte
/// by byte: the same events, the same error at the same offset, and the
/// bytes left exactly as they came from that offset on.
#[test]
fn the_fast_path_gives_way_where_it_must() {
    use ws::frame;
    let text126 = |fin, op, p: &[u8], m| frame_coded(fin, 0, op, p, m, 126);
    let cases: Vec<(&str, Setup, Vec<u8>, Option<u64>)> = vec![
        // A whole text frame while a message is in progress.
        (
            "text inside a message",
            plain(),
            [
                frame(false, 1, b"ab", KEY),
                text126(true, 1, &[b'c'; 300], KEY),
            ]
            .concat(),
            Some(8),
        ),
        // max_message counts the message in progress: 100 + 300 > 350.
        (
            "max_message across frames",
            Setup {
                max_message: 350,
                ..plain()
            },
            [
                frame(false, 2, &[1; 100], KEY),
                text126(true, 0, &[2; 300], KEY),
            ]
            .concat(),
            Some(106),
        ),
        // stream_above applies to a 16-bit frame.
        (
            "stream_above",
            Setup {
                stream_above: 200,
                ..plain()
            },
            text126(true, 2, &[3; 300], KEY),
            None,
        ),
        // A 16-bit length below 126 (not minimal): taken as the parser takes it.
        (
            "126 code, 5 bytes",
            plain(),
            text126(true, 1, b"hello", KEY),
            None,
        ),
        // A client takes unmasked, refuses masked.
        (
            "client, masked 16-bit",
            Setup {
                client: true,
                ..plain()
            },
            [
                text126(true, 2, &[4; 200], None),
                text126(true, 2, &[4; 200], KEY),
            ]
            .concat(),
            Some(204),
        ),
        // RSV2 on a 16-bit frame.
        (
            "rsv2",
            plain(),
            frame_coded(true, 2, 2, &[5; 200], KEY, 126),
            Some(0),
        ),
        // A close inside a fragmented message, its code not sendable.
        (
            "bad close between fragments",
            plain(),
            [
                frame(false, 1, b"ab", KEY),
                frame(true, 8, b"\x03\xed", KEY),
                frame(true, 0, b"c", KEY),
            ]
            .concat(),
            Some(8),
        ),
        // Text ending inside a code point, 16-bit length.
        (
            "16-bit text ends in a code point",
            plain(),
            text126(true, 1, &[&[b'a'; 200][..], b"\xe2\x82"].concat(), KEY),
            Some(0),
        ),
        // Nothing read after the peer's close.
        (
            "after close",
            plain(),
            [
                frame(true, 8, b"\x03\xe8", KEY),
                text126(true, 2, &[6; 200], KEY),
            ]
            .concat(),
            None,
        ),
    ];
    for (name, s, bytes, offset) in cases {
        let whole = drive(s, &bytes, &[]);
        let trickled = drive(s, &bytes, &(0..bytes.len()).collect::<Vec<_>>());
        for (how, out) in [("whole", &whole), ("trickled", &trickled)] {
            check(s, &bytes, out, &format!("{name} {how}"));
            assert_eq!(
                out.error.as_ref().and_then(offset_of),
                offset,
                "{name} {how}: {:?}",
                out.error
            );
        }
        assert_eq!(whole.messages, trickled.messages, "{name}");
        if s.stream_above == u64::MAX {
            assert_eq!(whole.events, trickled.events, "{name}");
        }
    }
}

/// A pong that waits for room holds back the small message after it
/// until it is written, then the message comes.
#[test]
fn an_owed_pong_holds_back_the_fast_path() {
    use ws::frame;
    let s = Setup {
        urgent: Some(1),
        pings: false,
        ..plain()
    };
    let mut c = conn(s);
    let bytes = [
        frame(true, 9, b"1", KEY),
        frame(true, 9, b"2", KEY),
        frame(true, 2, b"m", KEY),
    ]
    .concat();
    c.feed(&bytes, NOW).unwrap();
    assert_eq!(c.poll_event(), Ok(None), "the second pong is owed");
    assert!(!ws::drain(&mut c).is_empty());
    assert_eq!(
        c.poll_event(),
        Ok(Some(WsEvent::Binary(cleave_proto::Bytes::from_static(
            b"m"
        ))))
    );
    assert_eq!(ws::drain(&mut c), frame(true, 10, b"2", None));
}
