//! cleave-std: drives cleave's Sans-IO core from blocking `std` I/O.
//!
//! The core's [`Conn`](cleave_proto::Conn) holds one connection's receive
//! buffer, write queue, lifecycle and timeouts, and a
//! [`Protocol`](cleave_proto::Protocol) makes events of the bytes. This
//! crate owns only what touches the OS: reading into the buffer's spare
//! room (no second copy), writing the queue with `write_vectored`, setting
//! read timeouts so that a blocking read returns at the connection's
//! deadline, shutting the socket down or resetting it, and waking threads
//! that wait for room or for a ticket.
//!
//! ```text
//!   your thread                      cleave-std Stream<S, P>             core Conn<P>
//!   ───────────                      ───────────────────               ────────────
//!   recv() ─────────────────────>    write the protocol's replies  <── poll_transmit
//!                                    read timeout := next deadline <── poll_timeout
//!                                    read into the spare room ─────>   handle_read / handle_eof
//!                                    timed out ────────────────────>   handle_timeout
//!          <── event / the end / error ──────────────────────────────  poll_event
//!   send(item) / flush() / close() ─> write_vectored ──────────────>   push / handle_written
//!                                    shutdown, or SO_LINGER 0 ─────>   poll_shutdown / handle_shutdown
//! ```
//!
//! # When to pick it
//!
//! For a thread per connection, a command-line tool, a test harness, or
//! anything that reads a file, a pipe or a Unix socket: no runtime, no
//! event loop, the code reads top to bottom. For many thousands of
//! connections, pick cleave-tokio or cleave-mio: a blocked thread per
//! connection costs a stack each.
//!
//! | need | use |
//! |------|-----|
//! | frames from a socket, file or pipe | [`Stream`]`<S, `[`Framed`](cleave_proto::Framed)`<D>>`, [`recv`](Stream::recv) |
//! | a routed connection (PROXY header, sniffing, frames, tunnel) | [`Stream`]`<S, `[`Session`](cleave_proto::Session)`>`, events are [`cleave_proto::Event`]s; [`switch`](Stream::switch) to another protocol once routed |
//! | a protocol that answers by itself (a pong, a close) | your [`Protocol`](cleave_proto::Protocol) queues with [`Wire::reply`](cleave_proto::conn::Wire::reply); `recv` writes it before it blocks |
//! | give up on silent or slow peers | [`Stream::with_config`] with [`Timeouts`](cleave_proto::Timeouts): idle, opening, frame, tunnel idle |
//! | one thread reads and writes its connection | [`Stream::send`], [`Stream::flush`], [`Stream::close`]: no lock, no extra thread |
//! | other threads write to a connection | [`spawn_writer`] → [`WriteHandle`] (clone it) |
//! | reads on one thread, writes from others | `try_clone` the socket: a [`Stream`] reads one clone in a [`ReadHalf`] (the write half is the writer's: no shutdown from the reading side), [`spawn_writer`] writes the other |
//! | a source of your own | implement [`Socket`] (timeouts, shutdown, reset: each optional) |
//!
//! # Same thread or writer thread?
//!
//! A [`Stream`] is a plain value: pushes are method calls, and bytes reach
//! the socket when the queue is full, on [`flush`](Stream::flush), or
//! before `recv` blocks if the protocol queued a reply, with nothing
//! shared. A [`WriteHandle`] lets any thread push; a thread of its own
//! writes, and never holds the queue's lock while it blocks in a write,
//! so [`try_send`](WriteHandle::try_send) never waits for a slow peer. It
//! costs a lock per push and a wake-up of the writer thread.
//!
//! # Drive loop of a thread-per-connection server
//!
//! ```text
//!   accept ─> Stream::with_config(socket, Framed::new(decoder), config)
//!   loop:
//!     recv()?            blocks for bytes (at most until the next deadline); Ok(None) at the end
//!       └─ send          (the answer: queued; written first if full)
//!     recv_buffered()?   the requests that arrived together, no read
//!       └─ send
//!     flush()?           every answer, one write_vectored
//!   close()?             what is left, then a FIN
//!   Err(Protocol(TimedOut(..)))  a timeout ran out: the socket is shut down
//!                                or reset already; drop the stream
//! ```
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{Shutdown, TcpListener, TcpStream};
//! use std::time::Duration;
//!
//! use cleave_proto::{ConnConfig, Encoder, Error, Framed, Lines, Timeouts};
//! use cleave_std::{ConnError, Stream};
//!
//! fn serve(socket: TcpStream) -> Result<(), Box<dyn std::error::Error>> {
//!     // Hang up on a client silent for 30 s, or 5 s into a line.
//!     let timeouts = Timeouts::default()
//!         .idle(Some(Duration::from_secs(30)))
//!         .frame(Some(Duration::from_secs(5)));
//!     let config = ConnConfig::default().timeouts(timeouts);
//!     let mut lines = Stream::with_config(socket, Framed::new(Lines::new()), config);
//!     let mut encoder = Lines::new();
//!     loop {
//!         let line = match lines.recv() {
//!             Ok(Some(line)) => line,
//!             Ok(None) => break, // the peer is done
//!             Err(ConnError::Protocol(Error::TimedOut(_))) => return Ok(()), // already shut down
//!             Err(e) => return Err(e.into()), // bad bytes, reset
//!         };
//!         lines.send(encoder.encode(line)?)?; // queued; written first if full
//!         while let Some(line) = lines.recv_buffered()? {
//!             lines.send(encoder.encode(line)?)?;
//!         }
//!         lines.flush()?; // the answers to what arrived together, in one write
//!     }
//!     lines.close()?; // and a FIN
//!     Ok(())
//! }
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = TcpListener::bind("127.0.0.1:0")?;
//! let mut client = TcpStream::connect(listener.local_addr()?)?;
//! let server = std::thread::spawn(move || {
//!     let (socket, _) = listener.accept()?;
//!     serve(socket).map_err(|e| std::io::Error::other(e.to_string()))
//! });
//! client.write_all(b"echo\nthis\n")?;
//! client.shutdown(Shutdown::Write)?;
//! let mut echoed = String::new();
//! client.read_to_string(&mut echoed)?;
//! assert_eq!(echoed, "echo\nthis\n");
//! server.join().expect("no panic")?;
//! # Ok(())
//! # }
//! ```
//!
//! # Errors and timeouts
//!
//! A [`Stream`] returns [`ConnError`], which says whose fault it was:
//! [`Protocol`](ConnError::Protocol), the core's typed error (the peer's
//! bytes, a limit, or one of the connection's timeouts:
//! [`Error::TimedOut`](cleave_proto::Error::TimedOut) with the
//! [`Timeout`](cleave_proto::Timeout) that ran out), and
//! [`Io`](ConnError::Io), the OS; both final.
//! [`TimedOut`](ConnError::TimedOut) is a read timeout of the caller's
//! (while the connection has no deadline of its own) or a write timeout:
//! not final, call again. Nothing read is ever lost: an incomplete last
//! frame comes back in [`cleave_proto::Error::Truncated`] (or
//! [`cleave_proto::Event::Closed`] from a session).
//!
//! The connection's timeouts and a router's inspect delay run from the
//! moment the stream is made, before the first byte. `recv` honours them
//! with the socket's read timeout (it sets one only while there is a
//! deadline, and puts the caller's back after); when one runs out, the
//! socket is shut down (a clean close) or reset (a peer that left an
//! incomplete frame) as the protocol says, and the error comes back.
//!
//! Through a [`WriteHandle`]: [`WriteError`], the same for every handle
//! once the writer failed; a write that could not be queued comes back in
//! a [`Rejected`](cleave_proto::Rejected)`<T, WriteError>` (or
//! `Rejected<T, Refusal>` from the `try_` methods).

#![warn(missing_docs, unreachable_pub)]
// Builders and results a caller must act on are `#[must_use]`.
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![forbid(unsafe_code)]

mod error;
mod handle;
mod shared;
mod socket;
mod stream;
mod thread;

pub use error::{ConnError, WriteError};
pub use handle::WriteHandle;
pub use socket::{ReadHalf, Socket};
pub use stream::Stream;
pub use thread::{spawn_writer, try_spawn_writer};

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
