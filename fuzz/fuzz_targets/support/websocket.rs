//! What the WebSocket fuzz targets share: the setup the first bytes choose,
//! a run over the input in pieces that checks each run's own contracts,
//! the comparison of runs cut differently, the read-back of what a
//! connection queued, and a header reader of this file's own.

#![allow(dead_code)] // each target uses its part

use std::time::Duration;

use cleave_proto::conn::{Conn, ConnConfig, Shutdown};
use cleave_proto::websocket::{
    close_code_for, is_sendable, Assembler, Kind, Role, WebSocket, WsConfig, WsEvent,
};
use cleave_proto::{Error, InvalidInput, Limit, RecvBufConfig, WriteQueueConfig, WsField};

pub(crate) const NOW: Duration = Duration::ZERO;

/// Sendable close codes the fuzzer picks from.
pub(crate) const CODES: [u16; 8] = [1000, 1001, 1002, 1003, 1008, 1011, 3000, 4999];

/// A masking-key source that is the same on every run from `seed`.
pub(crate) fn entropy(seed: u8) -> impl FnMut(&mut [u8]) + Send + 'static {
    let mut state = u32::from(seed).wrapping_mul(0x9E37_79B9) | 1;
    move |buf: &mut [u8]| {
        for b in buf {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            *b = state.to_le_bytes()[0];
        }
    }
}

/// A connection in `role`.
pub(crate) fn conn(role: Role, ws: WsConfig, config: ConnConfig, seed: u8) -> Conn<WebSocket> {
    let protocol = match role {
        Role::Server => WebSocket::server(ws),
        Role::Client => WebSocket::client(ws, entropy(seed)),
    };
    Conn::with_config(protocol, config, NOW)
}

pub(crate) fn other(role: Role) -> Role {
    match role {
        Role::Server => Role::Client,
        Role::Client => Role::Server,
    }
}

/// Everything one connection queued, written out, `step` bytes a write
/// at most (partial writes).
pub(crate) fn drain(conn: &mut Conn<WebSocket>, step: usize, out: &mut Vec<u8>) {
    while let Some(chunk) = conn.poll_transmit_chunk() {
        let n = chunk.len().min(step.max(1));
        out.extend_from_slice(&chunk[..n]);
        conn.handle_written(n, NOW)
            .expect("the queue takes what it handed out");
    }
}

/// A frame header read the simple way: (FIN, opcode, mask, payload
/// length, header length), `None` until it is all there.
pub(crate) fn header(buf: &[u8]) -> Option<(bool, u8, Option<[u8; 4]>, u64, usize)> {
    let (&b0, &b1) = (buf.first()?, buf.get(1)?);
    let (len, at) = match b1 & 0x7F {
        126 => (
            u64::from(u16::from_be_bytes(buf.get(2..4)?.try_into().ok()?)),
            4,
        ),
        127 => (u64::from_be_bytes(buf.get(2..10)?.try_into().ok()?), 10),
        n => (u64::from(n), 2),
    };
    let (mask, head_len) = if b1 & 0x80 == 0 {
        (None, at)
    } else {
        (Some(buf.get(at..at + 4)?.try_into().ok()?), at + 4)
    };
    Some((b0 & 0x80 != 0, b0 & 0x0F, mask, len, head_len))
}

/// What the fuzzer chose besides the bytes.
#[derive(Clone, Debug)]
pub(crate) struct Setup {
    pub(crate) role: Role,
    pub(crate) ws: WsConfig,
    pub(crate) config: ConnConfig,
    pub(crate) sizes: [usize; 2],
    /// The stream ends after the input.
    pub(crate) eof: bool,
    /// The urgent lane has room for every reply (else it is small and
    /// only drained between reads, so replies may find it full).
    pub(crate) roomy: bool,
    /// The application starts the close handshake before any byte comes.
    pub(crate) close_first: Option<u16>,
    pub(crate) seed: u8,
}

pub(crate) const SETUP_LEN: usize = 9;

/// The setup from [`SETUP_LEN`] bytes: flags (visible pings, end of
/// stream, a frame limit, a message limit, streaming, a small receive
/// buffer, a small urgent lane, the application closing first), the
/// limits, two piece sizes, the urgent lane's size, more flags (no
/// automatic pong) and the masks' seed.
pub(crate) fn setup(role: Role, knobs: [u8; SETUP_LEN]) -> Option<Setup> {
    let [flags, frame, message, stream, buffer, a, b, lane, more] = knobs;
    let mut ws = WsConfig::default()
        .pings(flags & 1 != 0)
        .auto_pong(more & 1 == 0);
    if flags & 4 != 0 {
        ws = ws.max_frame(u64::from(frame) + 1).ok()?;
    }
    if flags & 8 != 0 {
        ws = ws.max_message(u64::from(message) * 4 + 1).ok()?;
    }
    if flags & 0x10 != 0 {
        ws = ws.stream_above(u64::from(stream % 64));
    }
    let mut recv = RecvBufConfig::default();
    if flags & 0x20 != 0 {
        recv = recv
            .max_buffered(usize::from(buffer) + 1)
            .ok()?
            .read_reserve(16)
            .ok()?;
    }
    let roomy = flags & 0x40 == 0;
    let send = if roomy {
        WriteQueueConfig::default()
            .urgent_max_items(1 << 16)
            .ok()?
            .urgent_max_bytes(1 << 24)
            .ok()?
    } else {
        WriteQueueConfig::default()
            .urgent_max_items(usize::from(lane % 4) + 1)
            .ok()?
            .urgent_max_bytes(usize::from(lane >> 2) * 4 + 1)
            .ok()?
    };
    Some(Setup {
        role,
        ws,
        config: ConnConfig::default().recv_buf(recv).write_queue(send),
        sizes: [usize::from(a % 64) + 1, usize::from(b % 64) + 1],
        eof: flags & 2 != 0,
        roomy,
        close_first: (flags & 0x80 != 0).then(|| CODES[usize::from(more >> 1) % CODES.len()]),
        seed: more >> 4,
    })
}

/// One event as the runs compare it: messages whole (parts assembled).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seen {
    Message(Kind, Vec<u8>),
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close(Option<u16>, Vec<u8>),
}

/// Everything one run saw.
#[derive(Debug, Default)]
pub(crate) struct Run {
    pub(crate) events: Vec<Seen>,
    /// The bytes handed out of a message not finished.
    pub(crate) pending: Vec<u8>,
    pending_kind: Option<Kind>,
    pub(crate) error: Option<Error>,
    pub(crate) closed: bool,
    /// The buffer was full and no event could free it: at this offset.
    pub(crate) stalled: Option<u64>,
    /// Input bytes fed.
    pub(crate) fed: usize,
    /// What the connection queued, written out.
    pub(crate) out: Vec<u8>,
}

impl Run {
    fn over(&self) -> bool {
        self.error.is_some() || self.closed
    }
}

/// One round: polls until the connection needs more, checking each
/// event; drains the queue at the end (and after each event when the lane
/// is roomy).
/// Polls until the connection has nothing more, writing what it queued;
/// polls again while writing made room (an answer waiting for room is
/// queued then, and reading goes on), as the adapters do.
fn poll(conn: &mut Conn<WebSocket>, setup: &Setup, run: &mut Run, assembler: &mut Assembler) {
    loop {
        let written = run.out.len();
        poll_once(conn, setup, run, assembler);
        // After an error nothing polls again; after a close the answer
        // may still wait for room.
        if run.out.len() == written || run.error.is_some() {
            break;
        }
    }
}

fn poll_once(conn: &mut Conn<WebSocket>, setup: &Setup, run: &mut Run, assembler: &mut Assembler) {
    let ws = &setup.ws;
    let max_message = usize::try_from(ws.get_max_message()).unwrap_or(usize::MAX);
    loop {
        let event = match conn.poll_event() {
            Ok(Some(event)) => event,
            Ok(None) => break,
            Err(e) => {
                assert!(!run.over(), "an error after the end: {e:?}");
                assert_eq!(conn.poll_event(), Err(e.clone()), "the error is not final");
                run.error = Some(e);
                break;
            }
        };
        assert!(!run.over(), "an event after the end: {event:?}");
        let seen = match event {
            WsEvent::Text(t) => {
                assert!(run.pending_kind.is_none(), "a message inside a message");
                assert!(std::str::from_utf8(&t).is_ok(), "text not UTF-8");
                assert!(t.len() <= max_message, "a text over max_message");
                Some(Seen::Message(Kind::Text, t.to_vec()))
            }
            WsEvent::Binary(b) => {
                assert!(run.pending_kind.is_none(), "a message inside a message");
                assert!(b.len() <= max_message, "a binary over max_message");
                Some(Seen::Message(Kind::Binary, b.to_vec()))
            }
            WsEvent::Part(part) => {
                let kind = *run.pending_kind.get_or_insert(part.kind);
                assert_eq!(part.kind, kind, "a part of another kind");
                run.pending.extend_from_slice(&part.data);
                assert!(run.pending.len() <= max_message, "parts over max_message");
                if kind == Kind::Text {
                    if let Err(e) = std::str::from_utf8(&run.pending) {
                        assert!(e.error_len().is_none(), "invalid text handed out");
                    }
                }
                let last = part.last;
                let whole = assembler.push(part);
                assert_eq!(whole.is_some(), last, "the assembler and the last part");
                whole.map(|(kind, bytes)| {
                    assert_eq!(&bytes[..], &run.pending[..], "assembled, not as handed out");
                    if kind == Kind::Text {
                        assert!(std::str::from_utf8(&bytes).is_ok(), "text not UTF-8");
                    }
                    run.pending.clear();
                    run.pending_kind = None;
                    Seen::Message(kind, bytes.to_vec())
                })
            }
            WsEvent::Ping(p) => {
                // Shown when asked for, or when the application answers.
                let shown = ws.get_pings() || !ws.get_auto_pong();
                assert!(shown && p.len() <= 125, "ping {p:?}");
                Some(Seen::Ping(p.to_vec()))
            }
            WsEvent::Pong(p) => {
                assert!(ws.get_pings() && p.len() <= 125, "pong {p:?}");
                Some(Seen::Pong(p.to_vec()))
            }
            WsEvent::Close(c) => {
                assert!(c.code.is_none_or(is_sendable), "close code {:?}", c.code);
                assert!(c.code.is_some() || c.reason.is_empty());
                assert!(std::str::from_utf8(&c.reason).is_ok() && c.reason.len() <= 123);
                run.closed = true;
                Some(Seen::Close(c.code, c.reason.to_vec()))
            }
        };
        run.events.extend(seen);
        check_buffer(conn);
        if setup.roomy {
            drain(conn, usize::MAX, &mut run.out);
        }
    }
    check_buffer(conn);
    drain(conn, usize::MAX, &mut run.out);
}

fn check_buffer(conn: &Conn<WebSocket>) {
    let buf = conn.recv_buf();
    assert!(
        buf.len() <= buf.config().get_max_buffered(),
        "over max_buffered"
    );
}

/// Feeds `pieces` of `input` (as much of each as the buffer takes,
/// polling between), then the end of the stream if asked; checks each
/// event and what follows the last.
pub(crate) fn run(setup: &Setup, input: &[u8], pieces: &[&[u8]]) -> Run {
    let mut conn = conn(setup.role, setup.ws.clone(), setup.config, setup.seed);
    let mut run = Run::default();
    let mut assembler = Assembler::new();
    if let Some(code) = setup.close_first {
        let close = conn
            .protocol_mut()
            .close(code, "")
            .expect("a sendable code");
        conn.push(close).expect("an empty queue takes a close");
        assert!(conn.protocol().is_closing());
        // It goes out before any byte comes: the pongs for pings that
        // come after it follow it, however the input is cut.
        drain(&mut conn, usize::MAX, &mut run.out);
    }
    'feed: for piece in pieces {
        let mut piece = *piece;
        while !piece.is_empty() {
            if run.over() {
                break 'feed;
            }
            let n = piece.len().min(conn.recv_buf().remaining());
            if n == 0 {
                run.stalled = Some(conn.recv_buf().offset());
                break 'feed;
            }
            conn.feed(&piece[..n], NOW)
                .expect("the buffer takes what fits");
            run.fed += n;
            piece = &piece[n..];
            poll(&mut conn, setup, &mut run, &mut assembler);
        }
    }
    if let Some(at) = run.stalled {
        check_stall(setup, &conn, at);
    } else if setup.eof && !run.over() {
        conn.handle_eof(NOW);
        poll(&mut conn, setup, &mut run, &mut assembler);
    }
    let (offset, len) = (conn.recv_buf().offset(), conn.recv_buf().len());
    match &run.error {
        Some(Error::Truncated { partial, offset }) => {
            // The bytes as they arrived, masked again where they were.
            assert!(setup.eof && run.fed == input.len());
            let at = usize::try_from(*offset).expect("an offset in memory");
            assert_eq!(&partial[..], &input[at..], "the partial bytes");
        }
        Some(e) => check_place(setup, input, e),
        None => {
            assert_eq!(offset + len as u64, run.fed as u64, "bytes lost");
            if setup.eof && !run.closed && run.stalled.is_none() {
                assert!(
                    len == 0 && run.pending_kind.is_none(),
                    "ended inside a frame"
                );
            }
        }
    }
    // Nothing comes after the end: more bytes, the end of the stream.
    if run.over() {
        let rest = &input[run.fed..];
        let n = rest.len().min(conn.recv_buf().remaining());
        let _ = conn.feed(&rest[..n], NOW);
        conn.handle_eof(NOW);
        for _ in 0..2 {
            match (&run.error, conn.poll_event()) {
                (Some(e), Err(again)) => assert_eq!(&again, e, "the error is not final"),
                (None, Ok(None)) => {}
                (_, got) => panic!("after the end: {got:?}, not {:?}", run.error),
            }
        }
        drain(&mut conn, usize::MAX, &mut run.out);
        assert_eq!(
            conn.poll_shutdown(),
            Some(Shutdown::Write),
            "no FIN after the end"
        );
    } else {
        drain(&mut conn, usize::MAX, &mut run.out);
    }
    check_queued(setup, &run);
    run
}

/// The frames of `input` as a reader walks them, back to back: (start,
/// header length, payload length), the last one possibly cut.
fn frames(input: &[u8]) -> Vec<(usize, usize, u64)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < input.len() {
        let Some((.., len, head_len)) = header(&input[at..]) else {
            out.push((at, 0, 0));
            break;
        };
        out.push((at, head_len, len));
        let end = usize::try_from(len)
            .ok()
            .and_then(|n| (at + head_len).checked_add(n));
        at = end.unwrap_or(usize::MAX);
    }
    out
}

/// An error points at the frame at fault: the header there breaks the
/// rule the error names. Text found invalid in a streamed frame may
/// point inside it or at its end instead: past what was handed out.
fn check_place(setup: &Setup, input: &[u8], error: &Error) {
    let (offset, rule) = match error {
        Error::InvalidInput { kind, offset } => (*offset, Some(*kind)),
        Error::LimitExceeded { offset, .. } => (*offset, None),
        other => panic!("an error a WebSocket does not give: {other:?}"),
    };
    let at = usize::try_from(offset).expect("an offset in memory");
    let frames = frames(input);
    // A frame read whole (any opcode), or a header, that the receive
    // buffer cannot hold is refused at its start.
    if let Error::LimitExceeded {
        limit: Limit::Buffer,
        max,
        ..
    } = error
    {
        let frame = frames.iter().find(|&&(start, ..)| start == at);
        let &(_, head_len, len) = frame.expect("a buffer refusal at a frame's start");
        let whole = (head_len as u64).saturating_add(len);
        assert!(
            head_len == 0 || whole > *max,
            "{error:?}: the frame there ({head_len} + {len} bytes) fits"
        );
        return;
    }
    if rule == Some(InvalidInput::Utf8) {
        let inside = frames.iter().any(|&(start, head_len, len)| {
            let data = head_len > 0 && input[start] & 8 == 0;
            let end = ((start + head_len) as u64).saturating_add(len);
            let streamed = len > setup.ws.get_stream_above();
            data && streamed && start < at && offset <= end
        });
        if inside {
            return;
        }
    }
    // Whether the frame starting at `at` breaks the rule.
    let breaks = |at: usize| {
        let (b0, b1) = (input[at], input.get(at + 1).copied().unwrap_or(0));
        let opcode = b0 & 0x0F;
        match rule {
            Some(InvalidInput::WebSocket(field)) => match field {
                WsField::Reserved => b0 & 0x70 != 0,
                WsField::OpCode => !matches!(opcode, 0 | 1 | 2 | 8 | 9 | 10),
                WsField::Control => opcode & 8 != 0 && (b0 & 0x80 == 0 || b1 & 0x7F > 125),
                WsField::Mask => (b1 & 0x80 != 0) != (setup.role == Role::Server),
                WsField::Length => {
                    b1 & 0x7F == 127 && input.get(at + 2).is_some_and(|b| b & 0x80 != 0)
                }
                WsField::Continuation => matches!(opcode, 0..=2),
                WsField::Close => opcode == 8,
                _ => false,
            },
            Some(InvalidInput::Utf8) => matches!(opcode, 0 | 1 | 8),
            Some(_) => false,
            // A frame or message over its limit.
            None => matches!(opcode, 0..=2),
        }
    };
    let start = frames.iter().any(|&(start, ..)| start == at);
    assert!(start, "{error:?}: not at a frame's start");
    let (b0, b1) = (input[at], input.get(at + 1).copied().unwrap_or(0));
    assert!(
        breaks(at),
        "{error:?}: the frame there ({b0:#04x} {b1:#04x}) does not break that rule"
    );
}

/// A full buffer that no event frees holds a frame larger than it, not
/// one to stream.
fn check_stall(setup: &Setup, conn: &Conn<WebSocket>, at: u64) {
    let buf = conn.recv_buf();
    let max = buf.config().get_max_buffered();
    assert!(buf.is_full() && buf.offset() == at);
    let Some((_, opcode, _, len, head_len)) = header(buf.peek()) else {
        assert!(max < 14, "a full buffer without a whole header");
        return;
    };
    assert!(
        len.saturating_add(head_len as u64) > max as u64,
        "a frame that fits stalled"
    );
    // A frame to stream goes as its bytes come, and one whose header
    // fills the buffer is refused: neither stalls.
    assert!(
        opcode & 8 != 0 || len <= setup.ws.get_stream_above(),
        "a frame to stream stalled"
    );
}

/// The pongs queued after a close (a ping that came after this side's
/// close is still answered, RFC 6455 section 5.5.2), unmasked; every frame
/// there is a pong.
fn pongs_after_close(mut rest: &[u8]) -> Vec<Vec<u8>> {
    let mut pongs = Vec::new();
    while !rest.is_empty() {
        let (fin, opcode, mask, len, head_len) = header(rest).expect("a whole frame queued");
        assert!(
            fin && opcode == 0xA && len <= 125,
            "after the close: opcode {opcode}"
        );
        let end = head_len + usize::try_from(len).expect("a short pong");
        let mut payload = rest[head_len..end].to_vec();
        if let Some(key) = mask {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= key[i % 4];
            }
        }
        pongs.push(payload);
        rest = &rest[end..];
    }
    pongs
}

/// What the connection queued reads back, by the other role, as pongs
/// for the pings seen (in order; some of them when the lane was small),
/// then at most one close: the application's, the one that fits the
/// error, or the echo of the peer's.
fn check_queued(setup: &Setup, run: &Run) {
    let ws = WsConfig::default().pings(true);
    let mut reader = conn(other(setup.role), ws, ConnConfig::default(), 0);
    reader
        .feed(&run.out, NOW)
        .expect("the buffer takes the replies");
    reader.handle_eof(NOW);
    let mut pongs = Vec::new();
    let mut close = None;
    loop {
        match reader.poll_event() {
            Ok(Some(WsEvent::Pong(p))) => {
                assert!(close.is_none(), "a pong after the close");
                pongs.push(p.to_vec());
            }
            Ok(Some(WsEvent::Close(c))) => close = Some(c.code),
            Ok(Some(event)) => panic!("queued: {event:?}"),
            Ok(None) => break,
            Err(e) => panic!("the queued frames do not read back: {e:?}"),
        }
    }
    // Only pongs follow a close, and only this side's own close (the
    // peer's closes the exchange: nothing is answered after it).
    let after = pongs_after_close(reader.recv_buf().peek());
    assert!(
        after.is_empty() || setup.close_first.is_some(),
        "pongs after the close of the peer"
    );
    pongs.extend(after);
    let answered = setup.ws.get_auto_pong();
    if !answered {
        assert!(pongs.is_empty(), "pongs none asked for");
    } else if setup.ws.get_pings() {
        let pings: Vec<&Vec<u8>> = run
            .events
            .iter()
            .filter_map(|s| match s {
                Seen::Ping(p) => Some(p),
                _ => None,
            })
            .collect();
        if setup.roomy {
            assert!(
                pongs.iter().eq(pings.iter().copied()),
                "pongs {pongs:?} for pings {pings:?}"
            );
        } else {
            let mut rest = pings.iter();
            for pong in &pongs {
                assert!(rest.any(|p| *p == pong), "a pong for no ping: {pong:?}");
            }
        }
    }
    let want = match (&setup.close_first, &run.error, run.events.last()) {
        (Some(code), ..) => Some(Some(*code)),
        (None, Some(Error::Truncated { .. }), _) => None,
        (None, Some(e), _) => Some(Some(close_code_for(e))),
        (None, None, Some(Seen::Close(code, _))) if run.closed => Some(*code),
        _ => None,
    };
    if setup.roomy || want.is_none() || close.is_some() {
        assert_eq!(close, want, "the close queued, for {:?}", run.error);
    }
}

/// `input` in pieces whose sizes cycle through `sizes`: the cutting every
/// harness shares (`core/tests/support/harness.rs`).
pub(crate) use crate::harness::pieces;

/// Checks a run cut differently against the whole input's: the same
/// events, the same error, the same stall, the same bytes queued (when
/// nothing was dropped). The one difference allowed: text found invalid
/// in a streamed frame, of which one run handed out more first (its error
/// then points past what it handed out, when inside the frame).
pub(crate) fn compare(setup: &Setup, whole: &Run, cut: &Run, how: &str) {
    assert_eq!(cut.events, whole.events, "{how}: other events");
    assert_eq!(cut.stalled, whole.stalled, "{how}: another stall");
    assert_eq!(cut.closed, whole.closed, "{how}: closed or not");
    match (&whole.error, &cut.error) {
        (
            Some(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                offset: a,
            }),
            Some(Error::InvalidInput {
                kind: InvalidInput::Utf8,
                offset: b,
            }),
        ) => {
            // The run that handed out more of the message first.
            let (lo, hi) = if whole.pending.len() <= cut.pending.len() {
                (whole, cut)
            } else {
                (cut, whole)
            };
            let more = hi
                .pending
                .strip_prefix(&lo.pending[..])
                .unwrap_or_else(|| panic!("{how}: other bytes handed out"));
            let (lo_at, hi_at) = if lo.pending.len() == whole.pending.len() {
                (*a, *b)
            } else {
                (*b, *a)
            };
            // At the end of a streamed frame the error lies past it in
            // every run; inside one, past what each run handed out: those
            // bytes, and the frame's header if the other run had handed
            // out none of it.
            let head = hi_at
                .checked_sub(lo_at)
                .and_then(|d| d.checked_sub(more.len() as u64));
            assert!(
                a == b || !more.is_empty() && matches!(head, Some(0 | 2 | 4 | 6 | 8 | 10 | 14)),
                "{how}: invalid text at {b}, not {a}, after {} more bytes",
                more.len()
            );
        }
        (a, b) => {
            assert_eq!(b, a, "{how}: another error");
            assert_eq!(cut.pending, whole.pending, "{how}: other bytes handed out");
        }
    }
    if setup.roomy {
        assert_eq!(cut.out, whole.out, "{how}: other bytes queued");
    }
}

/// The whole input, one byte at a time and in the fuzzer's pieces.
pub(crate) fn check(setup: &Setup, input: &[u8]) {
    let whole = run(setup, input, &[input]);
    for sizes in [&[1][..], &setup.sizes[..]] {
        let cut = run(setup, input, &pieces(input, sizes));
        compare(setup, &whole, &cut, &format!("pieces {sizes:?}"));
    }
}
