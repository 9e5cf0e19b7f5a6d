//! The writer thread: it takes chunks of the queue under the lock, writes
//! them without it, and accounts for them under it again.

use std::io::{self, Write};
use std::sync::{Arc, PoisonError};
use std::thread::JoinHandle;

use cleave_proto::conn::{write_chunks, SLICES};
use cleave_proto::{Bytes, Marks, WriteQueueConfig};

use crate::handle::WriteHandle;
use crate::shared::Inner;
use crate::socket::Socket;

/// Starts a thread that writes into `io` what the returned handle (and its
/// clones) push, and returns the handle and the thread.
///
/// `io` must block (a write timeout, `WouldBlock` or `TimedOut`, is a
/// failure like any other: set one to give up on a peer that stops
/// reading). The thread writes with `write_vectored`, flushes `io` when the
/// queue runs empty or a [`flush`](WriteHandle::flush) asks, and never holds
/// the queue's lock while it is inside a write, so pushes never wait for
/// the writer.
///
/// The thread ends when the queue is closed (by
/// [`close`](WriteHandle::close), or when the last handle is dropped) and
/// everything is written and flushed: it shuts the write half down
/// ([`Socket::shutdown_write`]: the peer reads the end even if `io` is a
/// clone of a socket another thread reads) and drops `io`. Or it ends when
/// the writer fails. Its result says which.
///
/// # Panics
///
/// If the system cannot start a thread, as [`std::thread::spawn`];
/// [`try_spawn_writer`] returns the error instead.
///
/// ```
/// use std::io::Read;
/// use std::net::{TcpListener, TcpStream};
///
/// use cleave_proto::{Bytes, WriteQueueConfig};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let listener = TcpListener::bind("127.0.0.1:0")?;
/// let socket = TcpStream::connect(listener.local_addr()?)?;
/// let (handle, thread) = cleave_std::spawn_writer(socket, WriteQueueConfig::default());
/// let ticket = handle.try_send(Bytes::from_static(b"ping\n"))?; // fire and forget...
/// handle.written(ticket)?; // ...or wait for it: no allocation either way
/// handle.close()?;
/// thread.join().expect("the writer thread does not panic")?;
///
/// let (mut peer, _) = listener.accept()?;
/// let mut got = String::new();
/// peer.read_to_string(&mut got)?;
/// assert_eq!(got, "ping\n");
/// # Ok(())
/// # }
/// ```
pub fn spawn_writer<W>(io: W, config: WriteQueueConfig) -> (WriteHandle, JoinHandle<io::Result<()>>)
where
    W: Write + Socket + Send + 'static,
{
    let inner = Inner::new(config);
    let thread = std::thread::spawn(writer_thread(io, inner.clone()));
    (WriteHandle::new(inner), thread)
}

/// As [`spawn_writer`], for a program that carries on when the system
/// cannot start another thread.
///
/// # Errors
///
/// What the system says when the thread cannot start; `io` is dropped
/// then.
pub fn try_spawn_writer<W>(
    io: W,
    config: WriteQueueConfig,
) -> io::Result<(WriteHandle, JoinHandle<io::Result<()>>)>
where
    W: Write + Socket + Send + 'static,
{
    let inner = Inner::new(config);
    let thread = std::thread::Builder::new().spawn(writer_thread(io, inner.clone()))?;
    Ok((WriteHandle::new(inner), thread))
}

/// The writer thread's body.
fn writer_thread<W: Write + Socket>(io: W, inner: Arc<Inner>) -> impl FnOnce() -> io::Result<()> {
    move || {
        let guard = PanicGuard(&inner);
        let result = run(io, &inner);
        drop(guard);
        result
    }
}

/// What the writer thread does next, decided under the lock.
enum Job {
    /// Write the chunks handed out.
    Write,
    /// Flush the writer; how far it will have flushed.
    Flush(Marks),
    /// Everything is written and flushed, and the queue closed: shut the
    /// write half down.
    Shutdown,
}

/// The writer thread's loop: chunks are taken under the lock, written
/// outside it, and accounted for under it again.
fn run<W: Write + Socket>(mut io: W, inner: &Inner) -> io::Result<()> {
    let mut chunks: Vec<Bytes> = Vec::with_capacity(SLICES);
    loop {
        let job = {
            let mut shared = inner.lock();
            loop {
                let marks = shared.queue.marks();
                // A flush someone waits for, once its bytes are written.
                if shared.flushes.flush_due(marks) {
                    break Job::Flush(marks);
                }
                if shared.queue.chunks_owned(&mut chunks, SLICES) > 0 {
                    break Job::Write;
                }
                // Empty: make what was written reach its destination.
                if shared.flushes.flushed() != marks {
                    break Job::Flush(marks);
                }
                if shared.queue.is_closed() {
                    break Job::Shutdown;
                }
                shared.idle = true;
                shared = inner
                    .work
                    .wait(shared)
                    .unwrap_or_else(PoisonError::into_inner);
                shared.idle = false;
            }
        };
        match job {
            Job::Write => {
                // A writer that takes nothing fails (`WriteZero`); one that
                // has nothing now (`Ok(None)`) cannot: it blocks.
                let written = write_chunks(&chunks, |slices| io.write_vectored(slices).map(Some))
                    .map(Option::unwrap_or_default);
                chunks.clear();
                let mut shared = inner.lock();
                let advanced = written.and_then(|n| {
                    shared
                        .queue
                        .advance(n)
                        // A writer that claims more than it was given.
                        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
                });
                if let Err(e) = advanced {
                    return Err(inner.fail(&mut shared, e));
                }
                inner.publish(shared.queue.marks());
                inner.wake_waiters(&shared);
            }
            Job::Flush(marks) => {
                let flushed = retry_interrupted(|| io.flush());
                let mut shared = inner.lock();
                if let Err(e) = flushed {
                    return Err(inner.fail(&mut shared, e));
                }
                shared.flushes.did_flush(marks, drop);
                inner.wake_waiters(&shared);
            }
            Job::Shutdown => {
                let shut = retry_interrupted(|| io.shutdown_write());
                let mut shared = inner.lock();
                if let Err(e) = shut {
                    return Err(inner.fail(&mut shared, e));
                }
                inner.end(&mut shared);
                return Ok(());
            }
        }
    }
}

/// `call`, again while a signal interrupts it (as every write is).
fn retry_interrupted(mut call: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    loop {
        match call() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            done => return done,
        }
    }
}

/// Fails the queue if the writer panics, so that no handle waits for ever.
struct PanicGuard<'a>(&'a Inner);

impl Drop for PanicGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut shared = self.0.lock();
            if !shared.done {
                self.0
                    .fail(&mut shared, io::Error::other("the writer panicked"));
            }
        }
    }
}
