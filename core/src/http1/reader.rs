//! [`HeadReader`]: a request head's length once it is whole and passes
//! the server's strict checks, for decoders that take heads as frames.

use crate::error::{Error, Limit};
use crate::http1::config::Http1Config;
use crate::http1::lines::BlockScan;
use crate::http1::parse::{early_check, parse_request, Role};
use crate::recv_buf::RecvBuf;

/// Where the search for one request head is: resumed on every call, so a
/// head trickled in pieces is looked at once.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct HeadReader {
    scan: BlockScan,
    checked: usize,
    /// The stream offset of the head's first byte (after empty lines).
    start: u64,
}

impl HeadReader {
    /// `(skip, len)`: the empty lines before the head (ignored, RFC 9112
    /// section 2.2), and the head's length, once it is whole and valid;
    /// `None` while it is not whole.
    pub(crate) fn poll(
        &mut self,
        recv: &RecvBuf,
        config: &Http1Config,
    ) -> Result<Option<(usize, usize)>, Error> {
        let all = recv.peek();
        let mut skip = 0;
        while let [b'\r', b'\n', ..] = &all[skip..] {
            skip += 2;
        }
        let buf = &all[skip..];
        let start = recv.offset() + skip as u64;
        if start != self.start {
            *self = Self {
                start,
                ..Self::default()
            };
        }
        let fail = |bad: crate::http1::lines::Bad| bad.into_error(start);
        let found = self
            .scan
            .scan(
                buf,
                config.get_allow_bare_lf(),
                config.get_max_line(),
                config.get_max_head(),
                Limit::HeadLength,
            )
            .map_err(fail)?;
        let Some(len) = found else {
            early_check(buf, self.checked, Role::Request).map_err(fail)?;
            self.checked = buf.len();
            return Ok(None);
        };
        parse_request(&buf[..len], config).map_err(fail)?;
        Ok(Some((skip, len)))
    }
}
