//! The adapter's errors are the ones every cleave driver reports: the
//! core's typed errors or what the OS said ([`ConnError`]; its `TimedOut`
//! is a read or write timeout the caller set, not final), and a writer
//! thread's failure ([`WriteError`]).

pub use cleave_proto::{ConnError, WriteError};
