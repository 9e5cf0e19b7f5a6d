//! The writer thread against writers that a test controls: one that blocks
//! until released, one that buffers until flushed, one that panics.

use std::io::{self, IoSlice, Write};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cleave_proto::{Bytes, Encoder, Lines, WriteQueueConfig};
use cleave_std::{spawn_writer, try_spawn_writer, Socket, WriteError};

/// A writer that says when it is inside a write, and stays there until
/// the test says how the write ends.
struct Gated {
    entered: Sender<()>,
    release: Receiver<io::Result<()>>,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Write for Gated {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let _ = self.entered.send(());
        // A gate dropped by the test opens for good.
        self.release.recv().unwrap_or(Ok(()))?;
        let mut out = self.out.lock().unwrap();
        for buf in bufs {
            out.extend_from_slice(buf);
        }
        Ok(bufs.iter().map(|b| b.len()).sum())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for Gated {}

/// The test's side of a [`Gated`] writer.
struct Controls {
    /// A message each time the writer enters a write.
    inside: Receiver<()>,
    /// How the write in progress ends; dropped, every write goes through.
    gate: Sender<io::Result<()>>,
    /// What went through.
    out: Arc<Mutex<Vec<u8>>>,
}

fn gated() -> (Gated, Controls) {
    let (entered, inside) = channel();
    let (gate, release) = channel();
    let out = Arc::new(Mutex::new(Vec::new()));
    let writer = Gated {
        entered,
        release,
        out: out.clone(),
    };
    (writer, Controls { inside, gate, out })
}

#[test]
fn pushes_never_wait_for_a_writer_inside_a_write() {
    let (writer, Controls { inside, gate, out }) = gated();
    let config = WriteQueueConfig::default().max_items(3).unwrap();
    let (handle, thread) = spawn_writer(writer, config);
    handle.try_send(Bytes::from_static(b"first ")).unwrap();
    inside.recv().unwrap(); // the writer holds "first " and blocks

    // The lock is free: pushes go in, and a full queue answers at once.
    let second = handle.try_send(Bytes::from_static(b"second ")).unwrap();
    let urgent = handle
        .try_send_urgent(Bytes::from_static(b"URGENT "))
        .unwrap();
    handle.try_send(Bytes::from_static(b"third ")).unwrap();
    // Three bulk writes pending, the one being written included: full.
    let full = handle.try_send(Bytes::from_static(b"fourth ")).unwrap_err();
    assert_eq!(full.into_value(), "fourth ");
    let timed_out = handle
        .send_timeout(Bytes::from_static(b"fourth "), Duration::from_millis(10))
        .unwrap_err();
    assert!(matches!(timed_out.error(), WriteError::TimedOut));
    assert!(matches!(
        handle.written_timeout(second, Duration::from_millis(10)),
        Err(WriteError::TimedOut)
    ));
    assert!(!handle.is_written(urgent));

    drop(gate); // every write goes through from now on
    handle.written(urgent).unwrap();
    handle.written(second).unwrap();
    handle.close().unwrap();
    thread.join().unwrap().unwrap();
    // The urgent write went ahead of the bulk writes queued before it.
    assert_eq!(&out.lock().unwrap()[..], b"first URGENT second third ");
}

#[test]
fn a_failed_write_fails_every_handle_with_the_same_error() {
    let (writer, Controls { inside, gate, .. }) = gated();
    let (handle, thread) = spawn_writer(writer, WriteQueueConfig::default());
    let ticket = handle.try_send(Bytes::from_static(b"doomed")).unwrap();
    inside.recv().unwrap();
    let later = handle.try_send(Bytes::from_static(b"also doomed")).unwrap();
    let clone = handle.clone();
    let waiter = std::thread::spawn(move || clone.written(later));
    gate.send(Err(io::Error::new(io::ErrorKind::BrokenPipe, "gone")))
        .unwrap();
    for result in [
        handle.written(ticket),
        waiter.join().unwrap(),
        handle.flush(),
    ] {
        match result {
            Err(WriteError::Failed(e)) => {
                assert_eq!(
                    (e.kind(), e.to_string()),
                    (io::ErrorKind::BrokenPipe, "gone".into())
                )
            }
            other => panic!("{other:?}"),
        }
    }
    let e = handle.send(Bytes::from_static(b"x")).unwrap_err();
    assert!(matches!(e.error(), WriteError::Failed(_)));
    assert_eq!(
        io::Error::from(e.into_parts().0).kind(),
        io::ErrorKind::BrokenPipe
    );
    assert_eq!(
        thread.join().unwrap().unwrap_err().kind(),
        io::ErrorKind::BrokenPipe
    );
}

/// A writer that keeps what it is given until it is flushed, like a
/// `BufWriter`.
struct Buffered {
    held: Vec<u8>,
    out: Arc<Mutex<Vec<u8>>>,
}

impl Write for Buffered {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.held.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.lock().unwrap().append(&mut self.held);
        Ok(())
    }
}

/// Says when it is shut down, after the last flush.
impl Socket for Buffered {
    fn shutdown_write(&self) -> io::Result<()> {
        self.out.lock().unwrap().extend_from_slice(b" (shut)");
        Ok(())
    }
}

#[test]
fn flush_reaches_the_writer_and_the_last_handle_closes() {
    let out = Arc::new(Mutex::new(Vec::new()));
    let writer = Buffered {
        held: Vec::new(),
        out: out.clone(),
    };
    let (handle, thread) = try_spawn_writer(writer, WriteQueueConfig::default()).unwrap();
    let mut encoder = Lines::new();
    let handles: Vec<_> = (0..4).map(|_| handle.clone()).collect();
    let producers: Vec<_> = handles
        .into_iter()
        .enumerate()
        .map(|(i, handle)| {
            let frame = encoder.encode(format!("from {i}").into()).unwrap();
            let out = out.clone();
            std::thread::spawn(move || {
                handle.send(frame).unwrap();
                handle.flush().unwrap();
                // After a flush, what this handle sent is out of the writer.
                let flushed = String::from_utf8(out.lock().unwrap().clone()).unwrap();
                assert!(flushed.contains(&format!("from {i}\n")), "{flushed:?}");
            })
        })
        .collect();
    for producer in producers {
        producer.join().unwrap();
    }
    handle.flush().unwrap();
    assert_eq!(out.lock().unwrap().len(), 4 * "from i\n".len());
    // The clones are gone; dropping the last handle closes the queue, and
    // the thread ends once the rest is written and flushed.
    handle.try_send(Bytes::from_static(b"last")).unwrap();
    drop(handle);
    thread.join().unwrap().unwrap();
    assert!(out.lock().unwrap().ends_with(b"last (shut)"));
}

/// A writer that panics.
struct Panics;

impl Write for Panics {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        panic!("a writer that panics");
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Socket for Panics {}

#[test]
fn a_writer_that_panics_fails_the_handles_instead_of_hanging_them() {
    let (handle, thread) = spawn_writer(Panics, WriteQueueConfig::default());
    let ticket = handle.try_send(Bytes::from_static(b"boom")).unwrap();
    assert!(matches!(handle.written(ticket), Err(WriteError::Failed(_))));
    assert!(matches!(handle.close(), Err(WriteError::Failed(_))));
    assert!(thread.join().is_err(), "the panic is the thread's result");
}
