//! permessage-deflate (RFC 7692): the parameters both ends agree on in the
//! opening handshake, and one connection's compressor and decompressor.
//!
//! Each message is one raw DEFLATE stream segment ended by a sync flush,
//! without the flush's trailing `0x00 0x00 0xff 0xff` (section 7.2.1); the
//! receiver puts those four bytes back before inflating (section 7.2.2).
//! With context takeover a message may point back into the earlier ones of
//! the same direction, so each direction keeps its LZ77 window between
//! messages unless the handshake said not to.
//!
//! Window sizes: RFC 7692 allows 8 to 15 bits; zlib (and zlib-rs) cannot
//! make a raw DEFLATE stream with 8. A window of 8 is therefore worked with
//! 9 bits, which is safe both ways: zlib keeps 262 bytes of lookahead out of
//! its window, so a 9-bit compressor never reaches farther back than 250
//! bytes (inside the 256 the peer keeps), and a 9-bit decompressor reads
//! everything an 8-bit compressor writes. (zlib-rs keeps a 32 KiB window
//! for inflating whatever the bits, so a peer reaching back farther than
//! its negotiated window is not caught: harmless, the data is still what
//! the peer meant.)

mod codec;
mod extensions;
#[cfg(test)]
mod tests;

use alloc::string::String;
use core::fmt::Write as _;

use crate::error::Error;
use crate::{InvalidInput, WsField};

pub(crate) use codec::Deflate;
use extensions::{is, Extensions, Malformed, Requested};

/// The extension's name in `Sec-WebSocket-Extensions`.
const NAME: &str = "permessage-deflate";
/// The smallest window RFC 7692 lets a peer ask for.
const MIN_WINDOW_BITS: u8 = 8;
/// The largest window, DEFLATE's own 32 KiB, which is also what a peer
/// may use when nothing limits it.
const MAX_WINDOW_BITS: u8 = 15;
/// Default compression level: zlib's own default, what browsers and most
/// WebSocket libraries send with. Lower levels save CPU; zlib-rs's level 1
/// uses static Huffman codes only and compresses text markedly worse.
const DEFAULT_LEVEL: u32 = 6;

/// What an endpoint offers (a client) or accepts (a server) for
/// permessage-deflate. A plain value with chainable setters.
///
/// "This endpoint" is the one holding the configuration; "the peer" is the
/// other end. Limits on the peer are requests: a server cannot limit a
/// client's window unless the client's offer says it can be limited, and
/// then takes the offer anyway.
///
/// ```
/// use cleave_proto::websocket::DeflateConfig;
///
/// let config = DeflateConfig::new()
///     .no_context_takeover(true)
///     .max_window_bits(10)?
///     .level(3)?;
/// assert_eq!(config.get_max_window_bits(), 10);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeflateConfig {
    no_context_takeover: bool,
    peer_no_context_takeover: bool,
    max_window_bits: u8,
    peer_max_window_bits: u8,
    level: u32,
    min_size: usize,
}

impl Default for DeflateConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl DeflateConfig {
    /// Context takeover allowed both ways, 15-bit windows both ways,
    /// compression level 6 (zlib's default), and every message compressed
    /// (`min_size` 0: with context takeover even short messages usually
    /// shrink, pointing back into earlier ones).
    #[must_use]
    pub fn new() -> Self {
        Self {
            no_context_takeover: false,
            peer_no_context_takeover: false,
            max_window_bits: MAX_WINDOW_BITS,
            peer_max_window_bits: MAX_WINDOW_BITS,
            level: DEFAULT_LEVEL,
            min_size: 0,
        }
    }

    /// Whether this endpoint starts every message with an empty window
    /// (its compressor forgets between messages). Saves the compressor's
    /// memory between messages, at some cost in ratio. A server says so in
    /// its response (`server_no_context_takeover`), a client in its offer
    /// (`client_no_context_takeover`).
    #[must_use]
    pub fn no_context_takeover(mut self, on: bool) -> Self {
        self.no_context_takeover = on;
        self
    }

    /// Whether to ask the peer to start every message with an empty window,
    /// so that this endpoint's decompressor holds nothing between messages.
    /// A server answers with `client_no_context_takeover` (which a client
    /// must honour); a client offers `server_no_context_takeover` (and
    /// fails the handshake if the server does not accept it).
    #[must_use]
    pub fn peer_no_context_takeover(mut self, on: bool) -> Self {
        self.peer_no_context_takeover = on;
        self
    }

    /// This endpoint's LZ77 window for compressing, as a power of two
    /// (8 to 15: 256 bytes to 32 KiB). A smaller window costs the
    /// compressor less memory (see the module documentation about 8).
    ///
    /// # Errors
    ///
    /// `InvalidConfig` outside 8 to 15.
    pub fn max_window_bits(mut self, bits: u8) -> Result<Self, Error> {
        self.max_window_bits = window_setting("max_window_bits", bits)?;
        Ok(self)
    }

    /// The window to ask the peer to compress with at most (8 to 15). A
    /// client offers it as `server_max_window_bits` and fails the handshake
    /// if the server does not accept it; a server answers with
    /// `client_max_window_bits` when the client's offer allows it.
    ///
    /// # Errors
    ///
    /// `InvalidConfig` outside 8 to 15.
    pub fn peer_max_window_bits(mut self, bits: u8) -> Result<Self, Error> {
        self.peer_max_window_bits = window_setting("peer_max_window_bits", bits)?;
        Ok(self)
    }

    /// zlib's compression level, 0 (stored, no compression) to 9 (best).
    ///
    /// # Errors
    ///
    /// `InvalidConfig` above 9.
    pub fn level(mut self, level: u32) -> Result<Self, Error> {
        if level > 9 {
            return Err(Error::invalid_config("level", level.into(), "0 to 9"));
        }
        self.level = level;
        Ok(self)
    }

    /// Messages shorter than this are sent uncompressed (RSV1 clear), which
    /// the extension allows for any message.
    #[must_use]
    pub fn min_size(mut self, bytes: usize) -> Self {
        self.min_size = bytes;
        self
    }

    /// See [`no_context_takeover`](Self::no_context_takeover).
    #[must_use]
    pub fn get_no_context_takeover(&self) -> bool {
        self.no_context_takeover
    }

    /// See [`peer_no_context_takeover`](Self::peer_no_context_takeover).
    #[must_use]
    pub fn get_peer_no_context_takeover(&self) -> bool {
        self.peer_no_context_takeover
    }

    /// See [`max_window_bits`](Self::max_window_bits).
    #[must_use]
    pub fn get_max_window_bits(&self) -> u8 {
        self.max_window_bits
    }

    /// See [`peer_max_window_bits`](Self::peer_max_window_bits).
    #[must_use]
    pub fn get_peer_max_window_bits(&self) -> u8 {
        self.peer_max_window_bits
    }

    /// See [`level`](Self::level).
    #[must_use]
    pub fn get_level(&self) -> u32 {
        self.level
    }

    /// See [`min_size`](Self::min_size).
    #[must_use]
    pub fn get_min_size(&self) -> usize {
        self.min_size
    }
}

/// `bits` if RFC 7692 allows it as a window size.
fn window_setting(setting: &'static str, bits: u8) -> Result<u8, Error> {
    if (MIN_WINDOW_BITS..=MAX_WINDOW_BITS).contains(&bits) {
        Ok(bits)
    } else {
        Err(Error::invalid_config(setting, bits.into(), "8 to 15"))
    }
}

/// The permessage-deflate parameters of one connection: what both ends
/// use. Window bits are 8 to 15; 15 when the handshake did not limit them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeflateParams {
    /// The server starts every message with an empty window.
    pub server_no_context_takeover: bool,
    /// The client starts every message with an empty window.
    pub client_no_context_takeover: bool,
    /// The largest window the server compresses with.
    pub server_max_window_bits: u8,
    /// The largest window the client compresses with.
    pub client_max_window_bits: u8,
    /// Server side: the client's offer carried `server_max_window_bits`,
    /// so the answer carries it back, even at 15, which absence would
    /// mean otherwise (RFC 7692, section 7.1.2.1: a server accepts the
    /// parameter by including it). Client side: the server's answer
    /// carried it.
    pub server_window_offered: bool,
}

impl DeflateParams {
    /// Server side: the first acceptable permessage-deflate offer among a
    /// client's `Sec-WebSocket-Extensions` values (each may list several
    /// extensions, RFC 7692 sections 5 and 7), answered as `config` wants.
    ///
    /// An offer with an unknown parameter, a repeated one or a bad value is
    /// declined (skipped), as is the rest of a value from a syntax error
    /// on. The answer keeps every limit the offer asks for and adds the
    /// configuration's own: the server's window is the smaller of the two,
    /// and the client's window is limited only if its offer carries
    /// `client_max_window_bits` (otherwise it may not be).
    ///
    /// `None`: nothing acceptable was offered; the server answers without
    /// the extension.
    #[must_use]
    pub fn negotiate<'a>(
        offers: impl IntoIterator<Item = &'a [u8]>,
        config: &DeflateConfig,
    ) -> Option<DeflateParams> {
        offers
            .into_iter()
            .flat_map(Extensions::new)
            .filter_map(Result::ok)
            .filter(|extension| is(extension.name, NAME))
            .find_map(|extension| Requested::parse(&extension.params).ok())
            .map(|offer| Self::accept(&offer, config))
    }

    /// The answer to `offer` under `config`.
    fn accept(offer: &Requested, config: &DeflateConfig) -> Self {
        let client_max_window_bits = match offer.client_max_window_bits {
            None => MAX_WINDOW_BITS,
            Some(hint) => hint.map_or(config.peer_max_window_bits, |bits| {
                bits.min(config.peer_max_window_bits)
            }),
        };
        Self {
            server_no_context_takeover: offer.server_no_context_takeover
                || config.no_context_takeover,
            client_no_context_takeover: offer.client_no_context_takeover
                || config.peer_no_context_takeover,
            server_max_window_bits: offer
                .server_max_window_bits
                .map_or(config.max_window_bits, |bits| {
                    bits.min(config.max_window_bits)
                }),
            client_max_window_bits,
            server_window_offered: offer.server_max_window_bits.is_some(),
        }
    }

    /// The server's `Sec-WebSocket-Extensions` value, e.g.
    /// `permessage-deflate; server_no_context_takeover; client_max_window_bits=10`.
    /// A window of 15 is left out (it is what absence means), but for the
    /// server's when the client offered `server_max_window_bits`.
    #[must_use]
    pub fn to_header(&self) -> String {
        let mut header = String::from(NAME);
        if self.server_no_context_takeover {
            header.push_str("; server_no_context_takeover");
        }
        if self.client_no_context_takeover {
            header.push_str("; client_no_context_takeover");
        }
        if self.server_window_offered {
            let bits = self
                .server_max_window_bits
                .clamp(MIN_WINDOW_BITS, MAX_WINDOW_BITS);
            // Writing to a String cannot fail.
            let _ = write!(header, "; server_max_window_bits={bits}");
        } else {
            push_bits(
                &mut header,
                "server_max_window_bits",
                self.server_max_window_bits,
            );
        }
        push_bits(
            &mut header,
            "client_max_window_bits",
            self.client_max_window_bits,
        );
        header
    }

    /// Client side: the offer for `config`, one extension with no fallback
    /// (so that [`from_response`](Self::from_response) knows what the
    /// server answers). It always says the client supports
    /// `client_max_window_bits`, with the client's window when below 15.
    #[must_use]
    pub fn offer(config: &DeflateConfig) -> String {
        let mut offer = String::from(NAME);
        if config.peer_no_context_takeover {
            offer.push_str("; server_no_context_takeover");
        }
        if config.no_context_takeover {
            offer.push_str("; client_no_context_takeover");
        }
        push_bits(
            &mut offer,
            "server_max_window_bits",
            config.peer_max_window_bits,
        );
        if config.max_window_bits < MAX_WINDOW_BITS {
            push_bits(&mut offer, "client_max_window_bits", config.max_window_bits);
        } else {
            offer.push_str("; client_max_window_bits");
        }
        offer
    }

    /// Client side: the server's answer (one `Sec-WebSocket-Extensions`
    /// value) to [`offer`](Self::offer)`(config)`.
    ///
    /// The server may add `server_no_context_takeover`,
    /// `client_no_context_takeover` and `server_max_window_bits` of its
    /// own; it must keep what the offer asked of it. The result also holds
    /// what the offer promised of the client (its window, its context
    /// takeover), which the client keeps whatever the answer says.
    ///
    /// # Errors
    ///
    /// [`WsField::Negotiation`] (RFC 7692, section 7.1.2: the client fails
    /// the connection) for anything else than one permessage-deflate
    /// extension, an unknown, repeated or malformed parameter, a
    /// `client_max_window_bits` without a value or above the offered one,
    /// or an offered `server_max_window_bits` or
    /// `server_no_context_takeover` not granted.
    pub fn from_response(value: &[u8], config: &DeflateConfig) -> Result<DeflateParams, Error> {
        let mut extensions = Extensions::new(value);
        let extension = match (extensions.next(), extensions.next()) {
            (Some(Ok(extension)), None) if is(extension.name, NAME) => extension,
            _ => return Err(negotiation()),
        };
        let answer = Requested::parse(&extension.params).map_err(|Malformed| negotiation())?;
        if config.peer_no_context_takeover && !answer.server_no_context_takeover {
            return Err(negotiation());
        }
        let server_max_window_bits = answer.server_max_window_bits.unwrap_or(MAX_WINDOW_BITS);
        if server_max_window_bits > config.peer_max_window_bits {
            // Also catches a limit asked for and not answered (15 then).
            return Err(negotiation());
        }
        let client_max_window_bits = match answer.client_max_window_bits {
            None => MAX_WINDOW_BITS,
            Some(None) => return Err(negotiation()),
            Some(Some(bits)) if bits > config.max_window_bits => return Err(negotiation()),
            Some(Some(bits)) => bits,
        };
        Ok(Self {
            server_no_context_takeover: answer.server_no_context_takeover,
            client_no_context_takeover: answer.client_no_context_takeover
                || config.no_context_takeover,
            server_max_window_bits,
            client_max_window_bits: client_max_window_bits.min(config.max_window_bits),
            server_window_offered: answer.server_max_window_bits.is_some(),
        })
    }
}

/// Appends `; name=bits` for a window below 15 (absence means 15).
fn push_bits(header: &mut String, name: &str, bits: u8) {
    if bits < MAX_WINDOW_BITS {
        let bits = bits.max(MIN_WINDOW_BITS);
        // Writing to a String cannot fail.
        let _ = write!(header, "; {name}={bits}");
    }
}

fn negotiation() -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(WsField::Negotiation),
        offset: 0,
    }
}
