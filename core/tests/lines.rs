//! Contracts of `Lines`: round trips, chunking invariance, conservation,
//! limits, end of stream.

#[path = "support/harness.rs"]
mod harness;

use cleave_proto::{
    Bytes, Decoder, Error, InvalidInput, Limit, Lines, LinesConfig, RecvBuf, RecvBufConfig,
};
use harness::{assert_chunking_invariant, assert_conserved, pieces, run, Placement};
use proptest::prelude::*;

fn config() -> RecvBufConfig {
    RecvBufConfig::default()
}

/// Line contents over a small alphabet that stresses `\r`, UTF-8 and the
/// delimiter's neighbourhood, each with a `\n` or `\r\n` ending.
fn lines_strategy() -> impl Strategy<Value = Vec<(Vec<u8>, bool)>> {
    let byte = prop::sample::select(vec![b'a', b' ', b'\r', 0xc3, 0xa9, b'z']);
    prop::collection::vec((prop::collection::vec(byte, 0..24), any::<bool>()), 0..24)
}

fn encode(lines: &[(Vec<u8>, bool)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (line, crlf) in lines {
        out.extend_from_slice(line);
        out.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
    }
    out
}

/// What a line decodes to: the one `\r` before `\n` is framing.
fn expected(lines: &[(Vec<u8>, bool)], strip_cr: bool) -> Vec<Bytes> {
    lines
        .iter()
        .map(|(line, crlf)| {
            let mut line = line.clone();
            if *crlf && !strip_cr {
                line.push(b'\r');
            }
            if !*crlf && strip_cr && line.last() == Some(&b'\r') {
                line.pop();
            }
            Bytes::from(line)
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip_whatever_the_pieces(
        lines in lines_strategy(),
        strip_cr in any::<bool>(),
        sizes in prop::collection::vec(1usize..40, 1..8),
    ) {
        let input = encode(&lines);
        let make = || Lines::with_config(LinesConfig::default().strip_cr(strip_cr));
        let run = assert_chunking_invariant(make, config(), &input, &sizes, Placement::Head);
        prop_assert_eq!(run.frames(), expected(&lines, strip_cr));
        prop_assert_eq!(run.outcome, Ok(()));
    }

    #[test]
    fn any_bytes_any_config_chunking_invariant_and_conserved(
        input in prop::collection::vec(prop::sample::select(vec![b'a', b'\r', b'\n', 0, 0xc3, 0xa9, 0xff]), 0..300),
        max in 0usize..16,
        strip_cr in any::<bool>(),
        utf8 in any::<bool>(),
        nul in any::<bool>(),
        last_line in any::<bool>(),
        sizes in prop::collection::vec(1usize..32, 1..8),
    ) {
        let config = LinesConfig::default()
            .max_length(max)
            .strip_cr(strip_cr)
            .utf8(utf8)
            .delimiter(if nul { 0 } else { b'\n' })
            .unterminated_last_line(last_line);
        let run = assert_chunking_invariant(|| Lines::with_config(config), self::config(), &input, &sizes, Placement::Head);
        for cut in &run.cuts {
            prop_assert!(cut.frame.len() <= max);
            // overhead: the delimiter, maybe a `\r`, nothing else
            let overhead = (cut.end - cut.start) as usize - cut.frame.len();
            prop_assert!(overhead <= 2);
        }
    }
}

#[test]
fn eof_mid_line_returns_the_partial_bytes() {
    let input = b"one\ntwo\nthr";
    let run = run(Lines::new(), config(), &pieces(input, &[2]));
    assert_eq!(run.frames(), ["one", "two"]);
    assert_eq!(
        run.outcome,
        Err(Error::Truncated {
            partial: Bytes::from_static(b"thr"),
            offset: 8
        })
    );
    assert_conserved(input, &run, Placement::Head);
}

#[test]
fn unterminated_last_line_is_a_frame_when_configured() {
    let input = b"one\ntwo";
    let config = LinesConfig::default().unterminated_last_line(true);
    let run = run(Lines::with_config(config), self::config(), &[input]);
    assert_eq!(run.frames(), ["one", "two"]);
    assert_eq!(run.outcome, Ok(()));
}

#[test]
fn too_long_line_fails_before_the_buffer_grows_past_the_limit() {
    let max = 64 * 1024;
    let mut buf = RecvBuf::new();
    let mut lines = Lines::with_config(LinesConfig::default().max_length(max));
    let piece = [b'x'; 4096];
    let mut fed = 0;
    let err = loop {
        buf.feed(&piece).unwrap();
        fed += piece.len();
        match lines.decode(&mut buf) {
            Ok(None) => assert!(fed < 2 * max, "never failed"),
            Ok(Some(line)) => panic!("no delimiter, yet a line: {line:?}"),
            Err(e) => break e,
        }
    };
    // It fails as soon as max + 2 bytes (line, `\r`, delimiter) hold no
    // delimiter: one read past the limit at most.
    assert!(buf.len() <= max + 2 + piece.len());
    assert_eq!(
        err,
        Error::LimitExceeded {
            limit: Limit::LineLength,
            max: max as u64,
            attempted: max as u64 + 1,
            offset: 0
        }
    );
    // Final, and nothing was consumed.
    assert_eq!(lines.decode(&mut buf), Err(err));
    assert_eq!(buf.len(), fed);
}

#[test]
fn invalid_utf8_is_reported_at_the_bad_byte_and_left_in_the_buffer() {
    let mut buf = RecvBuf::new();
    buf.feed(b"ok\nab\xe2\x82\n").unwrap();
    let mut lines = Lines::with_config(LinesConfig::default().utf8(true));
    assert_eq!(lines.decode(&mut buf).unwrap().as_deref(), Some(&b"ok"[..]));
    let err = lines.decode(&mut buf).unwrap_err();
    assert_eq!(
        err,
        Error::InvalidInput {
            kind: InvalidInput::Utf8,
            offset: 5
        }
    );
    assert_eq!(err.fault(), cleave_proto::Fault::Peer);
    assert_eq!(&buf.take_tail()[..], b"ab\xe2\x82\n");
}

#[test]
fn frames_are_views_of_the_receive_buffer() {
    let mut buf = RecvBuf::new();
    buf.feed(b"first\nsecond\n").unwrap();
    let base = buf.peek().as_ptr() as usize;
    let mut lines = Lines::new();
    let first = lines.decode(&mut buf).unwrap().unwrap();
    let second = lines.decode(&mut buf).unwrap().unwrap();
    assert_eq!(first.as_ptr() as usize, base);
    assert_eq!(second.as_ptr() as usize, base + 6);
}

#[test]
fn consuming_behind_the_decoders_back_restarts_the_search() {
    let mut buf = RecvBuf::new();
    let mut lines = Lines::new();
    buf.feed(b"abc").unwrap();
    assert_eq!(lines.decode(&mut buf), Ok(None));
    buf.advance(3).unwrap();
    buf.feed(b"\n").unwrap();
    assert_eq!(lines.decode(&mut buf).unwrap().as_deref(), Some(&b""[..]));
}

#[test]
fn a_line_over_the_limit_fails_as_soon_as_it_is_known() {
    let mut lines = Lines::with_config(LinesConfig::default().max_length(3));
    let mut buf = RecvBuf::new();
    // `abc\r` may still be `abc` + CRLF: wait.
    buf.feed(b"abc\r").unwrap();
    assert_eq!(lines.decode(&mut buf), Ok(None));
    buf.feed(b"\n").unwrap();
    assert_eq!(
        lines.decode(&mut buf).unwrap().as_deref(),
        Some(&b"abc"[..])
    );
    // `abcd` cannot be a line of 3 whatever follows: fail now.
    buf.feed(b"abcd").unwrap();
    assert_eq!(
        lines.decode(&mut buf),
        Err(Error::LimitExceeded {
            limit: Limit::LineLength,
            max: 3,
            attempted: 4,
            offset: 5
        })
    );
}

#[test]
fn end_of_stream_with_a_full_buffer_is_not_a_limit_error() {
    let config = RecvBufConfig::default().max_buffered(4).unwrap();
    let last_line = LinesConfig::default().unterminated_last_line(true);
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"abcd").unwrap();
    let mut lines = Lines::with_config(last_line);
    assert_eq!(
        lines.decode_eof(&mut buf).unwrap().as_deref(),
        Some(&b"abcd"[..])
    );
    assert_eq!(lines.decode_eof(&mut buf), Ok(None));

    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"abcd").unwrap();
    assert_eq!(
        Lines::new().decode_eof(&mut buf),
        Err(Error::Truncated {
            partial: Bytes::from_static(b"abcd"),
            offset: 0
        })
    );
}

#[test]
fn a_decoder_moved_to_a_fresh_buffer_starts_over() {
    let mut lines = Lines::new();
    let mut first = RecvBuf::new();
    first.feed(b"abc").unwrap();
    assert_eq!(lines.decode(&mut first), Ok(None));
    let mut second = RecvBuf::new();
    second.feed(b"a\nbc").unwrap();
    assert_eq!(
        lines.decode(&mut second).unwrap().as_deref(),
        Some(&b"a"[..])
    );
}
