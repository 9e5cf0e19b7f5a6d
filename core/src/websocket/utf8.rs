//! UTF-8 checked across the pieces of a message: a code point split
//! between two frames (or two reads) is valid, and an invalid sequence
//! fails as soon as it is certain, not at the end of the message (what
//! Autobahn's cases 6.4.x check).

/// The state between pieces: the start of a code point the last piece
/// ended inside (at most three bytes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Utf8 {
    pending: [u8; 4],
    len: u8,
}

/// Not UTF-8, certainly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Invalid;

impl Utf8 {
    /// Checks the next piece. `Err` as soon as the bytes so far can no
    /// longer start valid UTF-8 whatever follows.
    pub(crate) fn feed(&mut self, mut data: &[u8]) -> Result<(), Invalid> {
        if self.len > 0 {
            data = self.finish_pending(data)?;
            if self.len > 0 {
                return Ok(()); // still inside that code point
            }
        }
        match simdutf8::compat::from_utf8(data) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_some() => Err(Invalid),
            Err(e) => {
                // The piece ends inside a code point that may yet be valid.
                let rest = data.get(e.valid_up_to()..).unwrap_or_default();
                self.keep(rest);
                Ok(())
            }
        }
    }

    /// The message ended: nothing may be left pending.
    pub(crate) fn end(&mut self) -> Result<(), Invalid> {
        let complete = self.len == 0;
        *self = Self::default();
        if complete {
            Ok(())
        } else {
            Err(Invalid)
        }
    }

    /// Completes the pending code point from the front of `data` and
    /// returns what is left of `data`.
    fn finish_pending<'a>(&mut self, data: &'a [u8]) -> Result<&'a [u8], Invalid> {
        let have = usize::from(self.len);
        let width = width(self.pending[0]).ok_or(Invalid)?;
        let take = (width - have).min(data.len());
        let (head, rest) = data.split_at(take);
        let mut point = self.pending;
        point[have..have + take].copy_from_slice(head);
        let got = have + take;
        match core::str::from_utf8(&point[..got]) {
            Ok(_) => self.len = 0,
            Err(e) if e.error_len().is_some() => return Err(Invalid),
            // Still short of the whole code point, and valid so far.
            Err(_) => self.keep(&point[..got]),
        }
        Ok(rest)
    }

    fn keep(&mut self, bytes: &[u8]) {
        let n = bytes.len().min(3);
        self.pending[..n].copy_from_slice(&bytes[..n]);
        self.len = u8::try_from(n).unwrap_or(3);
    }
}

/// How long a code point that starts with `lead` is.
fn width(lead: u8) -> Option<usize> {
    match lead {
        0x00..=0x7F => Some(1),
        0xC2..=0xDF => Some(2),
        0xE0..=0xEF => Some(3),
        0xF0..=0xF4 => Some(4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_split(bytes: &[u8]) {
        let whole = core::str::from_utf8(bytes).is_ok();
        for cut in 0..=bytes.len() {
            let mut v = Utf8::default();
            let (a, b) = bytes.split_at(cut);
            let result = v.feed(a).and_then(|()| v.feed(b)).and_then(|()| v.end());
            assert_eq!(result.is_ok(), whole, "{bytes:x?} cut at {cut}");
        }
    }

    #[test]
    fn any_split_agrees_with_the_whole() {
        for text in [
            "",
            "hello",
            "κόσμε",
            "\u{10FFFF}\u{FFFF}\u{80}",
            "a\u{1F600}b\u{E000}c",
        ] {
            check_split(text.as_bytes());
        }
        for bad in [
            &b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xed\xa0\x80edited"[..],
            b"\xf4\x90\x80\x80",
            b"\xc0\x80",
            b"\xed\xa0\x80",
            b"\xf8\x88\x80\x80\x80",
            b"\xff",
            b"abc\xe2\x82",
        ] {
            check_split(bad);
        }
    }

    #[test]
    fn byte_by_byte_fails_at_the_first_certain_byte() {
        // Autobahn 6.4.2: the surrogate half fails at its second byte.
        let bytes = b"\xce\xba\xe1\xbd\xb9\xcf\x83\xce\xbc\xce\xb5\xf4\x90\x80\x80\x65\x64";
        let mut v = Utf8::default();
        let failed_at = bytes.iter().position(|&b| v.feed(&[b]).is_err());
        assert_eq!(failed_at, Some(12), "at the 0x90 after 0xf4");
        let mut v = Utf8::default();
        for &b in "κόσμε\u{10FFFF}".as_bytes() {
            v.feed(&[b]).unwrap();
        }
        v.end().unwrap();
    }

    #[test]
    fn a_message_ending_inside_a_code_point_is_invalid() {
        let mut v = Utf8::default();
        v.feed(b"ab\xe2\x82").unwrap();
        assert_eq!(v.end(), Err(Invalid));
        // And the state is fresh for the next message.
        v.feed(b"ok").unwrap();
        v.end().unwrap();
    }
}
