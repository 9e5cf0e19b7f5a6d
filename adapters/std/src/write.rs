//! Blocking vectored writes of a [`WriteQueue`], shared by [`Stream`]
//! (which writes on the caller's thread) and the writer thread.
//!
//! [`Stream`]: crate::Stream

use std::io::{self, IoSlice, Write};

use cleave_proto::{Bytes, Frame, Rejected, Ticket, WriteQueue};

/// How many slices one write hands the OS.
pub(crate) const SLICES: usize = 64;

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

/// Writes the next slices of `queue` with one `write_vectored` and records
/// what the writer took. Returns the bytes written: 0 only when nothing was
/// pending.
///
/// # Errors
///
/// What the writer says (the queue is unchanged then, so the same bytes go
/// out on the next call); `InvalidData` for a writer that claims more than
/// it was given.
pub(crate) fn write_once<W: Write + ?Sized>(
    queue: &mut WriteQueue,
    io: &mut W,
) -> io::Result<usize> {
    let written = {
        let mut slices = [IoSlice::new(&[]); SLICES];
        let n = queue.io_slices(&mut slices);
        if n == 0 {
            return Ok(0);
        }
        write_vectored(io, &slices[..n])?
    };
    queue
        .advance(written)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    Ok(written)
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

/// What the bulk lane takes: plain bytes or an encoded frame.
pub(crate) trait Item: Sized {
    fn push_into(self, queue: &mut WriteQueue) -> Result<Ticket, Rejected<Self>>;
}

impl Item for Bytes {
    fn push_into(self, queue: &mut WriteQueue) -> Result<Ticket, Rejected<Self>> {
        queue.push(self)
    }
}

impl Item for Frame {
    fn push_into(self, queue: &mut WriteQueue) -> Result<Ticket, Rejected<Self>> {
        queue.push_frame(self)
    }
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
        let mut queue = WriteQueue::new();
        let mut expected = Vec::new();
        for i in 0..50u8 {
            let bytes = Bytes::from(vec![i; usize::from(i) * 97 % 1500 + 1]);
            expected.extend_from_slice(&bytes);
            queue.push(bytes).unwrap();
        }
        let mut io = Stingy {
            out: Vec::new(),
            max: 333,
            calls: 0,
        };
        while write_once(&mut queue, &mut io).unwrap() > 0 {}
        assert!(queue.is_flushed());
        assert_eq!(io.out, expected);
    }

    #[test]
    fn a_writer_that_takes_nothing_is_an_error() {
        let mut queue = WriteQueue::new();
        queue.push(Bytes::from_static(b"x")).unwrap();
        let mut full: &mut [u8] = &mut [];
        let e = write_once(&mut queue, &mut full).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        assert_eq!(queue.len(), 1, "nothing was taken off the queue");
    }
}
