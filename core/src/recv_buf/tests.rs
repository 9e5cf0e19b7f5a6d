use super::memory::{block, LARGE_BLOCK};
use super::*;

/// A buffer handed in with little room left in a large block: the
/// first feed takes the block back from the front, finds it far
/// larger than an idle buffer keeps, and reads into a block of its own
/// size instead, as `make_room` does.
#[test]
fn a_large_block_handed_in_is_not_kept_by_the_quick_reclaim() {
    let mut big = BytesMut::with_capacity(1 << 20);
    big.resize((1 << 20) - 8 * 1024, 0);
    let _ = big.split(); // the view: 8 KiB of room at the block's end
    assert_eq!(big.capacity(), 8 * 1024);
    let mut buf = RecvBuf::from_buffer(big, RecvBufConfig::default()).unwrap();
    // The view's room filled and its bytes taken and dropped: the
    // block's pieces are gone, and the view has no room left.
    buf.feed(&[0; 8 * 1024]).unwrap();
    drop(buf.split_to(8 * 1024).unwrap());
    buf.feed(&[1; 100]).unwrap();
    assert_eq!(buf.peek(), &[1; 100][..]);
    assert!(buf.capacity() <= 32 * 1024, "{} kept", buf.capacity());
}

#[test]
fn a_large_block_is_asked_for_fallibly_and_keeps_its_capacity() {
    let large = block(LARGE_BLOCK + 1).unwrap();
    assert!(large.capacity() > LARGE_BLOCK);
    assert!(block(usize::MAX).is_none());
    assert!(block(isize::MAX as usize).is_none());
}

#[test]
fn spare_region_is_reused_without_zeroing_twice() {
    let mut buf = RecvBuf::new();
    let spare = buf.spare_mut().unwrap();
    assert_eq!(spare.len(), DEFAULT_READ_RESERVE);
    spare[..3].copy_from_slice(b"abc");
    buf.commit(3).unwrap();
    // The rest of the region stays initialised and is handed out again
    // as it is: no resize, no zeroing.
    let spare = buf.spare_mut().unwrap();
    assert_eq!(spare.len(), DEFAULT_READ_RESERVE - 3);
    assert_eq!(buf.buf.len(), DEFAULT_READ_RESERVE);
    assert_eq!(buf.peek(), b"abc");
}

#[test]
fn feed_writes_into_initialised_spare() {
    let mut buf = RecvBuf::new();
    let _ = buf.spare_mut().unwrap();
    buf.feed(b"xyz").unwrap();
    assert_eq!(buf.peek(), b"xyz");
    assert_eq!(buf.buf.len(), DEFAULT_READ_RESERVE);
    assert_eq!(
        buf.commit(1),
        Err(Error::Misuse(Misuse::CommitTooLarge {
            committed: 1,
            spare: 0
        }))
    );
}

#[test]
fn reuses_the_block_once_its_frames_are_dropped() {
    let config = RecvBufConfig::default().read_reserve(40).unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(&[7; 40]).unwrap();
    let block = buf.peek().as_ptr();
    let frame = buf.split_to(40).unwrap();
    buf.feed(&[8; 40]).unwrap();
    assert_ne!(buf.peek().as_ptr(), block, "the frame still uses the block");
    drop(frame);
    let block = buf.peek().as_ptr();
    drop(buf.split_to(40).unwrap());
    buf.feed(&[9; 40]).unwrap();
    assert_eq!(
        buf.peek().as_ptr(),
        block,
        "the block is free again: reused"
    );
    assert_eq!(buf.capacity(), 40);
}

#[test]
fn grows_by_what_arrived_plus_at_most_one_reserve() {
    let config = RecvBufConfig::default().read_reserve(16).unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(&[7; 40]).unwrap();
    assert_eq!(buf.capacity(), 40);
    let frame = buf.split_to(30).unwrap();
    buf.feed(&[8; 5]).unwrap();
    assert_eq!(buf.capacity(), 10 + 16);
    assert_eq!(&frame[..], &[7; 30][..]);
}
