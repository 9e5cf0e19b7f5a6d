//! cleave-proto: the Sans-IO core of cleave.
//!
//! cleave's core takes bytes in and gives back owned [`Bytes`] frames. It
//! does no I/O, reads no clock and depends on no runtime, so the same
//! protocol code runs under tokio, mio, blocking sockets, io_uring or a test
//! that feeds it one byte at a time.
//!
//! ```text
//!   adapter (cleave-tokio, cleave-mio, cleave-std, your loop, a test)
//!   ───────
//!   read into conn.spare_mut() ─> handle_read(n, now) / handle_eof(now)
//!   timer fired ───────────────> handle_timeout(now)
//!                                      │
//!   Conn<P: Protocol> ── RecvBuf (owned BytesMut; limits; peek without consuming)
//!        │               WriteQueue (bounded, tickets, urgent lane)
//!        │               lifecycle of both sides; Timeouts (idle, opening,
//!        │               frame, tunnel idle), from the `now` it is given
//!        v
//!   Protocol ── Framed<D: Decoder>   Lines | LengthPrefixed | Varint | Heads
//!        │      Session               [PROXY header] -> Router (sniffers: TLS SNI/ALPN,
//!        │                            HTTP Host, prefix) -> frames -> raw tunnel
//!        │      Raw                   the bytes as they come
//!        │      http1::Server | Client HTTP/1.1, strict; Routed: a route per request
//!        │      websocket::WebSocket  RFC 6455, both roles, permessage-deflate
//!        │      (may queue its own replies: Wire::reply, push, farewell)
//!        v
//!   poll_event()     -> Bytes frames and events: views of the buffer, not copies
//!   poll_transmit()  -> the next slices to write ──> writev ──> handle_written(n, now)
//!   poll_shutdown()  -> a FIN or a reset is due;  poll_timeout() -> when to wake
//!   switch(|p| q)    -> the next protocol, over the same buffer (unread bytes in place)
//! ```
//!
//! The pieces can be used alone (a decoder over a buffer; a write queue) or
//! together: a [`Conn`] is one connection in both directions, and its
//! [`Protocol`] (a [`Framed`] decoder, a routing [`Session`],
//! [`http1`]'s server and client, a [`websocket::WebSocket`]) is the logic. The adapters each have one driver, generic
//! over the protocol.
//!
//! # How to drive it
//!
//! A decoder alone:
//!
//! 1. Put bytes into a [`RecvBuf`]: [`feed`](RecvBuf::feed) a slice you own,
//!    or read straight into [`spare_mut`](RecvBuf::spare_mut) and
//!    [`commit`](RecvBuf::commit) what arrived.
//! 2. Call [`Decoder::decode`] until it returns `Ok(None)` ("need more").
//! 3. At end of stream call [`Decoder::decode_eof`] until `Ok(None)`; an
//!    incomplete last frame comes back inside [`Error::Truncated`].
//! 4. To switch to raw bytes (a tunnel after a protocol upgrade),
//!    [`take_tail`](RecvBuf::take_tail) hands over what was read past the
//!    last frame.
//!
//! ```
//! use cleave_proto::{Decoder, Lines, RecvBuf};
//!
//! let mut buf = RecvBuf::new();
//! let mut lines = Lines::new();
//! let mut got = Vec::new();
//! for piece in [&b"PING\r\nSE"[..], b"T k v\r\n", b"TUNNEL\nraw bytes"] {
//!     buf.feed(piece)?;
//!     while let Some(line) = lines.decode(&mut buf)? {
//!         if &line[..] == b"TUNNEL" {
//!             got.push(buf.take_tail()); // the raw tail, not copied
//!             break;
//!         }
//!         got.push(line);
//!     }
//! }
//! assert_eq!(got, ["PING", "SET k v", "raw bytes"]);
//! # Ok::<(), cleave_proto::Error>(())
//! ```
//!
//! A whole connection: a [`Conn`] over a protocol, whose handlers, polls and
//! questions [`Conn`]'s documentation lists in call order.
//!
//! ```
//! use cleave_proto::conn::{Conn, ConnConfig, Framed, Timeouts};
//! use cleave_proto::{Bytes, Error, Lines, Timeout};
//! use core::time::Duration;
//!
//! let ms = Duration::from_millis;
//! let config = ConnConfig::default().timeouts(Timeouts::default().frame(Some(ms(500))));
//! let mut conn = Conn::with_config(Framed::new(Lines::new()), config, ms(0));
//! conn.feed(b"hello\nwor", ms(10))?;
//! assert_eq!(conn.poll_event()?, Some(Bytes::from("hello")));
//! assert_eq!(conn.poll_event()?, None); // "wor" waits for its end...
//! assert_eq!(conn.poll_timeout(), Some(ms(510))); // ...for 500 ms at most
//! conn.handle_timeout(ms(510));
//! assert_eq!(conn.poll_event(), Err(Error::TimedOut(Timeout::Frame)));
//! assert_eq!(conn.recv_buf().peek(), b"wor"); // nothing lost
//! # Ok::<(), Error>(())
//! ```
//!
//! # Errors
//!
//! One [`Error`] type, whose variants say who is at fault ([`Error::fault`]):
//! the peer's bytes, a configured limit, or the caller. A decoder's errors
//! are final, and the bytes it did not consume stay in the buffer.
//!
//! # Features
//!
//! - `std` (default): forwards to the dependencies, and adds what drivers
//!   over `std::io` share: [`ConnError`], [`WriteError`], `From<Error> for
//!   std::io::Error`, [`Conn::write_with`], [`Conn::read_io`],
//!   [`Conn::write_io`], [`Conn::check_written`]. Without it the crate is
//!   `no_std` and needs only `alloc`, so it can run under an embedded poller
//!   or a user-space TCP stack.
//! - `deflate`: permessage-deflate (RFC 7692) for [`websocket`], on flate2
//!   with the zlib-rs backend (implies `std`).
//! - `xxh3`: XXH3-64 checksums for [`Checked`] frames, on xxhash-rust.
//!   (CRC-16 and CRC-32 are always there; with `std`, CRC-32 uses
//!   crc32fast's SIMD.)
//! - `prost`: `codec::message`, typed prost messages over [`Varint`]
//!   frames (prost 0.14 needs Rust 1.85; the rest of the crate 1.83).

#![cfg_attr(not(any(feature = "std", test)), no_std)]
#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]
// Builders and results a caller must act on are `#[must_use]`.
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![warn(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::cast_possible_truncation
)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

extern crate alloc;

pub mod codec;
pub mod conn;
mod decoder;
#[cfg(feature = "std")]
mod driver;
mod encoder;
mod error;
pub mod http1;
mod recv_buf;
pub mod route;
mod session;
pub mod sniff;
pub mod websocket;
pub mod write;

pub use bytes::{Bytes, BytesMut};
pub use codec::checked::{
    BadChecksum, Checked, CheckedConfig, Checksum, ChecksumMismatch, SkipMismatched,
};
pub use codec::heads::Heads;
pub use codec::length::{Endian, LengthConfig, LengthPrefixed, DEFAULT_MAX_FRAME_LENGTH};
pub use codec::lines::{Lines, LinesConfig, DEFAULT_MAX_LINE_LENGTH};
pub use codec::varint::{Varint, VarintConfig, MAX_VARINT_LEN};
pub use conn::{Conn, ConnConfig, Framed, Protocol, Raw, Timeouts};
pub use decoder::{Decoder, Frames};
#[cfg(feature = "std")]
pub use driver::{ConnError, WriteError};
pub use encoder::{Encoder, Frame, INLINE_FRAMING};
pub use error::{
    Error, Fault, HttpField, InvalidInput, Limit, Misuse, ProxyField, Refusal, Rejected, Timeout,
    TlsField, Unencodable, VarintField, WsField,
};
pub use recv_buf::{
    Position, RecvBuf, RecvBufConfig, DEFAULT_IDLE_CAPACITY, DEFAULT_MAX_BUFFERED,
    DEFAULT_READ_RESERVE,
};
pub use session::{Event, NoFrames, NoSwitch, ProxyMode, Session, SessionConfig, Switch};
pub use write::{
    fragments, Fragments, Lane, Marks, Progress, Push, Ticket, Waiters, WriteQueue,
    WriteQueueConfig,
};

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
