//! A router budget below a TLS record header (5 bytes): the TLS sniffer
//! gives no final answer on the first byte alone (0x16), since a second
//! byte may still say "not TLS"; its answer, the router's and the
//! session's do not depend on how the bytes arrive.

use std::time::Duration;

use cleave_proto::conn::Conn;
use cleave_proto::route::{Match, RouteState, Router, RouterConfig};
use cleave_proto::sniff::{tls, Sniff};
use cleave_proto::{Event, Session, SessionConfig};

fn router() -> Router<&'static str> {
    Router::with_config("fallback", RouterConfig::default().budget(4))
        .rule(Match::Tls, "tls")
        .rule(Match::Prefix(b"\x16\x01".as_ref().into()), "magic")
}

#[test]
fn tls_sniffer_more_bytes_keep_a_final_answer() {
    // sniff/mod.rs: "give it more bytes and it either keeps its answer or
    // turns need more into a final one".
    let short = tls::sniff(&[0x16], 4);
    let long = tls::sniff(&[0x16, 0x01], 4);
    if !short.is_need_more() {
        assert_eq!(short, long, "a final answer changed with more bytes");
    }
    // The resumable sniffer must answer as `sniff` on the same bytes.
    let mut s = tls::Sniffer::new();
    let _ = s.sniff(&[0x16], 4);
    assert_eq!(s.sniff(&[0x16, 0x01], 4), &Sniff::NoMatch);
}

#[test]
fn route_with_answers_as_route_on_the_same_bytes() {
    let r = router();
    let data = b"\x16\x01rest";
    let at_once = r.route(data, Duration::ZERO).unwrap();
    let mut state = RouteState::new();
    let mut trickled = None;
    for end in 1..=data.len() {
        if let Some(d) = r.route_with(&mut state, &data[..end], Duration::ZERO) {
            trickled = Some(d);
            break;
        }
    }
    assert_eq!(Some(at_once), trickled);
}

#[test]
fn session_routed_event_does_not_depend_on_the_pieces() {
    let data = b"\x16\x01rest";
    let run = |pieces: &[&[u8]]| {
        let mut conn = Conn::new(
            Session::tunnel(router(), SessionConfig::default()),
            Duration::ZERO,
        );
        let mut events = Vec::new();
        for p in pieces {
            conn.feed(p, Duration::ZERO).unwrap();
            while let Some(e) = conn.poll_event().unwrap() {
                if let Event::Routed(d) = e {
                    events.push(d);
                }
            }
        }
        events
    };
    assert_eq!(run(&[data]), run(&[&data[..1], &data[1..]]));
}

/// Every budget up to a record header, every second byte: a final answer
/// on the first byte alone is the answer on both.
#[test]
fn a_final_answer_on_one_byte_holds_for_every_second_byte() {
    for budget in 0..=6 {
        let one = tls::sniff(&[0x16], budget);
        if one.is_need_more() {
            continue;
        }
        for second in 0..=u8::MAX {
            assert_eq!(
                tls::sniff(&[0x16, second], budget),
                one,
                "budget {budget}, second byte {second:#04x}"
            );
        }
    }
}
