//! A client-role `WebSocket` on any bytes (unmasked frames from a server),
//! with the limits the fuzzer picks (`max_frame`, `max_message`,
//! `stream_above`, visible pings, no automatic pong, a small receive
//! buffer, a small urgent lane, this side closing first): the whole input,
//! one byte at a time and cut into the pieces the fuzzer picks give the
//! same events (parts assembled into whole messages, since streamed
//! pieces depend on the cuts), the same error (kind and offset), the same
//! stall of a full buffer and, when the urgent lane has room, the same
//! bytes queued; and each run keeps the contracts on its own:
//!
//! - an error is final: polled again it comes again, and again after more
//!   bytes and the end of the stream; after an error or a `Close` event no
//!   event comes, and the write side shuts once the queue is out;
//! - every `Text` message, every assembled text and every text prefix
//!   handed out is UTF-8 (a prefix may end inside a code point); parts
//!   of one message share its kind; no message exceeds `max_message`;
//!   pings come out when asked for or when auto-pong is off, pongs only
//!   when asked for, at most 125 bytes; a
//!   peer's close has a sendable code (or none) and a UTF-8 reason;
//! - the receive buffer never holds more than its `max_buffered`, and it
//!   stalls full only on a frame larger than it, never on one to stream
//!   (one whose header alone fills it is refused);
//! - nothing fed is lost: without an error, the consumed offset and the
//!   buffered bytes add up to the input fed; a stream that ends cleanly
//!   ends between messages;
//! - an error points at the frame at fault: a frame starts there (frames
//!   walked back to back by a header reader of the target's own) whose
//!   header breaks the rule the error names (reserved bits, opcode,
//!   control rules, masking, length, continuation, a close, text, a
//!   limit); text found invalid in a streamed frame may point inside it or
//!   at its end instead, past what was handed out;
//! - what the connection queued (its own frames, masked) parses back
//!   (with a server-role reader, pings visible) as pongs for the pings
//!   seen, in order (a subsequence of them when the urgent lane is small;
//!   none when pongs are off), and at most one close frame among them,
//!   with nothing but pongs after it and those only after this side's own
//!   close (sent before any byte came: a ping after it is still
//!   answered): this side's own when it closed first, else `close_code_for(error)` on an error (none for
//!   `Truncated`), the echo of the peer's code on a peer close, none
//!   otherwise (with a small urgent lane the close may be missing: one
//!   that finds the lane full is not queued);
//! - a `Truncated` error's `partial` is the input's unconsumed tail
//!   exactly: the bytes as they arrived.
//!
//! The one difference allowed between runs: text found invalid in a
//! streamed frame, of which one cut handed out more first (the error is
//! the same at the frame's end; inside it, it lies further by exactly
//! those bytes, and the frame's header if the other cut had handed out
//! none of it).
//!
//! The first 9 bytes choose the setup (`support/websocket.rs`, `setup`):
//! flags, the frame and message limits, `stream_above`, the buffer's
//! limit, two piece sizes, the urgent lane, more flags and the masks'
//! seed.

#![no_main]

use cleave_proto::websocket::Role;
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;
#[path = "support/websocket.rs"]
mod support;
use support::{check, setup, SETUP_LEN};

fuzz_target!(|data: &[u8]| {
    let Some((knobs, input)) = data.split_first_chunk::<SETUP_LEN>() else {
        return;
    };
    let Some(setup) = setup(Role::Client, *knobs) else {
        return;
    };
    check(&setup, input);
});
