//! Feeding a connection its input in pieces, the way the tests that
//! compare cuts do.

use core::time::Duration;

use cleave_proto::conn::{Conn, Protocol};
use cleave_proto::Error;

/// Feeds `pieces` in turn, taking every event after each, until the
/// input ends or an error comes: the events, and the error if one came.
pub fn feed_pieces<'a, P: Protocol>(
    conn: &mut Conn<P>,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> (Vec<P::Event>, Option<Error>) {
    let mut events = Vec::new();
    for piece in pieces {
        conn.feed(piece, Duration::ZERO).unwrap();
        loop {
            match conn.poll_event() {
                Ok(Some(event)) => events.push(event),
                Ok(None) => break,
                Err(e) => return (events, Some(e)),
            }
        }
    }
    (events, None)
}
