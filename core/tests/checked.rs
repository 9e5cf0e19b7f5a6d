//! Contracts of `Checked`, the flatstream-compatible checksummed frames:
//! flatstream's golden frames reproduced and read back, check values and
//! independent checksums at every length class, refusals (a CRC-32C value is
//! not a CRC-32, a flipped bit anywhere is caught), flatstream's reader
//! behaviours (limit before allocation, torn frame at the end, a mismatch
//! skipped), chunking invariance, conservation and final errors.

#[path = "support/harness.rs"]
mod harness;

use cleave_proto::{
    BadChecksum, Bytes, Checked, CheckedConfig, Checksum, ChecksumMismatch, Decoder, Encoder,
    Error, InvalidInput, Limit, Misuse, RecvBuf, RecvBufConfig, Unencodable,
};
use harness::{assert_chunking_invariant, assert_conserved, pieces, run, Placement};
use proptest::prelude::*;

/// Every algorithm this build can compute.
fn algorithms() -> Vec<Checksum> {
    [
        Checksum::None,
        Checksum::Crc16,
        Checksum::Crc32,
        Checksum::Xxh3,
    ]
    .into_iter()
    .filter(|c| c.is_available())
    .collect()
}

fn buf_config() -> RecvBufConfig {
    RecvBufConfig::default().max_buffered(4 << 20).unwrap()
}

/// A golden file's frame: its hex, decoded.
fn golden(checksum: Checksum, payload: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/data/flatstream/{}_{payload}.hex",
        env!("CARGO_MANIFEST_DIR"),
        checksum.name()
    );
    let hex = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let hex: String = hex.split_whitespace().collect();
    assert_eq!(hex.len() % 2, 0, "{path}: odd number of hex digits");
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn wire(frame: &cleave_proto::Frame) -> Vec<u8> {
    [frame.head(), frame.body(), frame.tail()].concat()
}

/// CRC-16/XMODEM, bit by bit: the definition, independent of any table.
fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc = 0u16;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                crc << 1 ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The frame's layout written out by hand, with checksums from other
/// implementations than the codec's where there are any: CRC-16 bit by bit,
/// CRC-32 from the `crc` crate's catalogue (the codec uses crc32fast with
/// `std`), XXH3 from xxhash-rust (the codec's own; its golden frames are
/// flatstream's).
fn layout(checksum: Checksum, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    match checksum {
        Checksum::None => {}
        Checksum::Crc16 => out.extend_from_slice(&crc16_xmodem(payload).to_le_bytes()),
        Checksum::Crc32 => {
            let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISO_HDLC).checksum(payload);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        Checksum::Xxh3 => out.extend_from_slice(&Checksum::Xxh3.compute(payload).to_le_bytes()),
        _ => unreachable!("a checksum this test does not know"),
    }
    out.extend_from_slice(payload);
    out
}

#[test]
fn flatstream_golden_frames_are_reproduced_and_read_back() {
    for checksum in algorithms() {
        for (name, len) in [("empty", 0), ("small", 3), ("medium", 1032)] {
            let frame = golden(checksum, name);
            let mut buf = RecvBuf::new();
            buf.feed(&frame).unwrap();
            let mut codec = Checked::new(checksum).unwrap();
            let payload = codec
                .decode(&mut buf)
                .unwrap_or_else(|e| panic!("{checksum} {name}: {e}"))
                .unwrap_or_else(|| panic!("{checksum} {name}: no frame"));
            assert_eq!(payload.len(), len, "{checksum} {name}");
            assert!(buf.is_empty());
            if name == "small" {
                assert_eq!(payload, "abc");
            }
            assert_eq!(wire(&codec.encode(payload.clone()).unwrap()), frame);
            assert_eq!(layout(checksum, &payload), frame, "{checksum} {name}");
        }
    }
}

#[test]
fn the_golden_medium_payload_is_a_flatbuffer_of_1024_zero_bytes() {
    // What the provenance says the payload is: a root offset (4) to a
    // vector of 1024 bytes, its length, then the 1024 zeros.
    let frame = golden(Checksum::None, "medium");
    let payload = &frame[4..];
    assert_eq!(payload.len(), 1032);
    assert_eq!(&payload[..4], &4u32.to_le_bytes());
    assert_eq!(&payload[4..8], &1024u32.to_le_bytes());
    assert!(payload[8..].iter().all(|&b| b == 0));
}

#[cfg(feature = "xxh3")]
#[test]
fn every_algorithm_is_built_with_xxh3() {
    assert_eq!(algorithms().len(), 4);
}

#[cfg(not(feature = "xxh3"))]
#[test]
fn xxh3_without_its_feature_is_a_config_error() {
    assert!(matches!(
        Checked::new(Checksum::Xxh3),
        Err(Error::Misuse(Misuse::InvalidConfig { .. }))
    ));
}

#[test]
fn check_values() {
    assert_eq!(Checksum::Crc16.compute(b"123456789"), 0x31c3);
    assert_eq!(Checksum::Crc32.compute(b"123456789"), 0xcbf4_3926);
    // Of "abc", as the golden small frames carry them.
    assert_eq!(Checksum::Crc16.compute(b"abc"), 0x9dd6);
    assert_eq!(Checksum::Crc32.compute(b"abc"), 0x3524_41c2);
    assert_eq!(
        [
            Checksum::None,
            Checksum::Crc16,
            Checksum::Crc32,
            Checksum::Xxh3
        ]
        .map(Checksum::width),
        [0, 2, 4, 8]
    );
}

#[test]
fn round_trips_at_every_length_class_match_the_layout() {
    let big = 3 << 20;
    for checksum in algorithms() {
        let mut codec =
            Checked::with_config(CheckedConfig::new(checksum).max_frame_length(big as u64))
                .unwrap();
        for len in [0usize, 1, 255, 256, 65_535, 65_536, big] {
            let payload: Bytes = (0..len).map(|i| (i * 31 + len) as u8).collect();
            let bytes = wire(&codec.encode(payload.clone()).unwrap());
            assert_eq!(bytes, layout(checksum, &payload), "{checksum} at {len}");
            let mut buf = RecvBuf::with_config(buf_config());
            // Fed in reads of 16 KiB, as a socket would give them.
            let mut got = None;
            for piece in bytes.chunks(16 << 10) {
                assert!(got.is_none());
                buf.feed(piece).unwrap();
                got = codec.decode(&mut buf).unwrap();
            }
            assert_eq!(got, Some(payload), "{checksum} at {len}");
            assert!(buf.is_empty());
        }
    }
}

/// The first error a decoder gives for `input`, fed whole.
fn first_error(checksum: Checksum, input: &[u8]) -> Error {
    let run = run(Checked::new(checksum).unwrap(), buf_config(), &[input]);
    assert_conserved(input, &run, Placement::Tail);
    run.outcome.expect_err("no error")
}

#[test]
fn a_crc32c_value_is_not_a_crc32() {
    let payload = b"123456789";
    let crc32c = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(payload);
    assert_eq!(crc32c, 0xe306_9283, "CRC-32C's check value");
    let mut frame = 9u32.to_le_bytes().to_vec();
    frame.extend_from_slice(&crc32c.to_le_bytes());
    frame.extend_from_slice(payload);
    let error = first_error(Checksum::Crc32, &frame);
    let text = error.to_string();
    assert!(
        text.contains("0xe3069283") && text.contains("0xcbf43926") && text.contains("go on"),
        "{text}"
    );
    assert_eq!(
        error,
        Error::InvalidInput {
            kind: InvalidInput::Checksum(ChecksumMismatch {
                checksum: Checksum::Crc32,
                expected: 0xe306_9283,
                calculated: 0xcbf4_3926,
            }),
            offset: 0,
        }
    );
}

#[test]
fn a_flipped_bit_in_the_payload_or_the_checksum_is_refused() {
    for checksum in algorithms().into_iter().filter(|&c| c != Checksum::None) {
        for name in ["small", "medium"] {
            let good = golden(checksum, name);
            // Every bit of the checksum and of the payload's first 64 bytes
            // (the whole of "abc"), then every 97th bit of the rest.
            let bits = (32..good.len() * 8)
                .filter(|&bit| bit < (4 + checksum.width() + 64) * 8 || bit % 97 == 0);
            for bit in bits {
                let mut bad = good.clone();
                bad[bit / 8] ^= 1 << (bit % 8);
                // A stream of the good frame, the bad one, the good one.
                let input = [&good[..], &bad, &good].concat();
                let run = run(Checked::new(checksum).unwrap(), buf_config(), &[&input]);
                assert_conserved(&input, &run, Placement::Tail);
                assert_eq!(run.cuts.len(), 1, "{checksum} {name} bit {bit}");
                assert!(
                    matches!(
                        run.outcome,
                        Err(Error::InvalidInput {
                            kind: InvalidInput::Checksum(_),
                            offset,
                        }) if offset == good.len() as u64
                    ),
                    "{checksum} {name} bit {bit}: {:?}",
                    run.outcome
                );
                // Nothing of the bad frame was consumed.
                assert_eq!(run.rest, [&bad[..], &good].concat());
            }
        }
    }
}

#[test]
fn a_mismatch_is_skipped_and_the_next_frame_read_when_asked() {
    for checksum in algorithms().into_iter().filter(|&c| c != Checksum::None) {
        let good = golden(checksum, "small");
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 0x20; // "abC"
        let input = [&bad[..], &good, &bad, &good].concat();
        let expected_bad = BadChecksum {
            mismatch: ChecksumMismatch {
                checksum,
                expected: checksum.compute(b"abc"),
                calculated: checksum.compute(b"abC"),
            },
            offset: 0,
            payload: Bytes::from_static(b"abC"),
        };
        let whole = skip_run(checksum, &[&input]);
        let frame = good.len() as u64;
        assert_eq!(
            whole,
            vec![
                Err(expected_bad.clone()),
                Ok(Bytes::from_static(b"abc")),
                Err(BadChecksum {
                    offset: 2 * frame,
                    ..expected_bad
                }),
                Ok(Bytes::from_static(b"abc")),
            ],
            "{checksum}"
        );
        assert_eq!(skip_run(checksum, &pieces(&input, &[1])), whole);
        assert_eq!(skip_run(checksum, &pieces(&input, &[3, 7, 2])), whole);
        let text = whole[0].clone().unwrap_err().to_string();
        assert!(
            text.contains("mismatch") && text.contains("offset 0"),
            "{text}"
        );
    }
}

/// Every item of a skipping decoder over `pieces`, which must end cleanly.
fn skip_run(checksum: Checksum, pieces: &[&[u8]]) -> Vec<Result<Bytes, BadChecksum>> {
    let mut frames = Checked::new(checksum).unwrap().skip_mismatched();
    let mut buf = RecvBuf::new();
    let mut out = Vec::new();
    for piece in pieces {
        buf.feed(piece).unwrap();
        while let Some(item) = frames.decode(&mut buf).unwrap() {
            out.push(item);
        }
    }
    assert_eq!(frames.decode_eof(&mut buf), Ok(None));
    out
}

#[test]
fn skipping_keeps_other_errors_final() {
    let mut frames = Checked::with_config(CheckedConfig::new(Checksum::Crc32).max_frame_length(8))
        .unwrap()
        .skip_mismatched();
    let mut buf = RecvBuf::new();
    buf.feed(b"\x09\0\0\0\0\0\0\0").unwrap();
    let over = Error::LimitExceeded {
        limit: Limit::FrameLength,
        max: 8,
        attempted: 9,
        offset: 0,
    };
    assert_eq!(frames.decode(&mut buf), Err(over.clone()));
    assert_eq!(frames.decode_eof(&mut buf), Err(over));
    assert_eq!(buf.len(), 8);
}

#[test]
fn the_limit_is_checked_before_any_payload_arrives() {
    // flatstream's default limit, 2 GiB: a header declaring one byte more
    // fails on its four length bytes.
    let config = CheckedConfig::new(Checksum::Xxh3).max_frame_length(2 << 30);
    let Ok(mut codec) = Checked::with_config(config) else {
        return; // no xxh3 in this build: the same holds for the others below
    };
    let mut buf = RecvBuf::new();
    buf.feed(&((2u32 << 30) + 1).to_le_bytes()).unwrap();
    assert_eq!(
        codec.decode(&mut buf),
        Err(Error::LimitExceeded {
            limit: Limit::FrameLength,
            max: 2 << 30,
            attempted: (2 << 30) + 1,
            offset: 0,
        })
    );
}

#[test]
fn a_declared_length_within_limits_is_never_reserved() {
    let reserve = 8 * 1024;
    let config = RecvBufConfig::default()
        .max_buffered(usize::MAX)
        .unwrap()
        .read_reserve(reserve)
        .unwrap();
    for checksum in algorithms() {
        let mut codec =
            Checked::with_config(CheckedConfig::new(checksum).max_frame_length(u32::MAX.into()))
                .unwrap();
        let mut buf = RecvBuf::with_config(config);
        let header = [&u32::MAX.to_le_bytes()[..], &[0u8; 8][..checksum.width()]].concat();
        for byte in header.iter().chain(b"some payload") {
            buf.feed(&[*byte]).unwrap();
            assert_eq!(codec.decode(&mut buf), Ok(None), "{checksum}");
            assert!(buf.capacity() <= buf.len() + reserve, "{checksum}");
        }
    }
}

#[test]
fn a_torn_frame_at_the_end_comes_back_whole() {
    for checksum in algorithms() {
        let frame = golden(checksum, "medium");
        let torn = &frame[..frame.len() - 5];
        let input = [&golden(checksum, "small")[..], torn].concat();
        let run = run(
            Checked::new(checksum).unwrap(),
            buf_config(),
            &pieces(&input, &[100]),
        );
        assert_conserved(&input, &run, Placement::Tail);
        assert_eq!(run.frames(), ["abc"]);
        match run.outcome {
            Err(Error::Truncated { partial, offset }) => {
                assert_eq!(&partial[..], torn);
                assert_eq!(offset, input.len() as u64 - torn.len() as u64);
            }
            other => panic!("{checksum}: {other:?}"),
        }
    }
}

#[test]
fn encode_refuses_a_payload_over_the_limit() {
    let mut codec =
        Checked::with_config(CheckedConfig::new(Checksum::Crc16).max_frame_length(2)).unwrap();
    assert_eq!(
        codec.encode(Bytes::from_static(b"abc")),
        Err(Error::Misuse(Misuse::Unencodable(Unencodable::TooLong {
            len: 3,
            max: 2
        })))
    );
    assert!(
        Checked::with_config(CheckedConfig::new(Checksum::None).max_frame_length(1 << 32)).is_err()
    );
}

#[test]
fn payloads_are_views_of_the_receive_buffer() {
    let payload = Bytes::from(vec![7u8; 4096]);
    for checksum in algorithms() {
        let mut codec = Checked::new(checksum).unwrap();
        let mut buf = RecvBuf::new();
        buf.feed(&wire(&codec.encode(payload.clone()).unwrap()))
            .unwrap();
        let at = buf.peek().as_ptr() as usize;
        let got = codec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(got, payload);
        assert_eq!(
            got.as_ptr() as usize,
            at + 4 + checksum.width(),
            "{checksum}: copied"
        );
    }
}

fn checksum_strategy() -> impl Strategy<Value = Checksum> {
    prop::sample::select(algorithms())
}

proptest! {
    #[test]
    fn any_payloads_round_trip_whatever_the_pieces(
        checksum in checksum_strategy(),
        payloads in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..12),
        sizes in prop::collection::vec(1usize..64, 1..6),
    ) {
        let mut codec = Checked::new(checksum).unwrap();
        let input: Vec<u8> = payloads
            .iter()
            .flat_map(|p| wire(&codec.encode(Bytes::from(p.clone())).unwrap()))
            .collect();
        let run = assert_chunking_invariant(
            || Checked::new(checksum).unwrap(),
            buf_config(),
            &input,
            &sizes,
            Placement::Tail,
        );
        prop_assert_eq!(&run.outcome, &Ok(()));
        prop_assert_eq!(run.frames(), payloads);
    }

    #[test]
    fn any_bytes_are_chunking_invariant_and_conserved(
        checksum in checksum_strategy(),
        input in prop::collection::vec(
            prop_oneof![3 => Just(0u8), 1 => Just(3u8), 2 => any::<u8>()], 0..200),
        sizes in prop::collection::vec(1usize..16, 1..6),
    ) {
        assert_chunking_invariant(
            || Checked::with_config(CheckedConfig::new(checksum).max_frame_length(64)).unwrap(),
            buf_config(),
            &input,
            &sizes,
            Placement::Tail,
        );
    }

    #[test]
    fn skipping_is_chunking_invariant(
        checksum in checksum_strategy(),
        frames in prop::collection::vec((prop::collection::vec(any::<u8>(), 0..40), any::<bool>()), 0..10),
        sizes in prop::collection::vec(1usize..16, 1..6),
    ) {
        let mut codec = Checked::new(checksum).unwrap();
        let mut input = Vec::new();
        for (payload, corrupt) in &frames {
            let mut bytes = wire(&codec.encode(Bytes::from(payload.clone())).unwrap());
            if *corrupt && checksum != Checksum::None {
                bytes[4] ^= 1; // the checksum's first byte
            }
            input.extend_from_slice(&bytes);
        }
        let whole = skip_run(checksum, &[&input]);
        prop_assert_eq!(whole.len(), frames.len());
        for (item, (payload, corrupt)) in whole.iter().zip(&frames) {
            let flagged = *corrupt && checksum != Checksum::None;
            match item {
                Ok(got) => prop_assert!(!flagged && got[..] == payload[..]),
                Err(bad) => prop_assert!(flagged && bad.payload[..] == payload[..]),
            }
        }
        prop_assert_eq!(skip_run(checksum, &pieces(&input, &sizes)), whole);
    }
}

#[test]
fn kept_headers_give_whole_frames_to_forward_as_they_came() {
    use cleave_proto::Frame;
    for checksum in algorithms() {
        let input = [golden(checksum, "small"), golden(checksum, "medium")].concat();
        let config = CheckedConfig::new(checksum).keep_header();
        assert!(config.keeps_header());
        let make = || Checked::with_config(config).unwrap();
        // Each frame is its own bytes, header and all: the run tiles the
        // input with nothing left for framing.
        let run = assert_chunking_invariant(make, buf_config(), &input, &[5, 300], Placement::Tail);
        assert_eq!(run.outcome, Ok(()));
        let frames = run.frames();
        assert_eq!(frames.concat(), input);
        // Forwarded as they came, they read back as the payloads.
        let mut buf = RecvBuf::new();
        for frame in &frames {
            let out = Frame::from(frame.clone());
            buf.feed(out.body()).unwrap();
        }
        let mut payloads = Checked::new(checksum).unwrap();
        assert_eq!(payloads.decode(&mut buf).unwrap().unwrap(), "abc");
        assert_eq!(payloads.decode(&mut buf).unwrap().unwrap().len(), 1032);
        // A bad checksum is still caught, and reported with its payload.
        if checksum != Checksum::None {
            let mut bad = golden(checksum, "small");
            bad[4] ^= 1;
            let mut frames = make().skip_mismatched();
            let mut buf = RecvBuf::new();
            buf.feed(&bad).unwrap();
            let item = frames.decode(&mut buf).unwrap().unwrap();
            assert_eq!(item.unwrap_err().payload, "abc");
            assert!(buf.is_empty());
        }
    }
}

#[test]
fn a_stopped_decoder_can_be_made_to_skip_the_bad_frame() {
    let good = golden(Checksum::Crc32, "small");
    let mut bad = good.clone();
    bad[4] ^= 1;
    let mut buf = RecvBuf::new();
    buf.feed(&[&bad[..], &good].concat()).unwrap();
    let mut stopped = Checked::new(Checksum::Crc32).unwrap();
    assert!(matches!(
        stopped.decode(&mut buf),
        Err(Error::InvalidInput {
            kind: InvalidInput::Checksum(_),
            offset: 0
        })
    ));
    let mut skipping = stopped.skip_mismatched();
    assert_eq!(
        skipping
            .decode(&mut buf)
            .unwrap()
            .unwrap()
            .unwrap_err()
            .payload,
        "abc"
    );
    assert_eq!(
        skipping.decode(&mut buf),
        Ok(Some(Ok(Bytes::from_static(b"abc"))))
    );
    // Other errors stay final.
    let mut over =
        Checked::with_config(CheckedConfig::new(Checksum::Crc32).max_frame_length(1)).unwrap();
    let mut buf = RecvBuf::new();
    buf.feed(&good).unwrap();
    let error = over.decode(&mut buf).unwrap_err();
    assert_eq!(over.skip_mismatched().decode(&mut buf), Err(error));
}
