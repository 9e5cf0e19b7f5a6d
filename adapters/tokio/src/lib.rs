//! cleave-tokio: drives cleave's Sans-IO core from tokio.
//!
//! The core's [`Conn`](cleave_proto::Conn) holds one connection's receive
//! buffer, write queue, lifecycle and timeouts, and a
//! [`Protocol`](cleave_proto::Protocol) makes events of the bytes (and may
//! queue replies of its own). This crate owns only what touches the
//! runtime: reading into the buffer's spare room (no second copy), writing
//! the queue with vectored writes, tokio timers for the core's deadlines,
//! waking whoever waits for room or for a ticket, and shutting down or
//! resetting the socket when the core says so.
//!
//! ```text
//!   socket ──read──> Conn<P> (RecvBuf ─ P::poll_event ─> events) ──> Stream::poll_next
//!   socket <─write── Conn<P> (WriteQueue <─ push / send, P's urgent replies)
//!   tokio Sleep ───> handle_timeout at conn.poll_timeout()
//!   FIN or reset <── conn.poll_shutdown()
//! ```
//!
//! | need | use |
//! |------|-----|
//! | any protocol over a socket, both directions, same task | [`Connection`] (a `Stream` of events; `send`, `flush`, `close`; `conn_mut().push` queues) |
//! | frames from a socket (and answers on it) | [`FrameReader`]: a `Connection` over a decoder |
//! | a routed connection (PROXY header, sniffing, frames, tunnel) | [`SessionReader`]: a `Connection` over a [`Session`](cleave_proto::Session) |
//! | timeouts (idle, opening, frame, tunnel idle) | [`ConnConfig`](cleave_proto::ConnConfig) given to `with_config` |
//! | a write half with no protocol, same task | [`Writer`]: no lock, no extra task |
//! | other tasks write to a connection | [`spawn_writer`] → [`WriteHandle`] (clone it; also a `Sink`) |
//! | any protocol, its events in one task, writes from many (next to the protocol's replies) | [`spawn_connection`] → [`Events`], [`ConnHandle`] (clone it) |
//! | the raw part after a hand-off | [`tunnel`], [`tunnel_with`] (an idle timeout) |
//! | the same between two sockets, moved by the kernel (splice(2) on Linux) | `splice_tunnel` with [`Pipes::global`] (unix) |
//! | an existing `tokio_util::codec::Framed` | `TokioCodec` (feature `codec`) |
//!
//! # Same task or cross task?
//!
//! A [`Connection`] or a [`Writer`] is a plain value: pushes are method
//! calls, and bytes reach the socket when its task polls it, with nothing
//! shared. A [`WriteHandle`] lets any task push; a spawned task writes. It
//! costs a lock per push and a wake-up of the writer task, which is what a
//! connection that many tasks answer on needs, and what a connection that
//! one task serves does not (BENCHMARKS.md measures both). All three write
//! through the same drain.
//!
//! # Drive loop of a routing proxy
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use cleave_proto::route::{HostPattern, Match, Router};
//! use cleave_proto::{ConnConfig, Event, Session, SessionConfig, Timeouts};
//! use cleave_tokio::{tunnel_with, SessionReader, TunnelConfig};
//! use futures_util::StreamExt;
//! use tokio::net::{TcpListener, TcpStream};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let timeouts = Timeouts::default()
//!     .frame(Some(Duration::from_secs(5)))
//!     .idle(Some(Duration::from_secs(60)))
//!     .tunnel_idle(Some(Duration::from_secs(300)));
//! let listener = TcpListener::bind("127.0.0.1:8443").await?;
//! loop {
//!     let (client, _) = listener.accept().await?;
//!     tokio::spawn(async move {
//!         let router = Router::new("127.0.0.1:9000")
//!             .rule(Match::TlsServerName(HostPattern::new("*.example.com")), "127.0.0.1:9001");
//!         let session = Session::tunnel(router, SessionConfig::default());
//!         let config = ConnConfig::default().timeouts(timeouts);
//!         let mut events = SessionReader::with_config(client, session, config);
//!         let mut backend = None;
//!         // A timeout ends the stream with `Error::TimedOut`; the socket is
//!         // shut down or reset by then, and dropped here.
//!         while let Some(Ok(event)) = events.next().await {
//!             match event {
//!                 Event::Routed(decision) => backend = TcpStream::connect(decision.target).await.ok(),
//!                 Event::Tunnel(tail) => {
//!                     let (mut client, conn) = events.into_parts();
//!                     let config = TunnelConfig::default().idle(conn.timeouts().get_tunnel_idle());
//!                     if let Some(mut backend) = backend {
//!                         let _ = tunnel_with(&mut client, &mut backend, tail, config).await;
//!                     }
//!                     return;
//!                 }
//!                 _ => {}
//!             }
//!         }
//!     });
//! }
//! # }
//! ```

#![warn(missing_docs, unreachable_pub)]
// Builders and results a caller must act on are `#[must_use]`.
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![forbid(unsafe_code)]

#[cfg(feature = "codec")]
mod codec;
mod conn;
mod drive;
mod entropy;
mod error;
mod reset;
mod spawn;
#[cfg(unix)]
mod splice;
mod tunnel;
mod writer;

pub use cleave_splice::{Pipes, PipesConfig};
#[cfg(feature = "codec")]
pub use codec::TokioCodec;
pub use conn::{Connection, FrameReader, SessionReader};
pub use entropy::OsEntropy;
pub use error::{ConnError, WriteError};
pub use reset::Reset;
pub use spawn::{spawn_connection, spawn_writer, ConnHandle, Events, WriteHandle};
#[cfg(unix)]
pub use splice::{splice_tunnel, SpliceStream};
pub use tunnel::{tunnel, tunnel_with, TunnelConfig};
pub use writer::Writer;

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
