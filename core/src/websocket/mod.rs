//! WebSocket (RFC 6455), both roles, on the connection model, with
//! permessage-deflate (RFC 7692) behind the `deflate` feature.

mod assemble;
mod close;
mod config;
#[cfg(feature = "deflate")]
mod deflate;
mod frame;
mod handshake;
mod proto;
mod slice;
mod utf8;

pub use assemble::Assembler;
pub use close::{close_code, close_code_for, is_sendable, CloseFrame};
pub use config::{WsConfig, DEFAULT_MAX_FRAME, DEFAULT_MAX_MESSAGE, DEFAULT_STREAM_ABOVE};
pub use frame::OpCode;
pub use proto::{Kind, Part, WebSocket, WsEvent};
pub use slice::SliceFrame;

#[cfg(feature = "deflate")]
pub use deflate::{DeflateConfig, DeflateParams};
pub use handshake::{
    accept, accept_key, refusal, AcceptConfig, Accepted, ClientHandshake, ConnectConfig, Negotiated,
};

/// Which end of the connection a WebSocket is: a server reads masked
/// frames and sends them unmasked; a client the other way round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Accepted the connection: reads masked frames.
    Server,
    /// Opened the connection: masks what it sends.
    Client,
}

/// Where a client's randomness comes from: its masking keys and its
/// `Sec-WebSocket-Key`. The core has none of its own; the adapters supply
/// one from the operating system (RFC 6455, section 10.3: the masks must
/// not be predictable).
pub trait Entropy {
    /// Fills `buf` with random bytes.
    fn fill(&mut self, buf: &mut [u8]);
}

impl<F: FnMut(&mut [u8])> Entropy for F {
    fn fill(&mut self, buf: &mut [u8]) {
        self(buf);
    }
}
