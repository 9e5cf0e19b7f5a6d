//! cleave's WebSocket encoders read back by its decoder: the fuzzer picks
//! messages (text made UTF-8 with `String::from_utf8_lossy`, binary; small
//! ones from the input, large ones up to 72 KiB, 160 KiB in all, that take
//! the 16- and 64-bit lengths), each sent whole (`message`, or
//! `message_slice` from a borrowed payload) or in
//! fragments (`part`, empty ones too, text cut inside code points) with
//! pings between them if asked, pings of 0 to 125 bytes, and a close at
//! the end if asked. One role encodes them (a client masks with the keys its entropy gives),
//! the queue is drained in partial writes, and the other role decodes the
//! bytes whole and cut where the fuzzer says (pieces and writes longer in
//! proportion for a long stream), streaming large frames if asked:
//!
//! - the same messages (parts assembled), pings and close come back, in
//!   the order sent, and no error, in every cut;
//! - a server's message frame carries the payload itself, not a copy;
//! - the reader queues the same bytes whatever the cuts: pongs for every
//!   ping, in order, then the echo of the close; fed back to the sender
//!   they come out as its pongs and the end of its close handshake, with
//!   nothing after.
//!
//! The first 6 bytes choose the setup: flags (the sender's role, a
//! streaming reader, a close at the end and its reason, pings between
//! fragments), `stream_above` and the close code, two piece sizes, the
//! write size, the masks' seed. Then items, each an opcode byte and its
//! arguments, until the input ends.

#![no_main]

use cleave_proto::conn::{Conn, ConnConfig};
use cleave_proto::websocket::{Assembler, Kind, Role, WebSocket, WsConfig, WsEvent};
use cleave_proto::write::Push;
use cleave_proto::{Bytes, WriteQueueConfig};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;
#[path = "support/websocket.rs"]
mod support;
use support::{conn, drain, other, pieces, Seen, CODES, NOW};

const REASONS: [&str; 4] = [
    "",
    "bye",
    "κόσμε \u{1F600}",
    "a reason of some length, well past the sixteen bytes",
];

/// What the fuzzer chose besides the items.
struct Setup {
    sender: Role,
    /// The reader's `stream_above`.
    stream_above: Option<u64>,
    close: Option<(u16, &'static str)>,
    pings_between: bool,
    sizes: [usize; 2],
    write: usize,
    seed: u8,
}

fn setup([flags, stream, a, b, write, seed]: [u8; 6]) -> Setup {
    Setup {
        sender: if flags & 1 != 0 {
            Role::Client
        } else {
            Role::Server
        },
        stream_above: (flags & 2 != 0).then_some(u64::from(stream % 64)),
        close: (flags & 4 != 0).then(|| {
            let code = CODES[usize::from(stream >> 6) * 2 + usize::from(flags >> 7)];
            (code, REASONS[usize::from(flags >> 4) & 3])
        }),
        pings_between: flags & 8 != 0,
        sizes: [usize::from(a % 128) + 1, usize::from(b) * 16 + 1],
        write: usize::from(write) * 8 + 1,
        seed,
    }
}

/// Takes the next byte of the items, 0 once they ran out.
fn byte(items: &mut &[u8]) -> u8 {
    match items.split_first() {
        Some((&b, rest)) => {
            *items = rest;
            b
        }
        None => 0,
    }
}

/// Takes up to `n` bytes of the items.
fn take<'a>(items: &mut &'a [u8], n: usize) -> &'a [u8] {
    let (head, rest) = items.split_at(n.min(items.len()));
    *items = rest;
    head
}

/// The sender: pushes frames, draining the queue in partial writes when
/// it is full; records the bytes written.
struct Sender {
    conn: Conn<WebSocket>,
    wire: Vec<u8>,
    write: usize,
}

impl Sender {
    fn push<F: Push>(&mut self, frame: F) {
        if let Err(refused) = self.conn.push(frame) {
            self.drain();
            let frame = refused.into_parts().1;
            self.conn.push(frame).expect("an empty queue takes a frame");
        }
    }

    /// Writes what is queued in partial writes (longer ones for a long
    /// queue: the cost stays near the bytes').
    fn drain(&mut self) {
        let step = self.write * (1 + self.conn.queue().len() / 4096);
        drain(&mut self.conn, step, &mut self.wire);
    }

    /// A message from a borrowed payload (`message_slice`): the same
    /// bytes as `message` makes, copied into the queue as it is pushed.
    fn message_slice(&mut self, kind: Kind, payload: &[u8]) {
        let frame = self
            .conn
            .protocol_mut()
            .message_slice(kind, payload)
            .unwrap();
        self.push(frame);
    }

    fn message(&mut self, kind: Kind, payload: &[u8]) {
        let payload = Bytes::copy_from_slice(payload);
        let frame = self
            .conn
            .protocol_mut()
            .message(kind, payload.clone())
            .unwrap();
        if self.conn.protocol().role() == Role::Server {
            assert_eq!(
                frame.body().as_ptr(),
                payload.as_ptr(),
                "a server's payload copied"
            );
        }
        self.push(frame);
    }

    fn ping(&mut self, payload: &[u8]) {
        let frame = self
            .conn
            .protocol_mut()
            .ping(Bytes::copy_from_slice(payload));
        self.push(frame.expect("a ping of at most 125 bytes"));
    }
}

/// The items encoded; returns what must come back.
fn encode(sender: &mut Sender, setup: &Setup, mut items: &[u8]) -> Vec<Seen> {
    let mut want = Vec::new();
    // The bytes of large messages left to make.
    let mut budget: usize = 160 << 10;
    while !items.is_empty() {
        let op = byte(&mut items);
        match op % 4 {
            0 | 1 => {
                let kind = if op & 4 != 0 {
                    Kind::Text
                } else {
                    Kind::Binary
                };
                let n = usize::from(byte(&mut items));
                let (raw, unit) = if op & 8 != 0 {
                    // Large: 16- and 64-bit lengths, generated.
                    let len = (n * 288 + usize::from(byte(&mut items))).min(budget);
                    budget -= len;
                    let raw: Vec<u8> = (0..len).map(|i| (i * 31) as u8 ^ op).collect();
                    (raw, 4096)
                } else {
                    (take(&mut items, n).to_vec(), 1)
                };
                let payload = match kind {
                    Kind::Text => String::from_utf8_lossy(&raw).into_owned().into_bytes(),
                    Kind::Binary => raw,
                };
                if op % 4 == 0 && op & 16 != 0 {
                    sender.message_slice(kind, &payload);
                } else if op % 4 == 0 {
                    sender.message(kind, &payload);
                } else {
                    let f = byte(&mut items);
                    let mut sizes = [usize::from(f & 15) * unit, usize::from(f >> 4) * unit];
                    if sizes == [0, 0] {
                        sizes[1] = payload.len().max(1);
                    }
                    let mut rest = &payload[..];
                    let mut i = 0;
                    loop {
                        let (piece, tail) = rest.split_at(sizes[i % 2].min(rest.len()));
                        rest = tail;
                        let last = rest.is_empty();
                        let first = i == 0;
                        let frame = sender
                            .conn
                            .protocol_mut()
                            .part(kind, Bytes::copy_from_slice(piece), first, last)
                            .unwrap();
                        sender.push(frame);
                        if last {
                            break;
                        }
                        if setup.pings_between {
                            let ping = [i as u8];
                            sender.ping(&ping);
                            want.push(Seen::Ping(ping.to_vec()));
                        }
                        i += 1;
                    }
                }
                want.push(Seen::Message(kind, payload));
            }
            2 => {
                let n = usize::from(byte(&mut items) % 126);
                let payload = take(&mut items, n);
                sender.ping(payload);
                want.push(Seen::Ping(payload.to_vec()));
            }
            _ => {
                let payload = if op & 4 != 0 {
                    vec![op; 125]
                } else {
                    Vec::new()
                };
                sender.ping(&payload);
                want.push(Seen::Ping(payload));
            }
        }
    }
    if let Some((code, reason)) = setup.close {
        let frame = sender.conn.protocol_mut().close(code, reason);
        sender.push(frame.expect("a sendable code and a short reason"));
        assert!(sender.conn.protocol().is_closing());
        want.push(Seen::Close(Some(code), reason.as_bytes().to_vec()));
    }
    sender.drain();
    want
}

/// A connection's events until it needs more, messages assembled.
fn events(conn: &mut Conn<WebSocket>, assembler: &mut Assembler, seen: &mut Vec<Seen>) {
    loop {
        let event = match conn.poll_event() {
            Ok(Some(event)) => event,
            Ok(None) => return,
            Err(e) => panic!("the encoders' bytes refused: {e:?}"),
        };
        assert!(
            !matches!(seen.last(), Some(Seen::Close(..))),
            "after the close: {event:?}"
        );
        let next = match event {
            WsEvent::Text(t) => Some(Seen::Message(Kind::Text, t.to_vec())),
            WsEvent::Binary(b) => Some(Seen::Message(Kind::Binary, b.to_vec())),
            WsEvent::Part(part) => assembler
                .push(part)
                .map(|(k, b)| Seen::Message(k, b.to_vec())),
            WsEvent::Ping(p) => Some(Seen::Ping(p.to_vec())),
            WsEvent::Pong(p) => Some(Seen::Pong(p.to_vec())),
            WsEvent::Close(c) => Some(Seen::Close(c.code, c.reason.to_vec())),
        };
        seen.extend(next);
    }
}

/// The other role reads `wire` in `pieces`; returns what it saw and
/// what it queued.
fn decode(setup: &Setup, pieces: &[&[u8]]) -> (Vec<Seen>, Vec<u8>) {
    let mut ws = WsConfig::default().pings(true);
    if let Some(above) = setup.stream_above {
        ws = ws.stream_above(above);
    }
    let lane = WriteQueueConfig::default()
        .urgent_max_items(1 << 16)
        .and_then(|c| c.urgent_max_bytes(1 << 24))
        .expect("valid limits");
    let config = ConnConfig::default().write_queue(lane);
    let mut reader = conn(other(setup.sender), ws, config, setup.seed.wrapping_add(1));
    let mut assembler = Assembler::new();
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for piece in pieces {
        reader.feed(piece, NOW).expect("the buffer takes the piece");
        events(&mut reader, &mut assembler, &mut seen);
        drain(&mut reader, usize::MAX, &mut out);
    }
    reader.handle_eof(NOW);
    events(&mut reader, &mut assembler, &mut seen);
    drain(&mut reader, usize::MAX, &mut out);
    assert!(reader.recv_buf().is_empty(), "bytes left after the close");
    (seen, out)
}

fuzz_target!(|data: &[u8]| {
    let Some((knobs, items)) = data.split_first_chunk::<6>() else {
        return;
    };
    let setup = setup(*knobs);
    let ws = WsConfig::default().pings(true);
    let mut sender = Sender {
        conn: conn(setup.sender, ws, ConnConfig::default(), setup.seed),
        wire: Vec::new(),
        write: setup.write,
    };
    let want = encode(&mut sender, &setup, items);
    let wire = std::mem::take(&mut sender.wire);
    let (seen, answers) = decode(&setup, &[&wire]);
    assert_eq!(seen, want, "read back whole");
    // Pieces longer for a long stream: the cost stays near the bytes'.
    let scale = 1 + wire.len() / 4096;
    let sizes = setup.sizes.map(|size| size * scale);
    let (cut, cut_answers) = decode(&setup, &pieces(&wire, &sizes));
    assert_eq!(cut, want, "read back in pieces {sizes:?}");
    assert_eq!(cut_answers, answers, "other answers in pieces");
    // The answers, back to the sender: its pongs, then its close's echo.
    let mut back = Vec::new();
    sender
        .conn
        .feed(&answers, NOW)
        .expect("the buffer takes the answers");
    sender.conn.handle_eof(NOW);
    events(&mut sender.conn, &mut Assembler::new(), &mut back);
    let mut expected: Vec<Seen> = want
        .iter()
        .filter_map(|s| match s {
            Seen::Ping(p) => Some(Seen::Pong(p.clone())),
            _ => None,
        })
        .collect();
    if let Some((code, _)) = setup.close {
        expected.push(Seen::Close(Some(code), Vec::new()));
    }
    assert_eq!(back, expected, "the answers read back by the sender");
    assert!(sender.conn.recv_buf().is_empty(), "bytes after the echo");
});
