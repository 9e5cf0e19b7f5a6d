use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;

use super::*;

fn pool(max_open: usize, max_idle: usize) -> Pipes {
    Pipes::new(
        PipesConfig::default()
            .max_open(Some(max_open))
            .max_idle(max_idle),
    )
}

/// A connected pair of non-blocking Unix sockets.
fn pair() -> (UnixStream, UnixStream) {
    let (a, b) = UnixStream::pair().unwrap();
    a.set_nonblocking(true).unwrap();
    b.set_nonblocking(true).unwrap();
    (a, b)
}

#[test]
fn a_lease_moves_bytes_socket_to_pipe_to_socket_and_counts_them() {
    let pipes = pool(1, 1);
    let (mut client, from) = pair();
    let (to, mut sink) = pair();
    let mut lease = pipes.lease().expect("one pipe");
    // Nothing yet: the socket says so.
    let e = lease.fill(&from).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);

    client.write_all(b"through the kernel").unwrap();
    assert_eq!(lease.fill(&from).unwrap(), 18);
    assert_eq!((lease.len(), lease.is_empty()), (18, false));
    assert_eq!(lease.drain(&to).unwrap(), 18);
    assert!(lease.is_empty());
    let mut got = [0; 18];
    sink.read_exact(&mut got).unwrap();
    assert_eq!(&got, b"through the kernel");
    assert_eq!(pipes.spliced(), 18);

    // The end of the stream.
    drop(client);
    assert_eq!(lease.fill(&from).unwrap(), 0);
    drop(lease);
    assert_eq!((pipes.open(), pipes.idle()), (1, 1), "kept, empty");
}

#[test]
fn the_pool_is_bounded_reuses_empty_pipes_and_closes_full_ones() {
    let pipes = pool(2, 1);
    let (first, second) = (pipes.lease().unwrap(), pipes.lease().unwrap());
    assert!(pipes.lease().is_none(), "two at most");
    assert_eq!((pipes.open(), pipes.idle()), (2, 0));
    drop(first);
    drop(second);
    // One kept (max_idle), one closed.
    assert_eq!((pipes.open(), pipes.idle()), (1, 1));
    let reused = pipes.lease().unwrap();
    assert_eq!((pipes.open(), pipes.idle()), (1, 0), "the kept one");

    // A pipe left holding bytes (a failed tunnel) is closed, not kept.
    let mut full = reused;
    let (mut client, from) = pair();
    client.write_all(b"left behind").unwrap();
    assert_eq!(full.fill(&from).unwrap(), 11);
    drop(full);
    assert_eq!((pipes.open(), pipes.idle()), (0, 0));
}

#[test]
fn a_zero_limit_opens_nothing_and_the_default_leaves_most_descriptors() {
    let none = pool(0, 8);
    assert!(none.lease().is_none());
    assert_eq!(none.open(), 0);
    let default = Pipes::default();
    assert!(default.max_open() > 0 && default.max_open() <= 4096);
    assert_eq!(default.config(), &PipesConfig::default());
}

#[test]
fn a_descriptor_splice_cannot_read_is_unsupported() {
    let pipes = pool(1, 1);
    let mut lease = pipes.lease().unwrap();
    let dir = std::fs::File::open("/").unwrap();
    let e = lease.fill(&dir).unwrap_err();
    assert!(is_unsupported(&e), "{e}");
    assert!(!is_unsupported(&io::ErrorKind::WouldBlock.into()));
}

#[test]
fn a_pipe_can_be_sized() {
    // The kernel's default: 16 pages.
    let default = Pipes::default().lease().expect("a pipe").pipe_size();
    assert!(
        default.is_power_of_two() && default >= 64 * 1024,
        "{default}"
    );
    let pipes = Pipes::new(PipesConfig::default().size(Some(256 * 1024)));
    let lease = pipes.lease().expect("within pipe-max-size");
    assert_eq!(lease.pipe_size(), 256 * 1024);
    // Sizes round up to a power of two pages.
    let odd = Pipes::new(PipesConfig::default().size(Some(100 * 1024)));
    assert_eq!(odd.lease().expect("a pipe").pipe_size(), 128 * 1024);
    // Above what an unprivileged process may ask for, a pool refuses the
    // pipe rather than hand out one of another size; root may be granted
    // it.
    let huge = Pipes::new(PipesConfig::default().size(Some(1 << 30)));
    let lease = huge.lease();
    match &lease {
        Some(lease) => assert_eq!(lease.pipe_size(), 1 << 30),
        None => assert_eq!(huge.open(), 0, "a refused pipe is closed"),
    }
    if !rustix::process::geteuid().is_root() {
        assert!(lease.is_none(), "a 1 GiB pipe for an unprivileged process");
    }
}

/// A loopback TCP connection whose peer sent `abc`, an out-of-band
/// `X`, `def`, and (if `fin`) its end: the proxy's side, non-blocking,
/// and the peer's.
fn urgent(fin: bool) -> (std::net::TcpStream, std::net::TcpStream) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut peer = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (ours, _) = listener.accept().unwrap();
    peer.write_all(b"abc").unwrap();
    socket2::SockRef::from(&peer)
        .send_out_of_band(b"X")
        .unwrap();
    peer.write_all(b"def").unwrap();
    if fin {
        peer.shutdown(std::net::Shutdown::Write).unwrap();
    }
    ours.set_nonblocking(true).unwrap();
    (ours, peer)
}

/// Fills and drains until `fill` refuses; what went through the pipe.
/// Waits for bytes still on their way (a millisecond at a time, a
/// bounded number of times); an end of stream fails the test.
fn splice_until_refused(lease: &mut Lease, from: &std::net::TcpStream) -> (Vec<u8>, io::Error) {
    let (to, mut sink) = pair();
    let mut got = Vec::new();
    for _ in 0..10_000 {
        match lease.fill(from) {
            Ok(0) => panic!("an end of stream with bytes past the urgent mark"),
            Ok(n) => {
                assert_eq!(lease.drain(&to).unwrap(), n);
                let mut buf = vec![0; n];
                sink.read_exact(&mut buf).unwrap();
                got.extend_from_slice(&buf);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            Err(e) => return (got, e),
        }
    }
    panic!("stuck at {got:?}: the bytes past the urgent mark never came");
}

#[test]
fn a_fill_stopped_at_an_urgent_mark_says_copy_and_loses_nothing() {
    for fin in [false, true] {
        let pipes = pool(1, 1);
        let mut lease = pipes.lease().unwrap();
        let (mut ours, _peer) = urgent(fin);
        let (spliced, e) = splice_until_refused(&mut lease, &ours);
        assert_eq!(spliced, b"abc", "up to the mark (fin: {fin})");
        assert!(is_unsupported(&e), "{e}");
        assert!(lease.is_empty(), "nothing held back");
        // A read goes on past the mark, without the out-of-band byte.
        ours.set_nonblocking(false).unwrap();
        let mut rest = [0; 3];
        ours.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"def");
        if fin {
            assert_eq!(ours.read(&mut rest).unwrap(), 0, "then the end");
        }
        drop(lease);
        assert_eq!((pipes.open(), pipes.idle()), (1, 1), "kept, empty");
    }
}

#[test]
fn only_an_urgent_mark_or_an_unreadable_socket_is_unsupported() {
    assert!(is_unsupported(&sys::stopped_at_urgent_mark()));
    for kind in [
        io::ErrorKind::WouldBlock,
        io::ErrorKind::ConnectionReset,
        io::ErrorKind::Other,
    ] {
        assert!(!is_unsupported(&kind.into()), "{kind:?}");
    }
    assert!(!is_unsupported(&io::Error::other("another error")));
}

#[test]
fn a_rust_program_ignores_sigpipe_so_its_pools_splice() {
    // The Rust runtime ignores SIGPIPE before `main` (and the test
    // harness's); `tests/sigpipe.rs` puts it back to the default.
    assert!(!sys::sigpipe_ends_the_process());
    assert!(pool(1, 1).lease().is_some());
}
