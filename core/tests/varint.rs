//! Contracts of `Varint`: round trips against prost's encoder, chunking
//! invariance, conservation, bad varints, limits.

#[path = "support/harness.rs"]
mod harness;

use cleave_proto::{
    Bytes, Decoder, Error, InvalidInput, Limit, RecvBuf, RecvBufConfig, Varint, VarintConfig,
    VarintField,
};
use harness::{assert_chunking_invariant, assert_conserved, pieces, run, Placement};
use proptest::prelude::*;

fn buf_config() -> RecvBufConfig {
    RecvBufConfig::default()
}

/// Bodies of every length class: 1-byte, 2-byte and 3-byte varints.
fn bodies_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let len = prop_oneof![0usize..130, 16_000usize..16_600, 20_000usize..20_001];
    prop::collection::vec(len.prop_map(|n| vec![0x5a; n]), 0..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Frames written by prost's `encode_length_delimiter` decode to the same
    /// bodies, whatever the pieces.
    #[test]
    fn round_trip_with_prost_whatever_the_pieces(
        bodies in bodies_strategy(),
        sizes in prop::collection::vec(1usize..3000, 1..6),
    ) {
        let mut input = Vec::new();
        for body in &bodies {
            prost::encode_length_delimiter(body.len(), &mut input).unwrap();
            input.extend_from_slice(body);
        }
        let run = assert_chunking_invariant(Varint::new, buf_config(), &input, &sizes, Placement::Tail);
        let expected: Vec<Bytes> = bodies.into_iter().map(Bytes::from).collect();
        prop_assert_eq!(run.frames(), expected);
        prop_assert_eq!(run.outcome, Ok(()));
    }

    /// On any bytes we read the same first length as prost, or refuse
    /// where it refuses (prost accepts non-minimal encodings, so we do too
    /// here). A frame limit of 0 makes our decoder report the length it read.
    #[test]
    fn first_length_agrees_with_prost(input in prop::collection::vec(any::<u8>(), 0..14)) {
        let theirs = prost::decode_length_delimiter(&input[..]).ok().map(|n| n as u64);
        let config = VarintConfig::default().max_frame_length(0).allow_non_minimal(true);
        let ours = match decode_one(&input, config) {
            Ok(Some(body)) => Some(body.len() as u64),
            Err(Error::LimitExceeded { limit: Limit::FrameLength, attempted, .. }) => Some(attempted),
            Ok(None) | Err(_) => None,
        };
        prop_assert_eq!(ours, theirs);
    }

    #[test]
    fn any_bytes_chunking_invariant_and_conserved(
        input in prop::collection::vec(prop_oneof![Just(0x80u8), Just(0u8), Just(1), Just(3), any::<u8>()], 0..200),
        max in 0u64..64,
        non_minimal in any::<bool>(),
        sizes in prop::collection::vec(1usize..32, 1..8),
    ) {
        let config = VarintConfig::default().max_frame_length(max).allow_non_minimal(non_minimal);
        let run = assert_chunking_invariant(|| Varint::with_config(config), buf_config(), &input, &sizes, Placement::Tail);
        for cut in &run.cuts {
            let head = (cut.end - cut.start) as usize - cut.frame.len();
            prop_assert!((1..=10).contains(&head));
        }
    }
}

fn decode_one(input: &[u8], config: VarintConfig) -> Result<Option<Bytes>, Error> {
    let mut buf = RecvBuf::new();
    buf.feed(input).unwrap();
    Varint::with_config(config).decode(&mut buf)
}

#[test]
fn bad_varints_are_typed_errors_at_the_telling_byte() {
    let invalid = |kind, offset| Err(Error::InvalidInput { kind, offset });
    let eleven = [0x80u8; 11];
    assert_eq!(
        decode_one(&eleven, VarintConfig::default()),
        invalid(InvalidInput::Varint(VarintField::TooLong), 9)
    );
    let mut overflow = [0xffu8; 10];
    overflow[9] = 0x7f;
    assert_eq!(
        decode_one(&overflow, VarintConfig::default()),
        invalid(InvalidInput::Varint(VarintField::Overflow), 9)
    );
    assert_eq!(
        decode_one(b"\x85\x00abcde", VarintConfig::default()),
        invalid(InvalidInput::Varint(VarintField::NotMinimal), 1)
    );
    let lenient = VarintConfig::default().allow_non_minimal(true);
    assert_eq!(
        decode_one(b"\x85\x00abcde", lenient),
        Ok(Some(Bytes::from_static(b"abcde")))
    );
}

#[test]
fn nine_continuation_bytes_are_need_more_not_an_error() {
    assert_eq!(decode_one(&[0x80; 9], VarintConfig::default()), Ok(None));
}

#[test]
fn frame_over_the_limit_fails_as_soon_as_its_length_arrives() {
    let config = VarintConfig::default().max_frame_length(100);
    // 300 = 0xac 0x02, no body yet
    assert_eq!(
        decode_one(b"\xac\x02", config),
        Err(Error::LimitExceeded {
            limit: Limit::FrameLength,
            max: 100,
            attempted: 300,
            offset: 0
        })
    );
}

#[test]
fn declared_huge_length_does_not_reserve() {
    let config = VarintConfig::default().max_frame_length(u64::MAX);
    let reserve = cleave_proto::DEFAULT_READ_RESERVE;
    let buf_config = RecvBufConfig::default().max_buffered(usize::MAX).unwrap();
    let mut buf = RecvBuf::with_config(buf_config);
    let mut dec = Varint::with_config(config);
    // 2^32 as a varint (5 bytes), then 5 body bytes: 10 bytes arrived.
    buf.feed(b"\x80\x80\x80\x80\x10hello").unwrap();
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert!(buf.capacity() <= 10 + reserve);
}

#[test]
fn eof_mid_frame_returns_length_and_partial_body() {
    let input = b"\x02ok\x05par";
    let run = run(Varint::new(), buf_config(), &pieces(input, &[1]));
    assert_eq!(run.frames(), ["ok"]);
    assert_eq!(
        run.outcome,
        Err(Error::Truncated {
            partial: Bytes::from_static(b"\x05par"),
            offset: 3
        })
    );
    assert_conserved(input, &run, Placement::Tail);
}
