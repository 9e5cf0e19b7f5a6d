//! [`Assembler`]: whole messages from the [`Part`]s of a streamed one.

use bytes::{Bytes, BytesMut};

use super::{Kind, Part};

/// Makes whole messages of [`Part`]s, with one copy (none for a message
/// whose only part is its last).
#[derive(Debug, Default)]
pub struct Assembler {
    kind: Option<Kind>,
    buf: BytesMut,
}

impl Assembler {
    /// An empty assembler.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a part; the whole message once its last part came. The
    /// [`WebSocket`](super::WebSocket)'s `max_message` bounds what it collects.
    pub fn push(&mut self, part: Part) -> Option<(Kind, Bytes)> {
        let kind = *self.kind.get_or_insert(part.kind);
        if !part.last {
            self.buf.extend_from_slice(&part.data);
            return None;
        }
        self.kind = None;
        if self.buf.is_empty() {
            return Some((kind, part.data));
        }
        self.buf.extend_from_slice(&part.data);
        let whole = self.buf.split().freeze();
        self.buf = BytesMut::new();
        Some((kind, whole))
    }
}
