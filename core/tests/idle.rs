//! What one connection's core state (a `Conn<Framed<Lines>>`: its receive
//! buffer and its write queue) holds on the heap once it goes idle after
//! real traffic, counted by a global allocator: nothing, when the adapter
//! does what the adapters do when a read finds nothing
//! (`Conn::release_idle`); the bytes of a partial line, and no more, while
//! one waits.

#[path = "support/counting.rs"]
mod counting;

use core::time::Duration;

use cleave_proto::conn::{Conn, ConnConfig, Framed};
use cleave_proto::{Bytes, Encoder, Lines, WriteQueue};
use counting::live_bytes;

/// One connection that echoes lines, as an adapter drives it.
struct Echo {
    conn: Conn<Framed<Lines>>,
    encoder: Lines,
}

impl Echo {
    fn new() -> Self {
        Self::with_config(ConnConfig::default())
    }

    fn with_config(config: ConnConfig) -> Self {
        Self {
            conn: Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO),
            encoder: Lines::new(),
        }
    }

    /// Reads `data` into the buffer's spare room, as a socket read would,
    /// in reads of at most one reserve; answers every line (echoes it) and
    /// writes the answers out in writes of at most 4 KiB.
    fn receive(&mut self, mut data: &[u8]) -> usize {
        let mut lines = 0;
        while !data.is_empty() {
            let spare = self.conn.spare_mut().expect("room");
            let n = spare.len().min(data.len());
            spare[..n].copy_from_slice(&data[..n]);
            self.conn.handle_read(n, Duration::ZERO).expect("fits");
            data = &data[n..];
            while let Some(event) = self.conn.poll_event().expect("valid") {
                let frame = self.encoder.encode(event).expect("encodes");
                self.conn.push(frame).expect("room");
                lines += 1;
            }
        }
        while self.conn.wants_write() {
            let mut slices = [&b""[..]; 16];
            let n = self.conn.poll_transmit_slices(&mut slices);
            let offered: usize = slices[..n].iter().map(|s| s.len()).sum();
            self.conn
                .handle_written(offered.min(4096), Duration::ZERO)
                .expect("offered");
        }
        lines
    }

    /// What an adapter does when a read finds nothing: the connection is
    /// about to wait.
    fn go_idle(&mut self) {
        self.conn.release_idle();
    }
}

#[test]
fn an_idle_connection_holds_no_heap_after_real_traffic() {
    let before = live_bytes();
    let mut conn = Echo::new();
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
    let mut conn = Echo::new();
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
    let mut conn = Echo::with_config(
        ConnConfig::default()
            .recv_buf(RecvBufConfig::default().release_when_idle(false))
            .write_queue(WriteQueueConfig::default().release_when_idle(false)),
    );
    assert_eq!(conn.receive(b"a line\n"), 1);
    conn.go_idle();
    let kept = live_bytes() - before;
    assert!(
        kept >= 8 * 1024,
        "the read block and the run buffer stay: {kept}"
    );
    let (_, mut buf, mut queue) = conn.conn.into_parts();
    assert!(!buf.release_idle() && !queue.release_idle());
    // shrink_to_fit still gives them back when asked.
    assert!(buf.shrink_to_fit() && queue.shrink_to_fit());
    drop((buf, queue));
    assert_eq!(live_bytes(), before);
}

#[test]
fn with_a_release_delay_a_connection_keeps_its_blocks_until_quiet_that_long() {
    let at = Duration::from_millis;
    let before = live_bytes();
    let config = ConnConfig::default().release_after(Duration::from_secs(1));
    let mut conn = Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO);
    assert_eq!(
        conn.poll_timeout(),
        Some(at(1000)),
        "nothing to give back yet, but a spell began"
    );
    conn.handle_timeout(at(1000));
    assert_eq!((conn.poll_timeout(), live_bytes()), (None, before));

    // An exchange at 1.1 s: a line in, its echo out.
    let exchange = |conn: &mut Conn<Framed<Lines>>, now| {
        conn.feed(b"a line\n", now).expect("fits");
        let line = conn.poll_event().expect("valid").expect("a line");
        conn.push(Lines::new().encode(line).expect("encodes"))
            .expect("room");
        while let Some(chunk) = conn.poll_transmit_chunk() {
            conn.handle_written(chunk.len(), now).expect("offered");
        }
        assert_eq!(conn.poll_event(), Ok(None));
    };
    exchange(&mut conn, at(1100));
    let busy = live_bytes() - before;
    assert!(
        busy >= 8 * 1024,
        "the read block and the run buffer: {busy}"
    );

    // The driver finds the socket empty: both are kept for a second.
    conn.release_idle();
    assert_eq!(live_bytes() - before, busy);
    assert_eq!(conn.poll_timeout(), Some(at(2100)));
    conn.handle_timeout(at(1700));
    conn.release_idle();
    assert_eq!(live_bytes() - before, busy, "quiet for 600 ms only");

    // Quiet for the whole second: given back, once.
    conn.handle_timeout(at(2100));
    assert_eq!(live_bytes(), before, "quiet for a second: no heap held");
    assert_eq!(conn.poll_timeout(), None, "no deadline once given back");

    // Traffic starts a new spell, with its own deadline; an exchange
    // within the delay of the last one keeps the blocks (none allocated
    // again).
    exchange(&mut conn, at(3000));
    let busy = live_bytes() - before;
    exchange(&mut conn, at(3500));
    conn.release_idle();
    assert_eq!(live_bytes() - before, busy);
    assert_eq!(conn.poll_timeout(), Some(at(4500)));
    conn.handle_timeout(at(4600)); // a late timer
    assert_eq!(live_bytes(), before);
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn without_a_release_delay_the_deadlines_are_the_timeouts_alone() {
    use cleave_proto::Timeouts;
    let at = Duration::from_millis;
    let timeouts = Timeouts::default().idle(Some(Duration::from_secs(30)));
    let config = ConnConfig::default().timeouts(timeouts);
    let mut conn = Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO);
    conn.feed(b"a", at(10)).expect("fits");
    assert_eq!(conn.poll_timeout(), Some(at(30_010)));
    // With a delay, the earlier of the two.
    let config = config.release_after(Duration::from_secs(1));
    let mut conn = Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO);
    conn.feed(b"a", at(10)).expect("fits");
    assert_eq!(conn.poll_timeout(), Some(at(1010)));
    conn.handle_timeout(at(1010));
    assert_eq!(conn.poll_timeout(), Some(at(30_010)));
    assert_eq!(conn.poll_event(), Ok(None), "the partial line is kept");
    assert_eq!(conn.recv_buf().peek(), b"a");
}

/// A finished connection (the peer ended, everything answered) has no
/// timer left to release by: with a delay, `release_idle` gives its
/// buffers back at once, as without one.
#[test]
fn a_finished_connection_releases_at_once_whatever_the_delay() {
    let at = Duration::from_millis;
    let before = live_bytes();
    let config = ConnConfig::default().release_after(Duration::from_secs(1));
    let mut conn = Conn::with_config(Framed::new(Lines::new()), config, Duration::ZERO);
    conn.feed(b"last line\n", at(10)).expect("fits");
    let line = conn.poll_event().expect("valid").expect("a line");
    conn.push(Lines::new().encode(line).expect("encodes"))
        .expect("room");
    while let Some(chunk) = conn.poll_transmit_chunk() {
        conn.handle_written(chunk.len(), at(10)).expect("offered");
    }
    conn.handle_eof(at(20));
    assert_eq!(conn.poll_event(), Ok(None), "a clean end");
    assert!(conn.is_finished());
    assert!(live_bytes() > before);
    conn.release_idle();
    assert_eq!(
        live_bytes(),
        before,
        "nothing held, 10 ms after the last byte"
    );
}

/// What an idle connection holds once its buffers are gone is its struct:
/// the README's figures, kept from growing unnoticed (on 64-bit targets,
/// where they were measured).
#[cfg(target_pointer_width = "64")]
#[test]
fn an_idle_connection_struct_stays_within_its_stated_size() {
    use core::mem::size_of;
    assert!(size_of::<Conn<Framed<Lines>>>() <= 608);
    assert!(size_of::<WriteQueue>() <= 288);
    assert!(size_of::<cleave_proto::RecvBuf>() <= 112);
    assert!(size_of::<Framed<Lines>>() <= 104);
    assert!(size_of::<cleave_proto::Session<usize>>() <= 160);
}
