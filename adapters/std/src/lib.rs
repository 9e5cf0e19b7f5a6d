//! cleave-std: drives cleave's Sans-IO core from blocking `std` I/O.
//!
//! It owns only what touches the OS: reading into the core's
//! [`RecvBuf`](cleave_proto::RecvBuf) (straight into its spare room, no second
//! copy), writing the core's [`WriteQueue`](cleave_proto::WriteQueue) with
//! `write_vectored`, waking threads that wait for room or for a ticket,
//! and turning read timeouts into a typed, recoverable error. Every
//! protocol decision stays in the core.
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
//! | a routed connection (PROXY header, sniffing, frames, tunnel) | [`Stream`]`<S, `[`Session`](cleave_proto::Session)`>`, events are [`cleave_proto::Event`]s |
//! | one thread reads and writes its connection | [`Stream::send`], [`Stream::flush`]: no lock, no extra thread |
//! | other threads write to a connection | [`spawn_writer`] → [`WriteHandle`] (clone it) |
//! | reads on one thread, writes from others | `try_clone` the socket: a [`Stream`] reads one clone, [`spawn_writer`] writes the other |
//! | give up on a silent peer | `set_read_timeout`: [`RecvError::TimedOut`], then [`recv`](Stream::recv) again |
//!
//! # Same thread or writer thread?
//!
//! A [`Stream`] is a plain value: pushes are method calls, and bytes reach
//! the socket when the queue is full or on [`flush`](Stream::flush), with
//! nothing shared. A [`WriteHandle`] lets any thread push; a thread of its
//! own writes, and never holds the queue's lock while it blocks in a write,
//! so [`try_send`](WriteHandle::try_send) never waits for a slow peer. It
//! costs a lock per push and a wake-up of the writer thread.
//!
//! # Drive loop of a thread-per-connection server
//!
//! ```text
//!   accept ─> Stream::new(socket, Framed::new(decoder))
//!   loop:
//!     recv()?            blocks for bytes; Ok(None) at the end
//!       └─ send_frame    (the answer: queued; written first if full)
//!     recv_buffered()?   the requests that arrived together, no read
//!       └─ send_frame
//!     flush()?           every answer, one write_vectored
//!   Err(TimedOut)        the read timeout ran out: close, or recv again
//! ```
//!
//! ```
//! use std::io::{Read, Write};
//! use std::net::{Shutdown, TcpListener, TcpStream};
//! use std::time::Duration;
//!
//! use cleave_proto::{Encoder, Framed, Lines};
//! use cleave_std::{RecvError, Stream};
//!
//! fn serve(socket: TcpStream) -> Result<(), Box<dyn std::error::Error>> {
//!     socket.set_read_timeout(Some(Duration::from_secs(30)))?;
//!     let mut lines = Stream::new(socket, Framed::new(Lines::new()));
//!     let mut encoder = Lines::new();
//!     loop {
//!         let line = match lines.recv() {
//!             Ok(Some(line)) => line,
//!             Ok(None) => break,                        // the peer is done
//!             Err(RecvError::TimedOut) => break,        // idle for 30 s
//!             Err(e) => return Err(e.into()),           // bad bytes, reset
//!         };
//!         lines.send_frame(encoder.encode(line)?)?; // queued; written first if full
//!         while let Some(line) = lines.recv_buffered()? {
//!             lines.send_frame(encoder.encode(line)?)?;
//!         }
//!         lines.flush()?; // the answers to what arrived together, in one write
//!     }
//!     lines.close()?;
//!     lines.get_ref().shutdown(Shutdown::Write)?;
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
//! # Errors
//!
//! Reading: [`RecvError`] says whose fault it was ([`Protocol`](RecvError::Protocol),
//! the peer's bytes or a limit; [`Io`](RecvError::Io), the reader), both
//! final; [`TimedOut`](RecvError::TimedOut) is not final. Nothing read is
//! ever lost: an incomplete last frame comes back in
//! [`cleave_proto::Error::Truncated`] (or [`cleave_proto::Event::Closed`] from a
//! session).
//!
//! Writing on the caller's thread: `io::Error`, as `Write` says. Through a
//! [`WriteHandle`]: [`WriteError`], the same for every handle once the
//! writer failed; a write that could not be queued comes back in a
//! [`SendError`] (or a [`Rejected`](cleave_proto::Rejected) from the `try_`
//! methods).

#![warn(missing_docs, unreachable_pub)]
// Builders and results a caller must act on are `#[must_use]`.
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![forbid(unsafe_code)]

mod error;
mod handle;
mod shared;
mod stream;
mod thread;
mod write;

pub use error::{RecvError, SendError, WriteError};
pub use handle::WriteHandle;
pub use stream::Stream;
pub use thread::{spawn_writer, try_spawn_writer};

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
