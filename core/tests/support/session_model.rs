//! Drives a `Session` over pieces of an input and accounts for its bytes.
//!
//! Shared by the integration tests and the fuzz target (`#[path]`).

#![allow(dead_code)]

use std::time::Duration;

use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::{Bytes, Decoder, Error, Event, Session};

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

/// Feeds `pieces`, polling after each, then ends the stream. Consecutive
/// tunnel events are joined (raw bytes pass through as they arrive). Also
/// returns the final error, if any.
pub fn drive<D: Decoder<Item = Bytes>>(
    mut session: Session<&'static str, D>,
    pieces: &[&[u8]],
) -> (Vec<Ev>, Option<Error>) {
    let mut events: Vec<Ev> = Vec::new();
    let push = |events: &mut Vec<Ev>, e: Ev| match (events.last_mut(), e) {
        (Some(Event::Tunnel(a)), Event::Tunnel(b)) => *a = Bytes::from([&a[..], &b[..]].concat()),
        (_, e) => events.push(e),
    };
    let pump = |session: &mut Session<&'static str, D>, events: &mut Vec<Ev>| -> Option<Error> {
        loop {
            match session.poll_event(Duration::ZERO) {
                Ok(Some(e)) => push(events, e),
                Ok(None) => return None,
                Err(e) => {
                    assert_eq!(
                        session.poll_event(Duration::ZERO),
                        Err(e.clone()),
                        "error not final"
                    );
                    return Some(e);
                }
            }
        }
    };
    for piece in pieces {
        session.feed(piece).unwrap();
        if let Some(e) = pump(&mut session, &mut events) {
            return (events, Some(e));
        }
    }
    session.handle_eof();
    let error = pump(&mut session, &mut events);
    (events, error)
}

pub fn pieces<'a>(data: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut i = 0;
    while !rest.is_empty() {
        let n = sizes[i % sizes.len()].clamp(1, rest.len());
        out.push(&rest[..n]);
        rest = &rest[n..];
        i += 1;
    }
    out
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
