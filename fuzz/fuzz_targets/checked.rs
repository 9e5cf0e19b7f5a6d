//! `Checked` on any bytes, with every algorithm, in both mismatch modes:
//! whole, byte-at-a-time and cut input give the same items and outcome;
//! errors are final; every byte ends in a frame, its header or the rest; a
//! frame that passes re-encodes to exactly the bytes it came from.

#![no_main]

use cleave_proto::{
    Bytes, Checked, CheckedConfig, Checksum, Decoder, Encoder, RecvBuf, RecvBufConfig,
};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;

const ALGORITHMS: [Checksum; 4] = [
    Checksum::None,
    Checksum::Crc16,
    Checksum::Crc32,
    Checksum::Xxh3,
];

/// Every item of a skipping decoder over `pieces` and how it ended, with
/// the stream range of each item.
type SkipRun = (
    Vec<(u64, u64, Result<Bytes, cleave_proto::BadChecksum>)>,
    Result<(), cleave_proto::Error>,
);

fn skip_run(config: CheckedConfig, pieces: &[&[u8]]) -> SkipRun {
    let mut frames = Checked::with_config(config).unwrap().skip_mismatched();
    let mut buf = RecvBuf::new();
    let mut items = Vec::new();
    for piece in pieces {
        buf.feed(piece).unwrap();
        loop {
            let start = buf.offset();
            match frames.decode(&mut buf) {
                Ok(Some(item)) => items.push((start, buf.offset(), item)),
                Ok(None) => break,
                Err(e) => return (items, Err(e)),
            }
        }
    }
    loop {
        let start = buf.offset();
        match frames.decode_eof(&mut buf) {
            Ok(Some(item)) => items.push((start, buf.offset(), item)),
            Ok(None) => return (items, Ok(())),
            Err(e) => return (items, Err(e)),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[knobs, max, a, b], input)) = data.split_first_chunk::<4>() else {
        return;
    };
    let checksum = ALGORITHMS[usize::from(knobs & 3)];
    let config = CheckedConfig::new(checksum).max_frame_length(u64::from(max) * 4);
    let sizes = [usize::from(a % 64) + 1, usize::from(b % 64) + 1];
    if knobs & 4 == 0 {
        let run = harness::assert_chunking_invariant(
            || Checked::with_config(config).unwrap(),
            RecvBufConfig::default(),
            input,
            &sizes,
            harness::Placement::Tail,
        );
        let mut codec = Checked::with_config(config).unwrap();
        for cut in &run.cuts {
            let frame = codec.encode(cut.frame.clone()).unwrap();
            let wire = [frame.head(), frame.body()].concat();
            assert_eq!(wire, &input[cut.start as usize..cut.end as usize]);
        }
    } else {
        let whole = skip_run(config, &[input]);
        assert_eq!(skip_run(config, &harness::pieces(input, &[1])), whole);
        assert_eq!(skip_run(config, &harness::pieces(input, &sizes)), whole);
        let mut at = 0;
        for (start, end, item) in &whole.0 {
            assert_eq!(*start, at, "items do not tile the stream");
            let wire = &input[*start as usize..*end as usize];
            let payload = match item {
                Ok(payload) => payload,
                Err(bad) => {
                    assert_ne!(bad.mismatch.expected, bad.mismatch.calculated);
                    assert_eq!(bad.offset, *start);
                    &bad.payload
                }
            };
            assert_eq!(&wire[4 + checksum.width()..], &payload[..]);
            at = *end;
        }
    }
});
