//! Contracts of `LengthConfig::messagepack` and of magic markers: frames
//! protosocket-messagepack writes decode to its MessagePack values however
//! they are cut; our frames are its bytes and decode with its decoder; a
//! frame that does not start with `0xce` is refused at that byte, as soon
//! as it arrives; magic configurations are checked and work both ways.

#![cfg(feature = "std")]

#[path = "support/harness.rs"]
mod harness;

use bytes::Buf as _;
use cleave_proto::{
    Bytes, Decoder, Encoder, Error, InvalidInput, LengthConfig, LengthPrefixed, Misuse, RecvBuf,
    RecvBufConfig,
};
use harness::{assert_chunking_invariant, Placement};
use protosocket::{Decoder as _, Encoder as _, Serialize as _};
use protosocket_messagepack::{MessagePackDecoder, MessagePackSerializer};
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Record {
    id: u64,
    name: String,
    tags: Vec<String>,
    payload: Vec<u8>,
    score: Option<f64>,
}

/// A record whose MessagePack encoding is at least `min` bytes.
fn record(id: u64, min: usize) -> Record {
    let record = Record {
        id,
        name: "x".repeat(min),
        tags: vec!["alpha".into(), format!("tag-{id}")],
        payload: (0..=id as u8).collect(),
        score: (id % 2 == 0).then_some(id as f64 / 3.0),
    };
    assert!(rmp_serde::to_vec(&record).unwrap().len() >= min);
    record
}

/// Records whose bodies need a fixstr, str8, str16 and str32 name: small,
/// over 255 and over 65 535 bytes.
fn records() -> Vec<Record> {
    vec![
        record(0, 0),
        record(1, 20),
        record(2, 300),
        record(3, 70_000),
        record(4, 5),
    ]
}

fn messagepack() -> LengthPrefixed {
    LengthPrefixed::with_config(LengthConfig::messagepack()).unwrap()
}

/// What protosocket-messagepack's serializer writes for `record`.
fn serialized(record: &Record) -> Vec<u8> {
    let mut out = Vec::new();
    MessagePackSerializer::<Record>::default().serialize_into_buffer(record.clone(), &mut out);
    out
}

/// The wire bytes of our frame of `record`'s MessagePack encoding.
fn cleave_wire(record: &Record) -> Vec<u8> {
    let body = Bytes::from(rmp_serde::to_vec(record).unwrap());
    let frame = messagepack().encode(body).unwrap();
    assert!(frame.tail().is_empty());
    [frame.head(), &frame.body()[..]].concat()
}

#[test]
fn protosocket_frames_decode_to_equal_values_however_cut() {
    let records = records();
    // Through both of protosocket's entry points: the serializer and the
    // `Encoder` every `Serialize` is.
    let mut input = Vec::new();
    let mut encoder = MessagePackSerializer::<Record>::default();
    for (i, record) in records.iter().enumerate() {
        if i % 2 == 0 {
            input.extend_from_slice(&serialized(record));
        } else {
            let mut out = encoder.encode(record.clone());
            input.extend_from_slice(&out.copy_to_bytes(out.remaining()));
        }
    }
    let run = assert_chunking_invariant(
        messagepack,
        RecvBufConfig::default(),
        &input,
        &[7, 300, 65_537, 1, 5],
        Placement::Tail,
    );
    assert_eq!(run.outcome, Ok(()));
    let bodies = run.frames();
    assert_eq!(bodies.len(), records.len());
    for (body, record) in bodies.iter().zip(&records) {
        assert_eq!(&rmp_serde::from_slice::<Record>(body).unwrap(), record);
    }
    // The large body needs every byte of the u32 length.
    assert!(bodies[3].len() > 65_535);
    assert!(bodies[2].len() > 255);
}

#[test]
fn our_frames_are_protosocket_bytes_and_decode_with_its_decoder() {
    let records = records();
    for record in &records {
        let ours = cleave_wire(record);
        assert_eq!(ours[0], 0xce);
        assert!(
            ours == serialized(record),
            "bytes differ for record {}",
            record.id
        );
        let (consumed, value) = MessagePackDecoder::<Record>::default()
            .decode(&ours[..])
            .unwrap();
        assert_eq!((consumed, &value), (ours.len(), record));
    }

    // A stream of them, frame after frame.
    let wire: Vec<u8> = records.iter().flat_map(cleave_wire).collect();
    let mut decoder = MessagePackDecoder::<Record>::default();
    let mut rest = &wire[..];
    let mut theirs = Vec::new();
    while !rest.is_empty() {
        let (consumed, value) = decoder.decode(rest).unwrap();
        assert!(consumed > 0 && consumed <= rest.len());
        theirs.push(value);
        rest = &rest[consumed..];
    }
    assert_eq!(theirs, records);
}

#[test]
fn frame_without_the_marker_is_refused_at_its_first_byte() {
    let good = cleave_wire(&record(1, 10));
    // 0xcf is a MessagePack uint64, 0x05 a positive fixint, 0xcd a uint16.
    for first in [0xcfu8, 0x05, 0xcd] {
        let mut frames = messagepack();
        let mut buf = RecvBuf::new();
        buf.feed(&good).unwrap();
        assert!(frames.decode(&mut buf).unwrap().is_some());
        buf.feed(&[first]).unwrap();
        let expected = Error::InvalidInput {
            kind: InvalidInput::Magic,
            offset: good.len() as u64,
        };
        assert_eq!(frames.decode(&mut buf), Err(expected.clone()));
        // Final, and the bytes stay.
        buf.feed(&[0, 0, 0, 1, 0xc3]).unwrap();
        assert_eq!(frames.decode(&mut buf), Err(expected.clone()));
        assert_eq!(frames.decode_eof(&mut buf), Err(expected));
        assert_eq!(&buf.take_tail()[..], &[first, 0, 0, 0, 1, 0xc3]);
    }
}

#[test]
fn frame_without_the_marker_is_refused_however_cut() {
    let good = cleave_wire(&record(2, 400));
    let mut input = good.clone();
    input.extend_from_slice(&[0xcf, 0, 0, 0, 1, 0xc3]);
    let run = assert_chunking_invariant(
        messagepack,
        RecvBufConfig::default(),
        &input,
        &[3, 100],
        Placement::Tail,
    );
    assert_eq!(run.frames(), vec![Bytes::copy_from_slice(&good[5..])]);
    assert_eq!(
        run.outcome,
        Err(Error::InvalidInput {
            kind: InvalidInput::Magic,
            offset: good.len() as u64,
        })
    );
    assert_eq!(run.rest, [0xcf, 0, 0, 0, 1, 0xc3]);
}

#[test]
fn magic_longer_than_the_field_offset_is_an_invalid_config() {
    let config = LengthConfig::default().magic(&[1, 2]).field_offset(1);
    assert!(matches!(
        LengthPrefixed::with_config(config),
        Err(Error::Misuse(Misuse::InvalidConfig {
            setting: "field_offset",
            value: 1,
            ..
        }))
    ));
    // The magic alone raises the offset to its length: a valid config
    // that writes and checks the magic.
    let config = LengthConfig::default().magic(&[1]);
    assert_eq!(config.header_len(), 5);
    let mut codec = LengthPrefixed::with_config(config).unwrap();
    let frame = codec.encode(Bytes::from_static(b"x")).unwrap();
    assert_eq!(frame.head(), b"\x01\0\0\0\x01");
}

#[test]
fn two_byte_magic_is_written_by_the_encoder_and_checked_by_the_decoder() {
    let config = LengthConfig::default().magic(b"CL").field_offset(2);
    let mut codec = LengthPrefixed::with_config(config).unwrap();
    let frame = codec.encode(Bytes::from_static(b"hello")).unwrap();
    assert_eq!(frame.head(), b"CL\0\0\0\x05");
    let wire = [frame.head(), &frame.body()[..]].concat();

    let run = assert_chunking_invariant(
        || LengthPrefixed::with_config(config).unwrap(),
        RecvBufConfig::default(),
        &[&wire[..], &wire[..]].concat(),
        &[2, 5],
        Placement::Tail,
    );
    assert_eq!(run.outcome, Ok(()));
    assert_eq!(run.frames(), vec![Bytes::from_static(b"hello"); 2]);

    // A first byte that matches waits; a second that differs is refused at
    // its own offset.
    let mut decoder = LengthPrefixed::with_config(config).unwrap();
    let mut buf = RecvBuf::new();
    buf.feed(&wire).unwrap();
    assert_eq!(
        decoder.decode(&mut buf).unwrap().as_deref(),
        Some(&b"hello"[..])
    );
    buf.feed(b"C").unwrap();
    assert_eq!(decoder.decode(&mut buf), Ok(None));
    buf.feed(b"X").unwrap();
    let expected = Error::InvalidInput {
        kind: InvalidInput::Magic,
        offset: wire.len() as u64 + 1,
    };
    assert_eq!(decoder.decode(&mut buf), Err(expected.clone()));
    assert_eq!(decoder.decode(&mut buf), Err(expected));
    assert_eq!(&buf.take_tail()[..], b"CX");
}

#[test]
fn magic_with_other_bytes_before_the_field_decodes_but_does_not_encode() {
    // A 2-byte magic, a type byte the caller frames, then the length.
    let config = LengthConfig::default().magic(b"CL").field_offset(3);
    let mut codec = LengthPrefixed::with_config(config).unwrap();
    let mut buf = RecvBuf::new();
    buf.feed(b"CL\x07\0\0\0\x02hi").unwrap();
    assert_eq!(codec.decode(&mut buf).unwrap().as_deref(), Some(&b"hi"[..]));
    assert!(matches!(
        codec.encode(Bytes::from_static(b"hi")),
        Err(Error::Misuse(Misuse::InvalidConfig {
            setting: "field_offset",
            value: 3,
            ..
        }))
    ));
}
