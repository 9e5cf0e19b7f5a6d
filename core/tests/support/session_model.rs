//! Drives a `Session` through a `Conn` over pieces of an input and
//! accounts for its bytes.
//!
//! Shared by the integration tests and the fuzz targets (`#[path]`).

#![allow(dead_code)]

use std::time::Duration;

use cleave_proto::conn::{Conn, ConnConfig};
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::{Bytes, Decoder, Error, Event, Session, Switch};

pub fn rules() -> Router<&'static str> {
    Router::new("other")
        .rule(Match::TlsServerName(HostPattern::new("example.com")), "tls")
        .rule(Match::HttpUpgrade(None), "upgrade")
        .rule(Match::HttpHost(HostPattern::new("*")), "never")
        .rule(Match::Prefix("SSH-".into()), "ssh")
        .rule(Match::Prefix("hello".into()), "hello")
        .rule(Match::Prefix("LINE ".into()), "lines")
}

pub type Ev = Event<&'static str, Bytes>;

/// Appends `event`, joining consecutive tunnel events (raw bytes pass
/// through as they arrive, in pieces that depend on the reads).
pub fn push_joined(events: &mut Vec<Ev>, event: Ev) {
    match (events.last_mut(), event) {
        (Some(Event::Tunnel(a)), Event::Tunnel(b)) => *a = Bytes::from([&a[..], &b[..]].concat()),
        (_, event) => events.push(event),
    }
}

/// Polls `conn` until it needs more, collecting the events; returns the
/// final error, if one came, after checking that it is final.
pub fn pump<P>(conn: &mut Conn<P>, events: &mut Vec<Ev>) -> Option<Error>
where
    P: cleave_proto::Protocol<Event = Ev>,
{
    loop {
        match conn.poll_event() {
            Ok(Some(e)) => push_joined(events, e),
            Ok(None) => return None,
            Err(e) => {
                assert_eq!(conn.poll_event(), Err(e.clone()), "error not final");
                assert!(conn.is_read_done(), "an error, yet more to read");
                return Some(e);
            }
        }
    }
}

/// Feeds `pieces` through a default `Conn`, polling after each, then ends
/// the stream. Consecutive tunnel events are joined. Also returns the final
/// error, if any.
pub fn drive<D, S>(
    session: Session<&'static str, D, S>,
    pieces: &[&[u8]],
) -> (Vec<Ev>, Option<Error>)
where
    D: Decoder<Item = Bytes>,
    S: Switch<Bytes>,
{
    drive_with(session, ConnConfig::default(), pieces)
}

/// As [`drive`], over a `Conn` made with `config`. After the end (the last
/// event, or an error) nothing more comes.
pub fn drive_with<D, S>(
    session: Session<&'static str, D, S>,
    config: ConnConfig,
    pieces: &[&[u8]],
) -> (Vec<Ev>, Option<Error>)
where
    D: Decoder<Item = Bytes>,
    S: Switch<Bytes>,
{
    let mut conn = Conn::with_config(session, config, Duration::ZERO);
    let mut events: Vec<Ev> = Vec::new();
    for piece in pieces {
        conn.feed(piece, Duration::ZERO).unwrap();
        if let Some(e) = pump(&mut conn, &mut events) {
            return (events, Some(e));
        }
    }
    conn.handle_eof(Duration::ZERO);
    let error = pump(&mut conn, &mut events);
    if error.is_none() {
        assert!(
            matches!(events.last(), Some(Event::Closed(_))),
            "the stream ended without a Closed event"
        );
        assert!(conn.is_finished(), "ended, yet not finished");
        assert_eq!(conn.poll_event(), Ok(None), "an event after the end");
        assert!(conn.recv_buf().is_empty(), "bytes left after the end");
    }
    (events, error)
}

/// Bytes the events account for: a PROXY header's length, frames with
/// their delimiter (`overhead` a frame), tunnel and closing bytes.
pub fn accounted(events: &[Ev], overhead: usize) -> usize {
    events
        .iter()
        .map(|e| match e {
            Event::Proxy { len, .. } => *len,
            Event::Frame(f) => f.len() + overhead,
            Event::Tunnel(b) | Event::Closed(b) => b.len(),
            Event::Routed(d) => d.consume,
            _ => 0,
        })
        .sum()
}
