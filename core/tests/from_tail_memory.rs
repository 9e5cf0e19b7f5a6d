//! `RecvBuf::from_tail` keeps no large block alive for a small tail, one
//! at the end of a large block included (its view's capacity counts from
//! its start only), and `capacity()` and the release of an emptied buffer
//! see the memory it keeps. The shared counting allocator measures it,
//! per thread.

#[path = "support/counting.rs"]
mod counting;

use cleave_proto::{Bytes, RecvBuf, RecvBufConfig};

const BIG: usize = 4 << 20;
const BIG_BYTES: i64 = BIG as i64;

/// The hand-off path: a session's buffer read a 4 MiB frame plus 10 bytes
/// of what follows; the frame is consumed, the tail taken and given to a
/// new buffer.
#[test]
fn from_tail_of_a_handoff_does_not_pin_the_big_block() {
    let baseline = counting::live_bytes();
    let mut session = RecvBuf::new();
    session.feed(&vec![7u8; BIG + 10]).unwrap();
    drop(session.split_to(BIG).unwrap());
    let tail: Bytes = session.take_tail();
    drop(session);
    assert_eq!(tail.len(), 10);

    let buf = RecvBuf::from_tail(tail, RecvBufConfig::default()).unwrap();
    // Everything else is dropped: what is live beyond the baseline is
    // what `buf` keeps.
    let live = counting::live_bytes() - baseline;
    println!(
        "heap kept by a buffer holding {} bytes: {live}; buf.capacity(): {}",
        buf.len(),
        buf.capacity()
    );
    assert!(
        live < BIG_BYTES / 2,
        "a 10-byte tail keeps {live} bytes of heap alive (capacity() says {})",
        buf.capacity()
    );
}

/// Same with a plain `Bytes`, as in the crate's own test, but the tail is
/// checked against the memory it keeps instead of `capacity()`.
#[test]
fn from_tail_at_the_end_of_a_block_pins_nothing_unseen() {
    let baseline = counting::live_bytes();
    let mut big = Bytes::from(vec![0u8; BIG]);
    let tail = big.split_off(BIG - 10);
    drop(big);
    let buf = RecvBuf::from_tail(tail, RecvBufConfig::default()).unwrap();
    let live = counting::live_bytes() - baseline;
    println!("heap kept: {live}; buf.capacity(): {}", buf.capacity());
    assert!(
        buf.capacity() >= BIG || live < BIG_BYTES / 2,
        "capacity() reports {} while the buffer keeps a {BIG}-byte block alive ({live} live)",
        buf.capacity()
    );
}

/// Once the buffer empties, "it gives back a block above twice the
/// idle_capacity": no 4 MiB block taken over with a tail stays.
#[test]
fn an_emptied_from_tail_buffer_keeps_no_big_block() {
    let baseline = counting::live_bytes();
    let mut session = RecvBuf::new();
    session.feed(&vec![7u8; BIG + 10]).unwrap();
    drop(session.split_to(BIG).unwrap());
    let tail = session.take_tail();
    drop(session);
    let mut buf = RecvBuf::from_tail(tail, RecvBufConfig::default()).unwrap();
    buf.advance(10).unwrap();
    assert!(buf.is_empty());
    let live = counting::live_bytes() - baseline;
    println!(
        "empty buffer keeps {live} bytes; capacity(): {}",
        buf.capacity()
    );
    assert!(
        live <= 2 * cleave_proto::DEFAULT_IDLE_CAPACITY as i64 + 256,
        "an empty buffer keeps {live} bytes of heap (idle capacity {})",
        cleave_proto::DEFAULT_IDLE_CAPACITY
    );
}
