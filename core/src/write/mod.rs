//! The write side: a bounded [`WriteQueue`] of owned `Bytes`, and
//! [`fragments`] for cutting payloads into owned pieces.
//!
//! Encoders ([`Encoder`](crate::Encoder)) turn items into
//! [`Frame`](crate::Frame)s; the queue takes frames or plain `Bytes`, and an
//! adapter drains it into a socket with vectored writes.

mod config;
mod fragment;
mod marks;
mod push;
mod queue;

pub use config::{
    WriteQueueConfig, DEFAULT_COALESCE_BELOW, DEFAULT_COALESCE_LIMIT, DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DRAIN_BYTES, DEFAULT_MAX_ITEMS, DEFAULT_MAX_SLICES, DEFAULT_PIECE_SIZE,
    DEFAULT_URGENT_MAX_BYTES, DEFAULT_URGENT_MAX_ITEMS, MAX_PIECE_SIZE,
};
pub use fragment::{fragments, Fragments};
pub use marks::{Marks, Waiters};
pub use push::Push;
pub use queue::{Lane, Progress, Ticket, WriteQueue};
