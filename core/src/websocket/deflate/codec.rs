//! One connection's compressor and decompressor: messages compressed as
//! RFC 7692 section 7.2 says, and inflated under a limit (a compression
//! bomb is caught after at most [`STEP`] bytes of work past it).

use alloc::vec::Vec;
use core::fmt;

use bytes::{Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::{DeflateConfig, DeflateParams, MAX_WINDOW_BITS};
use crate::error::Error;
use crate::websocket::Role;
use crate::{InvalidInput, Limit, WsField};

/// The smallest window zlib makes a raw DEFLATE stream with (see the
/// module documentation for why 8 becomes 9 safely).
const ZLIB_MIN_WINDOW_BITS: u8 = 9;
/// The end of a sync flush, an empty stored block's length fields: removed
/// by the sender, appended by the receiver (RFC 7692, section 7.2).
pub(super) const TAIL: [u8; 4] = [0x00, 0x00, 0xff, 0xff];
/// An empty message, compressed: the header byte of an empty stored block
/// whose length fields are the [`TAIL`] (RFC 7692, section 7.2.3.6).
pub(super) const EMPTY: [u8; 1] = [0x00];
/// How much is inflated per step: the decompressor never writes more than
/// this beyond what `out` may still take, so a compression bomb is caught
/// after at most this much work past the limit.
const STEP: usize = 8 * 1024;
/// When `out` is full, the decompressor may still write this much, into
/// a buffer of its own, to tell whether the message goes on.
pub(super) const PROBE: usize = 64;
/// The largest stored DEFLATE block.
const STORED_MAX: usize = 0xffff;
/// zlib-rs's compressor, besides its window: the 64 Ki-entry hash table
/// (128 KiB), the literal and symbol buffers at memory level 8 (112 KiB)
/// and about 3 KiB of state. Measured from zlib-rs 0.6's allocation.
pub(super) const DEFLATE_FIXED: usize = 243 * 1024;
/// zlib-rs's decompressor: a 32 KiB window whatever the window bits, and
/// about 14 KiB of state (tables). Measured from zlib-rs 0.6's allocation.
pub(super) const INFLATE_MEMORY: usize = 47 * 1024;

/// One direction's window (zlib's bits, 9 to 15) and whether its
/// compressor forgets between messages.
#[derive(Clone, Copy, Debug)]
pub(super) struct Direction {
    pub(super) window_bits: u8,
    pub(super) no_context_takeover: bool,
}

/// One connection's compressor (for what it sends) and decompressor (for
/// what the peer sends), each made on first use.
pub(crate) struct Deflate {
    level: Compression,
    pub(super) ours: Direction,
    pub(super) theirs: Direction,
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
    pub(super) window: Window,
}

/// The last `size` bytes of a stream, in a ring allocated once (at the
/// first message), as the decompressor's own window holds them.
#[derive(Debug, Default)]
pub(super) struct Window {
    pub(super) ring: Vec<u8>,
    /// Where the next byte goes once the ring is full (its oldest byte).
    at: usize,
}

impl Window {
    /// Appends `bytes`, forgetting what falls out of the last `size`.
    pub(super) fn push(&mut self, bytes: &[u8], size: usize) {
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
    pub(super) fn bytes(&self) -> Vec<u8> {
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
pub(super) fn sync_flushed(compressor: &mut Compress, input: &[u8]) -> Option<Vec<u8>> {
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
pub(super) fn stored(input: &[u8]) -> Vec<u8> {
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

pub(super) fn invalid_compressed() -> Error {
    Error::InvalidInput {
        kind: InvalidInput::WebSocket(WsField::Compressed),
        offset: 0,
    }
}
