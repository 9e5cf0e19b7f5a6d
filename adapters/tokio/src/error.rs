//! The adapter's errors are the ones every cleave driver reports: the
//! core's typed errors or what the OS said ([`ConnError`]), and a shared
//! writer's failure ([`WriteError`]; this crate never returns its
//! `TimedOut`: wrap a wait in `tokio::time::timeout`).

pub use cleave_proto::{ConnError, WriteError};
