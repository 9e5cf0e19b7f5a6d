//! Contracts of `LengthPrefixed`: round trips for every layout, agreement
//! with tokio-util's `LengthDelimitedCodec`, chunking invariance,
//! conservation, limits that never allocate what a peer declares.

#[path = "support/harness.rs"]
mod harness;

use cleave_proto::{
    Bytes, Decoder, Endian, Error, InvalidInput, LengthConfig, LengthPrefixed, Limit, RecvBuf,
    RecvBufConfig, Varint,
};
use harness::{assert_chunking_invariant, assert_conserved, pieces, run, Placement};
use proptest::prelude::*;
use tokio_util::codec::Decoder as _;

/// A layout, described the way a protocol spec would.
#[derive(Clone, Copy, Debug)]
struct Layout {
    offset: usize,
    width: usize,
    endian: Endian,
    /// What the field counts: 0 = body, 1 = field + body, 2 = header + body,
    /// 3 = body minus a 2-byte trailer (so the adjustment is +2).
    counts: u8,
    /// 0 = strip the header, 1 = keep it, 2 = strip only the bytes before
    /// the field.
    skip: u8,
}

impl Layout {
    fn head(&self) -> usize {
        self.offset + self.width
    }

    fn adjustment(&self) -> i64 {
        match self.counts {
            0 => 0,
            1 => -(self.width as i64),
            2 => -(self.head() as i64),
            _ => 2,
        }
    }

    fn skip_len(&self) -> usize {
        match self.skip {
            0 => self.head(),
            1 => 0,
            _ => self.offset,
        }
    }

    fn config(&self) -> LengthConfig {
        LengthConfig::default()
            .field_offset(self.offset)
            .field_width(self.width)
            .unwrap()
            .endian(self.endian)
            .adjustment(self.adjustment())
            .skip(self.skip_len())
            .max_frame_length(1 << 20)
    }

    /// The wire bytes of one frame with this body.
    fn encode(&self, body: &[u8]) -> Vec<u8> {
        let field = (body.len() as i64 - self.adjustment()) as u64;
        let bytes = match self.endian {
            Endian::Big => field.to_be_bytes()[8 - self.width..].to_vec(),
            Endian::Little => field.to_le_bytes()[..self.width].to_vec(),
        };
        let mut out = vec![0xa5; self.offset];
        out.extend_from_slice(&bytes);
        out.extend_from_slice(body);
        out
    }
}

fn layout_strategy() -> impl Strategy<Value = Layout> {
    (
        0usize..4,
        prop::sample::select(vec![1usize, 2, 3, 4, 8]),
        any::<bool>(),
        0u8..4,
        0u8..3,
    )
        .prop_map(|(offset, width, big, counts, skip)| Layout {
            offset,
            width,
            endian: if big { Endian::Big } else { Endian::Little },
            counts,
            skip,
        })
}

fn bodies_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    // At least 2 bytes, so a "+2 trailer" layout never needs a negative field.
    prop::collection::vec(prop::collection::vec(any::<u8>(), 2..60), 0..20)
}

fn buf_config() -> RecvBufConfig {
    RecvBufConfig::default()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn round_trip_every_layout_whatever_the_pieces(
        layout in layout_strategy(),
        bodies in bodies_strategy(),
        sizes in prop::collection::vec(1usize..50, 1..8),
    ) {
        let mut input = Vec::new();
        let mut expected = Vec::new();
        for body in &bodies {
            let wire = layout.encode(body);
            expected.push(Bytes::copy_from_slice(&wire[layout.skip_len()..]));
            input.extend_from_slice(&wire);
        }
        let make = || LengthPrefixed::with_config(layout.config()).unwrap();
        let run = assert_chunking_invariant(make, buf_config(), &input, &sizes, Placement::Tail);
        prop_assert_eq!(run.frames(), expected);
        prop_assert_eq!(run.outcome, Ok(()));
    }

    /// The same layout in tokio-util's terms gives the same frames: its
    /// adjustment counts from the skip point, ours from the end of the field.
    #[test]
    fn agrees_with_tokio_util_length_delimited_codec(
        layout in layout_strategy(),
        bodies in bodies_strategy(),
    ) {
        let input: Vec<u8> = bodies.iter().flat_map(|b| layout.encode(b)).collect();
        let tokio_adjustment = layout.adjustment() + (layout.head() - layout.skip_len()) as i64;
        let mut builder = tokio_util::codec::LengthDelimitedCodec::builder();
        builder
            .length_field_offset(layout.offset)
            .length_field_length(layout.width)
            .length_adjustment(tokio_adjustment as isize)
            .num_skip(layout.skip_len())
            .max_frame_length(1 << 20);
        if layout.endian == Endian::Little {
            builder.little_endian();
        }
        let mut codec = builder.new_codec();
        let mut theirs_buf = bytes::BytesMut::from(&input[..]);
        let mut theirs = Vec::new();
        while let Some(frame) = codec.decode(&mut theirs_buf).unwrap() {
            theirs.push(frame.freeze());
        }
        let ours = run(LengthPrefixed::with_config(layout.config()).unwrap(), buf_config(), &[&input]);
        prop_assert_eq!(ours.frames(), theirs);
    }

    #[test]
    fn any_bytes_any_layout_chunking_invariant_and_conserved(
        layout in layout_strategy(),
        input in prop::collection::vec(any::<u8>(), 0..200),
        max in 0u64..64,
        sizes in prop::collection::vec(1usize..32, 1..8),
    ) {
        let config = layout.config().max_frame_length(max);
        let run = assert_chunking_invariant(|| LengthPrefixed::with_config(config).unwrap(), buf_config(), &input, &sizes, Placement::Tail);
        for cut in &run.cuts {
            // overhead is exactly the skipped bytes
            prop_assert_eq!((cut.end - cut.start) as usize - cut.frame.len(), layout.skip_len());
        }
    }
}

/// An 8-byte header declaring 4 GiB, then 2 body bytes: 10 bytes in all.
fn four_gib_header() -> Vec<u8> {
    let mut input = (4u64 << 30).to_be_bytes().to_vec();
    input.extend_from_slice(b"hi");
    input
}

fn eight_byte_field() -> LengthConfig {
    LengthConfig::default().field_width(8).unwrap()
}

#[test]
fn declared_4_gib_over_the_frame_limit_fails_at_once() {
    let mut buf = RecvBuf::new();
    buf.feed(&four_gib_header()).unwrap();
    let mut dec = LengthPrefixed::with_config(eight_byte_field()).unwrap();
    assert_eq!(
        dec.decode(&mut buf),
        Err(Error::LimitExceeded {
            limit: Limit::FrameLength,
            max: cleave_proto::DEFAULT_MAX_FRAME_LENGTH,
            attempted: 4 << 30,
            offset: 0
        })
    );
    assert_eq!(buf.len(), 10, "nothing consumed");
}

#[test]
fn declared_4_gib_that_cannot_fit_the_buffer_fails_at_once() {
    let mut buf = RecvBuf::new();
    buf.feed(&four_gib_header()).unwrap();
    let config = eight_byte_field().max_frame_length(u64::MAX);
    let mut dec = LengthPrefixed::with_config(config).unwrap();
    let err = dec.decode(&mut buf).unwrap_err();
    assert!(
        matches!(err, Error::LimitExceeded { limit: Limit::Buffer, attempted, .. } if attempted == (4 << 30) + 8),
        "{err:?}"
    );
}

#[cfg(target_pointer_width = "64")]
#[test]
fn declared_4_gib_within_limits_waits_without_reserving_it() {
    let reserve = 8 * 1024;
    let config = RecvBufConfig::default()
        .max_buffered(5 << 30)
        .unwrap()
        .read_reserve(reserve)
        .unwrap();
    let decoder_config = eight_byte_field().max_frame_length(u64::MAX);

    // Fed by slice.
    let mut buf = RecvBuf::with_config(config);
    let mut dec = LengthPrefixed::with_config(decoder_config).unwrap();
    buf.feed(&four_gib_header()).unwrap();
    assert_eq!(dec.decode(&mut buf), Ok(None));
    assert!(
        buf.capacity() <= 10 + reserve,
        "capacity {}",
        buf.capacity()
    );

    // Read into spare room, as an adapter does, over several reads.
    let mut buf = RecvBuf::with_config(config);
    let mut dec = LengthPrefixed::with_config(decoder_config).unwrap();
    let input = four_gib_header();
    for chunk in input.chunks(3) {
        let spare = buf.spare_mut().unwrap();
        spare[..chunk.len()].copy_from_slice(chunk);
        buf.commit(chunk.len()).unwrap();
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert!(
            buf.capacity() <= buf.len() + reserve,
            "capacity {}",
            buf.capacity()
        );
    }
    assert_eq!(buf.len(), 10);
}

#[test]
fn adjusted_length_out_of_range_is_invalid_input_at_the_field() {
    let mut dec =
        LengthPrefixed::with_config(LengthConfig::default().field_offset(1).adjustment(-10))
            .unwrap();
    let mut buf = RecvBuf::new();
    buf.feed(b"\xff\0\0\0\x04rest").unwrap();
    assert_eq!(
        dec.decode(&mut buf),
        Err(Error::InvalidInput {
            kind: InvalidInput::LengthOutOfRange {
                declared: 4,
                adjustment: -10
            },
            offset: 1
        })
    );

    // Past u64::MAX, even with no frame limit: a peer error, not a limit.
    let config = LengthConfig::default()
        .field_width(8)
        .unwrap()
        .adjustment(1)
        .max_frame_length(u64::MAX);
    let mut dec = LengthPrefixed::with_config(config).unwrap();
    let mut buf = RecvBuf::new();
    buf.feed(&[0xff; 8]).unwrap();
    assert_eq!(
        dec.decode(&mut buf),
        Err(Error::InvalidInput {
            kind: InvalidInput::LengthOutOfRange {
                declared: u64::MAX,
                adjustment: 1
            },
            offset: 0
        })
    );
}

#[test]
fn a_frame_that_can_never_fit_fails_on_its_header() {
    let config = RecvBufConfig::default().max_buffered(6).unwrap();
    let mut buf = RecvBuf::with_config(config);
    buf.feed(b"\0\0\0\x09ab").unwrap();
    assert_eq!(
        LengthPrefixed::new().decode(&mut buf),
        Err(Error::LimitExceeded {
            limit: Limit::Buffer,
            max: 6,
            attempted: 13,
            offset: 0
        })
    );
}

#[test]
fn a_decoder_moved_to_a_fresh_buffer_starts_over() {
    let mut dec = Varint::new();
    let mut first = RecvBuf::new();
    first.feed(b"\x05a").unwrap();
    assert_eq!(dec.decode(&mut first), Ok(None));
    let mut second = RecvBuf::new();
    second.feed(b"\x01xABCD").unwrap();
    assert_eq!(dec.decode(&mut second).unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn eof_mid_frame_returns_header_and_partial_body() {
    let input = b"\0\0\0\x02ok\0\0\0\x09part";
    let run = run(LengthPrefixed::new(), buf_config(), &pieces(input, &[3]));
    assert_eq!(run.frames(), ["ok"]);
    assert_eq!(
        run.outcome,
        Err(Error::Truncated {
            partial: Bytes::from_static(b"\0\0\0\x09part"),
            offset: 6
        })
    );
    assert_conserved(input, &run, Placement::Tail);
}

#[test]
fn flatstream_preset_is_u32_little_endian() {
    let mut buf = RecvBuf::new();
    buf.feed(b"\x03\0\0\0abc").unwrap();
    let mut dec = LengthPrefixed::with_config(LengthConfig::flatstream()).unwrap();
    assert_eq!(dec.decode(&mut buf).unwrap().as_deref(), Some(&b"abc"[..]));
}

#[test]
fn frames_are_views_of_the_receive_buffer() {
    let mut buf = RecvBuf::new();
    buf.feed(b"\0\0\0\x03abc\0\0\0\x01d").unwrap();
    let base = buf.peek().as_ptr() as usize;
    let mut dec = LengthPrefixed::new();
    let a = dec.decode(&mut buf).unwrap().unwrap();
    let d = dec.decode(&mut buf).unwrap().unwrap();
    assert_eq!(
        (a.as_ptr() as usize, d.as_ptr() as usize),
        (base + 4, base + 11)
    );
}

/// An adjustment below minus the field's largest value leaves every
/// field declaring a negative body: nothing could be decoded or encoded,
/// so the configuration is refused (the encoder answered `TooLong { len:
/// 0, max: 0 }`, refusing what it named as allowed). At the bound, the
/// largest field encodes and decodes an empty body.
#[test]
fn an_adjustment_that_leaves_no_body_is_an_invalid_configuration() {
    use cleave_proto::{Encoder, Misuse};
    for (width, field_max) in [(1, 255i64), (2, 65_535), (4, u32::MAX as i64)] {
        let config = LengthConfig::default().field_width(width).unwrap();
        let refused = LengthPrefixed::with_config(config.adjustment(-field_max - 1));
        assert!(
            matches!(
                refused,
                Err(Error::Misuse(Misuse::InvalidConfig { setting: "adjustment", value, .. }))
                    if value == field_max.unsigned_abs() + 1
            ),
            "width {width}: {refused:?}"
        );
        let mut codec = LengthPrefixed::with_config(config.adjustment(-field_max)).unwrap();
        let frame = codec.encode(Bytes::new()).unwrap();
        let mut buf = RecvBuf::new();
        buf.feed(&frame.to_bytes()).unwrap();
        assert_eq!(
            codec.decode(&mut buf),
            Ok(Some(Bytes::new())),
            "width {width}"
        );
    }
}
