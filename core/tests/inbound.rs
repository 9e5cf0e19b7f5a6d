//! `Inbound`: `Framed` and `Session` driven the same way an adapter drives
//! them, over any pieces.

use std::time::Duration;

use cleave_proto::route::{Match, Router};
use cleave_proto::{
    Error, Event, Framed, Inbound, LengthPrefixed, Lines, RecvBufConfig, Session, SessionConfig,
};
use proptest::prelude::*;

/// What an adapter does: feed each piece through the buffer's spare room,
/// poll until nothing comes, then the end of the stream.
fn drive<P: Inbound>(
    inbound: &mut P,
    input: &[u8],
    cuts: &[usize],
) -> (Vec<P::Event>, Option<Error>) {
    let mut events = Vec::new();
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(input.len());
    for end in bounds {
        while at < end {
            let spare = match inbound.recv_buf().spare_mut() {
                Ok(spare) => spare,
                Err(e) => return (events, Some(e)),
            };
            let n = spare.len().min(end - at);
            spare[..n].copy_from_slice(&input[at..at + n]);
            inbound.recv_buf().commit(n).unwrap();
            at += n;
            loop {
                match inbound.poll_event(Duration::ZERO) {
                    Ok(Some(event)) => events.push(event),
                    Ok(None) => break,
                    Err(e) => return (events, Some(e)),
                }
            }
        }
    }
    inbound.handle_eof();
    loop {
        match inbound.poll_event(Duration::ZERO) {
            Ok(Some(event)) => events.push(event),
            Ok(None) => break,
            Err(e) => return (events, Some(e)),
        }
    }
    assert!(inbound.is_closed(), "the end of the stream was handled");
    (events, None)
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
        let config = RecvBufConfig::default().read_reserve(16).unwrap();
        let mut framed = Framed::with_config(Lines::new(), config);
        let (events, error) = drive(&mut framed, &input, &cuts);
        let got: Vec<String> = events.iter().map(|b| String::from_utf8(b.to_vec()).unwrap()).collect();
        prop_assert_eq!(got, lines);
        match error {
            None => prop_assert!(tail.is_empty()),
            Some(Error::Truncated { partial, .. }) => prop_assert_eq!(&partial[..], tail.as_bytes()),
            Some(other) => prop_assert!(false, "{other:?}"),
        }
    }
}

#[test]
fn a_bad_frame_is_a_final_error_and_the_bytes_stay() {
    let mut framed = Framed::new(LengthPrefixed::new());
    framed.recv_buf().feed(&[0, 0, 0, 2, b'h', b'i']).unwrap();
    assert_eq!(framed.poll_event(Duration::ZERO).unwrap().unwrap(), "hi");
    // Over the 8 MiB default frame limit.
    framed
        .recv_buf()
        .feed(&[0xff, 0xff, 0xff, 0xff, 1])
        .unwrap();
    assert!(!framed.is_closed());
    let first = framed.poll_event(Duration::ZERO).unwrap_err();
    assert!(matches!(first, Error::LimitExceeded { .. }), "{first:?}");
    // Closed: nothing more needs reading, and the error comes back.
    assert!(framed.is_closed());
    assert_eq!(framed.poll_event(Duration::ZERO).unwrap_err(), first);
    assert_eq!(framed.recv_buf().len(), 5, "nothing consumed");
    let (mut buf, _) = framed.into_parts();
    assert_eq!(&buf.take_tail()[..], &[0xff, 0xff, 0xff, 0xff, 1]);
}

#[test]
fn a_session_is_driven_through_the_same_trait() {
    let router = Router::new("other").rule(Match::Prefix("HELLO ".into()), "lines");
    let mut session = Session::framed(
        router,
        Lines::new(),
        |line| &line[..] == b"TUNNEL",
        SessionConfig::default(),
    );
    let input = b"HELLO there\nTUNNEL\nraw bytes";
    let (events, error) = drive(&mut session, input, &[3, 9, 15]);
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
}
