//! cleave-tokio: drives cleave's Sans-IO core from tokio.
//!
//! It owns only what touches the runtime: reading into the core's
//! [`RecvBuf`](cleave_proto::RecvBuf) (straight into its spare room, no second
//! copy), writing the core's [`WriteQueue`](cleave_proto::WriteQueue) with
//! vectored writes, waking whoever waits for room or for a ticket, timers
//! for the session's deadline, and shutting down cleanly. Every protocol
//! decision stays in the core.
//!
//! | need | use |
//! |------|-----|
//! | frames from a socket | [`FrameReader`] (a `Stream`) |
//! | a routed connection (PROXY header, sniffing, frames, tunnel) | [`SessionReader`] (a `Stream` of [`cleave_proto::Event`]s) |
//! | one task reads and writes its connection | [`Writer`]: same-task, no lock, no extra task |
//! | other tasks write to a connection | [`spawn_writer`] → [`WriteHandle`] (clone it; also a `Sink`) |
//! | the raw part after a hand-off | [`tunnel`] |
//! | an existing `tokio_util::codec::Framed` | `TokioCodec` (feature `codec`) |
//!
//! # Same task or cross task?
//!
//! A [`Writer`] is a plain value: pushes are method calls, and bytes reach
//! the socket when its task drains it, with nothing shared. A
//! [`WriteHandle`] lets any task push; a spawned task writes. It costs a
//! lock per push and a wake-up of the writer task, which is what a
//! connection that many tasks answer on needs, and what a connection that
//! one task serves does not (see the README's numbers).
//!
//! # Drive loop of a routing proxy
//!
//! ```no_run
//! use cleave_proto::route::{HostPattern, Match, Router};
//! use cleave_proto::{Event, Session, SessionConfig};
//! use cleave_tokio::{tunnel, SessionReader};
//! use futures_util::StreamExt;
//! use tokio::net::{TcpListener, TcpStream};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let listener = TcpListener::bind("127.0.0.1:8443").await?;
//! loop {
//!     let (client, _) = listener.accept().await?;
//!     tokio::spawn(async move {
//!         let router = Router::new("127.0.0.1:9000")
//!             .rule(Match::TlsServerName(HostPattern::new("*.example.com")), "127.0.0.1:9001");
//!         let mut events = SessionReader::new(client, Session::tunnel(router, SessionConfig::default()));
//!         let mut backend = None;
//!         while let Some(Ok(event)) = events.next().await {
//!             match event {
//!                 Event::Routed(decision) => backend = TcpStream::connect(decision.target).await.ok(),
//!                 Event::Tunnel(tail) => {
//!                     let (mut client, _) = events.into_parts();
//!                     if let Some(mut backend) = backend {
//!                         let _ = tunnel(&mut client, &mut backend, tail).await;
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
mod error;
mod handle;
mod read;
mod tunnel;
mod write;

#[cfg(feature = "codec")]
pub use codec::TokioCodec;
pub use error::{ReadError, WriteError};
pub use handle::{spawn_writer, WriteHandle, Written};
pub use read::{FrameReader, SessionReader};
pub use tunnel::{tunnel, Reset};
pub use write::Writer;

/// This crate's README, its examples compiled and run as doctests (the
/// README ships in the package, so they build from the packaged sources).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
