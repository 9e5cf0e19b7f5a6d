//! A line protocol fed in random pieces: what arrives, what comes out.
//!
//! ```text
//! cargo run --example sans_io_lines            # seed 1
//! cargo run --example sans_io_lines -- 42      # another cut of the same stream
//! ```
//!
//! The stream is cut at random places (the way a socket delivers it), fed
//! into a `RecvBuf`, and decoded with `Lines`. Whatever the cuts, the same
//! lines come out; a `TUNNEL` line switches to raw bytes, and the bytes read
//! past it are handed over whole; the count at the end shows every byte is
//! accounted for.

use cleave_proto::{Decoder, Error, Lines, LinesConfig, RecvBuf};

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

fn main() -> Result<(), Error> {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64);
    let mut rng = XorShift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);

    let mut buf = RecvBuf::new();
    let mut lines = Lines::with_config(LinesConfig::default().max_length(1024).utf8(true));
    let (mut framed, mut overhead) = (0usize, 0usize);
    let mut tunnel = Vec::new();
    let mut rest = STREAM;
    let mut tunneling = false;

    while !rest.is_empty() {
        let n = 1 + rng.below(rest.len().min(24));
        let (piece, tail) = rest.split_at(n);
        rest = tail;
        println!(
            "read {:>2} bytes: {:?}",
            piece.len(),
            String::from_utf8_lossy(piece)
        );
        if tunneling {
            tunnel.extend_from_slice(piece);
            continue;
        }
        buf.feed(piece)?;
        let mut at = buf.offset();
        while let Some(line) = lines.decode(&mut buf)? {
            println!("  line  {:?}", String::from_utf8_lossy(&line));
            framed += line.len();
            overhead += (buf.offset() - at) as usize - line.len();
            at = buf.offset();
            if &line[..] == b"TUNNEL" {
                // Everything read past the marker, as one `Bytes`, no copy.
                let tail = buf.take_tail();
                println!(
                    "  tunnel: {} bytes were already read past the marker",
                    tail.len()
                );
                tunnel.extend_from_slice(&tail);
                tunneling = true;
                break;
            }
        }
    }

    println!();
    println!("raw tunnel bytes: {:?}", String::from_utf8_lossy(&tunnel));
    println!(
        "{} bytes in = {} in lines + {} of delimiters + {} tunnelled",
        STREAM.len(),
        framed,
        overhead,
        tunnel.len()
    );
    assert_eq!(STREAM.len(), framed + overhead + tunnel.len());
    Ok(())
}
