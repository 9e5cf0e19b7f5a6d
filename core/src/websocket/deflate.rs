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

use alloc::borrow::Cow;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write as _};

use bytes::{Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::Role;
use crate::error::Error;
use crate::{InvalidInput, Limit, WsField};

/// The extension's name in `Sec-WebSocket-Extensions`.
const NAME: &str = "permessage-deflate";
/// The smallest window RFC 7692 lets a peer ask for.
const MIN_WINDOW_BITS: u8 = 8;
/// The largest window, DEFLATE's own 32 KiB, which is also what a peer
/// may use when nothing limits it.
const MAX_WINDOW_BITS: u8 = 15;
/// The smallest window zlib makes a raw DEFLATE stream with (see the
/// module documentation for why 8 becomes 9 safely).
const ZLIB_MIN_WINDOW_BITS: u8 = 9;
/// Default compression level: zlib's own default, what browsers and most
/// WebSocket libraries send with. Lower levels save CPU; zlib-rs's level 1
/// uses static Huffman codes only and compresses text markedly worse.
const DEFAULT_LEVEL: u32 = 6;
/// The end of a sync flush, an empty stored block's length fields: removed
/// by the sender, appended by the receiver (RFC 7692, section 7.2).
const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];
/// An empty message, compressed: the header byte of an empty stored block
/// whose length fields are the [`TAIL`] (RFC 7692, section 7.2.3.6).
const EMPTY: [u8; 1] = [0x00];
/// How much is inflated per step: the decompressor never writes more than
/// this beyond what `out` may still take, so a compression bomb is caught
/// after at most this much work past the limit.
const STEP: usize = 8 * 1024;
/// When `out` is full, the decompressor may still write this much, into
/// a buffer of its own, to tell whether the message goes on.
const PROBE: usize = 64;
/// The largest stored DEFLATE block.
const STORED_MAX: usize = 0xffff;
/// zlib-rs's compressor, besides its window: the 64 Ki-entry hash table
/// (128 KiB), the literal and symbol buffers at memory level 8 (112 KiB)
/// and about 3 KiB of state. Measured from zlib-rs 0.6's allocation.
const DEFLATE_FIXED: usize = 243 * 1024;
/// zlib-rs's decompressor: a 32 KiB window whatever the window bits, and
/// about 14 KiB of state (tables). Measured from zlib-rs 0.6's allocation.
const INFLATE_MEMORY: usize = 47 * 1024;

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

// ----- Sec-WebSocket-Extensions syntax (RFC 6455, section 9.1) -----

/// A value that breaks the header's syntax or the extension's rules.
#[derive(Debug)]
struct Malformed;

/// One extension of a `Sec-WebSocket-Extensions` value.
struct Extension<'a> {
    name: &'a [u8],
    params: Vec<Param<'a>>,
}

/// One `;`-separated parameter of an extension.
struct Param<'a> {
    name: &'a [u8],
    /// The value, a token or an unescaped quoted string.
    value: Option<Cow<'a, [u8]>>,
}

/// The extensions of one header value, in order. After a syntax error it
/// yields that error once and stops: where the next extension would start
/// is unknown then.
struct Extensions<'a> {
    rest: &'a [u8],
}

impl<'a> Extensions<'a> {
    fn new(value: &'a [u8]) -> Self {
        Self { rest: value }
    }
}

impl<'a> Iterator for Extensions<'a> {
    type Item = Result<Extension<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        // A list may hold empty elements (RFC 9110, section 5.6.1.2).
        loop {
            skip_ows(&mut self.rest);
            match self.rest.split_first() {
                None => return None,
                Some((b',', rest)) => self.rest = rest,
                Some(_) => break,
            }
        }
        let extension = extension(&mut self.rest);
        if extension.is_err() {
            self.rest = &[];
        }
        Some(extension)
    }
}

/// `extension-token *( ";" extension-param )`, and the `,` after it.
fn extension<'a>(s: &mut &'a [u8]) -> Result<Extension<'a>, Malformed> {
    let name = token(s)?;
    let mut params = Vec::new();
    loop {
        skip_ows(s);
        match s.split_first() {
            None => break,
            Some((b',', rest)) => {
                *s = rest;
                break;
            }
            Some((b';', rest)) => {
                *s = rest;
                params.push(param(s)?);
            }
            Some(_) => return Err(Malformed),
        }
    }
    Ok(Extension { name, params })
}

/// `token [ "=" ( token / quoted-string ) ]`.
fn param<'a>(s: &mut &'a [u8]) -> Result<Param<'a>, Malformed> {
    skip_ows(s);
    let name = token(s)?;
    skip_ows(s);
    let value = match s.split_first() {
        Some((b'=', rest)) => {
            *s = rest;
            skip_ows(s);
            Some(match s.split_first() {
                Some((b'"', rest)) => {
                    *s = rest;
                    Cow::Owned(quoted(s)?)
                }
                _ => Cow::Borrowed(token(s)?),
            })
        }
        _ => None,
    };
    Ok(Param { name, value })
}

/// The rest of a quoted string after its opening quote, unescaped.
fn quoted(s: &mut &[u8]) -> Result<Vec<u8>, Malformed> {
    let mut value = Vec::new();
    loop {
        let (&byte, rest) = s.split_first().ok_or(Malformed)?;
        *s = rest;
        match byte {
            b'"' => return Ok(value),
            b'\\' => {
                let (&escaped, rest) = s.split_first().ok_or(Malformed)?;
                if !(escaped == b'\t' || escaped >= b' ') || escaped == 0x7f {
                    return Err(Malformed);
                }
                value.push(escaped);
                *s = rest;
            }
            // qdtext: HTAB, SP, visible characters but `"` and `\`, obs-text.
            b'\t' | b' '..=0x7e | 0x80..=0xff => value.push(byte),
            _ => return Err(Malformed),
        }
    }
}

/// One or more token characters (RFC 9110, section 5.6.2).
fn token<'a>(s: &mut &'a [u8]) -> Result<&'a [u8], Malformed> {
    let len = s.iter().take_while(|&&byte| is_tchar(byte)).count();
    if len == 0 {
        return Err(Malformed);
    }
    let (token, rest) = s.split_at(len);
    *s = rest;
    Ok(token)
}

fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

fn skip_ows(s: &mut &[u8]) {
    let len = s
        .iter()
        .take_while(|&&byte| byte == b' ' || byte == b'\t')
        .count();
    *s = s.get(len..).unwrap_or_default();
}

/// Extension and parameter names are compared ignoring ASCII case.
fn is(name: &[u8], expected: &str) -> bool {
    name.eq_ignore_ascii_case(expected.as_bytes())
}

/// The parameters of a permessage-deflate offer or answer, each at most
/// once, with a valid value (RFC 7692, section 7.1).
#[derive(Debug, Default)]
struct Requested {
    server_no_context_takeover: bool,
    client_no_context_takeover: bool,
    server_max_window_bits: Option<u8>,
    /// `Some(None)`: the parameter without a value (in an offer: the
    /// client can be limited).
    client_max_window_bits: Option<Option<u8>>,
}

impl Requested {
    fn parse(params: &[Param<'_>]) -> Result<Self, Malformed> {
        let mut requested = Self::default();
        for param in params {
            let value = param.value.as_deref();
            if is(param.name, "server_no_context_takeover") {
                flag(&mut requested.server_no_context_takeover, value)?;
            } else if is(param.name, "client_no_context_takeover") {
                flag(&mut requested.client_no_context_takeover, value)?;
            } else if is(param.name, "server_max_window_bits") {
                if requested.server_max_window_bits.is_some() {
                    return Err(Malformed);
                }
                requested.server_max_window_bits = Some(window_bits(value.ok_or(Malformed)?)?);
            } else if is(param.name, "client_max_window_bits") {
                if requested.client_max_window_bits.is_some() {
                    return Err(Malformed);
                }
                requested.client_max_window_bits = Some(value.map(window_bits).transpose()?);
            } else {
                return Err(Malformed);
            }
        }
        Ok(requested)
    }
}

/// Sets a parameter that takes no value, once.
fn flag(seen: &mut bool, value: Option<&[u8]>) -> Result<(), Malformed> {
    if *seen || value.is_some() {
        return Err(Malformed);
    }
    *seen = true;
    Ok(())
}

/// A window size: a decimal 8 to 15 without leading zeros (RFC 7692,
/// section 7.1.2).
fn window_bits(value: &[u8]) -> Result<u8, Malformed> {
    match *value {
        [digit @ b'8'..=b'9'] => Ok(digit - b'0'),
        [b'1', digit @ b'0'..=b'5'] => Ok(10 + digit - b'0'),
        _ => Err(Malformed),
    }
}

// ----- compressing and inflating -----

/// One direction's window (zlib's bits, 9 to 15) and whether its
/// compressor forgets between messages.
#[derive(Clone, Copy, Debug)]
struct Direction {
    window_bits: u8,
    no_context_takeover: bool,
}

/// One connection's compressor (for what it sends) and decompressor (for
/// what the peer sends), each made on first use.
pub(crate) struct Deflate {
    level: Compression,
    ours: Direction,
    theirs: Direction,
    compressor: Option<Compress>,
    decompressor: Option<Decompress>,
    /// A message is half inflated: the decompressor holds its state.
    inflating: bool,
    /// The peer's message being inflated closed its DEFLATE stream (a
    /// block with BFINAL set, RFC 7692 section 7.2.3.4): the rest of it is
    /// ignored, and the next message starts a new stream (with the
    /// window's bytes as its dictionary, under context takeover).
    ended: bool,
    /// The last bytes the peer's messages inflated to, as many as its
    /// window holds, kept under context takeover: a stream the peer ends
    /// (BFINAL) goes on with them, earlier messages' bytes included.
    window: Window,
}

/// The last `size` bytes of a stream, in a ring allocated once (at the
/// first message), as the decompressor's own window holds them.
#[derive(Debug, Default)]
struct Window {
    ring: Vec<u8>,
    /// Where the next byte goes once the ring is full (its oldest byte).
    at: usize,
}

impl Window {
    /// Appends `bytes`, forgetting what falls out of the last `size`.
    fn push(&mut self, bytes: &[u8], size: usize) {
        let bytes = &bytes[bytes.len().saturating_sub(size)..];
        if self.ring.capacity() < size {
            self.ring.reserve_exact(size - self.ring.len());
        }
        // Filling up first.
        let fill = (size - self.ring.len()).min(bytes.len());
        let (head, rest) = bytes.split_at(fill);
        self.ring.extend_from_slice(head);
        // Then over the oldest bytes, from `at` round to the start.
        let first = rest.len().min(size - self.at);
        let (to_end, from_start) = rest.split_at(first);
        if let Some(slot) = self.ring.get_mut(self.at..self.at + to_end.len()) {
            slot.copy_from_slice(to_end);
        }
        if let Some(slot) = self.ring.get_mut(..from_start.len()) {
            slot.copy_from_slice(from_start);
        }
        if !rest.is_empty() {
            self.at = (self.at + rest.len()) % size;
        }
    }

    /// The bytes, oldest first.
    #[cfg(test)]
    fn bytes(&self) -> Vec<u8> {
        let (new, old) = self.ring.split_at(self.at);
        [old, new].concat()
    }

    /// Gives the bytes, oldest first, to a raw decompressor as its window:
    /// a raw stream's dictionary may be set at any time, and each call
    /// appends to the window as output would, so the ring's two halves go
    /// in turn, with no copy made to join them.
    fn prime(&self, decompressor: &mut Decompress) -> Result<(), flate2::DecompressError> {
        let (new, old) = self.ring.split_at(self.at);
        for part in [old, new] {
            if !part.is_empty() {
                decompressor.set_dictionary(part)?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for Deflate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deflate")
            .field("level", &self.level.level())
            .field("ours", &self.ours)
            .field("theirs", &self.theirs)
            .field("memory", &self.memory())
            .finish_non_exhaustive()
    }
}

impl Deflate {
    /// The compressor follows `params` for `role`'s direction, narrowed by
    /// `config` (a smaller window or no context takeover is always
    /// allowed); the decompressor follows `params` for the peer's.
    pub(crate) fn new(role: Role, params: DeflateParams, config: &DeflateConfig) -> Self {
        let (ours, theirs) = match role {
            Role::Server => (
                (
                    params.server_max_window_bits,
                    params.server_no_context_takeover,
                ),
                (
                    params.client_max_window_bits,
                    params.client_no_context_takeover,
                ),
            ),
            Role::Client => (
                (
                    params.client_max_window_bits,
                    params.client_no_context_takeover,
                ),
                (
                    params.server_max_window_bits,
                    params.server_no_context_takeover,
                ),
            ),
        };
        Self {
            level: Compression::new(config.level.min(9)),
            ours: Direction {
                window_bits: zlib_bits(ours.0.min(config.max_window_bits)),
                no_context_takeover: ours.1 || config.no_context_takeover,
            },
            theirs: Direction {
                window_bits: zlib_bits(theirs.0),
                no_context_takeover: theirs.1,
            },
            compressor: None,
            decompressor: None,
            inflating: false,
            ended: false,
            window: Window::default(),
        }
    }

    /// Inflates one piece of a compressed message's payload (the pieces in
    /// order, `last` on the message's final one, after which the sync
    /// flush's tail is put back, RFC 7692 section 7.2.2), appending to
    /// `out`.
    ///
    /// `out` never grows past `max` bytes: the message is inflated a step
    /// at a time, and once `out` holds `max` bytes a few more are inflated
    /// aside only to tell whether the message goes on.
    ///
    /// # Errors
    ///
    /// [`Limit::MessageLength`] when the message inflates past `max`;
    /// [`WsField::Compressed`] when it does not inflate. Either way the
    /// decompressor is dropped (the connection fails).
    pub(crate) fn inflate(
        &mut self,
        input: &[u8],
        last: bool,
        out: &mut BytesMut,
        max: usize,
    ) -> Result<(), Error> {
        let mut result = self.inflate_piece(input, out, max);
        if last && result.is_ok() {
            let before = out.len();
            result = self.inflate_piece(&TAIL, out, max);
            // The tail ends a sync-flushed segment (RFC 7692, section
            // 7.2.2): it yields nothing and leaves the stream between
            // blocks. Else the payload stopped inside a block (an empty
            // payload, say), and the next message's bytes would be read
            // as the rest of that block.
            if result.is_ok() && !self.ended && (out.len() != before || !self.ends_between_blocks())
            {
                result = Err(invalid_compressed());
            }
        }
        match result {
            Ok(()) if last => self.end_message(out),
            Ok(()) => self.inflating = true,
            Err(_) => {
                self.decompressor = None;
                self.inflating = false;
                self.ended = false;
            }
        }
        result
    }

    /// Whether the decompressor stands between two blocks. It is asked
    /// with a final empty block (fixed Huffman, its end-of-block code
    /// alone): between blocks that ends the stream and yields nothing.
    /// Anywhere else those bits are read as something else: a block's
    /// data or codes, or the code lengths of a dynamic block's header,
    /// where any bits are taken and nothing comes out (an empty stored
    /// block, which changes nothing, cannot tell that place from between
    /// blocks). The answer ends the stream, so the message ends as after
    /// a final block (`ended`): the decompressor starts again, primed with
    /// the window under context takeover.
    fn ends_between_blocks(&mut self) -> bool {
        const FINAL_EMPTY: [u8; 2] = [0x03, 0x00];
        let Some(decompressor) = &mut self.decompressor else {
            return true;
        };
        let mut scratch = [0u8; PROBE];
        let between = matches!(
            inflate_step(decompressor, &FINAL_EMPTY, &mut scratch),
            Ok((2, 0, Status::StreamEnd))
        );
        self.ended = between;
        between
    }

    /// Inflates `input` into `out`, a bounded step at a time.
    fn inflate_piece(
        &mut self,
        mut input: &[u8],
        out: &mut BytesMut,
        max: usize,
    ) -> Result<(), Error> {
        let mut scratch = [0u8; STEP];
        let bits = self.theirs.window_bits;
        while !self.ended {
            let room = max.saturating_sub(out.len());
            let space = if room == 0 { PROBE } else { room.min(STEP) };
            let buf = scratch.get_mut(..space).unwrap_or_default();
            let decompressor = self
                .decompressor
                .get_or_insert_with(|| Decompress::new_with_window_bits(false, bits));
            let (consumed, produced, status) = inflate_step(decompressor, input, buf)?;
            if produced > room {
                return Err(Error::LimitExceeded {
                    limit: Limit::MessageLength,
                    max: max as u64,
                    attempted: (out.len() + produced) as u64,
                    offset: 0,
                });
            }
            out.extend_from_slice(buf.get(..produced).unwrap_or_default());
            input = input.get(consumed..).unwrap_or_default();
            if status == Status::StreamEnd {
                self.ended = true;
            } else if produced < space && input.is_empty() {
                // All taken, and nothing more waiting to come out.
                break;
            } else if consumed == 0 && produced == 0 {
                // Input and room, yet no progress: the stream is stuck.
                return Err(invalid_compressed());
            }
        }
        Ok(())
    }

    /// A message was inflated whole (`message` is all of it): the
    /// decompressor starts afresh if the peer does (no context takeover).
    /// If the peer's stream ended (a block with BFINAL set) and it keeps
    /// its window, a new stream starts with that window as its dictionary:
    /// the last bytes of this message and of the ones before it, as many
    /// as the window holds (RFC 7692, section 7.2.2: the next message is
    /// read "using the LZ77 sliding window used to process the last").
    fn end_message(&mut self, message: &[u8]) {
        self.inflating = false;
        if !self.theirs.no_context_takeover {
            self.window.push(message, 1 << self.theirs.window_bits);
        }
        if self.theirs.no_context_takeover || self.ended {
            if let Some(decompressor) = &mut self.decompressor {
                decompressor.reset(false);
                if !self.theirs.no_context_takeover && self.window.prime(decompressor).is_err() {
                    // Not expected on a raw stream; an empty window still
                    // reads right or fails.
                    decompressor.reset(false);
                }
            }
        }
        self.ended = false;
    }

    /// Compresses a whole message payload: one sync-flushed segment, its
    /// trailing `0x00 0x00 0xff 0xff` removed (RFC 7692, section 7.2.1).
    /// The compressor starts afresh after it when this endpoint has no
    /// context takeover.
    pub(crate) fn compress(&mut self, input: &[u8]) -> Bytes {
        if input.is_empty() {
            // Nothing to add to the window: the empty stored block alone.
            return Bytes::from_static(&EMPTY);
        }
        let (level, bits) = (self.level, self.ours.window_bits);
        let compressor = self
            .compressor
            .get_or_insert_with(|| Compress::new_with_window_bits(level, false, bits));
        let compressed = match sync_flushed(compressor, input) {
            Some(compressed) => compressed,
            None => {
                // zlib failed, which valid settings do not make it do. The
                // message still goes, stored: the peer's window gets the
                // same bytes, and ours starts afresh.
                self.compressor = None;
                stored(input)
            }
        };
        if self.ours.no_context_takeover {
            if let Some(compressor) = &mut self.compressor {
                compressor.reset();
            }
        }
        Bytes::from(fitted(compressed))
    }

    /// Bytes of zlib state this connection holds now, for memory
    /// accounting. An estimate from zlib-rs 0.6's allocations (measured,
    /// not zlib's own formula): a compressor takes four times its window
    /// (the window twice over, and a 2-byte link per position) plus
    /// 243 KiB (hash table, literal buffers, state), 371 KiB at 15 bits;
    /// a decompressor 47 KiB whatever its window.
    #[must_use]
    pub(crate) fn memory(&self) -> usize {
        let compressor = self
            .compressor
            .as_ref()
            .map_or(0, |_| (4 << self.ours.window_bits) + DEFLATE_FIXED);
        let decompressor = self.decompressor.as_ref().map_or(0, |_| INFLATE_MEMORY);
        compressor + decompressor
    }

    /// Drops what no later message needs: the compressor when this
    /// endpoint has no context takeover, the decompressor when the peer
    /// has none and no message is half inflated. An idle connection then
    /// holds no zlib memory; each is made again on next use.
    pub(crate) fn release_idle(&mut self) {
        if self.ours.no_context_takeover {
            self.compressor = None;
        }
        if self.theirs.no_context_takeover && !self.inflating {
            self.decompressor = None;
        }
    }
}

/// `compressed` without the room its compression reserved when that is
/// more than a quarter of it (and 256 bytes) over: the frame keeps its
/// memory until it is written, and the write queue counts it by length. A
/// 16 MiB message of zeros compresses to 16 KB in room for 8 MiB; it
/// goes out holding 16 KB. (A shrink is a `realloc`, mostly in place.)
fn fitted(mut compressed: Vec<u8>) -> Vec<u8> {
    let len = compressed.len();
    if compressed.capacity() > len + len / 4 + 256 {
        compressed.shrink_to_fit();
    }
    compressed
}

/// A window size as zlib takes it for raw DEFLATE (9 to 15).
fn zlib_bits(bits: u8) -> u8 {
    bits.clamp(ZLIB_MIN_WINDOW_BITS, MAX_WINDOW_BITS)
}

/// One call into the decompressor: bytes taken, bytes written, status.
fn inflate_step(
    decompressor: &mut Decompress,
    input: &[u8],
    output: &mut [u8],
) -> Result<(usize, usize, Status), Error> {
    let (total_in, total_out) = (decompressor.total_in(), decompressor.total_out());
    let status = decompressor
        .decompress(input, output, FlushDecompress::None)
        .map_err(|_| invalid_compressed())?;
    // Both are bounded by the slices' lengths.
    let consumed = usize::try_from(decompressor.total_in() - total_in).unwrap_or(input.len());
    let produced = usize::try_from(decompressor.total_out() - total_out).unwrap_or(output.len());
    Ok((
        consumed.min(input.len()),
        produced.min(output.len()),
        status,
    ))
}

/// `input` compressed and sync-flushed, without the flush's tail; `None`
/// if zlib fails.
fn sync_flushed(compressor: &mut Compress, input: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(input.len() / 2 + 64);
    let start = compressor.total_in();
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity());
        }
        let taken = usize::try_from(compressor.total_in() - start).ok()?;
        let (before_in, before_out) = (compressor.total_in(), out.len());
        compressor
            .compress_vec(input.get(taken..)?, &mut out, FlushCompress::Sync)
            .ok()?;
        let all_taken = usize::try_from(compressor.total_in() - start).ok()? >= input.len();
        if all_taken && out.len() < out.capacity() {
            // zlib stopped with room left: the flush is complete.
            break;
        }
        if compressor.total_in() == before_in && out.len() == before_out {
            return None;
        }
    }
    let body = out.len().checked_sub(TAIL.len())?;
    if out.get(body..) != Some(&TAIL[..]) {
        return None;
    }
    out.truncate(body);
    Some(out)
}

/// `input` as stored (uncompressed) DEFLATE blocks, ended like a sync
/// flush without its tail: valid whatever the peer's window holds.
fn stored(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() + input.len() / STORED_MAX * 5 + 6);
    for chunk in input.chunks(STORED_MAX) {
        let len = u16::try_from(chunk.len()).unwrap_or(u16::MAX);
        out.push(0x00); // BFINAL 0, BTYPE 00 (stored)
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    out.extend_from_slice(&EMPTY);
    out
}

fn invalid_compressed() -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(WsField::Compressed),
        offset: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    const PLAIN: DeflateParams = DeflateParams {
        server_no_context_takeover: false,
        client_no_context_takeover: false,
        server_max_window_bits: 15,
        client_max_window_bits: 15,
        server_window_offered: false,
    };

    fn params(snct: bool, cnct: bool, server_bits: u8, client_bits: u8) -> DeflateParams {
        DeflateParams {
            server_no_context_takeover: snct,
            client_no_context_takeover: cnct,
            server_max_window_bits: server_bits,
            client_max_window_bits: client_bits,
            server_window_offered: false,
        }
    }

    fn answer(offers: &[&str], config: &DeflateConfig) -> Option<String> {
        DeflateParams::negotiate(offers.iter().map(|offer| offer.as_bytes()), config)
            .map(|params| params.to_header())
    }

    /// A deterministic, incompressible byte stream (xorshift).
    fn noise(len: usize, mut seed: u64) -> Vec<u8> {
        (0..len)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed.to_le_bytes()[3]
            })
            .collect()
    }

    fn inflate_all(deflate: &mut Deflate, payload: &[u8]) -> Result<Vec<u8>, Error> {
        let mut out = BytesMut::new();
        deflate.inflate(payload, true, &mut out, usize::MAX)?;
        Ok(out.to_vec())
    }

    fn pair(params: DeflateParams) -> (Deflate, Deflate) {
        let config = DeflateConfig::new();
        (
            Deflate::new(Role::Server, params, &config),
            Deflate::new(Role::Client, params, &config),
        )
    }

    // ----- configuration -----

    #[test]
    fn config_checks_its_ranges() {
        let config = DeflateConfig::default();
        assert_eq!(config, DeflateConfig::new());
        assert_eq!(config.get_level(), 6);
        assert_eq!(config.get_max_window_bits(), 15);
        assert_eq!(config.get_min_size(), 0);
        for bits in [0, 7, 16, 255] {
            assert!(matches!(
                DeflateConfig::new().max_window_bits(bits),
                Err(Error::Misuse(_))
            ));
            assert!(DeflateConfig::new().peer_max_window_bits(bits).is_err());
        }
        assert!(DeflateConfig::new().level(10).is_err());
        let config = DeflateConfig::new()
            .max_window_bits(8)
            .unwrap()
            .peer_max_window_bits(12)
            .unwrap()
            .level(0)
            .unwrap()
            .no_context_takeover(true)
            .peer_no_context_takeover(true)
            .min_size(100);
        assert_eq!(config.get_max_window_bits(), 8);
        assert_eq!(config.get_peer_max_window_bits(), 12);
        assert_eq!(config.get_level(), 0);
        assert!(config.get_no_context_takeover());
        assert!(config.get_peer_no_context_takeover());
        assert_eq!(config.get_min_size(), 100);
    }

    // ----- server negotiation -----

    #[test]
    fn autobahn_13_offers_are_answered() {
        let default = DeflateConfig::new();
        // (offer, answer with the default configuration), after Autobahn's
        // cases 13.1 to 13.7 (its offers: client_no_context_takeover,
        // client_max_window_bits, and what it asks of the server).
        let cases: &[(&str, &str)] = &[
            ("permessage-deflate", "permessage-deflate"),
            (
                "permessage-deflate; client_max_window_bits",
                "permessage-deflate",
            ),
            (
                "permessage-deflate; client_no_context_takeover; client_max_window_bits",
                "permessage-deflate; client_no_context_takeover",
            ),
            (
                "permessage-deflate; client_max_window_bits; server_no_context_takeover",
                "permessage-deflate; server_no_context_takeover",
            ),
            (
                "permessage-deflate; client_max_window_bits; server_max_window_bits=8",
                "permessage-deflate; server_max_window_bits=8",
            ),
            // An offered server window is answered, even at 15.
            (
                "permessage-deflate; client_max_window_bits; server_max_window_bits=15",
                "permessage-deflate; server_max_window_bits=15",
            ),
            (
                "permessage-deflate; client_no_context_takeover; client_max_window_bits; \
                 server_no_context_takeover; server_max_window_bits=8",
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
                 server_max_window_bits=8",
            ),
            (
                "permessage-deflate; client_max_window_bits=10",
                "permessage-deflate; client_max_window_bits=10",
            ),
            (
                "permessage-deflate; client_max_window_bits=15",
                "permessage-deflate",
            ),
        ];
        for (offer, expected) in cases {
            assert_eq!(
                answer(&[offer], &default).as_deref(),
                Some(*expected),
                "{offer}"
            );
        }
        for bits in 8..=15u8 {
            let offer = format!(
                "permessage-deflate; client_max_window_bits; server_max_window_bits={bits}"
            );
            let params = DeflateParams::negotiate([offer.as_bytes()], &default).unwrap();
            assert_eq!(params, params_with_server_bits(bits), "{offer}");
        }
        // 13.7: several offers in one value, the first acceptable wins.
        let offer = "permessage-deflate; client_no_context_takeover; client_max_window_bits; \
                     server_no_context_takeover; server_max_window_bits=8, \
                     permessage-deflate; client_no_context_takeover; client_max_window_bits; \
                     server_no_context_takeover, permessage-deflate";
        assert_eq!(
            DeflateParams::negotiate([offer.as_bytes()], &default),
            Some(offered(params(true, true, 8, 15)))
        );
    }

    /// An offer (or an answer) that carried `server_max_window_bits`.
    fn offered(params: DeflateParams) -> DeflateParams {
        DeflateParams {
            server_window_offered: true,
            ..params
        }
    }

    fn params_with_server_bits(bits: u8) -> DeflateParams {
        offered(DeflateParams {
            server_max_window_bits: bits,
            ..PLAIN
        })
    }

    #[test]
    fn server_config_shapes_the_answer() {
        let config = DeflateConfig::new()
            .no_context_takeover(true)
            .peer_no_context_takeover(true)
            .max_window_bits(10)
            .unwrap()
            .peer_max_window_bits(9)
            .unwrap();
        // The client can be limited: both limits and both takeovers.
        assert_eq!(
            answer(&["permessage-deflate; client_max_window_bits"], &config).as_deref(),
            Some(
                "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
                 server_max_window_bits=10; client_max_window_bits=9"
            )
        );
        // It cannot: its window stays 15, the offer is still taken.
        assert_eq!(
            DeflateParams::negotiate([&b"permessage-deflate"[..]], &config),
            Some(params(true, true, 10, 15))
        );
        // The smaller of the offer's and the configuration's limits.
        assert_eq!(
            DeflateParams::negotiate(
                [&b"permessage-deflate; server_max_window_bits=12; client_max_window_bits=8"[..]],
                &config
            ),
            Some(offered(params(true, true, 10, 8)))
        );
        assert_eq!(
            DeflateParams::negotiate(
                [&b"permessage-deflate; server_max_window_bits=9"[..]],
                &config
            ),
            Some(offered(params(true, true, 9, 15)))
        );
    }

    #[test]
    fn malformed_offers_are_declined() {
        let config = DeflateConfig::new();
        let declined = [
            "",
            "x-webkit-deflate-frame",
            "permessage-deflate; foo",
            "permessage-deflate; foo=1",
            "permessage-deflate; server_max_window_bits",
            "permessage-deflate; server_max_window_bits=7",
            "permessage-deflate; server_max_window_bits=16",
            "permessage-deflate; server_max_window_bits=08",
            "permessage-deflate; server_max_window_bits=1O",
            "permessage-deflate; server_max_window_bits=\"\"",
            "permessage-deflate; client_max_window_bits=abc",
            "permessage-deflate; client_max_window_bits=",
            "permessage-deflate; client_max_window_bits=100",
            "permessage-deflate; server_no_context_takeover=1",
            "permessage-deflate; client_no_context_takeover=\"\"",
            "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            "permessage-deflate; client_no_context_takeover; Client_No_Context_Takeover",
            "permessage-deflate; server_max_window_bits=10; server_max_window_bits=10",
            "permessage-deflate; client_max_window_bits; client_max_window_bits=10",
            "permessage-deflate; server_max_window_bits=\"10",
            "permessage-deflate;",
            "permessage-deflate; ; client_max_window_bits",
            "permessage-deflate client_max_window_bits",
            "permessage-deflate; =10",
            "permessage-deflate; server_max_window_bits==10",
            "permessage-deflate/1",
            "permessage-deflate; server_max_window_bits=\"1\x015\"",
        ];
        for offer in declined {
            assert_eq!(answer(&[offer], &config), None, "{offer:?}");
        }
        // Declined offers are skipped, acceptable ones after them taken.
        assert_eq!(
            answer(
                &["x-webkit-deflate-frame, permessage-deflate; foo, \
                   permessage-deflate; server_max_window_bits=10"],
                &config
            )
            .as_deref(),
            Some("permessage-deflate; server_max_window_bits=10")
        );
        // A syntax error ends its value, not the other values.
        assert_eq!(
            answer(
                &[
                    "permessage-deflate; server_max_window_bits=\"10, permessage-deflate",
                    "foo; bar=\"baz\", , permessage-deflate; server_max_window_bits=11",
                ],
                &config
            )
            .as_deref(),
            Some("permessage-deflate; server_max_window_bits=11")
        );
    }

    #[test]
    fn offer_syntax_is_read_leniently() {
        let config = DeflateConfig::new();
        let accepted = [
            ("permessage-deflate; server_max_window_bits=\"10\"", 10),
            ("permessage-deflate; server_max_window_bits=\"1\\1\"", 11),
            ("  permessage-deflate\t;server_max_window_bits = 12 , ", 12),
            (", ,permessage-deflate;SERVER_MAX_WINDOW_BITS=13", 13),
            ("Permessage-Deflate; server_max_window_bits=9", 9),
        ];
        for (offer, bits) in accepted {
            assert_eq!(
                DeflateParams::negotiate([offer.as_bytes()], &config),
                Some(params_with_server_bits(bits)),
                "{offer:?}"
            );
        }
        assert_eq!(
            DeflateParams::negotiate(
                [&b"permessage-deflate; client_max_window_bits=\"9\""[..]],
                &config
            ),
            Some(DeflateParams {
                client_max_window_bits: 9,
                ..PLAIN
            })
        );
        assert_eq!(DeflateParams::negotiate(core::iter::empty(), &config), None);
    }

    // ----- client negotiation -----

    #[test]
    fn client_offer_says_what_the_config_wants() {
        assert_eq!(
            DeflateParams::offer(&DeflateConfig::new()),
            "permessage-deflate; client_max_window_bits"
        );
        let config = DeflateConfig::new()
            .no_context_takeover(true)
            .peer_no_context_takeover(true)
            .max_window_bits(9)
            .unwrap()
            .peer_max_window_bits(10)
            .unwrap();
        let offer = DeflateParams::offer(&config);
        assert_eq!(
            offer,
            "permessage-deflate; server_no_context_takeover; client_no_context_takeover; \
             server_max_window_bits=10; client_max_window_bits=9"
        );
        // A server with the default configuration grants all of it.
        let server = DeflateParams::negotiate([offer.as_bytes()], &DeflateConfig::new()).unwrap();
        assert_eq!(server, offered(params(true, true, 10, 9)));
        let client = DeflateParams::from_response(server.to_header().as_bytes(), &config).unwrap();
        assert_eq!(client, server);
    }

    #[test]
    fn responses_are_checked_against_the_offer() {
        let plain = DeflateConfig::new();
        let asking = DeflateConfig::new()
            .peer_no_context_takeover(true)
            .peer_max_window_bits(10)
            .unwrap()
            .max_window_bits(12)
            .unwrap()
            .no_context_takeover(true);
        let ok: &[(&DeflateConfig, &str, DeflateParams)] = &[
            (&plain, "permessage-deflate", PLAIN),
            (
                &plain,
                "permessage-deflate; server_no_context_takeover",
                params(true, false, 15, 15),
            ),
            (
                &plain,
                "permessage-deflate; client_no_context_takeover; client_max_window_bits=8",
                params(false, true, 15, 8),
            ),
            (
                &plain,
                "permessage-deflate; server_max_window_bits=11",
                offered(params(false, false, 11, 15)),
            ),
            (
                &asking,
                "permessage-deflate; server_no_context_takeover; server_max_window_bits=10",
                offered(params(true, true, 10, 12)),
            ),
            (
                &asking,
                "permessage-deflate; server_no_context_takeover; server_max_window_bits=8; \
                 client_max_window_bits=9",
                offered(params(true, true, 8, 9)),
            ),
        ];
        for (config, response, expected) in ok {
            assert_eq!(
                DeflateParams::from_response(response.as_bytes(), config).ok(),
                Some(*expected),
                "{response}"
            );
        }
        let failing: &[(&DeflateConfig, &str)] = &[
            (&plain, ""),
            (&plain, "x-webkit-deflate-frame"),
            (&plain, "permessage-deflate, permessage-deflate"),
            (&plain, "permessage-deflate; foo"),
            (&plain, "permessage-deflate; client_max_window_bits"),
            (&plain, "permessage-deflate; client_max_window_bits=16"),
            (&plain, "permessage-deflate; server_max_window_bits"),
            (&plain, "permessage-deflate; server_max_window_bits=7"),
            (
                &plain,
                "permessage-deflate; server_no_context_takeover; server_no_context_takeover",
            ),
            (&plain, "permessage-deflate; server_max_window_bits=\"9"),
            // Asked for and not granted, or granted too large.
            (&asking, "permessage-deflate; server_max_window_bits=10"),
            (&asking, "permessage-deflate; server_no_context_takeover"),
            (
                &asking,
                "permessage-deflate; server_no_context_takeover; server_max_window_bits=11",
            ),
            (
                &asking,
                "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; \
                 client_max_window_bits=13",
            ),
        ];
        for (config, response) in failing {
            assert_eq!(
                DeflateParams::from_response(response.as_bytes(), config),
                Err(negotiation()),
                "{response}"
            );
        }
    }

    // ----- compressing and inflating -----

    #[test]
    fn rfc_7692_examples_inflate() {
        let hello = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00];
        let (_, mut client) = pair(PLAIN);
        // 7.2.3.1: one message.
        assert_eq!(inflate_all(&mut client, &hello).unwrap(), b"Hello");
        // 7.2.3.2: the same message again, pointing back into the first.
        assert_eq!(
            inflate_all(&mut client, &[0xf2, 0x00, 0x11, 0x00, 0x00]).unwrap(),
            b"Hello"
        );
        let others: [&[u8]; 3] = [
            // 7.2.3.3: a stored block.
            &[
                0x00, 0x05, 0x00, 0xfa, 0xff, 0x48, 0x65, 0x6c, 0x6c, 0x6f, 0x00,
            ],
            // 7.2.3.4: a block with BFINAL set.
            &[0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00],
            // 7.2.3.5: two blocks.
            &[
                0xf2, 0x48, 0x05, 0x00, 0x00, 0x00, 0xff, 0xff, 0xca, 0xc9, 0xc9, 0x07, 0x00,
            ],
        ];
        for payload in others {
            let (_, mut client) = pair(PLAIN);
            assert_eq!(inflate_all(&mut client, payload).unwrap(), b"Hello");
            // And the stream goes on for the next message.
            assert_eq!(inflate_all(&mut client, &hello).unwrap(), b"Hello");
        }
        // 7.2.3.6: an empty message.
        assert_eq!(inflate_all(&mut client, &[0x00]).unwrap(), b"");
        // The example split into frames (7.2.3.1's message, fragmented).
        let mut out = BytesMut::new();
        client.inflate(&hello[..3], false, &mut out, 100).unwrap();
        client.inflate(&[], false, &mut out, 100).unwrap();
        client.inflate(&hello[3..], true, &mut out, 100).unwrap();
        assert_eq!(&out[..], b"Hello");
    }

    /// The window keeps the last `size` bytes of everything pushed, in
    /// order, however the pushes fall.
    #[test]
    fn the_window_keeps_the_last_bytes_of_the_stream() {
        for size in [1, 7, 512] {
            for seed in 1..40u64 {
                let mut window = Window::default();
                let mut all = Vec::new();
                let mut rng = seed;
                for _ in 0..30 {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let len = usize::try_from(rng % (2 * size as u64 + 3)).unwrap();
                    let piece = noise(len, rng);
                    window.push(&piece, size);
                    all.extend_from_slice(&piece);
                    assert_eq!(window.bytes(), all[all.len().saturating_sub(size)..]);
                    assert!(window.ring.capacity() <= size.max(8));
                }
            }
        }
    }

    /// A sync-flushed raw DEFLATE segment of `data`, its tail removed.
    fn segment(compressor: &mut Compress, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(data.len() + 64);
        compressor
            .compress_vec(data, &mut out, FlushCompress::Sync)
            .unwrap();
        assert!(out.ends_with(&TAIL));
        out.truncate(out.len() - TAIL.len());
        out
    }

    /// RFC 7692, section 7.2.2: with context takeover, the message after
    /// one that ended its stream with BFINAL (section 7.2.3.4) is read
    /// with the window that read that one, earlier messages included.
    #[test]
    fn after_a_bfinal_message_the_window_still_holds_earlier_ones() {
        let first = b"abcdefghij";
        let (_, mut client) = pair(PLAIN);
        let mut fresh = Compress::new(Compression::default(), false);
        assert_eq!(
            inflate_all(&mut client, &segment(&mut fresh, first)).unwrap(),
            first
        );
        // "Hello" with BFINAL: 7.2.3.4's bytes.
        let hello = [0xf3, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00, 0x00];
        assert_eq!(inflate_all(&mut client, &hello).unwrap(), b"Hello");
        // A new stream primed with both messages, pointing 15 bytes back,
        // into the first.
        let mut primed = Compress::new(Compression::default(), false);
        primed.set_dictionary(b"abcdefghijHello").unwrap();
        let third = segment(&mut primed, first);
        assert!(third.len() < 8, "a back reference: {third:x?}");
        assert_eq!(inflate_all(&mut client, &third).unwrap(), first);
        // Without context takeover nothing is kept.
        let (_, mut plain) = pair(params(true, true, 15, 15));
        assert_eq!(inflate_all(&mut plain, &hello).unwrap(), b"Hello");
        assert!(plain.window.ring.capacity() == 0);
    }

    #[test]
    fn messages_round_trip() {
        let messages: Vec<Vec<u8>> = (0..40usize)
            .map(|i| match i % 5 {
                0 => b"{\"type\":\"update\",\"id\":42,\"value\":\"hello world\"}".to_vec(),
                1 => noise(300 + i * 37, i as u64 + 1),
                2 => Vec::new(),
                3 => b"abc".repeat(2000 + i),
                _ => {
                    let mut mixed = noise(5000, i as u64);
                    mixed.extend_from_slice(&mixed.clone());
                    mixed
                }
            })
            .collect();
        for bits in [8, 9, 11, 15] {
            for no_context_takeover in [false, true] {
                let params = params(no_context_takeover, no_context_takeover, bits, bits);
                let (mut server, mut client) = pair(params);
                for message in &messages {
                    let compressed = server.compress(message);
                    assert_eq!(&inflate_all(&mut client, &compressed).unwrap(), message);
                    let compressed = client.compress(message);
                    assert_eq!(&inflate_all(&mut server, &compressed).unwrap(), message);
                }
            }
        }
    }

    #[test]
    fn every_level_round_trips() {
        let message = [&b"level, level, level; "[..], &noise(3000, 17)].concat();
        for level in [0, 1, 5, 9] {
            let config = DeflateConfig::new().level(level).unwrap();
            let mut server = Deflate::new(Role::Server, PLAIN, &config);
            let (_, mut client) = pair(PLAIN);
            for _ in 0..3 {
                let compressed = server.compress(&message);
                assert!(
                    inflate_all(&mut client, &compressed).unwrap() == message,
                    "{level}"
                );
            }
        }
    }

    #[test]
    fn context_takeover_shrinks_repeats_and_its_absence_does_not() {
        let message = noise(2000, 7);
        for (no_context_takeover, shrinks) in [(false, true), (true, false)] {
            let (mut server, mut client) = pair(params(no_context_takeover, false, 15, 15));
            let first = server.compress(&message);
            let second = server.compress(&message);
            assert_eq!(second.len() < first.len() / 10, shrinks);
            assert_eq!(inflate_all(&mut client, &first).unwrap(), message);
            assert_eq!(inflate_all(&mut client, &second).unwrap(), message);
        }
        // The configuration alone resets our compressor too.
        let config = DeflateConfig::new().no_context_takeover(true);
        let mut server = Deflate::new(Role::Server, PLAIN, &config);
        let first = server.compress(&message);
        assert_eq!(server.compress(&message), first);
    }

    #[test]
    fn a_window_of_8_never_reaches_past_256_bytes() {
        // A block repeated 300 bytes later: a 9-bit zlib window (what 8
        // becomes) must not match it, a 10-bit one does.
        let block = noise(300, 3);
        let message = [&block[..], &block[..]].concat();
        for (bits, matched) in [(8, false), (9, false), (10, true)] {
            let (mut server, mut client) = pair(params(false, false, bits, 15));
            let compressed = server.compress(&message);
            assert_eq!(compressed.len() < 400, matched, "{bits} bits");
            assert_eq!(inflate_all(&mut client, &compressed).unwrap(), message);
        }
    }

    #[test]
    fn a_message_in_any_pieces_inflates_the_same() {
        let messages = [
            b"Hello, Hello, Hello, Hello!".to_vec(),
            noise(3000, 11),
            b"xyz".repeat(5000),
        ];
        let (mut server, _) = pair(PLAIN);
        let compressed: Vec<Bytes> = messages.iter().map(|m| server.compress(m)).collect();
        // Every split into two pieces, and a few into many.
        let first = &compressed[0];
        for at in 0..=first.len() {
            let (_, mut client) = pair(PLAIN);
            let mut out = BytesMut::new();
            client.inflate(&first[..at], false, &mut out, 1000).unwrap();
            client.inflate(&first[at..], true, &mut out, 1000).unwrap();
            assert_eq!(&out[..], &messages[0][..], "split at {at}");
        }
        for piece in [1, 2, 7, 100, 4096] {
            let (_, mut client) = pair(PLAIN);
            for (message, compressed) in messages.iter().zip(&compressed) {
                let mut out = BytesMut::new();
                let mut pieces = compressed.chunks(piece).peekable();
                while let Some(chunk) = pieces.next() {
                    let last = pieces.peek().is_none();
                    client.inflate(chunk, last, &mut out, usize::MAX).unwrap();
                }
                assert_eq!(&out[..], &message[..], "pieces of {piece}");
            }
        }
    }

    /// `mib` MiB of zeros as one compressed message: 1 MiB compressed,
    /// then the same 1 MiB again, whose segment (pointing back into
    /// zeros) repeats as is.
    fn bomb(mib: usize) -> Vec<u8> {
        let mut compressor = Compress::new(Compression::best(), false);
        let zeros = vec![0u8; 1 << 20];
        let mut first = sync_flushed(&mut compressor, &zeros).unwrap();
        let mut next = sync_flushed(&mut compressor, &zeros).unwrap();
        first.extend_from_slice(&TAIL);
        next.extend_from_slice(&TAIL);
        let mut bomb = first;
        for _ in 1..mib {
            bomb.extend_from_slice(&next);
        }
        bomb.truncate(bomb.len() - TAIL.len());
        bomb
    }

    #[test]
    fn a_compression_bomb_is_refused_early() {
        let payload = bomb(100);
        assert!(payload.len() < 1 << 20, "{} bytes", payload.len());
        let max = 1 << 20;
        // Whole.
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::new();
        let error = client.inflate(&payload, true, &mut out, max).unwrap_err();
        let Error::LimitExceeded {
            limit,
            max: limit_max,
            attempted,
            offset,
        } = error
        else {
            panic!("{error:?}");
        };
        assert_eq!(
            (limit, limit_max, offset),
            (Limit::MessageLength, max as u64, 0)
        );
        assert!(attempted > max as u64 && attempted <= (max + PROBE) as u64);
        assert_eq!(out.len(), max);
        assert_eq!(client.memory(), 0, "the decompressor is dropped");
        // In frames.
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::new();
        let mut result = Ok(());
        let mut chunks = payload.chunks(1000).peekable();
        while let Some(chunk) = chunks.next() {
            result = client.inflate(chunk, chunks.peek().is_none(), &mut out, max);
            assert!(out.len() <= max);
            if result.is_err() {
                break;
            }
        }
        assert!(matches!(
            result,
            Err(Error::LimitExceeded {
                limit: Limit::MessageLength,
                ..
            })
        ));
        // The whole bomb inflates where the limit allows it.
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::new();
        client.inflate(&bomb(3), true, &mut out, 3 << 20).unwrap();
        assert_eq!(out.len(), 3 << 20);
        assert!(out.iter().all(|&byte| byte == 0));
    }

    #[test]
    fn the_limit_is_exact() {
        let message = b"0123456789".repeat(1000);
        let (mut server, _) = pair(PLAIN);
        let compressed = server.compress(&message);
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::new();
        client
            .inflate(&compressed, true, &mut out, message.len())
            .unwrap();
        assert_eq!(&out[..], &message[..]);
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::new();
        assert_eq!(
            client.inflate(&compressed, true, &mut out, message.len() - 1),
            Err(Error::LimitExceeded {
                limit: Limit::MessageLength,
                max: message.len() as u64 - 1,
                attempted: message.len() as u64,
                offset: 0,
            })
        );
        // What `out` held before counts.
        let (_, mut client) = pair(PLAIN);
        let mut out = BytesMut::from(&b"ab"[..]);
        assert!(client
            .inflate(&compressed, true, &mut out, message.len() + 1)
            .is_err());
    }

    #[test]
    fn garbage_does_not_inflate() {
        let garbage: [&[u8]; 3] = [
            &[0xff; 16],                           // BTYPE 11 is reserved
            &[0x00, 0x05, 0x00, 0x00, 0x00, b'a'], // stored block, NLEN wrong
            &[0x1a, 0x03],                         // fixed block, length code 286
        ];
        for payload in garbage {
            let (_, mut client) = pair(PLAIN);
            assert_eq!(
                inflate_all(&mut client, payload),
                Err(invalid_compressed()),
                "{payload:x?}"
            );
            assert_eq!(client.memory(), 0);
        }
        // A reference before the start of the stream: RFC 7692 7.2.3.2's
        // second message, without the first.
        let (_, mut client) = pair(PLAIN);
        assert_eq!(
            inflate_all(&mut client, &[0xf2, 0x00, 0x11, 0x00, 0x00]),
            Err(invalid_compressed())
        );
    }

    #[test]
    fn independent_deflate_streams_interoperate() {
        // flate2's raw deflate writer, sync-flushed per message.
        let messages = [
            b"first message, first message".to_vec(),
            noise(1000, 9),
            b"first".to_vec(),
        ];
        let mut encoder = flate2::write::DeflateEncoder::new(Vec::new(), Compression::fast());
        let (_, mut client) = pair(PLAIN);
        for message in &messages {
            encoder.write_all(message).unwrap();
            encoder.flush().unwrap();
            let segment = core::mem::take(encoder.get_mut());
            assert_eq!(segment[segment.len() - 4..], TAIL);
            let payload = &segment[..segment.len() - 4];
            assert_eq!(&inflate_all(&mut client, payload).unwrap(), message);
        }
        // And the other way: our messages into flate2's raw deflate reader.
        let (mut server, _) = pair(PLAIN);
        let mut decoder = flate2::write::DeflateDecoder::new(Vec::new());
        for message in &messages {
            decoder.write_all(&server.compress(message)).unwrap();
            decoder.write_all(&TAIL).unwrap();
            decoder.flush().unwrap();
            assert_eq!(&core::mem::take(decoder.get_mut()), message);
        }
    }

    #[test]
    fn stored_blocks_inflate() {
        for len in [0, 1, 65_535, 65_536, 140_000] {
            let message = noise(len, 13);
            let (_, mut client) = pair(PLAIN);
            assert_eq!(
                inflate_all(&mut client, &stored(&message)).unwrap(),
                message
            );
            // Twice: the first one left the stream where a message ends.
            assert_eq!(
                inflate_all(&mut client, &stored(&message)).unwrap(),
                message
            );
        }
        let (mut server, _) = pair(PLAIN);
        assert_eq!(&server.compress(&[])[..], &EMPTY);
    }

    #[test]
    fn memory_is_held_only_while_needed() {
        let message = b"some text, some text".to_vec();
        // Context takeover both ways: both are kept.
        let (mut server, mut client) = pair(PLAIN);
        assert_eq!(server.memory(), 0);
        let compressed = server.compress(&message);
        assert_eq!(server.memory(), (4 << 15) + DEFLATE_FIXED);
        inflate_all(&mut client, &compressed).unwrap();
        assert_eq!(client.memory(), INFLATE_MEMORY);
        server.release_idle();
        client.release_idle();
        assert_eq!(server.memory(), (4 << 15) + DEFLATE_FIXED);
        assert_eq!(client.memory(), INFLATE_MEMORY);
        // No context takeover both ways, small windows.
        let (mut server, mut client) = pair(params(true, true, 9, 9));
        let compressed = server.compress(&message);
        assert_eq!(server.memory(), (4 << 9) + DEFLATE_FIXED);
        server.release_idle();
        assert_eq!(server.memory(), 0);
        // Not while a message is half inflated.
        let mut out = BytesMut::new();
        client
            .inflate(&compressed[..2], false, &mut out, usize::MAX)
            .unwrap();
        client.release_idle();
        assert_eq!(client.memory(), INFLATE_MEMORY);
        client
            .inflate(&compressed[2..], true, &mut out, usize::MAX)
            .unwrap();
        assert_eq!(&out[..], &message[..]);
        client.release_idle();
        assert_eq!(client.memory(), 0);
        // Made again on next use.
        let compressed = server.compress(&message);
        assert_eq!(inflate_all(&mut client, &compressed).unwrap(), message);
        assert!(format!("{client:?}").contains("Deflate"));
    }

    #[test]
    fn roles_pick_their_direction() {
        // The server's window 9 with no context takeover, the client's 12.
        let params = params(true, false, 9, 12);
        let config = DeflateConfig::new();
        let server = Deflate::new(Role::Server, params, &config);
        let client = Deflate::new(Role::Client, params, &config);
        assert_eq!(
            (server.ours.window_bits, server.ours.no_context_takeover),
            (9, true)
        );
        assert_eq!(
            (server.theirs.window_bits, server.theirs.no_context_takeover),
            (12, false)
        );
        assert_eq!(
            (client.ours.window_bits, client.ours.no_context_takeover),
            (12, false)
        );
        assert_eq!(
            (client.theirs.window_bits, client.theirs.no_context_takeover),
            (9, true)
        );
        // The configuration narrows our own side only; 8 is worked as 9.
        let config = DeflateConfig::new()
            .max_window_bits(8)
            .unwrap()
            .no_context_takeover(true);
        let client = Deflate::new(Role::Client, params, &config);
        assert_eq!(
            (client.ours.window_bits, client.ours.no_context_takeover),
            (9, true)
        );
        assert_eq!(client.theirs.window_bits, 9);
        // Out-of-range parameters built by hand do not panic.
        let odd = Deflate::new(Role::Server, self::params(false, false, 0, 200), &config);
        assert_eq!((odd.ours.window_bits, odd.theirs.window_bits), (9, 15));
    }
}
