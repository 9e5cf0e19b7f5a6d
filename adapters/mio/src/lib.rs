//! cleave-mio: drives cleave's Sans-IO core from a mio poll loop.
//!
//! For event loops you own: a proxy or a broker with its own `mio::Poll`,
//! a server that keeps thousands of connections on one thread, an
//! embedding where a runtime would be in the way. A [`Conn`] is one
//! connection's state, driven on readiness; it does not own the loop, the
//! tokens or the timers, so it fits the loop you already have.
//!
//! | need | use |
//! |------|-----|
//! | frames from a socket | `Conn<S, cleave_proto::Framed<D>>`: events are the decoder's frames |
//! | a routed connection (PROXY header, sniffing, frames, tunnel) | `Conn<S, cleave_proto::Session<T, D>>`: events are [`cleave_proto::Event`]s |
//! | what to register for | [`Conn::update_registration`] (or [`Conn::interest`]) |
//! | when to wake without I/O | [`Conn::deadline`] (a session's inspect delay) |
//! | a listener and connections by token | [`Conns`]: a slab of `Conn`s; `accept`, `get_mut`, `settle` |
//!
//! Pick cleave-tokio instead when the program already runs on tokio, and
//! cleave-std for blocking code.
//!
//! # The drive loop
//!
//! ```text
//!   accept ─> Conn::new(socket, inbound); conn.register(registry, token)
//!   loop {
//!       poll.poll(&mut events, earliest deadline)
//!       for each event of a connection:
//!           conn.on_event(event, &mut out)             reads if readable (until the
//!                                                      socket is empty), writes if writable
//!           handle `out`; conn.push(..)                answers are queued
//!           outcome.more ─> on_readable(&mut out) again  the read budget ran out
//!           conn.on_writable()                         and go out now, not one poll later
//!           conn.update_registration(registry, token)  WRITABLE only while
//!                                                      something is queued
//!           conn.is_finished() ─> deregister and drop
//!       for each connection whose deadline() passed: conn.on_deadline(&mut out)
//!   }
//!
//! `on_readable` and `on_writable` do the two halves of `on_event` when
//! there is no event to hand over (after resuming a paused reader, say).
//! ```
//!
//! A loop that takes its timeout from `deadline()` must call
//! `on_deadline` for every connection whose deadline passed, framed ones
//! included: a new connection's deadline is its start, and the first call
//! starts the read side's clock (a session's inspect delay runs from
//! there, even for a client that never sends a byte). Only a loop that
//! serves framed connections alone can do without timers.
//!
//! A line server and one client, on one thread's poll loop:
//!
//! ```
//! use std::io::{Read, Write};
//! use cleave_proto::{Encoder, Framed, Lines};
//! use cleave_mio::Conn;
//! use mio::net::TcpListener;
//! use mio::{Events, Interest, Poll, Token};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut poll = Poll::new()?;
//! let mut listener = TcpListener::bind("127.0.0.1:0".parse()?)?;
//! poll.registry().register(&mut listener, Token(0), Interest::READABLE)?;
//! let addr = listener.local_addr()?;
//! let client = std::thread::spawn(move || -> std::io::Result<String> {
//!     let mut socket = std::net::TcpStream::connect(addr)?;
//!     socket.write_all(b"hello\nworld\n")?;
//!     socket.shutdown(std::net::Shutdown::Write)?;
//!     let mut answer = String::new();
//!     socket.read_to_string(&mut answer)?;
//!     Ok(answer)
//! });
//!
//! let mut conn = None;
//! let (mut events, mut lines, mut encoder) = (Events::with_capacity(64), Vec::new(), Lines::new());
//! while conn.as_ref().is_none_or(|c: &Conn<_, _>| !c.is_finished()) {
//!     poll.poll(&mut events, None)?;
//!     for event in &events {
//!         if event.token() == Token(0) {
//!             let (socket, _) = listener.accept()?;
//!             let mut c = Conn::new(socket, Framed::new(Lines::new()));
//!             c.register(poll.registry(), Token(1))?;
//!             conn = Some(c);
//!             continue;
//!         }
//!         let Some(c) = conn.as_mut() else { continue };
//!         let mut outcome = c.on_event(event, &mut lines)?;
//!         loop {
//!             for line in lines.drain(..) {
//!                 c.push_frame(encoder.encode(line)?).expect("room");
//!             }
//!             if !outcome.more {
//!                 break;
//!             }
//!             outcome = c.on_readable(&mut lines)?; // the read budget ran out: read on
//!         }
//!         if outcome.eof {
//!             c.close_write(); // answer, then end our side too
//!         }
//!         c.on_writable()?; // what was just queued
//!         c.update_registration(poll.registry(), Token(1))?;
//!     }
//! }
//! assert_eq!(client.join().expect("client")?, "hello\nworld\n");
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs, unreachable_pub)]
// Builders and results a caller must act on are `#[must_use]`.
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![forbid(unsafe_code)]

mod conn;
mod conns;
mod error;

pub use conn::{Conn, ReadOutcome, Socket, DEFAULT_READ_BUDGET};
pub use conns::{Accepted, Conns};
pub use error::ConnError;

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
