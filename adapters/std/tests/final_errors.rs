//! How a connection ends when something fails: a timeout with bytes still
//! queued, a signal, a connection the kernel gave up on, and a reading
//! stream beside a writer thread. Real loopback sockets (or a writer the
//! test controls), each test within a bounded time.

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use cleave_proto::{Bytes, ConnConfig, Error, Framed, Lines, Timeout, Timeouts, WriteQueueConfig};
use cleave_std::{spawn_writer, ConnError, ReadHalf, Socket, Stream};
use socket2::{Domain, Type};

/// Runs `f` on a thread of its own and fails the test if it does not
/// finish within `limit` (the thread is left behind then).
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => v,
        // The test body panicked: its panic is the test's.
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(panic) => std::panic::resume_unwind(panic),
            Ok(()) => unreachable!(),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("did not finish within {limit:?} (hung)"),
    }
}

/// Small kernel buffers: the server's sends and the client's receives.
fn small_pair() -> (TcpStream, TcpStream) {
    let listener = socket2::Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    listener.set_send_buffer_size(16 * 1024).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    listener.bind(&addr.into()).unwrap();
    listener.listen(1).unwrap();
    let listener: TcpListener = listener.into();
    let client = socket2::Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    client.set_recv_buffer_size(16 * 1024).unwrap();
    client
        .connect(&listener.local_addr().unwrap().into())
        .unwrap();
    let (server, _) = listener.accept().unwrap();
    (client.into(), server)
}

/// The docs: when one of the connection's timeouts runs out,
/// `recv` returns `Err(Protocol(TimedOut(..)))` and "the socket was shut
/// down or reset then, as the protocol said: drop the stream"; and
/// `Timeouts`: after a clean close, what is still queued gets one more
/// idle span, "then the close becomes a reset", so a peer never takes a
/// truncated stream for a clean end.
///
/// Here the server follows the docs (a write timeout on the socket, as
/// advised for a peer that stops reading): a 1 MiB reply is queued and
/// flushed (the flush times out, non-final, nothing lost), the client does
/// not read yet, the idle timeout runs out. `recv` once returned the final
/// timeout with most of the reply still queued, the socket neither shut
/// down nor reset: dropping the stream as told gave the client a clean FIN
/// after a truncated reply. Now the rest is written until the linger
/// deadline, then the close is a reset.
#[test]
fn an_idle_timeout_with_bytes_still_queued_does_not_end_in_a_clean_fin() {
    within(Duration::from_secs(20), || {
        let (mut client, server) = small_pair();
        server
            .set_write_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let config = ConnConfig::default()
            .timeouts(Timeouts::default().idle(Some(Duration::from_millis(300))));
        let mut stream = Stream::with_config(server, Framed::new(Lines::new()), config);
        const TOTAL: usize = 1 << 20;
        stream.send(Bytes::from(vec![b'x'; TOTAL])).unwrap();
        match stream.flush() {
            Err(ConnError::TimedOut) => {} // not final: nothing lost
            other => panic!("the client does not read: {other:?}"),
        }
        let e = loop {
            match stream.recv() {
                Err(ConnError::TimedOut) => continue, // not final: call again
                Ok(Some(_)) => panic!("the client sent nothing"),
                Ok(None) => panic!("ended without the timeout"),
                Err(e) => break e,
            }
        };
        assert!(
            matches!(e, ConnError::Protocol(Error::TimedOut(Timeout::Idle))),
            "{e:?}"
        );
        let still_queued = stream.conn().queue().len();
        let write_end = stream.conn().write_end();
        // "the socket was shut down or reset then: drop the stream"
        drop(stream);
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        let end = client.read_to_end(&mut got);
        assert!(
            got.len() == TOTAL || end.is_err(),
            "the client read {} of {TOTAL} bytes and then a clean end ({end:?}); \
             after recv's final timeout {still_queued} bytes were still queued and \
             the write side's end was {write_end:?} (neither shut down nor reset)",
            got.len()
        );
    });
}

/// A writer whose flush is interrupted by a signal once (`EINTR`), then
/// works; everything else goes through.
struct InterruptedFlush {
    out: Arc<Mutex<Vec<u8>>>,
    interrupts: Arc<AtomicUsize>,
}

impl Write for InterruptedFlush {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        let mut out = self.out.lock().unwrap();
        for b in bufs {
            out.extend_from_slice(b);
        }
        Ok(bufs.iter().map(|b| b.len()).sum())
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.interrupts.fetch_add(1, Ordering::SeqCst) == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        Ok(())
    }
}

impl Socket for InterruptedFlush {}

/// An interrupted call (`EINTR`, `ErrorKind::Interrupted`) is retried
/// everywhere (`Conn::read_io`, `write_io`, `flush_io`: "called again when
/// a signal interrupts it", and the writer thread's writes). The writer
/// thread's flush took it for a final failure: the queue was aborted and
/// every handle failed, for a signal.
#[test]
fn the_writer_thread_retries_an_interrupted_flush() {
    within(Duration::from_secs(10), || {
        let out = Arc::new(Mutex::new(Vec::new()));
        let interrupts = Arc::new(AtomicUsize::new(0));
        let writer = InterruptedFlush {
            out: out.clone(),
            interrupts: interrupts.clone(),
        };
        let (handle, thread) = spawn_writer(writer, WriteQueueConfig::default());
        handle.send(Bytes::from_static(b"hello ")).unwrap();
        let flushed = handle.flush();
        let more = handle.send(Bytes::from_static(b"world"));
        let closed = handle.close();
        let joined = thread.join().unwrap();
        assert!(
            flushed.is_ok() && more.is_ok() && closed.is_ok() && joined.is_ok(),
            "one EINTR on flush: flush {flushed:?}, later send {:?}, close {closed:?}, thread {joined:?}",
            more.map_err(|r| r.into_parts().0)
        );
        assert_eq!(&out.lock().unwrap()[..], b"hello world");
    });
}

/// The split for reads on one thread and writes from others: a `Stream`
/// reads one clone of the socket in a `ReadHalf`, `spawn_writer` writes
/// the other. The writer thread streams a reply to a client that reads it
/// steadily and sends nothing; the reading side's idle timeout, which
/// sees only what it reads, runs out meanwhile. Its end must not cut the
/// reply: over the plain socket, its clean close shut the shared write
/// half down, and the client read a clean FIN in the middle of the reply.
#[test]
fn a_reading_stream_does_not_cut_the_writer_threads_reply_with_a_clean_fin() {
    within(Duration::from_secs(20), || {
        let (mut client, server) = small_pair();
        let (handle, writer) =
            spawn_writer(server.try_clone().unwrap(), WriteQueueConfig::default());
        let config = ConnConfig::default()
            .timeouts(Timeouts::default().idle(Some(Duration::from_millis(300))));
        let mut stream = Stream::with_config(ReadHalf(server), Framed::new(Lines::new()), config);
        const CHUNK: usize = 16 * 1024;
        const CHUNKS: usize = 64; // 1 MiB
        let producer = {
            let handle = handle.clone();
            thread::spawn(move || {
                let mut sent = 0;
                for i in 0..CHUNKS {
                    if handle
                        .send(Bytes::from(vec![(i % 251) as u8; CHUNK]))
                        .is_err()
                    {
                        break;
                    }
                    sent += 1;
                }
                let closed = handle.close();
                (sent, closed)
            })
        };
        drop(handle);
        // The client reads steadily, 16 KiB every 10 ms (about 1.6 MB/s):
        // the reply flows the whole time, and it takes ~640 ms.
        let reader = thread::spawn(move || {
            client
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut got = Vec::new();
            let mut buf = vec![0; CHUNK];
            let end = loop {
                match client.read(&mut buf) {
                    Ok(0) => break Ok(()),
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(e) => break Err(e),
                }
                thread::sleep(Duration::from_millis(10));
            };
            (got, end)
        });
        // The server's reading side: the client sends nothing.
        let recv = loop {
            match stream.recv() {
                Ok(Some(_)) => continue,
                other => break other.map(|_| ()),
            }
        };
        let (got, end) = reader.join().unwrap();
        drop(stream);
        let (sent, closed) = producer.join().unwrap();
        let thread_result = writer.join().unwrap();
        let expected: Vec<u8> = (0..CHUNKS)
            .flat_map(|i| vec![(i % 251) as u8; CHUNK])
            .collect();
        assert!(
            got == expected || end.is_err(),
            "the client read {} of {} bytes, then a clean end ({end:?}); the reading \
             stream ended with {recv:?}; the producer queued {sent} chunks and its \
             close said {closed:?}; the writer thread said {thread_result:?}",
            got.len(),
            expected.len()
        );
    });
}

/// Sets `TCP_USER_TIMEOUT`: the kernel aborts the connection (`ETIMEDOUT`)
/// when sent data stays unacknowledged, or a zero window stays closed,
/// for that long.
#[cfg(target_os = "linux")]
fn set_user_timeout(socket: &TcpStream, ms: u32) {
    use std::os::fd::AsRawFd;
    let value: libc::c_uint = ms;
    // SAFETY: a valid descriptor and a c_uint option value of its size.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_USER_TIMEOUT,
            (&value as *const libc::c_uint).cast(),
            size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    assert_eq!(rc, 0, "{}", io::Error::last_os_error());
}

/// Fills the kernel's buffers both ways with raw writes (the peer does
/// not read), so that the window is shut.
#[cfg(target_os = "linux")]
fn fill(socket: &mut TcpStream) -> usize {
    socket.set_nonblocking(true).unwrap();
    let chunk = [b'z'; 4096];
    let mut total = 0;
    loop {
        match socket.write(&chunk) {
            Ok(n) => total += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) => panic!("{e}"),
        }
    }
    socket.set_nonblocking(false).unwrap();
    total
}

/// The kernel aborts a connection whose peer keeps its window
/// shut past `TCP_USER_TIMEOUT` (the same `ETIMEDOUT` a dead peer gives
/// with keepalive, or after retransmissions run out): a final failure.
/// `recv` took every `ErrorKind::TimedOut` for a read timeout and said
/// `ConnError::TimedOut` ("a read timeout of the caller's ... call
/// again": none was set), and the call again read the dead socket's 0 as
/// the peer's clean end. On Unix a read timeout is `WouldBlock`; a
/// `TimedOut` is a final I/O error.
#[cfg(target_os = "linux")]
#[test]
fn a_connection_the_kernel_aborted_is_a_final_io_error_not_a_clean_end() {
    within(Duration::from_secs(30), || {
        let (client, mut server) = small_pair();
        set_user_timeout(&server, 300);
        fill(&mut server);
        // No read timeout, no connection deadline: `recv` may block until
        // the peer does something, or the kernel gives up.
        let mut stream = Stream::new(server, Framed::new(Lines::new()));
        let mut outcomes = Vec::new();
        let end = loop {
            // Ok(true): an event, Ok(false): the end of the stream.
            let got = stream.recv().map(|event| event.is_some());
            let done = !matches!(got, Err(ConnError::TimedOut)) || outcomes.len() > 5;
            outcomes.push(format!("{got:?}"));
            if done {
                break got;
            }
        };
        drop(client);
        assert!(
            matches!(end, Err(ConnError::Io(_))),
            "recv on a connection the kernel aborted (ETIMEDOUT) gave {outcomes:?}"
        );
    });
}

/// The write side: `flush` blocked in a write (no write timeout
/// set) on a connection the kernel then aborts reported
/// `ConnError::TimedOut`, "a write timeout: what the writer did not take
/// stays queued, and calling again goes on where it stopped".
#[cfg(target_os = "linux")]
#[test]
fn a_write_the_kernel_aborted_is_a_final_io_error_not_a_write_timeout() {
    within(Duration::from_secs(30), || {
        let (client, server) = small_pair();
        set_user_timeout(&server, 300);
        let mut stream = Stream::new(server, Framed::new(Lines::new()));
        stream.send(Bytes::from(vec![b'x'; 1 << 20])).unwrap();
        let first = stream.flush();
        let queued = stream.conn().queue().len();
        let again = stream.flush();
        drop(client);
        assert!(
            matches!(first, Err(ConnError::Io(_))),
            "flush with no write timeout, on a connection the kernel aborted: {first:?} \
             ({queued} bytes still queued); flushing again: {again:?}"
        );
    });
}

/// The same, once nothing more will be read: the client sends a line and
/// ends its side, the server queues a 1 MiB answer and calls `recv` for
/// the end, and the client never reads. `recv` writes what is owed (with
/// the socket's write timeout set to the connection's deadline; a write
/// timeout of the caller's alone would be `ConnError::TimedOut`, not
/// final: call again), and the idle timeout must end the connection with
/// its final error; retrying must not go on for ever.
#[test]
fn an_idle_timeout_ends_a_connection_whose_peer_ended_and_never_reads() {
    within(Duration::from_secs(20), || {
        let (mut client, server) = small_pair();
        server
            .set_write_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let config = ConnConfig::default()
            .timeouts(Timeouts::default().idle(Some(Duration::from_millis(300))));
        let mut stream = Stream::with_config(server, Framed::new(Lines::new()), config);
        client.write_all(b"get\n").unwrap();
        client.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(stream.recv().unwrap().as_deref(), Some(&b"get"[..]));
        stream
            .conn_mut()
            .push(Bytes::from(vec![b'x'; 1 << 20]))
            .unwrap();
        let started = std::time::Instant::now();
        let mut retries = 0;
        let outcome = loop {
            if started.elapsed() > Duration::from_secs(5) {
                break None;
            }
            match stream.recv() {
                Err(ConnError::TimedOut) => retries += 1, // not final: call again
                other => break Some(other),
            }
        };
        assert!(
            matches!(
                outcome,
                Some(Err(ConnError::Protocol(Error::TimedOut(Timeout::Idle))))
            ),
            "the idle timeout (300 ms) did not end it in 5 s: recv gave \
             ConnError::TimedOut {retries} times, then {outcome:?}"
        );
        drop(client);
    });
}

/// `ReadHalf`: "A reset (`Stream::reset`, or a protocol's) still applies
/// to the connection." A client leaves half a line and goes silent; the
/// frame timeout runs out with the partial frame buffered, which ends
/// the connection with a reset, not a clean close. Over a `ReadHalf` the
/// reset was never made: `recv` gave the final timeout, and dropping the
/// stream as told gave the client a clean end after a cut request.
#[test]
fn a_protocols_reset_applies_to_a_read_half() {
    within(Duration::from_secs(20), || {
        let (mut client, server) = small_pair();
        let config = ConnConfig::default()
            .timeouts(Timeouts::default().frame(Some(Duration::from_millis(200))));
        let mut stream = Stream::with_config(ReadHalf(server), Framed::new(Lines::new()), config);
        client.write_all(b"half a li").unwrap();
        let e = loop {
            match stream.recv() {
                Err(ConnError::TimedOut) => continue,
                Ok(Some(line)) => panic!("the client sent no whole line: {line:?}"),
                Ok(None) => panic!("ended without the timeout"),
                Err(e) => break e,
            }
        };
        assert!(
            matches!(e, ConnError::Protocol(Error::TimedOut(Timeout::Frame))),
            "{e:?}"
        );
        drop(stream);
        client
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let end = client.read(&mut [0; 16]);
        assert_eq!(
            end.as_ref().map_err(io::Error::kind),
            Err(io::ErrorKind::ConnectionReset),
            "the client read {end:?} after the frame timeout cut its line"
        );
    });
}
