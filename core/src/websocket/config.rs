//! [`WsConfig`]: a WebSocket's limits and what it answers by itself.

use crate::error::Error;

/// Default [`WsConfig::max_frame`]: 16 MiB, the largest frame Autobahn
/// sends and tungstenite's default.
pub const DEFAULT_MAX_FRAME: u64 = 16 << 20;
/// Default [`WsConfig::max_message`]: 64 MiB, tungstenite's default.
pub const DEFAULT_MAX_MESSAGE: u64 = 64 << 20;
/// Default [`WsConfig::stream_above`]: 1 MiB.
pub const DEFAULT_STREAM_ABOVE: u64 = 1 << 20;

/// A WebSocket's limits and habits. A plain value with chainable setters.
///
/// ```
/// use cleave_proto::websocket::WsConfig;
///
/// let config = WsConfig::default()
///     .max_message(1 << 20)?
///     .stream_above(64 << 10)
///     .pings(true);
/// assert_eq!(config.get_max_message(), 1 << 20);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WsConfig {
    max_frame: u64,
    max_message: u64,
    stream_above: u64,
    pings: bool,
    auto_pong: bool,
}

impl Default for WsConfig {
    fn default() -> Self {
        Self {
            max_frame: DEFAULT_MAX_FRAME,
            max_message: DEFAULT_MAX_MESSAGE,
            stream_above: DEFAULT_STREAM_ABOVE,
            pings: false,
            auto_pong: true,
        }
    }
}

impl WsConfig {
    /// The largest data frame payload taken; a larger one is answered
    /// with close 1009 and [`Limit::FrameLength`](crate::Limit::FrameLength).
    /// Control frames are not held to it: RFC 6455 bounds them at 125
    /// bytes, and a larger one is a protocol error (1002).
    /// A frame read whole (a compressed one, or one not above
    /// [`stream_above`](Self::stream_above)) must also fit the receive
    /// buffer's limit; a larger one is answered with close 1009 and
    /// [`Limit::Buffer`](crate::Limit::Buffer) as soon as its header
    /// arrives.
    ///
    /// # Errors
    ///
    /// `InvalidConfig` for 0.
    pub fn max_frame(mut self, bytes: u64) -> Result<Self, Error> {
        if bytes == 0 {
            return Err(Error::invalid_config("max_frame", 0, "at least 1"));
        }
        self.max_frame = bytes;
        Ok(self)
    }

    /// The largest message taken, its frames together (inflated, for a
    /// compressed one); a larger one is answered with close 1009 and
    /// [`Limit::MessageLength`](crate::Limit::MessageLength).
    ///
    /// # Errors
    ///
    /// `InvalidConfig` for 0.
    pub fn max_message(mut self, bytes: u64) -> Result<Self, Error> {
        if bytes == 0 {
            return Err(Error::invalid_config("max_message", 0, "at least 1"));
        }
        self.max_message = bytes;
        Ok(self)
    }

    /// Frames with more payload than this are handed out in pieces as
    /// their bytes arrive ([`WsEvent::Part`](crate::websocket::WsEvent::Part)),
    /// instead of whole once complete: the receive buffer holds one read,
    /// not the frame. Smaller frames come whole, as one view of the
    /// buffer. The buffer's own limit
    /// ([`RecvBufConfig::max_buffered`](crate::RecvBufConfig::max_buffered))
    /// must hold a frame of this size.
    #[must_use]
    pub fn stream_above(mut self, bytes: u64) -> Self {
        self.stream_above = bytes;
        self
    }

    /// Whether pings and pongs come out as events too (with
    /// [`auto_pong`](Self::auto_pong) on, pings are answered either way).
    /// Off by default.
    #[must_use]
    pub fn pings(mut self, visible: bool) -> Self {
        self.pings = visible;
        self
    }

    /// Whether a ping is answered with a pong by the protocol itself (on
    /// the urgent lane). On by default; turn it off only to answer pings
    /// yourself: pings then come out as [`WsEvent::Ping`](crate::websocket::WsEvent::Ping)
    /// events whatever [`pings`](Self::pings) says, and
    /// [`WebSocket::pong`](crate::websocket::WebSocket::pong) makes the
    /// answer.
    #[must_use]
    pub fn auto_pong(mut self, on: bool) -> Self {
        self.auto_pong = on;
        self
    }

    /// See [`max_frame`](Self::max_frame).
    #[must_use]
    pub fn get_max_frame(&self) -> u64 {
        self.max_frame
    }

    /// See [`max_message`](Self::max_message).
    #[must_use]
    pub fn get_max_message(&self) -> u64 {
        self.max_message
    }

    /// See [`stream_above`](Self::stream_above).
    #[must_use]
    pub fn get_stream_above(&self) -> u64 {
        self.stream_above
    }

    /// See [`pings`](Self::pings).
    #[must_use]
    pub fn get_pings(&self) -> bool {
        self.pings
    }

    /// See [`auto_pong`](Self::auto_pong).
    #[must_use]
    pub fn get_auto_pong(&self) -> bool {
        self.auto_pong
    }
}
