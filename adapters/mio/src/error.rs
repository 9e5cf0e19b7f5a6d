//! The adapter's error is the one every cleave driver reports: the core's
//! typed errors, or what the OS said.

pub use cleave_proto::ConnError;
