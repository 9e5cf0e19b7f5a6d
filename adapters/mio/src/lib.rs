//! cleave-mio: drives cleave's Sans-IO core from a mio poll loop.
//!
//! For event loops you own: a proxy or a broker with its own `mio::Poll`,
//! a server that keeps thousands of connections on one thread, an
//! embedding where a runtime would be in the way. A [`Conn`] is one
//! connection: the socket and the core's [`cleave_proto::Conn`] (receive
//! buffer, write queue, lifecycle, timeouts), driven on readiness. It does
//! not own the loop, the tokens or the timers, so it fits the loop you
//! already have; it only moves bytes, and the core decides the rest.
//!
//! ```text
//!   mio event ──> Conn::on_event ──> read into the core's buffer ──> core: handle_read
//!                                 └> write the queue's slices    ──> core: handle_written
//!   deadline  ──> Conn::on_timeout                               ──> core: handle_timeout
//!   the core's poll_event      ──> your events (frames, routing decisions, tunnel bytes)
//!   the core's poll_shutdown   ──> Socket::shutdown_write / Socket::reset_on_close
//!   the core's wants_read/write ─> Conn::interest ──> the registration
//! ```
//!
//! | need | use |
//! |------|-----|
//! | frames from a socket | `Conn<S, cleave_proto::Framed<D>>`: events are the decoder's frames |
//! | a routed connection (PROXY header, sniffing, frames, tunnel) | `Conn<S, cleave_proto::Session<T, D>>`: events are [`cleave_proto::Event`]s |
//! | a protocol of your own (it may answer on the urgent lane itself: a pong) | `Conn<S, P>` for any [`cleave_proto::Protocol`] |
//! | a raw tunnel after a routing decision or a marker | [`Conn::switch`] to [`cleave_proto::Raw`] |
//! | a raw tunnel between two sockets, moved by the kernel (splice(2) on Linux) | `Tunnel` (unix), with pipes from [`Pipes::global`] |
//! | idle, opening, frame and tunnel timeouts | [`Conn::with_config`] with a [`cleave_proto::ConnConfig`]; they end in [`cleave_proto::Error::TimedOut`] |
//! | answers, and the end of your side | [`Conn::conn_mut`] then the core's `push` (bulk) or `push_urgent`; [`Conn::close`], [`Conn::reset`] |
//! | what to register for | [`Conn::update_registration`] (or [`Conn::interest`]) |
//! | when to wake without I/O | [`Conn::deadline`], then [`Conn::on_timeout`] |
//! | a listener and connections by token | [`Conns`]: a slab of `Conn`s; `accept`, `get_mut`, `settle` |
//!
//! Pick cleave-tokio instead when the program already runs on tokio, and
//! cleave-std for blocking code.
//!
//! # The drive loop
//!
//! ```text
//!   accept ─> Conn::with_config(socket, protocol, config); conn.register(registry, token)
//!   loop {
//!       poll.poll(&mut events, earliest deadline())
//!       for each event of a connection:
//!           conn.on_event(event, &mut out)             reads if readable (until the
//!                                                      socket is empty), writes if writable
//!           handle `out`; conn.conn_mut().push(..)     answers are queued
//!           outcome.more ─> on_readable(&mut out) again  the read budget ran out
//!           outcome.eof  ─> conn.close()               answer, then end our side too
//!           conn.on_writable()                         and go out now, not one poll later
//!           conn.update_registration(registry, token)  WRITABLE only while
//!                                                      something is queued
//!           conn.is_finished() ─> deregister and drop
//!       for each connection whose deadline() passed:
//!           conn.on_timeout(&mut out)                  a timeout ran out (Err(TimedOut):
//!                                                      the connection is ending), or the
//!                                                      protocol decides by the clock
//!           then as after an event
//!   }
//! ```
//!
//! `on_readable` and `on_writable` do the two halves of `on_event` when
//! there is no event to hand over (after resuming a paused reader, say).
//!
//! The deadline is known from the connection's creation: its timeouts
//! and a session's inspect delay run from there, so a client that never
//! sends a byte (and never makes its socket readable) is routed, or ended,
//! on time. A loop that serves only connections without timeouts and
//! without a session can do without timers.
//!
//! A line server and one client, on one thread's poll loop, with an idle
//! timeout:
//!
//! ```
//! use std::io::{Read, Write};
//! use std::time::{Duration, Instant};
//! use cleave_proto::{ConnConfig, Encoder, Framed, Lines, Timeouts};
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
//! let idle = Timeouts::default().idle(Some(Duration::from_secs(30)));
//! let mut conn = None;
//! let (mut events, mut lines, mut encoder) = (Events::with_capacity(64), Vec::new(), Lines::new());
//! while conn.as_ref().is_none_or(|c: &Conn<_, _>| !c.is_finished()) {
//!     let deadline = conn.as_ref().and_then(|c: &Conn<_, _>| c.deadline());
//!     poll.poll(&mut events, deadline.map(|d| d.saturating_duration_since(Instant::now())))?;
//!     if let Some(c) = conn.as_mut().filter(|c| c.deadline().is_some_and(|d| d <= Instant::now())) {
//!         c.on_timeout(&mut lines)?; // Err(TimedOut(Idle)) if the client went quiet
//!     }
//!     for event in &events {
//!         if event.token() == Token(0) {
//!             let (socket, _) = listener.accept()?;
//!             let config = ConnConfig::default().timeouts(idle);
//!             let mut c = Conn::with_config(socket, Framed::new(Lines::new()), config);
//!             c.register(poll.registry(), Token(1))?;
//!             conn = Some(c);
//!             continue;
//!         }
//!         let Some(c) = conn.as_mut() else { continue };
//!         let mut outcome = c.on_event(event, &mut lines)?;
//!         loop {
//!             for line in lines.drain(..) {
//!                 c.conn_mut().push(encoder.encode(line)?).expect("room");
//!             }
//!             if !outcome.more {
//!                 break;
//!             }
//!             outcome = c.on_readable(&mut lines)?; // the read budget ran out: read on
//!         }
//!         if outcome.eof {
//!             c.close(); // answer, then end our side too
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
mod socket;
#[cfg(unix)]
mod tunnel;

pub use cleave_splice::{Pipes, PipesConfig};
pub use conn::{Conn, ReadOutcome, DEFAULT_READ_BUDGET};
pub use conns::{Accepted, Conns};
pub use error::ConnError;
pub use socket::Socket;
#[cfg(unix)]
pub use tunnel::{Side, Tunnel, DEFAULT_TUNNEL_BUDGET};

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
