//! cleave-proto: the Sans-IO core of cleave.
//!
//! cleave's core takes bytes in and gives back owned [`Bytes`] frames. It
//! does no I/O, reads no clock and depends on no runtime, so the same
//! protocol code runs under tokio, mio, blocking sockets, io_uring or a test
//! that feeds it one byte at a time.
//!
//! ```text
//!   bytes from anywhere (socket read, io_uring completion, test vector)
//!        │
//!        v
//!   RecvBuf ── feed(&[u8]) or spare_mut() + commit(n)
//!        │       owned BytesMut; limits; peek without consuming
//!        v
//!   Session ── [PROXY header] -> Router (sniffers: TLS SNI/ALPN, HTTP Host,
//!        │       prefix; budget, deadline) -> frames -> raw tunnel
//!        v
//!   Decoder ── Lines | LengthPrefixed | Varint | http::Heads
//!        │       Ok(Some(frame)) | Ok(None) = need more | Err(final)
//!        v
//!   Bytes frames: views of the receive buffer, never copies
//!   take_tail(): everything unread, as one Bytes, for a raw tunnel
//!
//!   Encoder ── Frame (head, body untouched, tail) ──> WriteQueue
//!               bounded, tickets, io_slices() + advance(n), urgent lane
//! ```
//!
//! The pieces can be used alone (a decoder over a buffer; a write queue) or
//! together: a [`Session`] is one connection's whole read side.
//!
//! # How to drive it
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
//! # Errors
//!
//! One [`Error`] type, whose variants say who is at fault ([`Error::fault`]):
//! the peer's bytes, a configured limit, or the caller. A decoder's errors
//! are final, and the bytes it did not consume stay in the buffer.
//!
//! # Features
//!
//! - `std` (default): forwards to the dependencies. Without it the crate is
//!   `no_std` and needs only `alloc`, so it can run under an embedded poller
//!   or a user-space TCP stack.

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
mod decoder;
mod encoder;
mod error;
mod inbound;
mod recv_buf;
pub mod route;
mod session;
pub mod sniff;
pub mod write;

pub use bytes::{Bytes, BytesMut};
pub use codec::length::{Endian, LengthConfig, LengthPrefixed, DEFAULT_MAX_FRAME_LENGTH};
pub use codec::lines::{Lines, LinesConfig, DEFAULT_MAX_LINE_LENGTH};
pub use codec::varint::{Varint, VarintConfig, MAX_VARINT_LEN};
pub use decoder::{Decoder, Frames};
pub use encoder::{Encoder, Frame, INLINE_FRAMING};
pub use error::{Error, Fault, Field, InvalidInput, Limit, Misuse, Rejected, Unencodable};
pub use inbound::{Framed, Inbound};
pub use recv_buf::{
    RecvBuf, RecvBufConfig, DEFAULT_IDLE_CAPACITY, DEFAULT_MAX_BUFFERED, DEFAULT_READ_RESERVE,
};
pub use session::{Event, NoFrames, ProxyMode, Session, SessionConfig};
pub use write::{fragments, Fragments, Lane, Progress, Ticket, WriteQueue, WriteQueueConfig};

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
