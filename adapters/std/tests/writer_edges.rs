//! The writer thread's handles at the edges: a close while a sender waits
//! for room.

use std::io::{self, IoSlice, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use cleave_proto::{Bytes, WriteQueueConfig};
use cleave_std::{spawn_writer, Socket, WriteError};

/// A writer that blocks inside each write until the test releases it.
struct Gated {
    entered: Sender<()>,
    release: Receiver<()>,
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let _ = self.entered.send(());
        let _ = self.release.recv();
        Ok(bufs.iter().map(|b| b.len()).sum())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for Gated {}

/// A thread waits in `send` for room; another closes the queue. The
/// sender's item can never go in, and it is told at once (it used to wait
/// for the writer's next progress: with a peer that does not read, for
/// ever).
#[test]
fn a_close_wakes_a_sender_waiting_for_room() {
    let (entered, inside) = channel();
    let (gate, release) = channel();
    let config = WriteQueueConfig::default().max_items(1).unwrap();
    let (handle, thread) = spawn_writer(Gated { entered, release }, config);
    handle.try_send(Bytes::from_static(b"first")).unwrap();
    inside.recv().unwrap(); // the writer is inside a write that does not end
    let sender = handle.clone();
    let (sent_tx, sent) = channel();
    std::thread::spawn(move || {
        let result = sender.send(Bytes::from_static(b"waits for room"));
        let _ = sent_tx.send(result.map(drop).map_err(|r| r.into_parts().0));
    });
    std::thread::sleep(Duration::from_millis(50));
    let closer = handle.clone();
    std::thread::spawn(move || closer.close());
    std::thread::sleep(Duration::from_millis(50));
    assert!(handle.is_closed(), "the queue is closed");
    assert!(
        handle.try_send(Bytes::from_static(b"x")).is_err(),
        "a push is refused at once"
    );
    let got = sent.recv_timeout(Duration::from_secs(5));
    // Clean up: let the writer go on.
    drop(gate);
    let _ = thread;
    assert!(
        matches!(got, Ok(Err(WriteError::Closed))),
        "the waiting sender after the close: {got:?}"
    );
}
