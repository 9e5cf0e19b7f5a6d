//! Drives a decoder over an input cut into pieces and checks the contracts
//! of `cleave_proto::Decoder`: chunking invariance, nothing lost, final errors.
//!
//! Shared by the integration tests (`mod support`) and the fuzz targets
//! (`#[path]`), so both check exactly the same things.

#![allow(dead_code)]

use cleave_proto::{Bytes, Decoder, Error, RecvBuf, RecvBufConfig};

/// Where a codec's frame sits in the bytes it was cut from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// At the start, framing after it (a line and its delimiter).
    Head,
    /// At the end, framing before it (a header and a body).
    Tail,
}

/// One frame and the stream range it was cut from (framing overhead
/// included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    pub start: u64,
    pub end: u64,
    pub frame: Bytes,
}

/// Everything a decoder made of one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    pub cuts: Vec<Cut>,
    /// `Ok(())` for a clean end of stream, else the final error.
    pub outcome: Result<(), Error>,
    /// Bytes never consumed: the buffer's tail plus input never fed (empty
    /// on a clean end; the error's `partial` for `Truncated`).
    pub rest: Vec<u8>,
}

impl Run {
    pub fn frames(&self) -> Vec<Bytes> {
        self.cuts.iter().map(|c| c.frame.clone()).collect()
    }
}

/// Splits `input` into pieces whose lengths cycle through `sizes` (a zero
/// size is read as 1).
pub fn pieces<'a>(input: &'a [u8], sizes: &[usize]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = input;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .copied()
            .unwrap_or(usize::MAX)
            .max(1);
        let (piece, tail) = rest.split_at(size.min(rest.len()));
        out.push(piece);
        rest = tail;
        i += 1;
    }
    out
}

/// Feeds `pieces` one at a time into a buffer made with `config`, decoding
/// after each, then ends the stream. Panics if a contract is broken along the
/// way (an error that is not final, a buffer over its limit).
pub fn run<D>(mut decoder: D, config: RecvBufConfig, pieces: &[&[u8]]) -> Run
where
    D: Decoder<Item = Bytes>,
{
    let mut buf = RecvBuf::with_config(config);
    let mut cuts = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        if let Err(e) = buf.feed(piece) {
            panic!("feed refused: {e} (give the test a larger buffer)");
        }
        loop {
            let start = buf.offset();
            match decoder.decode(&mut buf) {
                Ok(Some(frame)) => cuts.push(Cut {
                    start,
                    end: buf.offset(),
                    frame,
                }),
                Ok(None) => break,
                Err(e) => {
                    let unfed = pieces[i + 1..].concat();
                    return failed(decoder, buf, cuts, e, unfed);
                }
            }
        }
    }
    loop {
        let start = buf.offset();
        match decoder.decode_eof(&mut buf) {
            Ok(Some(frame)) => cuts.push(Cut {
                start,
                end: buf.offset(),
                frame,
            }),
            Ok(None) => {
                assert!(buf.is_empty(), "clean end with bytes left");
                assert_eq!(decoder.decode_eof(&mut buf), Ok(None));
                return Run {
                    cuts,
                    outcome: Ok(()),
                    rest: Vec::new(),
                };
            }
            Err(e) => return failed(decoder, buf, cuts, e, Vec::new()),
        }
    }
}

/// After an error: checks that it is final and nothing more is consumed,
/// then collects what is left.
fn failed<D>(mut decoder: D, mut buf: RecvBuf, cuts: Vec<Cut>, e: Error, unfed: Vec<u8>) -> Run
where
    D: Decoder<Item = Bytes>,
{
    let (len, offset) = (buf.len(), buf.offset());
    assert_eq!(
        decoder.decode(&mut buf),
        Err(e.clone()),
        "error is not final"
    );
    assert_eq!(
        decoder.decode_eof(&mut buf),
        Err(e.clone()),
        "error is not final at eof"
    );
    assert_eq!(
        (buf.len(), buf.offset()),
        (len, offset),
        "consumed after an error"
    );
    let mut rest = match &e {
        Error::Truncated { partial, .. } => {
            assert!(buf.is_empty(), "truncated, yet bytes left in the buffer");
            partial.to_vec()
        }
        _ => buf.take_tail().to_vec(),
    };
    rest.extend_from_slice(&unfed);
    Run {
        cuts,
        outcome: Err(e),
        rest,
    }
}

/// Checks that every input byte is in exactly one place: the cuts tile the
/// consumed prefix, each frame is exactly the bytes at its place in its cut
/// (the rest of the cut is framing), and the rest is exactly what follows.
pub fn assert_conserved(input: &[u8], run: &Run, placement: Placement) {
    let mut at = 0u64;
    for cut in &run.cuts {
        assert_eq!(cut.start, at, "cuts do not tile the stream");
        let wire = &input[cut.start as usize..cut.end as usize];
        let len = cut.frame.len();
        assert!(
            len <= wire.len(),
            "frame longer than the bytes it came from"
        );
        let expected = match placement {
            Placement::Head => &wire[..len],
            Placement::Tail => &wire[wire.len() - len..],
        };
        assert_eq!(
            &cut.frame[..],
            expected,
            "frame is not the bytes at its place"
        );
        at = cut.end;
    }
    let consumed = at as usize;
    assert_eq!(
        &run.rest[..],
        &input[consumed..],
        "rest is not what follows the frames"
    );
    match &run.outcome {
        Ok(()) => assert_eq!(consumed, input.len()),
        Err(Error::Truncated { offset, partial }) => {
            assert_eq!(*offset, at);
            assert!(!partial.is_empty());
        }
        Err(_) => {}
    }
}

/// Runs `make()` over the whole input, one byte at a time and cut by
/// `sizes`; asserts all three agree and conserve bytes; returns the run.
pub fn assert_chunking_invariant<D, F>(
    make: F,
    config: RecvBufConfig,
    input: &[u8],
    sizes: &[usize],
    placement: Placement,
) -> Run
where
    D: Decoder<Item = Bytes>,
    F: Fn() -> D,
{
    let whole = run(make(), config, &[input]);
    assert_conserved(input, &whole, placement);
    let bytewise = run(make(), config, &pieces(input, &[1]));
    assert_eq!(
        bytewise, whole,
        "one byte at a time differs from whole input"
    );
    let cut = run(make(), config, &pieces(input, sizes));
    assert_eq!(cut, whole, "pieces {sizes:?} differ from whole input");
    whole
}
