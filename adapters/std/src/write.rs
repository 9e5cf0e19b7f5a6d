//! Blocking vectored writes, shared by [`Stream`](crate::Stream) (which
//! writes its connection's queue on the caller's thread) and the writer
//! thread (which writes chunks it took out of its queue).

use std::io::{self, IoSlice, Write};

use cleave_proto::conn::SLICES;
use cleave_proto::Bytes;

/// One `write_vectored`, retried when interrupted by a signal.
///
/// # Errors
///
/// What the writer says; `WriteZero` when it takes nothing of a non-empty
/// write.
pub(crate) fn write_vectored<W: Write + ?Sized>(
    io: &mut W,
    slices: &[IoSlice<'_>],
) -> io::Result<usize> {
    let total: usize = slices.iter().map(|s| s.len()).sum();
    loop {
        match io.write_vectored(slices) {
            Ok(0) if total > 0 => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Writes `chunks` (owned views the queue handed out) with one
/// `write_vectored`, without the queue.
///
/// # Errors
///
/// As [`write_vectored`].
pub(crate) fn write_chunks<W: Write + ?Sized>(io: &mut W, chunks: &[Bytes]) -> io::Result<usize> {
    let mut slices = [IoSlice::new(&[]); SLICES];
    let n = chunks.len().min(SLICES);
    for (slice, chunk) in slices.iter_mut().zip(&chunks[..n]) {
        *slice = IoSlice::new(chunk);
    }
    write_vectored(io, &slices[..n])
}

/// A read or write timeout: `TimedOut` on some systems, `WouldBlock` on
/// Unix (and from a non-blocking socket).
pub(crate) fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takes at most `max` bytes a call, and is interrupted every other
    /// call.
    struct Stingy {
        out: Vec<u8>,
        max: usize,
        calls: usize,
    }

    impl Write for Stingy {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.calls += 1;
            if self.calls % 2 == 0 {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let n = buf.len().min(self.max);
            self.out.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn partial_and_interrupted_writes_lose_nothing() {
        let chunks: Vec<Bytes> = (0..50u8)
            .map(|i| Bytes::from(vec![i; usize::from(i) * 97 % 1500 + 1]))
            .collect();
        let expected = chunks.concat();
        let mut io = Stingy {
            out: Vec::new(),
            max: 333,
            calls: 0,
        };
        let mut rest = chunks;
        while !rest.is_empty() {
            let mut n = write_chunks(&mut io, &rest).unwrap();
            while n > 0 {
                let take = n.min(rest[0].len());
                rest[0] = rest[0].slice(take..);
                if rest[0].is_empty() {
                    rest.remove(0);
                }
                n -= take;
            }
        }
        assert_eq!(io.out, expected);
    }

    #[test]
    fn a_writer_that_takes_nothing_is_an_error() {
        let mut full: &mut [u8] = &mut [];
        let e = write_chunks(&mut full, &[Bytes::from_static(b"x")]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        assert_eq!(write_chunks(&mut full, &[]).unwrap(), 0, "nothing to write");
    }
}
