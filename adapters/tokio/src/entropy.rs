//! [`OsEntropy`]: the operating system's randomness for a WebSocket
//! client's masking keys and `Sec-WebSocket-Key`.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

use cleave_proto::websocket::Entropy;

/// Randomness from the operating system (`getrandom`), drawn 256 bytes at
/// a time so that a frame's mask is not a system call: what a
/// [`WebSocket::client`](cleave_proto::websocket::WebSocket::client) and a
/// [`ClientHandshake`](cleave_proto::websocket::ClientHandshake) need
/// (RFC 6455, section 10.3: a peer must not predict the masks).
///
/// Should the operating system refuse, the bytes come from the standard
/// library's per-process random hash keys instead (seeded by the
/// operating system at start-up): never a panic, never a fixed mask.
#[derive(Debug, Default)]
pub struct OsEntropy {
    pool: Vec<u8>,
    at: usize,
}

impl OsEntropy {
    /// A source with an empty pool: the first draw fills it.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn refill(&mut self) {
        self.pool.resize(256, 0);
        if getrandom::fill(&mut self.pool).is_err() {
            for chunk in self.pool.chunks_mut(8) {
                let mut hasher = RandomState::new().build_hasher();
                hasher.write_usize(chunk.as_ptr() as usize);
                let word = hasher.finish().to_ne_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
        self.at = 0;
    }
}

impl Entropy for OsEntropy {
    fn fill(&mut self, buf: &mut [u8]) {
        let mut filled = 0;
        while filled < buf.len() {
            if self.at >= self.pool.len() {
                self.refill();
            }
            let n = (buf.len() - filled).min(self.pool.len() - self.at);
            buf[filled..filled + n].copy_from_slice(&self.pool[self.at..self.at + n]);
            // Used bytes are not used again.
            self.pool[self.at..self.at + n].fill(0);
            self.at += n;
            filled += n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_differ_and_span_refills() {
        let mut entropy = OsEntropy::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut key = [0u8; 16];
            entropy.fill(&mut key);
            assert!(seen.insert(key), "a repeated 16-byte draw");
        }
    }
}
