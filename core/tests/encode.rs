//! Encoders: encoding then decoding gives the items back, for every
//! configuration; payloads are not copied; what cannot be framed is refused.

use cleave_proto::{
    Bytes, Decoder, Encoder, Endian, Error, LengthConfig, LengthPrefixed, Lines, LinesConfig,
    Misuse, RecvBuf, Unencodable, Varint, VarintConfig,
};
use proptest::prelude::*;

/// Encodes every item, concatenates the wire bytes, decodes them back (fed
/// in pieces of `piece`), and checks that each body was not copied.
fn round_trip<C>(mut codec: C, items: &[Bytes], piece: usize) -> Vec<Bytes>
where
    C: Encoder<Item = Bytes> + Decoder<Item = Bytes>,
{
    let mut wire = Vec::new();
    for item in items {
        let frame = codec.encode(item.clone()).unwrap();
        assert_eq!(
            frame.body().as_ptr(),
            item.as_ptr(),
            "the payload was copied"
        );
        wire.extend_from_slice(&frame.to_bytes());
    }
    let mut buf = RecvBuf::new();
    let mut out = Vec::new();
    for chunk in wire.chunks(piece.max(1)) {
        buf.feed(chunk).unwrap();
        while let Some(frame) = codec.decode(&mut buf).unwrap() {
            out.push(frame);
        }
    }
    assert_eq!(codec.decode_eof(&mut buf), Ok(None), "bytes left over");
    out
}

fn bodies(max_len: usize) -> impl Strategy<Value = Vec<Bytes>> {
    prop::collection::vec(
        prop::collection::vec(any::<u8>(), 0..max_len).prop_map(Bytes::from),
        0..20,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn length_prefixed_round_trips_for_every_encodable_layout(
        width in prop::sample::select(vec![1usize, 2, 3, 4, 8]),
        little in any::<bool>(),
        counts in 0u8..3,
        items in bodies(200),
        piece in 1usize..64,
    ) {
        // The field counts the body, the field and the body, or the body
        // less a 2-byte trailer: adjustments 0, -width and +2.
        let adjustment = [0, -(width as i64), 2][counts as usize];
        let items: Vec<Bytes> = items.into_iter().filter(|b| b.len() as i64 >= adjustment).collect();
        let items: Vec<Bytes> = if width == 1 { items.into_iter().filter(|b| b.len() < 200).collect() } else { items };
        let config = LengthConfig::default()
            .field_width(width).unwrap()
            .endian(if little { Endian::Little } else { Endian::Big })
            .adjustment(adjustment);
        let codec = LengthPrefixed::with_config(config).unwrap();
        prop_assert_eq!(round_trip(codec, &items, piece), items);
    }

    #[test]
    fn length_prefixed_with_the_header_kept_gives_header_and_body(items in bodies(100)) {
        let codec = LengthPrefixed::with_config(LengthConfig::default().keep_header()).unwrap();
        let out = round_trip(codec, &items, 7);
        prop_assert_eq!(out.len(), items.len());
        for (frame, body) in out.iter().zip(&items) {
            prop_assert_eq!(&frame[..4], &(body.len() as u32).to_be_bytes()[..]);
            prop_assert_eq!(&frame[4..], &body[..]);
        }
    }

    #[test]
    fn varint_round_trips(items in bodies(400), piece in 1usize..64) {
        prop_assert_eq!(round_trip(Varint::new(), &items, piece), items);
    }

    #[test]
    fn lines_round_trip_for_every_ending(
        lines in prop::collection::vec(prop::collection::vec(prop::sample::select(vec![b'a', b'\r', b' ', 0xc3, 0xa9]), 0..40), 0..20),
        crlf in any::<bool>(),
        strip_cr in any::<bool>(),
        nul in any::<bool>(),
        piece in 1usize..64,
    ) {
        let config = LinesConfig::default()
            .crlf(crlf)
            .strip_cr(strip_cr)
            .delimiter(if nul { 0 } else { b'\n' });
        // A line ending in `\r` right before the delimiter cannot be read
        // back when `\r` is stripped; after the `\r` of `\r\n` it can.
        let items: Vec<Bytes> = lines
            .into_iter()
            .filter(|l| !(strip_cr && !crlf && l.last() == Some(&b'\r')))
            .map(Bytes::from)
            .collect();
        let out = round_trip(Lines::with_config(config), &items, piece);
        if crlf && !strip_cr {
            // The `\r` of the ending is then part of what is read.
            let want: Vec<Bytes> = items.iter().map(|l| Bytes::from([&l[..], b"\r"].concat())).collect();
            prop_assert_eq!(out, want);
        } else {
            prop_assert_eq!(out, items);
        }
    }
}

fn unencodable(why: Unencodable) -> Error {
    Error::Misuse(Misuse::Unencodable(why))
}

#[test]
fn lines_refuse_what_would_not_read_back() {
    let mut lines = Lines::with_config(LinesConfig::default().max_length(8).utf8(true));
    let encode =
        |lines: &mut Lines, s: &'static [u8]| lines.encode(Bytes::from_static(s)).unwrap_err();
    assert_eq!(
        encode(&mut lines, b"a\nb"),
        unencodable(Unencodable::ContainsDelimiter { offset: 1 })
    );
    assert_eq!(
        encode(&mut lines, b"123456789"),
        unencodable(Unencodable::TooLong { len: 9, max: 8 })
    );
    assert_eq!(
        encode(&mut lines, b"abc\r"),
        unencodable(Unencodable::EndsWithCr)
    );
    assert_eq!(
        encode(&mut lines, b"ab\xff"),
        unencodable(Unencodable::NotUtf8 { valid_up_to: 2 })
    );
}

#[test]
fn crlf_edge_cases_read_back() {
    // With `\r` as the delimiter, crlf adds nothing (`\r\r` would be an
    // empty line more).
    let config = LinesConfig::default()
        .delimiter(b'\r')
        .crlf(true)
        .strip_cr(false);
    let out = round_trip(Lines::with_config(config), &[Bytes::from_static(b"a")], 1);
    assert_eq!(out, ["a"]);
    // Without strip_cr the decoder keeps the `\r`: it counts in the limit.
    let config = LinesConfig::default()
        .crlf(true)
        .strip_cr(false)
        .max_length(3);
    let mut lines = Lines::with_config(config);
    assert_eq!(
        lines.encode(Bytes::from_static(b"abc")).unwrap_err(),
        unencodable(Unencodable::TooLong { len: 3, max: 2 })
    );
    assert_eq!(round_trip(lines, &[Bytes::from_static(b"ab")], 1), ["ab\r"]);
    // With strip_cr, a line of exactly the limit reads back.
    let config = LinesConfig::default().crlf(true).max_length(3);
    let items = [Bytes::from_static(b"ab\r"), Bytes::from_static(b"abc")];
    assert_eq!(round_trip(Lines::with_config(config), &items, 2), items);
}

#[test]
fn length_prefixed_refuses_what_its_field_cannot_say() {
    let one_byte = LengthConfig::default().field_width(1).unwrap();
    let mut codec = LengthPrefixed::with_config(one_byte).unwrap();
    assert_eq!(
        codec.encode(Bytes::from(vec![0; 256])).unwrap_err(),
        unencodable(Unencodable::TooLong { len: 256, max: 255 })
    );
    assert!(codec.encode(Bytes::from(vec![0; 255])).is_ok());

    let trailer = LengthConfig::default().adjustment(2);
    let mut codec = LengthPrefixed::with_config(trailer).unwrap();
    assert_eq!(
        codec.encode(Bytes::from_static(b"a")).unwrap_err(),
        unencodable(Unencodable::TooShort { len: 1, min: 2 })
    );

    let capped = LengthConfig::default().max_frame_length(3);
    let mut codec = LengthPrefixed::with_config(capped).unwrap();
    assert_eq!(
        codec.encode(Bytes::from_static(b"four")).unwrap_err(),
        unencodable(Unencodable::TooLong { len: 4, max: 3 })
    );

    let offset = LengthConfig::default().field_offset(2);
    let mut codec = LengthPrefixed::with_config(offset).unwrap();
    let err = codec.encode(Bytes::from_static(b"x")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Misuse(Misuse::InvalidConfig {
                setting: "field_offset",
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn varint_refuses_past_its_limit_and_writes_minimal_lengths() {
    let mut codec = Varint::with_config(VarintConfig::default().max_frame_length(300));
    assert_eq!(
        codec.encode(Bytes::from(vec![0; 301])).unwrap_err(),
        unencodable(Unencodable::TooLong { len: 301, max: 300 })
    );
    assert_eq!(
        codec.encode(Bytes::from(vec![0; 300])).unwrap().head(),
        b"\xac\x02"
    );
    assert_eq!(codec.encode(Bytes::new()).unwrap().head(), b"\x00");
}

#[test]
fn framing_is_inline_and_the_body_is_the_item() {
    let mut codec = LengthPrefixed::new();
    let body = Bytes::from_static(b"one");
    let frame = codec.encode(body.clone()).unwrap();
    assert_eq!(frame.head(), b"\0\0\0\x03");
    assert_eq!(frame.body().as_ptr(), body.as_ptr());
    assert!(frame.tail().is_empty());
    let mut lines = Lines::with_config(LinesConfig::default().crlf(true));
    assert_eq!(
        lines.encode(Bytes::from_static(b"x")).unwrap().tail(),
        b"\r\n"
    );
}
