//! cleave-splice: the pipes of cleave's kernel-side tunnels.
//!
//! A tunnel direction moves its bytes socket -> pipe -> socket with
//! splice(2), so they never enter user space. This crate holds what
//! cleave-tokio's `splice_tunnel` and cleave-mio's `Tunnel` share: a
//! bounded pool of pipes ([`Pipes`]) that keeps the empty ones for the next
//! tunnel, and the two calls a direction makes on the pipe it leases
//! ([`Lease::fill`], [`Lease::drain`]). It does no waiting: the adapters
//! bring the readiness (tokio's, or a mio loop's).
//!
//! ```text
//!   Pipes::lease() ──> Lease
//!   socket ──Lease::fill──> pipe ──Lease::drain──> socket     (non-blocking)
//!   drop(Lease)  ──> back to the pool if empty, closed otherwise
//! ```
//!
//! A direction fills the pipe only when it is empty: then a fill that
//! would block says the socket has nothing, never that the pipe is full,
//! and the readiness it clears is the socket's.
//!
//! Where splice(2) does not exist (not Linux), or where `SIGPIPE` would
//! end the process, a pool opens no pipe: [`Pipes::lease`] returns `None`
//! and the adapters copy. A fill splice(2) will not do (a socket type it
//! does not read, a TCP urgent mark it stops at) fails with an error
//! [`is_unsupported`] recognises: the adapters copy from there on.

#![warn(missing_docs, unreachable_pub)]
#![warn(clippy::must_use_candidate, clippy::return_self_not_must_use)]
#![forbid(unsafe_code)]

/// This crate's README, its example compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

mod config;
mod lease;
mod pool;
#[cfg(any(target_os = "linux", target_os = "android"))]
#[path = "sys/linux.rs"]
mod sys;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[path = "sys/other.rs"]
mod sys;
#[cfg(all(test, any(target_os = "linux", target_os = "android")))]
mod tests;

pub use config::PipesConfig;
pub use lease::{is_unsupported, Lease};
pub use pool::Pipes;
