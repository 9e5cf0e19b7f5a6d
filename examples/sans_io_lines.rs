//! A line protocol fed in random pieces: what arrives, what comes out,
//! what goes back.
//!
//! ```text
//! cargo run --example sans_io_lines            # seed 1
//! cargo run --example sans_io_lines -- 42      # another cut of the same stream
//! ```
//!
//! The stream is cut at random places (the way a socket delivers it) and
//! fed by hand into a `Conn` running `Framed<Lines>`: no socket, no
//! runtime, and a clock that is just a number. Whatever the cuts, the same
//! lines come out, and each is answered through the connection's write
//! queue. A `TUNNEL` line switches the connection to `Raw`: the bytes
//! already read past the marker stay where they are and come out first,
//! whole. The count at the end shows every byte is accounted for.

use std::time::Duration;

use cleave_proto::conn::{Conn, Framed, Raw};
use cleave_proto::{Bytes, Error, Lines, LinesConfig};

const STREAM: &[u8] = b"HELLO cleave\r\n\
SET greeting bonjour\r\n\
GET greeting\r\n\
PING\n\
TUNNEL\r\n\
raw bytes after the switch: \x00\x01\x02 no framing here";

/// A small deterministic generator, so a seed always gives the same cuts.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

/// Writes out everything the connection has queued, as a socket that
/// takes it all would; returns how many bytes went.
fn write_all<P: cleave_proto::Protocol>(conn: &mut Conn<P>, now: Duration) -> Result<usize, Error> {
    let mut written = 0;
    while let Some(chunk) = conn.poll_transmit_chunk() {
        conn.handle_written(chunk.len(), now)?;
        written += chunk.len();
    }
    Ok(written)
}

fn main() -> Result<(), Error> {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64);
    let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);

    // The stream, as the socket hands it over.
    let mut pieces = Vec::new();
    let mut rest = STREAM;
    while !rest.is_empty() {
        let (piece, tail) = rest.split_at(1 + rng.below(rest.len().min(24)));
        pieces.push(piece);
        rest = tail;
    }
    let mut pieces = pieces.into_iter();

    // The driver's clock: any monotonic reading will do; here, one
    // millisecond per read.
    let mut now = Duration::ZERO;
    let lines = Lines::with_config(LinesConfig::default().max_length(1024).utf8(true));
    let mut conn = Conn::new(Framed::new(lines), now);
    let (mut framed, mut overhead, mut answered) = (0usize, 0usize, 0usize);

    // Lines until the marker.
    let mut raw = loop {
        let Some(piece) = pieces.next() else {
            panic!("the stream has a TUNNEL line");
        };
        now += Duration::from_millis(1);
        println!(
            "read {:>2} bytes: {:?}",
            piece.len(),
            String::from_utf8_lossy(piece)
        );
        conn.feed(piece, now)?;
        let mut at = conn.recv_buf().offset();
        let mut marker = false;
        while let Some(line) = conn.poll_event()? {
            println!("  line  {:?}", String::from_utf8_lossy(&line));
            framed += line.len();
            overhead += (conn.recv_buf().offset() - at) as usize - line.len();
            at = conn.recv_buf().offset();
            let answer = format!("+OK {}\r\n", line.len());
            conn.push(Bytes::from(answer))
                .expect("a few answers fit in the queue");
            if &line[..] == b"TUNNEL" {
                marker = true;
                break;
            }
        }
        answered += write_all(&mut conn, now)?;
        if marker {
            // The bytes read past the marker stay in the buffer; the raw
            // protocol takes the connection over with them in place.
            println!(
                "  switch: {} bytes were already read past the marker",
                conn.recv_buf().len()
            );
            break conn.switch(|_lines| Raw::new());
        }
    };

    // Raw bytes: first what was read past the marker (one `Bytes`, not a
    // copy), then each piece as it comes.
    let mut tunnel = Vec::new();
    let mut pump = |raw: &mut Conn<Raw>| -> Result<(), Error> {
        while let Some(bytes) = raw.poll_event()? {
            println!("  raw   {:?}", String::from_utf8_lossy(&bytes));
            tunnel.extend_from_slice(&bytes);
        }
        Ok(())
    };
    pump(&mut raw)?;
    for piece in pieces {
        now += Duration::from_millis(1);
        println!(
            "read {:>2} bytes: {:?}",
            piece.len(),
            String::from_utf8_lossy(piece)
        );
        raw.feed(piece, now)?;
        pump(&mut raw)?;
    }
    raw.handle_eof(now);
    pump(&mut raw)?;
    assert!(
        raw.is_finished(),
        "the stream ended and everything went out"
    );

    println!();
    println!("raw tunnel bytes: {:?}", String::from_utf8_lossy(&tunnel));
    println!(
        "{} bytes in = {} in lines + {} of delimiters + {} tunnelled; {} bytes of answers out",
        STREAM.len(),
        framed,
        overhead,
        tunnel.len(),
        answered
    );
    assert_eq!(STREAM.len(), framed + overhead + tunnel.len());
    Ok(())
}
