//! `Conn`: one connection in both directions, driven by a scripted socket
//! (random reads, partial writes, pushes, EOFs, errors, resets, closes and
//! the clock, interleaved) over `Framed<Lines>`, `Framed<LengthPrefixed>`
//! and `Session`, checked against a model of its lifecycle
//! (`support/conn_model.rs`); the timeouts one by one; a protocol that
//! answers on the urgent lane while the application writes frames; and
//! the switch from one protocol to another.

#[path = "support/conn_model.rs"]
mod conn_model;

#[path = "support/fixtures.rs"]
mod fixtures;

#[path = "support/session_model.rs"]
mod session_model;

use core::time::Duration;

use cleave_proto::conn::{Conn, ConnConfig, Framed, Phase, Protocol, Raw, Shutdown, Wire};
use cleave_proto::route::{Match, Reason, Router};
#[cfg(feature = "std")]
use cleave_proto::ConnError;
use cleave_proto::{
    Bytes, Error, Event, Frame, LengthConfig, LengthPrefixed, Lines, LinesConfig, NoFrames,
    NoSwitch, ProxyMode, RecvBufConfig, Refusal, Session, SessionConfig, Timeout, Timeouts,
    WriteQueueConfig,
};
use conn_model::{run, whole, Account, Step};
use fixtures::fixture;
use proptest::prelude::*;
use session_model::rules;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// ----- the scripted socket -----

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (1usize..48, any::<u8>()).prop_map(|(len, via)| Step::Read { len, via }),
        6 => (any::<u8>(), 1usize..6, any::<u8>())
            .prop_map(|(share, room, via)| Step::Write { share, room, via }),
        4 => (0usize..200, any::<bool>()).prop_map(|(len, frame)| Step::Push { len, frame }),
        4 => (0u64..150).prop_map(|ms| Step::Tick { ms }),
        2 => Just(Step::Shutdown),
        1 => any::<bool>().prop_map(Step::Pause),
        1 => prop_oneof![
            any::<u8>().prop_map(|via| Step::Eof { via }),
            any::<u8>().prop_map(|via| Step::ReadError { via }),
            any::<u8>().prop_map(|via| Step::WriteError { via }),
            Just(Step::Close),
            Just(Step::Reset),
            Just(Step::ShutdownFails),
        ],
    ]
}

/// Steps that leave the events alone: reads, writes, pushes, the
/// application's close, pauses, shutdowns, failed ones too (no clock, no
/// end, no error).
fn quiet_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        10 => (1usize..48, any::<u8>()).prop_map(|(len, via)| Step::Read { len, via }),
        5 => (any::<u8>(), 1usize..6, any::<u8>())
            .prop_map(|(share, room, via)| Step::Write { share, room, via }),
        3 => (0usize..200, any::<bool>()).prop_map(|(len, frame)| Step::Push { len, frame }),
        1 => Just(Step::Shutdown),
        1 => Just(Step::ShutdownFails),
        1 => Just(Step::Close),
        1 => any::<bool>().prop_map(Step::Pause),
    ]
}

fn timeout() -> impl Strategy<Value = Option<Duration>> {
    prop_oneof![Just(None), (1u64..500).prop_map(|n| Some(ms(n)))]
}

fn timeouts() -> impl Strategy<Value = Timeouts> {
    (timeout(), timeout(), timeout(), timeout()).prop_map(|(idle, opening, frame, tunnel)| {
        Timeouts::NONE
            .idle(idle)
            .opening(opening)
            .frame(frame)
            .tunnel_idle(tunnel)
    })
}

/// Small reads, sometimes a small buffer (a frame that does not fit is a
/// final error), a small queue (pushes are refused as full), and the given
/// timeouts.
fn config(timeouts: impl Strategy<Value = Timeouts>) -> impl Strategy<Value = ConnConfig> {
    (
        1usize..64,
        prop_oneof![3 => Just(None), 1 => (16usize..256).prop_map(Some)],
        1usize..6,
        16usize..400,
        timeouts,
    )
        .prop_map(|(reserve, max, items, bytes, timeouts)| {
            let mut recv = RecvBufConfig::default().read_reserve(reserve).unwrap();
            if let Some(max) = max {
                recv = recv.max_buffered(max).unwrap();
            }
            let send = WriteQueueConfig::default()
                .max_items(items)
                .unwrap()
                .max_bytes(bytes)
                .unwrap();
            ConnConfig::default()
                .recv_buf(recv)
                .write_queue(send)
                .timeouts(timeouts)
        })
}

/// Lines that keep their `\r` (so each frame's framing is its `\n`), with a
/// length limit some inputs go past.
fn lines() -> Framed<Lines> {
    let config = LinesConfig::default().strip_cr(false).max_length(64);
    Framed::new(Lines::with_config(config))
}

fn lines_input() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec("[a-z \r]{0,20}|[x]{60,70}", 0..8),
        "[a-z]{0,10}",
    )
        .prop_map(|(lines, tail)| {
            let mut input: Vec<u8> = lines
                .iter()
                .flat_map(|l| format!("{l}\n").into_bytes())
                .collect();
            input.extend_from_slice(tail.as_bytes());
            input
        })
}

/// Length-prefixed frames with a 128-byte limit some headers go past.
fn length_prefixed() -> Framed<LengthPrefixed> {
    let config = LengthConfig::default().max_frame_length(128);
    Framed::new(LengthPrefixed::with_config(config).unwrap())
}

fn length_input() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(
            prop_oneof![
                10 => prop::collection::vec(any::<u8>(), 0..40),
                1 => (129u32..1000).prop_map(|n| n.to_be_bytes().to_vec()),
            ],
            0..6,
        ),
        0usize..4,
    )
        .prop_map(|(frames, cut)| {
            let mut input = Vec::new();
            for frame in frames {
                if frame.len() == 4 && u32::from_be_bytes(frame[..].try_into().unwrap()) > 128 {
                    input.extend_from_slice(&frame); // a header over the limit
                    continue;
                }
                input.extend_from_slice(&(frame.len() as u32).to_be_bytes());
                input.extend_from_slice(&frame);
            }
            input.truncate(input.len().saturating_sub(cut));
            input
        })
}

fn is_tunnel(line: &Bytes) -> bool {
    &line[..] == b"TUNNEL"
}

type TunnelSession = Session<&'static str, NoFrames, NoSwitch<Bytes>>;
type LineSession = Session<&'static str, Lines, NoSwitch<Bytes>>;

fn sessions(proxy: ProxyMode) -> (TunnelSession, LineSession) {
    let config = SessionConfig::default().proxy(proxy);
    let lines = Lines::with_config(LinesConfig::default().strip_cr(false));
    (
        Session::tunnel(rules(), config),
        Session::framed(rules(), lines, is_tunnel as NoSwitch<Bytes>, config),
    )
}

/// A PROXY header (or none), lines, a marker and raw bytes, or any bytes.
fn session_input() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        4 => (
            prop::sample::select(vec!["", "proxy_v1_tcp4.bin", "proxy_v2_tlvs.bin", "tls_curl.bin"]),
            prop::collection::vec("[a-z ]{0,12}", 0..5),
            prop::collection::vec(any::<u8>(), 0..40),
            any::<bool>(),
        )
            .prop_map(|(first, lines, raw, cut)| {
                let mut input = match first {
                    "" => Vec::new(),
                    name if name.starts_with("proxy") => {
                        let data = fixture(name);
                        let payload = b"hello after proxy header\n".len();
                        data[..data.len() - payload].to_vec()
                    }
                    name => fixture(name),
                };
                for line in &lines {
                    input.extend_from_slice(format!("LINE {line}\n").as_bytes());
                }
                input.extend_from_slice(b"TUNNEL\n");
                input.extend_from_slice(&raw);
                if cut {
                    input.truncate(input.len() / 2);
                }
                input
            }),
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

fn proxy_mode() -> impl Strategy<Value = ProxyMode> {
    prop::sample::select(vec![
        ProxyMode::Off,
        ProxyMode::Optional,
        ProxyMode::Required,
    ])
}

/// The scripted run and the whole-input run agree on the events and the
/// error.
fn assert_chunking_invariant<P: Account>(
    make: impl Fn() -> P,
    config: ConnConfig,
    input: &[u8],
    steps: &[Step],
) where
    P::Event: PartialEq + core::fmt::Debug,
{
    let (events, error) = whole(make(), config, input);
    let outcome = run(make(), config, Duration::ZERO, input, steps);
    if error.is_none() {
        assert_eq!(outcome.fed, input.len(), "a quiet run reads everything");
    }
    assert_eq!(outcome.events, events, "the reads changed the events");
    assert_eq!(outcome.error, error, "the reads changed the error");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Lines under any interleaving of reads, writes, pushes, the clock,
    /// the end, errors, closes and resets: the model holds at every step.
    #[test]
    fn lines_keep_the_lifecycle(
        input in lines_input(),
        config in config(timeouts()),
        start in 0u64..1000,
        steps in prop::collection::vec(step(), 0..60),
    ) {
        run(lines(), config, ms(start), &input, &steps);
    }

    #[test]
    fn length_prefixed_frames_keep_the_lifecycle(
        input in length_input(),
        config in config(timeouts()),
        steps in prop::collection::vec(step(), 0..60),
    ) {
        run(length_prefixed(), config, Duration::ZERO, &input, &steps);
    }

    #[test]
    fn sessions_keep_the_lifecycle(
        input in session_input(),
        proxy in proxy_mode(),
        config in config(timeouts()),
        steps in prop::collection::vec(step(), 0..60),
    ) {
        let (tunnel, framed) = sessions(proxy);
        run(tunnel, config, Duration::ZERO, &input, &steps);
        run(framed, config, Duration::ZERO, &input, &steps);
    }

    /// Long silences: every timer runs out somewhere.
    #[test]
    fn slow_peers_meet_the_timeouts(
        input in session_input(),
        config in config(timeouts()),
        steps in prop::collection::vec(
            prop_oneof![
                3 => step(),
                1 => (100u64..3000).prop_map(|ms| Step::Tick { ms }),
            ],
            0..40,
        ),
    ) {
        let (tunnel, framed) = sessions(ProxyMode::Optional);
        run(tunnel, config, Duration::ZERO, &input, &steps);
        run(framed, config, Duration::ZERO, &input, &steps);
        run(lines(), config, Duration::ZERO, &input, &steps);
    }

    /// The events through a `Conn` do not depend on the reads (nor on the
    /// writes and pushes between them).
    #[test]
    fn events_do_not_depend_on_the_reads(
        lines_in in lines_input(),
        length_in in length_input(),
        session_in in session_input(),
        proxy in proxy_mode(),
        config in config(Just(Timeouts::NONE)),
        steps in prop::collection::vec(quiet_step(), 0..50),
    ) {
        assert_chunking_invariant(lines, config, &lines_in, &steps);
        assert_chunking_invariant(length_prefixed, config, &length_in, &steps);
        assert_chunking_invariant(|| sessions(proxy).0, config, &session_in, &steps);
        assert_chunking_invariant(|| sessions(proxy).1, config, &session_in, &steps);
    }
}

// ----- what an adapter does -----

/// What an adapter does: reads each piece through the buffer's spare room,
/// polls until nothing comes, then the end of the stream.
fn drive<P: Protocol>(
    conn: &mut Conn<P>,
    input: &[u8],
    cuts: &[usize],
) -> (Vec<P::Event>, Option<Error>) {
    let mut events = Vec::new();
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(input.len());
    let poll = |conn: &mut Conn<P>, events: &mut Vec<P::Event>| loop {
        match conn.poll_event() {
            Ok(Some(event)) => events.push(event),
            Ok(None) => return None,
            Err(e) => return Some(e),
        }
    };
    for end in bounds {
        while at < end {
            let spare = match conn.spare_mut() {
                Ok(spare) => spare,
                Err(e) => return (events, Some(e)),
            };
            let n = spare.len().min(end - at);
            spare[..n].copy_from_slice(&input[at..at + n]);
            conn.handle_read(n, Duration::ZERO).unwrap();
            at += n;
            if let Some(e) = poll(conn, &mut events) {
                return (events, Some(e));
            }
        }
    }
    conn.handle_eof(Duration::ZERO);
    let error = poll(conn, &mut events);
    assert!(conn.is_read_done(), "the end of the stream was handled");
    (events, error)
}

proptest! {
    #[test]
    fn framed_gives_the_decoders_frames_whatever_the_pieces(
        lines in prop::collection::vec("[a-z ]{0,40}", 0..30),
        tail in "[a-z]{0,10}",
        cuts in prop::collection::vec(any::<usize>(), 0..12),
    ) {
        let mut input: Vec<u8> = lines.iter().flat_map(|l| format!("{l}\n").into_bytes()).collect();
        input.extend_from_slice(tail.as_bytes());
        let config = ConnConfig::default().recv_buf(RecvBufConfig::default().read_reserve(16).unwrap());
        let mut conn = Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO);
        let (events, error) = drive(&mut conn, &input, &cuts);
        let got: Vec<String> = events.iter().map(|b| String::from_utf8(b.to_vec()).unwrap()).collect();
        prop_assert_eq!(got, lines);
        match error {
            None => prop_assert!(tail.is_empty()),
            Some(Error::Truncated { partial, .. }) => prop_assert_eq!(&partial[..], tail.as_bytes()),
            Some(other) => prop_assert!(false, "{other:?}"),
        }
        prop_assert!(conn.is_finished());
    }
}

#[test]
fn a_bad_frame_is_a_final_error_and_the_bytes_stay() {
    let mut conn = Conn::new(Framed::new(LengthPrefixed::new()), Duration::ZERO);
    conn.feed(&[0, 0, 0, 2, b'h', b'i'], Duration::ZERO)
        .unwrap();
    assert_eq!(conn.poll_event().unwrap().unwrap(), "hi");
    // Over the 8 MiB default frame limit.
    conn.feed(&[0xff, 0xff, 0xff, 0xff, 1], Duration::ZERO)
        .unwrap();
    assert!(!conn.is_read_done());
    let first = conn.poll_event().unwrap_err();
    assert!(matches!(first, Error::LimitExceeded { .. }), "{first:?}");
    // Done: nothing more needs reading, and the error comes back.
    assert!(conn.is_read_done() && !conn.wants_read());
    assert_eq!(conn.error(), Some(&first));
    assert_eq!(conn.poll_event().unwrap_err(), first);
    assert_eq!(conn.recv_buf().len(), 5, "nothing consumed");
    let (_, mut buf, _) = conn.into_parts();
    assert_eq!(&buf.take_tail()[..], &[0xff, 0xff, 0xff, 0xff, 1]);
}

#[test]
fn a_session_is_driven_the_same_way() {
    let router = Router::new("other").rule(Match::Prefix("HELLO ".into()), "lines");
    let session = Session::framed(
        router,
        Lines::new(),
        |line: &Bytes| &line[..] == b"TUNNEL",
        SessionConfig::default(),
    );
    let mut conn = Conn::new(session, Duration::ZERO);
    let input = b"HELLO there\nTUNNEL\nraw bytes";
    let (events, error) = drive(&mut conn, input, &[3, 9, 15]);
    assert!(error.is_none());
    assert!(matches!(&events[0], Event::Routed(d) if d.target == "lines"));
    assert_eq!(events[1], Event::Frame("HELLO there".into()));
    assert_eq!(events[2], Event::Frame("TUNNEL".into()));
    let tunnel: Vec<u8> = events[3..]
        .iter()
        .flat_map(|e| match e {
            Event::Tunnel(bytes) => bytes.to_vec(),
            Event::Closed(rest) => rest.to_vec(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(tunnel, b"raw bytes");
    assert!(conn.is_finished());
}

#[test]
fn a_switch_closure_may_keep_state() {
    // The third line, whatever it says, is the last before raw bytes.
    let mut seen = 0;
    let third = move |_: &Bytes| {
        seen += 1;
        seen == 3
    };
    let router = Router::new("lines");
    let session = Session::framed(router, Lines::new(), third, SessionConfig::default());
    let mut conn = Conn::new(session, Duration::ZERO);
    let (events, _) = drive(&mut conn, b"a\nb\nc\nd\ne\n", &[]);
    assert_eq!(
        events[1..],
        [
            Event::Frame("a".into()),
            Event::Frame("b".into()),
            Event::Frame("c".into()),
            Event::Tunnel("d\ne\n".into()),
            Event::Closed(Bytes::new()),
        ]
    );
}

// ----- the write side -----

#[test]
fn the_write_side_is_shut_once_after_the_last_byte() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"hello")).unwrap();
    conn.close();
    assert_eq!(conn.poll_shutdown(), None, "bytes are still queued");
    assert_eq!(
        conn.push(Bytes::from_static(b"late")).unwrap_err().error(),
        &Refusal::Closed
    );
    let chunk = conn.poll_transmit_chunk().unwrap();
    assert_eq!(&chunk[..], b"hello");
    conn.handle_written(2, ms(1)).unwrap();
    assert_eq!(conn.poll_shutdown(), None, "3 bytes are still queued");
    let chunk = conn.poll_transmit_chunk().unwrap();
    assert_eq!(&chunk[..], b"llo");
    conn.handle_written(3, ms(2)).unwrap();
    // Asked until done, never after.
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
    assert!(conn.wants_write());
    assert_eq!(conn.write_end(), None, "closing, not shut yet");
    conn.handle_shutdown();
    assert_eq!(conn.write_end(), Some(Shutdown::Write));
    assert_eq!(conn.poll_shutdown(), None);
    conn.close();
    assert_eq!(conn.poll_shutdown(), None, "a second close shuts nothing");
    assert!(!conn.wants_write() && conn.is_write_done());
    assert_eq!(conn.poll_transmit_chunk(), None);
}

#[test]
fn a_reset_drops_the_queue_and_stops_reading() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    let ticket = conn.push(Bytes::from(vec![7; 5000])).unwrap();
    conn.feed(b"a line\nand half", Duration::ZERO).unwrap();
    conn.reset();
    assert!(conn.queue().is_empty() && !conn.queue().is_written(ticket));
    assert_eq!(conn.poll_transmit_chunk(), None);
    assert!(!conn.wants_read() && conn.is_read_closed());
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
    assert_eq!(conn.write_end(), None, "resetting, not reset yet");
    conn.handle_shutdown();
    assert_eq!(conn.write_end(), Some(Shutdown::Reset));
    assert_eq!(conn.poll_shutdown(), None);
    conn.close();
    assert_eq!(conn.poll_shutdown(), None, "no FIN after a reset");
    assert_eq!(conn.write_end(), Some(Shutdown::Reset));
    assert!(conn.is_write_done());
    assert_eq!(
        conn.push(Bytes::from_static(b"x")).unwrap_err().error(),
        &Refusal::Closed
    );
}

#[test]
fn a_socket_error_after_the_shutdown_loses_nothing() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"all")).unwrap();
    conn.close();
    let chunk = conn.poll_transmit_chunk().unwrap();
    conn.handle_written(chunk.len(), ms(1)).unwrap();
    conn.shutdown_with(|_| Ok::<(), ()>(())).unwrap();
    assert_eq!(conn.write_end(), Some(Shutdown::Write));
    // The peer's reset, read after our FIN.
    conn.handle_write_error(ms(2));
    conn.handle_read_error(ms(2));
    assert_eq!(
        conn.write_end(),
        Some(Shutdown::Write),
        "still shut, not failed"
    );
    assert!(!conn.is_write_failed());
}

#[test]
fn a_write_error_drops_the_queue_and_nothing_is_shut() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"lost")).unwrap();
    conn.close();
    conn.handle_write_error(ms(1));
    assert!(conn.queue().is_empty() && conn.is_write_done());
    assert_eq!(conn.poll_shutdown(), None);
    assert_eq!(conn.write_end(), None, "failed: neither shut nor reset");
    assert!(conn.is_write_failed());
    assert!(!conn.wants_write());
    // The read side goes on.
    conn.feed(b"still read\n", ms(2)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("still read"))));
}

/// What every adapter's flush and close report once the write side
/// dropped its queue, and what a refused push says: one rule, in the core.
#[cfg(feature = "std")]
#[test]
fn a_dropped_queue_is_reported_the_same_way_whatever_dropped_it() {
    use std::io::ErrorKind;
    let kind = |got: Result<(), ConnError>| match got {
        Err(ConnError::Io(e)) => Some(e.kind()),
        other => panic!("{other:?}"),
    };

    // A write that failed: the socket's error once, then `BrokenPipe`.
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    let ticket = conn.push(Bytes::from_static(b"lost\n")).unwrap();
    assert!(conn.check_written().is_ok(), "nothing dropped yet");
    let got = conn.write_io(ms(1), |_| Err(ErrorKind::ConnectionReset.into()));
    assert!(matches!(got, Err(ConnError::Io(ref e)) if e.kind() == ErrorKind::ConnectionReset));
    assert!(conn.is_write_failed() && !conn.queue().is_written(ticket));
    assert_eq!(kind(conn.check_written()), Some(ErrorKind::BrokenPipe));

    // A writer that takes nothing of a write fails it (`WriteZero`).
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"lost\n")).unwrap();
    let got = conn.write_io(ms(1), |_| Ok(Some(0)));
    assert!(matches!(got, Err(ConnError::Io(ref e)) if e.kind() == ErrorKind::WriteZero));
    assert!(conn.is_write_failed());

    // The application's reset, with no error of the connection's.
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"lost\n")).unwrap();
    conn.reset();
    conn.handle_shutdown();
    assert_eq!(conn.write_end(), Some(Shutdown::Reset));
    assert_eq!(kind(conn.check_written()), Some(ErrorKind::BrokenPipe));
    assert!(
        matches!(conn.closed_error(), ConnError::Io(ref e) if e.kind() == ErrorKind::BrokenPipe)
    );

    // A timeout: its own error, for a reset and for a refused push.
    let mut conn = lines_with(Timeouts::NONE.idle(Some(ms(10))), Duration::ZERO);
    conn.handle_timeout(ms(10));
    assert!(conn.error().is_some());
    assert!(matches!(
        conn.closed_error(),
        ConnError::Protocol(Error::TimedOut(Timeout::Idle))
    ));
    conn.reset();
    conn.handle_shutdown();
    assert!(matches!(
        conn.check_written(),
        Err(ConnError::Protocol(Error::TimedOut(Timeout::Idle)))
    ));
}

/// A reset asked for has dropped the queue already: a flush reports it
/// before the driver did the reset.
#[cfg(feature = "std")]
#[test]
fn a_reset_not_yet_done_is_reported_as_dropped() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    let ticket = conn.push(Bytes::from_static(b"dropped\n")).unwrap();
    conn.reset();
    assert!(conn.queue().is_empty() && !conn.queue().is_written(ticket));
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
    assert!(
        matches!(conn.check_written(), Err(ConnError::Io(ref e)) if e.kind() == std::io::ErrorKind::BrokenPipe),
        "{:?}",
        conn.check_written()
    );
}

/// A chunk an io_uring-style driver held completes after the reset: the
/// reset still happens, and the late count is no misuse.
#[test]
fn a_write_completed_after_a_reset_keeps_the_reset() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"in flight\n")).unwrap();
    let chunk = conn.poll_transmit_chunk().unwrap();
    conn.reset();
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
    let got = conn.handle_written(chunk.len(), ms(1));
    assert!(got.is_ok(), "{got:?}");
    assert!(!conn.is_write_failed());
    assert_eq!(
        conn.poll_shutdown(),
        Some(Shutdown::Reset),
        "the reset was lost"
    );
    // A write error meanwhile does not cancel it either.
    conn.handle_write_error(ms(2));
    assert_eq!(
        conn.poll_shutdown(),
        Some(Shutdown::Reset),
        "the reset was lost"
    );
    conn.handle_shutdown();
    assert_eq!(conn.write_end(), Some(Shutdown::Reset));
}

/// A FIN the socket refuses fails writing; a refused reset is recorded
/// done. Neither is tried again.
#[test]
fn a_failed_shutdown_is_final() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.close();
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
    assert_eq!(conn.shutdown_with(|_| Err::<(), ()>(())), Err(()));
    assert!(conn.is_write_failed());
    assert_eq!(conn.poll_shutdown(), None);
    assert_eq!(conn.write_end(), None, "not shut");

    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.reset();
    assert_eq!(conn.shutdown_with(|_| Err::<(), ()>(())), Err(()));
    assert_eq!(conn.poll_shutdown(), None);
    assert_eq!(conn.write_end(), Some(Shutdown::Reset));
}

/// `push_or_full`: queued, or the item back while the lane is full, or
/// the connection's error once the queue is closed.
#[cfg(feature = "std")]
#[test]
fn push_or_full_gives_the_item_back_only_when_full() {
    let queue = WriteQueueConfig::default().max_items(1).unwrap();
    let config = ConnConfig::default()
        .write_queue(queue)
        .timeouts(Timeouts::NONE.idle(Some(ms(10))));
    let mut conn = Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO);
    assert!(matches!(
        conn.push_or_full(Bytes::from_static(b"a\n")),
        Ok(Ok(_))
    ));
    match conn.push_or_full(Bytes::from_static(b"b\n")) {
        Ok(Err(item)) => assert_eq!(item, "b\n"),
        other => panic!("{other:?}"),
    }
    conn.handle_timeout(ms(10));
    assert!(matches!(
        conn.push_or_full(Bytes::from_static(b"c\n")),
        Err(ConnError::Protocol(Error::TimedOut(Timeout::Idle)))
    ));
}

/// `read_io`: a signal is read through, "nothing now" changes nothing, a
/// failure ends reading and keeps what was buffered.
#[cfg(feature = "std")]
#[test]
fn read_io_reads_through_signals_and_records_a_failure() {
    use std::io::ErrorKind;
    let mut conn = lines_with(Timeouts::NONE, Duration::ZERO);
    let mut calls = 0;
    let got = conn.read_io(ms(1), |spare| {
        calls += 1;
        if calls == 1 {
            return Err(ErrorKind::Interrupted.into());
        }
        spare[..5].copy_from_slice(b"one\nt");
        Ok(Some(5))
    });
    assert!(matches!(got, Ok(Some(5))) && calls == 2, "{got:?}");
    assert!(matches!(conn.read_io(ms(2), |_| Ok(None)), Ok(None)));
    assert!(conn.wants_read() && !conn.is_read_closed());
    let got = conn.read_io(ms(3), |_| Err(ErrorKind::ConnectionReset.into()));
    assert!(matches!(got, Err(ConnError::Io(ref e)) if e.kind() == ErrorKind::ConnectionReset));
    assert!(!conn.wants_read() && conn.is_read_closed());
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("one"))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.recv_buf().peek(), b"t", "the rest stays");
}

#[test]
fn after_a_read_error_the_buffered_events_come_then_nothing() {
    let mut conn = lines_with(Timeouts::NONE, Duration::ZERO);
    // Bytes read before the read that failed, not polled yet.
    conn.feed(b"one\ntwo\nhalf", ms(1)).unwrap();
    conn.handle_read_error(ms(2));
    assert!(!conn.wants_read() && conn.is_read_closed());
    assert!(!conn.is_read_done(), "complete events are still buffered");
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("one"))));
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("two"))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert!(conn.is_read_done() && conn.is_finished());
    assert_eq!(conn.recv_buf().peek(), b"half", "the rest stays");
    assert_eq!(conn.poll_event(), Ok(None));
}

#[test]
fn once_reading_failed_and_the_events_are_out_the_clock_makes_none() {
    // A router still deciding when reading fails routes nobody afterwards:
    // its deadline no longer counts.
    let session = Session::tunnel(rules(), SessionConfig::default());
    let mut conn = Conn::new(session, Duration::ZERO);
    conn.feed(b"GET / HT", ms(1)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    conn.handle_read_error(ms(2));
    assert_eq!(conn.poll_event(), Ok(None));
    assert!(conn.is_read_done() && conn.is_finished());
    assert_eq!(conn.poll_timeout(), None);
    conn.handle_timeout(ms(10_000));
    assert_eq!(conn.poll_event(), Ok(None), "routed after the end");
}

#[test]
fn a_writer_that_claims_too_much_fails_the_write_side() {
    let mut conn = Conn::new(Framed::new(Lines::new()), Duration::ZERO);
    conn.push(Bytes::from_static(b"abc")).unwrap();
    let offered = conn.poll_transmit_chunk().unwrap();
    assert!(conn.handle_written(offered.len() + 1, ms(1)).is_err());
    assert!(conn.is_write_done() && conn.queue().is_empty());
    assert_eq!(
        conn.push(Bytes::from_static(b"x")).unwrap_err().error(),
        &Refusal::Closed
    );
}

// ----- the timeouts -----

fn lines_with(timeouts: Timeouts, start: Duration) -> Conn<Framed<Lines>> {
    let config = ConnConfig::default().timeouts(timeouts);
    Conn::with_config(Framed::new(Lines::new()), config, start)
}

#[test]
fn no_timeouts_no_deadline() {
    let conn = lines_with(Timeouts::NONE, ms(5));
    assert_eq!(conn.poll_timeout(), None);
    assert_eq!(*conn.timeouts(), Timeouts::default());
}

#[test]
fn the_opening_deadline_is_known_before_the_first_byte() {
    let start = ms(10_000);
    let timeouts = Timeouts::NONE.opening(Some(ms(300))).idle(Some(ms(1000)));
    let mut conn = lines_with(timeouts, start);
    assert_eq!(conn.poll_timeout(), Some(start + ms(300)));
    // Before the deadline nothing changes.
    conn.handle_timeout(start + ms(299));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.error(), None);
    assert_eq!(conn.poll_timeout(), Some(start + ms(300)));
    assert!(conn.wants_read() && !conn.wants_write());
    conn.handle_timeout(start + ms(300));
    let timed_out = Error::TimedOut(Timeout::Opening);
    assert_eq!(conn.error(), Some(&timed_out));
    assert_eq!(conn.poll_event(), Err(timed_out.clone()));
    assert_eq!(conn.poll_event(), Err(timed_out.clone()), "final");
    assert!(!conn.wants_read());
    // Nothing was buffered: a clean close.
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
    conn.handle_shutdown();
    assert!(conn.is_finished());
    assert_eq!(conn.poll_timeout(), None);
    assert_eq!(timed_out.fault(), cleave_proto::Fault::Limit);
}

#[test]
fn the_first_frame_ends_the_opening_and_any_byte_either_way_restarts_idle() {
    let timeouts = Timeouts::NONE.opening(Some(ms(300))).idle(Some(ms(200)));
    let mut conn = lines_with(timeouts, Duration::ZERO);
    assert_eq!(conn.poll_timeout(), Some(ms(200)), "idle runs out first");
    conn.feed(b"hel", ms(150)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_timeout(), Some(ms(300)), "now the opening does");
    conn.feed(b"lo\n", ms(250)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("hello"))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.protocol().phase(), Phase::Framing);
    assert_eq!(conn.poll_timeout(), Some(ms(450)), "idle alone");
    // A byte written restarts it too.
    conn.push(Bytes::from_static(b"x")).unwrap();
    conn.handle_timeout(ms(400));
    let chunk = conn.poll_transmit_chunk().unwrap();
    conn.handle_written(chunk.len(), ms(400)).unwrap();
    assert_eq!(conn.poll_timeout(), Some(ms(600)));
    conn.handle_timeout(ms(599));
    assert_eq!(conn.error(), None);
    conn.handle_timeout(ms(650));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Idle)));
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
}

#[test]
fn the_frame_timeout_runs_only_while_a_frame_is_incomplete() {
    let mut conn = lines_with(Timeouts::NONE.frame(Some(ms(100))), Duration::ZERO);
    assert_eq!(conn.poll_timeout(), None, "no frame started");
    conn.feed(b"ab", ms(0)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_timeout(), Some(ms(100)));
    // More of the same frame does not restart it.
    conn.feed(b"c", ms(50)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_timeout(), Some(ms(100)));
    // A frame completes: the next one's clock starts now.
    conn.feed(b"\nx", ms(90)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("abc"))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_timeout(), Some(ms(190)));
    conn.feed(b"\n", ms(150)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("x"))));
    assert_eq!(conn.poll_event(), Ok(None));
    // Between frames it does not run.
    assert_eq!(conn.poll_timeout(), None);
    conn.handle_timeout(ms(10_000));
    assert_eq!(conn.poll_event(), Ok(None));
    conn.feed(b"slow", ms(10_000)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_timeout(), Some(ms(10_100)));
    conn.handle_timeout(ms(10_099));
    assert_eq!(conn.error(), None);
    conn.handle_timeout(ms(10_100));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Frame)));
    // The peer left half a frame: it is reset, and the bytes stay.
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
    assert_eq!(conn.recv_buf().peek(), b"slow");
}

fn ssh_tunnel(timeouts: Timeouts) -> Conn<TunnelSession> {
    let router = Router::new("other").rule(Match::Prefix("SSH-".into()), "ssh");
    let session = Session::tunnel(router, SessionConfig::default());
    let mut conn = Conn::with_config(
        session,
        ConnConfig::default().timeouts(timeouts),
        Duration::ZERO,
    );
    conn.feed(b"SSH-2.0-x\r\n", ms(50)).unwrap();
    assert!(matches!(conn.poll_event(), Ok(Some(Event::Routed(_)))));
    assert_eq!(
        conn.poll_event(),
        Ok(Some(Event::Tunnel("SSH-2.0-x\r\n".into())))
    );
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.protocol().phase(), Phase::Tunnel);
    conn
}

#[test]
fn the_tunnel_idle_timeout_replaces_idle_in_a_tunnel() {
    let timeouts = Timeouts::NONE
        .idle(Some(ms(100)))
        .tunnel_idle(Some(ms(1000)))
        .frame(Some(ms(10)));
    let mut conn = ssh_tunnel(timeouts);
    assert_eq!(conn.poll_timeout(), Some(ms(1050)));
    conn.handle_timeout(ms(150));
    assert_eq!(conn.error(), None, "idle does not apply in a tunnel");
    conn.feed(b"raw", ms(500)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Event::Tunnel("raw".into()))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_timeout(), Some(ms(1500)));
    conn.handle_timeout(ms(1500));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::TunnelIdle)));
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));

    // Without a tunnel timeout of its own, idle applies in the tunnel.
    let mut conn = ssh_tunnel(Timeouts::NONE.idle(Some(ms(100))));
    assert_eq!(conn.poll_timeout(), Some(ms(150)));
    conn.handle_timeout(ms(150));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::TunnelIdle)));
}

#[test]
fn a_sessions_inspect_delay_routes_a_silent_client_by_the_clock() {
    let start = ms(100_000);
    let session = Session::tunnel(rules(), SessionConfig::default());
    let timeouts = Timeouts::NONE
        .opening(Some(ms(10_000)))
        .tunnel_idle(Some(ms(60_000)));
    let config = ConnConfig::default().timeouts(timeouts);
    let mut conn = Conn::with_config(session, config, start);
    // The router's delay (5 s) runs from the connection's start, before
    // the connection's own opening timeout.
    assert_eq!(conn.poll_timeout(), Some(start + ms(5000)));
    conn.handle_timeout(start + ms(4999));
    assert_eq!(conn.poll_event(), Ok(None));
    conn.handle_timeout(start + ms(5000));
    assert_eq!(conn.error(), None, "the router's deadline is not an error");
    let Ok(Some(Event::Routed(decision))) = conn.poll_event() else {
        panic!("not routed at the deadline");
    };
    assert_eq!(
        (decision.target, decision.reason),
        ("other", Reason::DeadlinePassed)
    );
    assert_eq!(conn.poll_event(), Ok(Some(Event::Tunnel(Bytes::new()))));
    assert_eq!(conn.poll_event(), Ok(None));
    // In the tunnel, the tunnel's timer from when it opened (no byte
    // yet): the backend, which may speak first, gets its whole minute.
    assert_eq!(conn.poll_timeout(), Some(start + ms(65_000)));
}

#[test]
fn the_opening_timeout_ends_a_session_that_routes_no_sooner() {
    let session = Session::tunnel(rules(), SessionConfig::default());
    let config = ConnConfig::default().timeouts(Timeouts::NONE.opening(Some(ms(2000))));
    let mut conn = Conn::with_config(session, config, Duration::ZERO);
    assert_eq!(conn.poll_timeout(), Some(ms(2000)));
    conn.feed(b"GET / HT", ms(10)).unwrap();
    assert_eq!(conn.poll_event(), Ok(None));
    conn.handle_timeout(ms(2000));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Opening)));
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
}

#[test]
fn poll_timeout_is_none_once_finished_and_a_late_timer_changes_nothing() {
    let mut conn = lines_with(Timeouts::NONE.idle(Some(ms(100))), Duration::ZERO);
    conn.feed(b"last\n", ms(10)).unwrap();
    conn.handle_eof(ms(20));
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("last"))));
    assert_eq!(conn.poll_event(), Ok(None));
    assert!(conn.is_finished());
    assert_eq!(conn.poll_timeout(), None);
    // A timer that fires anyway (set before, raced) changes nothing.
    conn.handle_timeout(ms(10_000));
    assert_eq!(conn.error(), None);
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.poll_shutdown(), None);
    assert!(conn.is_finished());
}

/// Lines, with a deadline of its own that only the test moves: a
/// protocol that does not act on its deadline.
#[derive(Debug)]
struct Deadline {
    lines: Framed<Lines>,
    due: Option<Duration>,
}

impl Protocol for Deadline {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        self.lines.poll_event(wire)
    }

    fn phase(&self) -> Phase {
        self.lines.phase()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.due
    }
}

#[test]
fn a_protocols_deadline_fires_once_until_the_protocol_moves_it() {
    let protocol = Deadline {
        lines: Framed::new(Lines::new()),
        due: Some(ms(10)),
    };
    let config = ConnConfig::default().timeouts(Timeouts::NONE.idle(Some(ms(100))));
    let mut conn = Conn::with_config(protocol, config, Duration::ZERO);
    assert_eq!(conn.poll_timeout(), Some(ms(10)));
    conn.handle_timeout(ms(10));
    assert_eq!(conn.poll_event(), Ok(None), "the protocol leaves it");
    assert_eq!(conn.poll_timeout(), Some(ms(100)), "the idle deadline next");
    // Later handlers do not bring the spent deadline back.
    conn.push(Bytes::from_static(b"x")).unwrap();
    let chunk = conn.poll_transmit_chunk().unwrap();
    conn.handle_written(chunk.len(), ms(20)).unwrap();
    conn.feed(b"half", ms(30)).unwrap();
    assert_eq!(conn.poll_timeout(), Some(ms(130)));
    // Moved on, it fires again, once.
    conn.protocol_mut().due = Some(ms(40));
    assert_eq!(conn.poll_timeout(), Some(ms(40)));
    conn.handle_timeout(ms(41));
    assert_eq!(conn.poll_timeout(), Some(ms(130)));
    // Moved on, and passed while other handlers ran: still due.
    conn.protocol_mut().due = Some(ms(50));
    conn.feed(b" more", ms(60)).unwrap();
    assert_eq!(conn.poll_timeout(), Some(ms(50)), "not handled yet");
    conn.handle_timeout(ms(60));
    assert_eq!(conn.poll_timeout(), Some(ms(160)));
    // A deadline not reached when a timeout is handled is not spent.
    conn.protocol_mut().due = Some(ms(500));
    conn.handle_timeout(ms(70));
    assert_eq!(conn.poll_timeout(), Some(ms(160)));
    assert_eq!(conn.error(), None);
    conn.set_timeouts(Timeouts::NONE);
    assert_eq!(conn.poll_timeout(), Some(ms(500)));
}

#[test]
fn the_idle_timeout_still_runs_while_the_peer_does_not_read() {
    let mut conn = lines_with(Timeouts::NONE.idle(Some(ms(100))), Duration::ZERO);
    conn.push(Bytes::from_static(b"unread answer")).unwrap();
    conn.handle_eof(ms(10));
    assert_eq!(conn.poll_event(), Ok(None));
    assert_eq!(conn.protocol().phase(), Phase::Done);
    assert!(!conn.is_finished(), "an answer is queued");
    assert_eq!(conn.poll_timeout(), Some(ms(100)));
    conn.handle_timeout(ms(100));
    assert_eq!(conn.error(), Some(&Error::TimedOut(Timeout::Idle)));
}

// ----- a protocol's own replies -----

/// A self-describing record: `[0xAB, lane, id (u32 LE), len (u32 LE),
/// filler...]`, the filler below 0xAB, so a record cut by another shows.
fn record(lane: u8, id: u32, len: usize) -> Vec<u8> {
    let len = len.max(10);
    let mut r = vec![0xAB, lane];
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&(len as u32).to_le_bytes());
    r.resize(len, (id % 170) as u8);
    r
}

const BULK: u8 = 0;
const URGENT: u8 = 1;

/// A record's lane and id.
type RecordId = (u8, u32);

/// Parses the written stream into whole records: (lane, id) each, and the
/// record cut short at the end, if one is. Panics if a record starts inside
/// another.
fn records(out: &[u8]) -> (Vec<RecordId>, Option<RecordId>) {
    let mut whole = Vec::new();
    let mut at = 0;
    while at < out.len() {
        let rest = &out[at..];
        assert_eq!(rest[0], 0xAB, "a record starts inside another at {at}");
        if rest.len() < 10 {
            return (
                whole,
                Some((rest.get(1).copied().unwrap_or(BULK), u32::MAX)),
            );
        }
        let lane = rest[1];
        let id = u32::from_le_bytes(rest[2..6].try_into().unwrap());
        let len = u32::from_le_bytes(rest[6..10].try_into().unwrap()) as usize;
        let have = rest.len().min(len);
        assert!(
            rest[10..have].iter().all(|&b| b == (id % 170) as u8),
            "record {id} holds bytes of another"
        );
        if rest.len() < len {
            return (whole, Some((lane, id)));
        }
        whole.push((lane, id));
        at += len;
    }
    (whole, None)
}

/// Lines; it answers `PING` itself, on the urgent lane, with a record (a
/// stand-in for a WebSocket pong), and gives every other line as an event.
#[derive(Debug)]
struct Pinger {
    lines: Framed<Lines>,
    /// A reply the urgent lane had no room for yet.
    waiting: Option<Bytes>,
    replies: u32,
}

impl Pinger {
    fn new() -> Self {
        Self {
            lines: Framed::new(Lines::new()),
            waiting: None,
            replies: 0,
        }
    }
}

impl Protocol for Pinger {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        loop {
            if let Some(reply) = self.waiting.take() {
                match wire.reply(reply) {
                    Ok(_) => {}
                    Err(refused) if matches!(refused.error(), Refusal::Full(_)) => {
                        // Write, then come back.
                        self.waiting = Some(refused.into_value());
                        return Ok(None);
                    }
                    // Closed: the connection is going; no one to answer.
                    Err(_) => {}
                }
            }
            match self.lines.poll_event(wire)? {
                Some(line) if &line[..] == b"PING" => {
                    self.waiting = Some(record(URGENT, self.replies, 16).into());
                    self.replies += 1;
                }
                other => return Ok(other),
            }
        }
    }

    fn phase(&self) -> Phase {
        self.lines.phase()
    }
}

/// Writes `share`/255 of what `conn` offers in `room` slices into `out`.
fn write_some(conn: &mut Conn<Pinger>, out: &mut Vec<u8>, share: u8, room: usize) -> usize {
    let mut slices = vec![&[][..]; room];
    let k = conn.poll_transmit_slices(&mut slices);
    let offered = slices[..k].concat();
    let n = offered.len() * usize::from(share) / 255;
    out.extend_from_slice(&offered[..n]);
    conn.handle_written(n, Duration::ZERO).unwrap();
    n
}

/// For each reply queued: the application's frames not started then.
type AheadOf = Vec<(u32, Vec<u32>)>;

/// Polls the lines; notes, for each reply the protocol queued meanwhile,
/// the frames (of `frames` pushed) whose first byte is not in `out` yet.
fn poll_lines(conn: &mut Conn<Pinger>, out: &[u8], frames: u32, ahead_of: &mut AheadOf) -> usize {
    let before = conn.protocol().replies;
    let mut events = 0;
    while let Some(line) = conn.poll_event().unwrap() {
        assert_eq!(&line[..], b"DATA");
        events += 1;
    }
    let (whole, cut) = records(out);
    let started = whole.iter().chain(&cut).filter(|r| r.0 == BULK).count() as u32;
    for id in before..conn.protocol().replies {
        ahead_of.push((id, (started..frames).collect()));
    }
    events
}

#[derive(Clone, Debug)]
enum App {
    /// The peer's next `len` bytes arrive.
    Read(usize),
    /// The application pushes a frame of three parts.
    Push(usize),
    /// The writer takes `share`/255 of what is offered in `room` slices.
    Write(u8, usize),
}

proptest! {
    /// Replies queued by the protocol go out between the application's
    /// frames, never inside one, and ahead of the frames not yet started;
    /// every reply and every frame goes out once, whatever the writes.
    #[test]
    fn replies_go_out_between_frames_whatever_the_writes(
        requests in prop::collection::vec(any::<bool>(), 0..30),
        script in prop::collection::vec(
            prop_oneof![
                3 => (1usize..12).prop_map(App::Read),
                2 => (0usize..300).prop_map(App::Push),
                4 => (any::<u8>(), 1usize..5).prop_map(|(share, room)| App::Write(share, room)),
            ],
            0..80,
        ),
    ) {
        let input: Vec<u8> = requests
            .iter()
            .flat_map(|&ping| if ping { &b"PING\n"[..] } else { &b"DATA\n"[..] })
            .copied()
            .collect();
        let mut conn = Conn::new(Pinger::new(), Duration::ZERO);
        let (mut fed, mut events, mut out) = (0, 0, Vec::new());
        let mut frames = 0u32;
        // For each reply: the frames not started when it was queued.
        let mut ahead_of = AheadOf::new();
        for step in &script {
            match *step {
                App::Read(len) => {
                    let n = len.min(input.len() - fed);
                    conn.feed(&input[fed..fed + n], Duration::ZERO).unwrap();
                    fed += n;
                }
                App::Push(len) => {
                    let r = record(BULK, frames, len);
                    let (a, b) = (3, r.len() - 2);
                    let frame = Frame::new(
                        Bytes::copy_from_slice(&r[..a]),
                        Bytes::copy_from_slice(&r[a..b]),
                        Bytes::copy_from_slice(&r[b..]),
                    );
                    if conn.push(frame).is_ok() {
                        frames += 1;
                    }
                }
                App::Write(share, room) => {
                    write_some(&mut conn, &mut out, share, room);
                }
            }
            events += poll_lines(&mut conn, &out, frames, &mut ahead_of);
        }
        conn.feed(&input[fed..], Duration::ZERO).unwrap();
        conn.handle_eof(Duration::ZERO);
        events += poll_lines(&mut conn, &out, frames, &mut ahead_of);
        conn.close();
        while conn.poll_shutdown().is_none() {
            prop_assert!(write_some(&mut conn, &mut out, 255, 4) > 0, "no progress");
        }
        conn.handle_shutdown();
        prop_assert!(conn.is_finished());

        let (written, cut) = records(&out);
        prop_assert_eq!(cut, None);
        let pings = requests.iter().filter(|&&ping| ping).count();
        prop_assert_eq!(events, requests.len() - pings);
        let of = |lane: u8| -> Vec<u32> {
            written.iter().filter(|r| r.0 == lane).map(|r| r.1).collect()
        };
        prop_assert_eq!(of(URGENT), (0..pings as u32).collect::<Vec<_>>());
        prop_assert_eq!(of(BULK), (0..frames).collect::<Vec<_>>());
        let at = |record: RecordId| written.iter().position(|r| *r == record).unwrap();
        for (reply, frames) in ahead_of {
            for frame in frames {
                prop_assert!(
                    at((URGENT, reply)) < at((BULK, frame)),
                    "reply {} went out after frame {}, queued before it started", reply, frame
                );
            }
        }
    }
}

// ----- switching protocols -----

#[test]
fn a_switch_to_raw_keeps_the_unread_bytes_in_place() {
    let timeouts = Timeouts::NONE
        .opening(Some(ms(100)))
        .tunnel_idle(Some(ms(5000)));
    let mut conn = lines_with(timeouts, Duration::ZERO);
    conn.feed(b"HELLO\nTUNNEL\nraw \x00 bytes\xff past the marker", ms(10))
        .unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("HELLO"))));
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("TUNNEL"))));
    // The answer to the marker, queued before the switch, goes out after.
    conn.push(Bytes::from_static(b"OK\n")).unwrap();
    let unread = conn.recv_buf().peek().as_ptr_range();
    let offset = conn.recv_buf().offset();
    let mut raw = conn.switch(|lines| {
        assert_eq!(lines.phase(), Phase::Framing);
        Raw::new()
    });
    assert_eq!(
        raw.recv_buf().peek().as_ptr_range(),
        unread,
        "the bytes did not move"
    );
    assert_eq!(raw.recv_buf().offset(), offset);
    assert_eq!(raw.protocol().phase(), Phase::Tunnel);
    // The tunnel's timer, from the last byte.
    assert_eq!(raw.poll_timeout(), Some(ms(5010)));
    let tail = raw.poll_event().unwrap().unwrap();
    assert_eq!(&tail[..], b"raw \x00 bytes\xff past the marker");
    assert_eq!(
        tail.as_ptr_range(),
        unread,
        "the tail is a view of the buffer, not a copy"
    );
    assert_eq!(raw.poll_event(), Ok(None));
    let chunk = raw.poll_transmit_chunk().unwrap();
    assert_eq!(&chunk[..], b"OK\n");
    raw.handle_written(chunk.len(), ms(20)).unwrap();
    // What comes next goes through as it comes; then the end.
    raw.feed(b"more", ms(30)).unwrap();
    assert_eq!(raw.poll_event(), Ok(Some(Bytes::from("more"))));
    raw.handle_eof(ms(40));
    assert_eq!(raw.poll_event(), Ok(None));
    assert!(raw.is_finished());
    assert_eq!(raw.poll_timeout(), None);
}

#[test]
fn a_switch_before_any_event_hands_every_byte_over() {
    let mut conn = lines_with(Timeouts::NONE, Duration::ZERO);
    let spare = conn.spare_mut().unwrap();
    spare[..5].copy_from_slice(b"no\nli");
    conn.handle_read(5, ms(1)).unwrap();
    let mut raw = conn.switch(|_| Raw::new());
    assert_eq!(raw.poll_event(), Ok(Some(Bytes::from("no\nli"))));
    assert_eq!(raw.poll_event(), Ok(None));
}

#[test]
fn a_switch_keeps_a_final_error() {
    let mut conn = lines_with(Timeouts::NONE, Duration::ZERO);
    conn.feed(b"half", ms(1)).unwrap();
    conn.handle_eof(ms(2));
    let truncated = conn.poll_event().unwrap_err();
    assert!(matches!(truncated, Error::Truncated { .. }));
    let mut raw = conn.switch(|_| Raw::new());
    assert_eq!(raw.poll_event(), Err(truncated));
}

#[test]
fn a_clean_close_after_a_timeout_gives_up_on_a_peer_that_does_not_read() {
    let mut conn = lines_with(
        Timeouts::NONE.idle(Some(ms(100))).frame(Some(ms(50))),
        Duration::ZERO,
    );
    conn.feed(b"ask\n", ms(10)).unwrap();
    assert_eq!(conn.poll_event(), Ok(Some(Bytes::from("ask"))));
    conn.push(Bytes::from_static(b"a long answer\n")).unwrap();
    // The peer goes quiet and never reads: the idle timeout ends the
    // connection cleanly, with the answer still queued.
    conn.handle_timeout(ms(110));
    assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Idle)));
    assert_eq!(conn.poll_shutdown(), None, "the answer goes first");
    assert!(conn.wants_write() && !conn.is_finished());
    // It waits one more idle span for the peer to take it...
    assert_eq!(conn.poll_timeout(), Some(ms(210)));
    conn.handle_timeout(ms(209));
    assert_eq!(conn.poll_shutdown(), None);
    // ...then resets: the connection ends even if the peer never reads.
    conn.handle_timeout(ms(210));
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
    assert_eq!(conn.queue().len(), 0, "what was queued is dropped");
    conn.handle_shutdown();
    assert!(conn.is_finished());
    assert_eq!(conn.poll_timeout(), None);
}

// ----- a protocol's fast path -----

/// Lines, with a fast path (when `fast`) that takes a line whose newline
/// is within the first 32 bytes buffered, and counts its calls.
#[derive(Debug)]
struct FastLines {
    lines: Framed<Lines>,
    fast: bool,
    fast_calls: usize,
    fast_events: usize,
}

impl FastLines {
    fn new(fast: bool) -> Self {
        let config = LinesConfig::default().max_length(48);
        Self {
            lines: Framed::new(Lines::with_config(config)),
            fast,
            fast_calls: 0,
            fast_events: 0,
        }
    }
}

impl Protocol for FastLines {
    type Event = Bytes;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<Bytes>, Error> {
        self.lines.poll_event(wire)
    }

    fn poll_fast(&mut self, wire: &mut Wire<'_>) -> Option<Bytes> {
        if !self.fast {
            return None;
        }
        self.fast_calls += 1;
        let peek = wire.recv().peek();
        let window = &peek[..peek.len().min(32)];
        if !window.contains(&b'\n') {
            return None;
        }
        match self.lines.poll_event(wire) {
            Ok(Some(line)) => {
                self.fast_events += 1;
                Some(line)
            }
            other => panic!("a whole short line gave {other:?}"),
        }
    }

    fn phase(&self) -> Phase {
        self.lines.phase()
    }
}

/// What a connection said after each step: the events (or the error) of
/// polling until `None`, and its deadline then.
type Said = Vec<(Vec<Result<Option<Bytes>, Error>>, Option<Duration>)>;

/// Feeds `input` cut at `cuts` (a millisecond apart), polls after each
/// piece and after the end, and records what it said.
fn drive_said(conn: &mut Conn<FastLines>, input: &[u8], cuts: &[usize]) -> Said {
    let mut said = Vec::new();
    let poll = |conn: &mut Conn<FastLines>, said: &mut Said| {
        let mut events = Vec::new();
        loop {
            let polled = conn.poll_event();
            let last = !matches!(polled, Ok(Some(_)));
            events.push(polled);
            if last || events.len() > 64 {
                break;
            }
        }
        said.push((events, conn.poll_timeout()));
    };
    let mut at = 0;
    for (i, &cut) in cuts.iter().chain([&input.len()]).enumerate() {
        let cut = cut.clamp(at, input.len());
        if conn.feed(&input[at..cut], ms(i as u64)).is_err() {
            break;
        }
        at = cut;
        poll(conn, &mut said);
    }
    conn.handle_eof(ms(1000));
    poll(conn, &mut said);
    said
}

/// A protocol's fast path changes nothing a connection says: the same
/// events, errors and deadlines (an event ends a partial frame's wait,
/// whichever path gave it), at every cut of every input; and once the
/// connection failed or the protocol is done, it is not asked again.
#[test]
fn a_fast_path_gives_what_the_full_poll_gives() {
    let inputs: [&[u8]; 4] = [
        b"one\ntwo\nthree\n",
        b"a line longer than the fast window of thirty-two\nshort\n",
        b"ok\nthis line is far too long for the limit of forty-eight bytes\nnever\n",
        b"last line without its newline",
    ];
    let timeouts = Timeouts::NONE.frame(Some(ms(100)));
    let mut fast_events = 0;
    for input in inputs {
        for first in 0..=input.len() {
            for second in first..=input.len().min(first + 7) {
                let cuts = [first, second];
                let config = ConnConfig::default().timeouts(timeouts);
                let mut full = Conn::with_config(FastLines::new(false), config, Duration::ZERO);
                let mut fast = Conn::with_config(FastLines::new(true), config, Duration::ZERO);
                let said = drive_said(&mut full, input, &cuts);
                assert_eq!(
                    drive_said(&mut fast, input, &cuts),
                    said,
                    "{input:?} cut at {cuts:?}"
                );
                fast_events += fast.protocol().fast_events;
                // Finished or failed: never asked again.
                let calls = fast.protocol().fast_calls;
                let again = fast.poll_event();
                assert_eq!(again, full.poll_event());
                assert!(again.is_err() || fast.protocol().phase() == Phase::Done);
                assert_eq!(
                    fast.protocol().fast_calls,
                    calls,
                    "{input:?} cut at {cuts:?}"
                );
            }
        }
    }
    assert!(fast_events > 0, "the fast path gave nothing");
}

/// Pushes of every size a queue holds in its own way (coalesced, kept by
/// reference, longer than a piece), in numbers around the few slices a
/// short queue is drained with and past them, drained by `write_with` or
/// `write_io` with a writer that takes any amount: every byte goes out
/// once, in order; and whenever the pending pushes surely fit in
/// [`SLICES`] slices, a write offers all that is pending (up to the
/// drain's byte limit), whether it was set up with few slices or many.
#[cfg(feature = "std")]
mod drains {
    use super::*;
    use cleave_proto::conn::SLICES;
    use std::collections::VecDeque;
    use std::io::IoSlice;

    const PIECE: usize = 64 * 1024;
    const MAX_DRAIN: usize = 1024 * 1024;

    /// What a write should offer, if the pending pushes (their unwritten
    /// bytes, oldest first) surely fit in `SLICES` slices: each push is
    /// at most one entry of its own or part of a run, an entry is cut
    /// into pieces of `PIECE` bytes, and a run buffer and a cut at a
    /// push boundary add one each.
    fn must_offer(pending: &VecDeque<usize>) -> Option<usize> {
        let slices: usize = pending
            .iter()
            .map(|&n| n.div_ceil(PIECE) + 1)
            .sum::<usize>()
            + 2;
        let bytes: usize = pending.iter().sum();
        (slices <= SLICES).then_some(bytes.min(MAX_DRAIN))
    }

    /// Takes up to `take` bytes of `slices` into `out`, after checking
    /// that they offer `offer` bytes if that is known.
    fn take_some(
        out: &mut Vec<u8>,
        slices: &[IoSlice<'_>],
        take: usize,
        offer: Option<usize>,
    ) -> usize {
        let offered: usize = slices.iter().map(|s| s.len()).sum();
        assert!(offered > 0);
        if let Some(offer) = offer {
            assert_eq!(offered, offer, "{} slices offered", slices.len());
        }
        let mut left = take;
        for slice in slices {
            let n = slice.len().min(left);
            out.extend_from_slice(&slice[..n]);
            left -= n;
            if left == 0 {
                break;
            }
        }
        take - left
    }

    /// Takes `n` written bytes off the front of the pending pushes.
    fn written(pending: &mut VecDeque<usize>, mut n: usize) {
        while n > 0 {
            let front = pending.front_mut().expect("no more written than pushed");
            let k = n.min(*front);
            *front -= k;
            n -= k;
            if *front == 0 {
                pending.pop_front();
            }
        }
    }

    /// A push half written inside a run of coalesced pushes: the drain
    /// cuts that run at the push's end, and the run takes two slices.
    /// Four entries then need five.
    #[test]
    fn a_run_cut_at_a_push_boundary_is_counted_twice() {
        for io in [false, true] {
            let mut conn = Conn::new(Raw::new(), Duration::ZERO);
            let sizes = [10, 10, 2000, 10, 2000]; // a run of two, one, a run of one, one
            let mut want = Vec::new();
            for (i, &n) in sizes.iter().enumerate() {
                let bytes = vec![b'a' + i as u8; n];
                want.extend_from_slice(&bytes);
                conn.push(Bytes::from(bytes)).expect("room");
            }
            let mut got = Vec::new();
            let mut takes = [5, usize::MAX].into_iter();
            let mut offers = Vec::new();
            loop {
                let take = takes.next().unwrap_or(usize::MAX);
                let mut write = |slices: &[IoSlice<'_>]| {
                    offers.push(slices.iter().map(|s| s.len()).sum::<usize>());
                    take_some(&mut got, slices, take, None)
                };
                let n = if io {
                    conn.write_io(Duration::ZERO, |slices| Ok(Some(write(slices))))
                        .expect("taken")
                        .unwrap_or(0)
                } else {
                    conn.write_with(Duration::ZERO, |slices| Ok::<_, Error>(write(slices)))
                        .expect("taken")
                };
                if n == 0 {
                    break;
                }
            }
            assert_eq!(got, want);
            // After the first 5 bytes, the second write offers all the rest.
            assert_eq!(offers, [want.len(), want.len() - 5], "io: {io}");
        }
    }

    fn size() -> impl Strategy<Value = usize> {
        prop_oneof![1usize..64, 64usize..5000, 60_000usize..140_000]
    }

    proptest! {
        #[test]
        fn every_pushed_byte_goes_out_once_in_order_however_many_slices(
            sizes in prop::collection::vec(size(), 0..24),
            takes in prop::collection::vec(1usize..200_000, 1..8),
            io in any::<bool>(),
        ) {
            let mut conn = Conn::new(Raw::new(), Duration::ZERO);
            let mut want = Vec::new();
            let mut got = Vec::new();
            let mut pending = VecDeque::new();
            let mut turn = 0;
            let mut drain_once = |conn: &mut Conn<Raw>, got: &mut Vec<u8>, pending: &mut VecDeque<usize>| -> usize {
                let take = takes[turn % takes.len()];
                turn += 1;
                let offer = must_offer(pending);
                let n = if io {
                    conn.write_io(Duration::ZERO, |slices| Ok(Some(take_some(got, slices, take, offer))))
                        .expect("the writer takes what it says")
                        .unwrap_or(0)
                } else {
                    conn.write_with(Duration::ZERO, |slices| {
                        Ok::<_, Error>(take_some(got, slices, take, offer))
                    })
                    .expect("the writer takes what it says")
                };
                written(pending, n);
                n
            };
            for (i, &n) in sizes.iter().enumerate() {
                let bytes: Vec<u8> = (0..n).map(|j| (i * 31 + j * 7) as u8).collect();
                want.extend_from_slice(&bytes);
                let mut item = Bytes::from(bytes);
                loop {
                    match conn.push(item) {
                        Ok(_) => break,
                        Err(full) => {
                            prop_assert!(matches!(full.error(), Refusal::Full(_)));
                            item = full.into_value();
                            prop_assert!(drain_once(&mut conn, &mut got, &mut pending) > 0);
                        }
                    }
                }
                pending.push_back(n);
            }
            while drain_once(&mut conn, &mut got, &mut pending) > 0 {}
            prop_assert!(conn.queue().is_empty() && pending.is_empty());
            prop_assert_eq!(got, want);
        }
    }
}

/// A read error after the peer's end changes nothing (a write that failed
/// after the peer closed reports one, say): the frame the end cut short
/// is still handed back, as `Truncated` with its bytes.
#[test]
fn a_read_error_after_the_end_keeps_the_frame_it_cut_short() {
    let now = Duration::ZERO;
    let mut conn = Conn::new(lines(), now);
    conn.feed(b"one\nabc", now).unwrap();
    conn.handle_eof(now);
    conn.handle_read_error(now);
    assert_eq!(conn.poll_event().unwrap().as_deref(), Some(&b"one"[..]));
    match conn.poll_event() {
        Err(Error::Truncated { partial, offset }) => {
            assert_eq!((&partial[..], offset), (&b"abc"[..], 4));
        }
        other => panic!("{other:?}"),
    }
}

/// After a reset no event comes, and a read completion that arrives late
/// and claims too much does not bring reading back.
#[test]
fn a_late_bad_completion_after_a_reset_brings_no_event() {
    let now = Duration::ZERO;
    let mut conn = Conn::new(lines(), now);
    conn.feed(b"one\ntwo\n", now).unwrap();
    let spare = conn.spare_mut().unwrap().len();
    conn.reset();
    assert!(conn.is_read_done());
    assert!(conn.handle_read(spare + 1, now).is_err());
    assert!(conn.is_read_done(), "reading stays over");
    assert_eq!(conn.poll_event(), Ok(None));
}

/// A reset after the write side was shut cleanly (everything written, the
/// FIN sent) drops nothing, and the connection does not say it did; a
/// reset with bytes still queued does.
#[cfg(feature = "std")]
#[test]
fn a_reset_after_a_clean_shutdown_reports_no_loss() {
    let now = Duration::ZERO;
    let mut conn = Conn::new(lines(), now);
    conn.push(Bytes::from_static(b"all of it\n")).unwrap();
    conn.close();
    while let Some(chunk) = conn.poll_transmit_chunk() {
        conn.handle_written(chunk.len(), now).unwrap();
    }
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Write));
    conn.handle_shutdown();
    conn.reset();
    assert_eq!(conn.poll_shutdown(), Some(Shutdown::Reset));
    assert!(conn.check_written().is_ok(), "nothing was dropped");

    let mut conn = Conn::new(lines(), now);
    conn.push(Bytes::from_static(b"never sent\n")).unwrap();
    conn.reset();
    assert!(conn.check_written().is_err(), "the queued line was dropped");
}
