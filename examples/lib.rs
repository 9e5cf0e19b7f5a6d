//! Runnable examples of cleave; see the `[[example]]` entries in Cargo.toml.

pub mod accept;
pub mod backlog;
pub mod http1;
pub mod http_proxy;
pub mod websocket;
