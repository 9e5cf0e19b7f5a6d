//! [`Http1Config`]: the limits of one HTTP/1.1 connection, and the few
//! leniencies RFC 9112 lets a recipient choose.

use crate::error::Error;

/// The most header fields one head may have ([`Http1Config::max_headers`]):
/// the slots the head parser keeps on the stack.
pub const MAX_HEADERS: usize = 256;

/// Limits and leniencies for [`Server`](crate::http1::Server) and
/// [`Client`](crate::http1::Client). The defaults are strict, as a server
/// (and a proxy in front of one) must be.
///
/// | setting | default | why |
/// |---|---|---|
/// | [`max_head`](Self::max_head) | 32 KiB | nginx's default room for a request's head (4 x 8 KiB); browsers send 1-4 KiB, cookies included |
/// | [`max_headers`](Self::max_headers) | 100 | Apache's `LimitRequestFields` and hyper's default |
/// | [`max_line`](Self::max_line) | 8 KiB | one start line or header line: Apache's `LimitRequestLine` / `LimitRequestFieldSize` |
/// | [`max_chunk_extensions`](Self::max_chunk_extensions) | 16 KiB per message | hyper's bound, after extensions were used to make servers buffer without end |
/// | [`max_trailers`](Self::max_trailers) | 16 KiB | trailers are rare and small |
/// | [`max_body`](Self::max_body) | none | the application knows; a declared length past it is refused at the head |
///
/// ```
/// use cleave_proto::http1::Http1Config;
///
/// let config = Http1Config::default().max_headers(64)?.max_body(Some(1 << 20));
/// assert_eq!(config.get_max_headers(), 64);
/// assert!(Http1Config::default().max_headers(0).is_err());
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http1Config {
    max_head: usize,
    max_headers: usize,
    max_line: usize,
    max_chunk_extensions: u64,
    max_trailers: usize,
    max_body: Option<u64>,
    allow_bare_lf: bool,
    allow_chunk_size_whitespace: bool,
    allow_equal_content_lengths: bool,
    allow_obs_fold_in_responses: bool,
}

impl Default for Http1Config {
    fn default() -> Self {
        Self {
            max_head: 32 * 1024,
            max_headers: 100,
            max_line: 8 * 1024,
            max_chunk_extensions: 16 * 1024,
            max_trailers: 16 * 1024,
            max_body: None,
            allow_bare_lf: false,
            allow_chunk_size_whitespace: false,
            allow_equal_content_lengths: false,
            allow_obs_fold_in_responses: false,
        }
    }
}

fn in_range(
    setting: &'static str,
    value: u64,
    min: u64,
    max: u64,
    expected: &'static str,
) -> Result<(), Error> {
    if value < min || value > max {
        return Err(Error::invalid_config(setting, value, expected));
    }
    Ok(())
}

impl Http1Config {
    /// The most bytes one head may take, start line to the empty line
    /// (`LimitExceeded { limit: HeadLength }`, which a server answers
    /// with 431).
    ///
    /// # Errors
    ///
    /// `Misuse::InvalidConfig` for 0 or more than `u32::MAX`.
    pub fn max_head(mut self, bytes: usize) -> Result<Self, Error> {
        in_range(
            "max_head",
            bytes as u64,
            1,
            u64::from(u32::MAX),
            "1 to 2^32 - 1 bytes",
        )?;
        self.max_head = bytes;
        Ok(self)
    }

    /// The most header fields in one head, and in one trailer section.
    ///
    /// # Errors
    ///
    /// `Misuse::InvalidConfig` for 0 or more than [`MAX_HEADERS`].
    pub fn max_headers(mut self, count: usize) -> Result<Self, Error> {
        in_range(
            "max_headers",
            count as u64,
            1,
            MAX_HEADERS as u64,
            "1 to 256 headers",
        )?;
        self.max_headers = count;
        Ok(self)
    }

    /// The longest start line or header line, CRLF included
    /// (`LimitExceeded { limit: LineLength }`; `RequestLine` for a request
    /// line, which a server answers with 414).
    ///
    /// # Errors
    ///
    /// `Misuse::InvalidConfig` for fewer than 16 bytes or more than
    /// `u32::MAX`.
    pub fn max_line(mut self, bytes: usize) -> Result<Self, Error> {
        in_range(
            "max_line",
            bytes as u64,
            16,
            u64::from(u32::MAX),
            "16 to 2^32 - 1 bytes",
        )?;
        self.max_line = bytes;
        Ok(self)
    }

    /// The chunk-extension bytes one message may carry, over all its
    /// chunks (`LimitExceeded { limit: ChunkExtension }`). 0 refuses every
    /// extension.
    ///
    /// A chunk-size line may run 18 bytes past what is left of it (16 hex
    /// digits, CR, LF) before it is refused with this limit: leading zeros
    /// past 16 digits take from it too, so that no line is unbounded.
    #[must_use]
    pub fn max_chunk_extensions(mut self, bytes: u64) -> Self {
        self.max_chunk_extensions = bytes;
        self
    }

    /// The largest trailer section, its empty line included
    /// (`LimitExceeded { limit: TrailerLength }`): at least 2 bytes, the
    /// empty line alone.
    ///
    /// # Errors
    ///
    /// `Misuse::InvalidConfig` for less than 2 or more than `u32::MAX`.
    pub fn max_trailers(mut self, bytes: usize) -> Result<Self, Error> {
        in_range(
            "max_trailers",
            bytes as u64,
            2,
            u64::from(u32::MAX),
            "2 to 2^32 - 1 bytes",
        )?;
        self.max_trailers = bytes;
        Ok(self)
    }

    /// The largest body, declared or received (`LimitExceeded { limit:
    /// BodyLength }`, a 413); `None` for no limit. A Content-Length past
    /// it is refused at the head, a chunk that would pass it at its size
    /// line, a body to the close once its bytes would pass it (those up
    /// to the limit come out first).
    #[must_use]
    pub fn max_body(mut self, bytes: Option<u64>) -> Self {
        self.max_body = bytes;
        self
    }

    /// Takes a bare LF as a line end in heads, chunk lines and trailers
    /// (RFC 9112, section 2.2 lets a recipient do so). Off by default: a
    /// server, and a proxy in front of one, must not read lines another
    /// parser would read otherwise. For a client talking to a broken
    /// server.
    #[must_use]
    pub fn allow_bare_lf(mut self, allow: bool) -> Self {
        self.allow_bare_lf = allow;
        self
    }

    /// Takes spaces and tabs after a chunk size (some old servers pad
    /// it). Off by default; for a client talking to such a server.
    #[must_use]
    pub fn allow_chunk_size_whitespace(mut self, allow: bool) -> Self {
        self.allow_chunk_size_whitespace = allow;
        self
    }

    /// Takes a Content-Length repeated with one value (`5, 5`, or the
    /// header twice), which RFC 9112 section 6.3 lets a recipient take as
    /// one. Off by default: strict, as a server must be when another hop
    /// may read it otherwise.
    #[must_use]
    pub fn allow_equal_content_lengths(mut self, allow: bool) -> Self {
        self.allow_equal_content_lengths = allow;
        self
    }

    /// Whether a response's field line folded onto the next (obsolete
    /// line folding: a line that starts with a space or a tab) is taken,
    /// each fold replaced with spaces where it lies in the receive buffer
    /// before the head is read, as RFC 9112 (section 5.2) asks of a user
    /// agent, and lets a proxy do before it forwards the response. Off by
    /// default: refused with `ObsFold` (what a proxy may do instead,
    /// answering 502). A head that is refused for another fault is handed
    /// back as it came. Requests and trailers are never unfolded, nor a
    /// first field line that starts with whitespace (RFC 9112, section
    /// 2.2). The limits count the lines as they came: `max_line` bounds
    /// each of them, and a field unfolded from several may be longer (the
    /// head stays within `max_head`).
    #[must_use]
    pub fn allow_obs_fold_in_responses(mut self, allow: bool) -> Self {
        self.allow_obs_fold_in_responses = allow;
        self
    }

    /// See [`max_head`](Self::max_head).
    #[must_use]
    pub fn get_max_head(&self) -> usize {
        self.max_head
    }

    /// See [`max_headers`](Self::max_headers).
    #[must_use]
    pub fn get_max_headers(&self) -> usize {
        self.max_headers
    }

    /// See [`max_line`](Self::max_line).
    #[must_use]
    pub fn get_max_line(&self) -> usize {
        self.max_line
    }

    /// See [`max_chunk_extensions`](Self::max_chunk_extensions).
    #[must_use]
    pub fn get_max_chunk_extensions(&self) -> u64 {
        self.max_chunk_extensions
    }

    /// See [`max_trailers`](Self::max_trailers).
    #[must_use]
    pub fn get_max_trailers(&self) -> usize {
        self.max_trailers
    }

    /// See [`max_body`](Self::max_body).
    #[must_use]
    pub fn get_max_body(&self) -> Option<u64> {
        self.max_body
    }

    /// See [`allow_bare_lf`](Self::allow_bare_lf).
    #[must_use]
    pub fn get_allow_bare_lf(&self) -> bool {
        self.allow_bare_lf
    }

    /// See [`allow_chunk_size_whitespace`](Self::allow_chunk_size_whitespace).
    #[must_use]
    pub fn get_allow_chunk_size_whitespace(&self) -> bool {
        self.allow_chunk_size_whitespace
    }

    /// See [`allow_equal_content_lengths`](Self::allow_equal_content_lengths).
    #[must_use]
    pub fn get_allow_equal_content_lengths(&self) -> bool {
        self.allow_equal_content_lengths
    }

    /// See [`allow_obs_fold_in_responses`](Self::allow_obs_fold_in_responses).
    #[must_use]
    pub fn get_allow_obs_fold_in_responses(&self) -> bool {
        self.allow_obs_fold_in_responses
    }
}
