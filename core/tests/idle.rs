//! What one connection's core state (a `Framed<Lines>` read side and a
//! `WriteQueue`) holds on the heap once it goes idle after real traffic,
//! counted by a global allocator: nothing, when the adapter does what the
//! adapters do when a read finds nothing (`release_idle` on both); the
//! bytes of a partial line, and no more, while one waits.

#[path = "support/counting.rs"]
mod counting;

use cleave_proto::{Bytes, Encoder, Framed, Inbound, Lines, WriteQueue};
use counting::live_bytes;

/// One connection's state, as an adapter drives it.
struct Conn {
    read: Framed<Lines>,
    queue: WriteQueue,
    encoder: Lines,
}

impl Conn {
    fn new() -> Self {
        Self {
            read: Framed::new(Lines::new()),
            queue: WriteQueue::new(),
            encoder: Lines::new(),
        }
    }

    /// Reads `data` into the buffer's spare room, as a socket read would,
    /// in reads of at most one reserve; answers every line (echoes it) and
    /// writes the answers out in writes of at most 4 KiB.
    fn receive(&mut self, mut data: &[u8]) -> usize {
        let mut lines = 0;
        while !data.is_empty() {
            let buf = self.read.recv_buf();
            let spare = buf.spare_mut().expect("room");
            let n = spare.len().min(data.len());
            spare[..n].copy_from_slice(&data[..n]);
            buf.commit(n).expect("fits");
            data = &data[n..];
            while let Some(event) = self
                .read
                .poll_event(core::time::Duration::ZERO)
                .expect("valid")
            {
                let frame = self.encoder.encode(event).expect("encodes");
                self.queue.push_frame(frame).expect("room");
                lines += 1;
            }
        }
        while !self.queue.is_flushed() {
            let mut slices = [&b""[..]; 16];
            let n = self.queue.chunks(&mut slices);
            let offered: usize = slices[..n].iter().map(|s| s.len()).sum();
            self.queue.advance(offered.min(4096)).expect("offered");
        }
        lines
    }

    /// What an adapter does when a read finds nothing: the connection is
    /// about to wait.
    fn go_idle(&mut self) {
        self.read.recv_buf().release_idle();
        self.queue.release_idle();
    }
}

#[test]
fn an_idle_connection_holds_no_heap_after_real_traffic() {
    let before = live_bytes();
    let mut conn = Conn::new();
    assert_eq!(live_bytes(), before, "a new connection allocates nothing");

    // A partial line, then quiet: only its bytes are held.
    assert_eq!(conn.receive(b"0123456789"), 0);
    conn.go_idle();
    assert_eq!(live_bytes() - before, 10, "a partial line holds its bytes");

    // Its end arrives and it is answered; a short line is answered; then
    // a 16 KiB line passes through.
    assert_eq!(conn.receive(b"abc\nshort line\n"), 2);
    let long = [&[b'x'; 16 * 1024 - 1][..], b"\n"].concat();
    assert_eq!(conn.receive(&long), 1);
    drop(long);
    conn.go_idle();
    assert_eq!(live_bytes(), before, "idle after traffic: no heap held");

    // And again, with the state reused: still nothing once idle.
    assert_eq!(conn.receive(b"again\n"), 1);
    assert!(live_bytes() > before, "a busy connection holds its blocks");
    conn.go_idle();
    assert_eq!(live_bytes(), before);
    drop(conn);
    assert_eq!(live_bytes(), before);
}

#[test]
fn shrinking_keeps_every_byte_and_a_busy_buffer_keeps_its_block() {
    let mut conn = Conn::new();
    conn.receive(b"first half of a li");
    conn.go_idle();
    conn.go_idle(); // twice: nothing more to give back, nothing lost
    assert_eq!(conn.receive(b"ne\n"), 1);
    // A buffer at least a quarter full keeps its block.
    let mut buf = cleave_proto::RecvBuf::new();
    buf.feed(&[b'y'; 4096]).expect("fits");
    let capacity = buf.capacity();
    assert!(!buf.shrink_to_fit());
    assert_eq!((buf.len(), buf.capacity()), (4096, capacity));
    // A queue with bytes pending keeps everything.
    let mut queue = WriteQueue::new();
    queue.push(Bytes::from_static(b"pending")).expect("room");
    assert!(!queue.shrink_to_fit());
    assert_eq!(queue.len(), 7);
}

#[test]
fn a_connection_configured_to_keep_its_blocks_keeps_them_when_idle() {
    use cleave_proto::{RecvBufConfig, WriteQueueConfig};
    let before = live_bytes();
    let mut conn = Conn {
        read: Framed::with_config(
            Lines::new(),
            RecvBufConfig::default().release_when_idle(false),
        ),
        queue: WriteQueue::with_config(WriteQueueConfig::default().release_when_idle(false)),
        encoder: Lines::new(),
    };
    assert_eq!(conn.receive(b"a line\n"), 1);
    conn.go_idle();
    assert!(!conn.read.recv_buf().release_idle() && !conn.queue.release_idle());
    let kept = live_bytes() - before;
    assert!(
        kept >= 8 * 1024,
        "the read block and the run buffer stay: {kept}"
    );
    // shrink_to_fit still gives them back when asked.
    assert!(conn.read.recv_buf().shrink_to_fit() && conn.queue.shrink_to_fit());
    assert_eq!(live_bytes(), before);
}
