//! Contracts of `codec::message::ProstCodec` (feature `prost`): its frames
//! are byte for byte prost's `encode_length_delimited` and what
//! protosocket-prost sends, at every varint length boundary; streams from
//! either decode to the same messages however they are cut; bad lengths are
//! refused within their 10 bytes (where protosocket-prost waits for more);
//! bad payloads are final errors that hand the frame back; `bytes::Bytes`
//! fields are views of the receive buffer.

#![cfg(feature = "prost")]

#[path = "support/harness.rs"]
mod harness;

use cleave_proto::codec::message::{BadMessage, ProstCodec};
use cleave_proto::{
    Bytes, Decoder, Encoder, Error, InvalidInput, Misuse, RecvBuf, RecvBufConfig, Unencodable,
    VarintConfig, VarintField,
};
use harness::pieces;
use proptest::prelude::*;
use prost::Message as _;
use protosocket::{Decoder as _, DeserializeError, Serialize as _};
use protosocket_prost::{ProstDecoder, ProstSerializer};

/// A message with a field of each wire shape: a varint, a string, a
/// zero-copy `bytes` field and a packed repeated field.
#[derive(Clone, PartialEq, prost::Message)]
struct Blob {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(bytes = "bytes", tag = "2")]
    data: Bytes,
    #[prost(string, tag = "3")]
    name: String,
    #[prost(uint32, repeated, tag = "4")]
    scores: Vec<u32>,
}

/// Payload lengths at which the varint length prefix changes width (and
/// their neighbours), except 1: no message encodes to one byte, since every
/// field is a key and at least one byte of value. The empty message and the
/// smallest non-empty one (2 bytes) stand for the 1-byte-prefix class.
const BOUNDARIES: [usize; 8] = [0, 2, 127, 128, 16_383, 16_384, 2_097_151, 2_097_152];

/// Bytes a varint of `n` takes.
fn varint_len(n: usize) -> usize {
    prost::encoding::encoded_len_varint(n as u64)
}

/// A `Blob` whose `encoded_len()` is exactly `target` (for any target but
/// 1), padded with its `data` field; `seed` varies the content.
fn sized(target: usize, seed: u8) -> Blob {
    if target == 0 {
        return Blob::default();
    }
    // id 0 is not encoded; 1 takes key + 1 byte; 128 takes key + 2 bytes.
    for (id, id_len) in [(0u64, 0usize), (1, 2), (128, 3)] {
        let Some(rest) = target.checked_sub(id_len) else {
            continue;
        };
        let data_len = if rest == 0 {
            Some(0)
        } else {
            // key (1 byte) + varint length + n bytes; an empty field is not
            // encoded, so n > 0.
            (1..=4).find_map(|len_len| {
                let n = rest.checked_sub(1 + len_len)?;
                (n > 0 && varint_len(n) == len_len).then_some(n)
            })
        };
        if let Some(n) = data_len {
            let data: Vec<u8> = (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
            let blob = Blob {
                id,
                data: Bytes::from(data),
                ..Blob::default()
            };
            assert_eq!(blob.encoded_len(), target);
            return blob;
        }
    }
    panic!("no Blob encodes to {target} bytes");
}

/// The messages at every boundary, in order.
fn boundary_blobs() -> Vec<Blob> {
    BOUNDARIES
        .iter()
        .enumerate()
        .map(|(i, &len)| sized(len, i as u8))
        .collect()
}

/// The wire bytes of one frame from our encoder.
fn cleave_wire(message: Blob) -> Vec<u8> {
    let frame = ProstCodec::<Blob>::new().encode(message).unwrap();
    assert!(frame.tail().is_empty());
    [frame.head(), &frame.body()[..]].concat()
}

/// Feeds `pieces` one at a time, decoding after each, then ends the stream:
/// every message, or the first error. Each successful decode consumes at
/// least one byte, so the loops end.
fn decode_pieces(pieces: &[&[u8]], config: RecvBufConfig) -> Result<Vec<Blob>, Error> {
    let mut codec = ProstCodec::<Blob>::new();
    let mut buf = RecvBuf::with_config(config);
    let mut out = Vec::new();
    for piece in pieces {
        buf.feed(piece)?;
        while let Some(message) = codec.decode(&mut buf)? {
            out.push(message);
        }
    }
    while let Some(message) = codec.decode_eof(&mut buf)? {
        out.push(message);
    }
    assert!(buf.is_empty(), "clean end with bytes left");
    Ok(out)
}

/// Decodes `input` whole, one byte at a time and in odd pieces; asserts the
/// three agree and returns the messages.
fn decode_every_way(input: &[u8]) -> Vec<Blob> {
    let config = RecvBufConfig::default();
    let whole = decode_pieces(&[input], config).unwrap();
    let bytewise = decode_pieces(&pieces(input, &[1]), config).unwrap();
    assert!(bytewise == whole, "one byte at a time differs from whole");
    let odd = decode_pieces(&pieces(input, &[1, 127, 3, 16_385, 65_537, 2]), config).unwrap();
    assert!(odd == whole, "odd pieces differ from whole");
    whole
}

#[test]
fn encoding_is_prosts_length_delimited_bytes_at_every_varint_boundary() {
    for (i, &len) in BOUNDARIES.iter().enumerate() {
        let message = sized(len, i as u8);
        assert_eq!(message.encoded_len(), len);
        let frame = ProstCodec::<Blob>::new().encode(message.clone()).unwrap();
        assert_eq!(frame.head().len(), varint_len(len), "prefix width at {len}");
        assert_eq!(frame.body().len(), len);
        let ours = [frame.head(), &frame.body()[..]].concat();
        assert!(
            ours == message.encode_length_delimited_to_vec(),
            "bytes differ from prost at {len}"
        );
    }
}

#[test]
fn prost_and_protosocket_streams_decode_to_the_same_messages_however_cut() {
    let messages = boundary_blobs();
    let mut from_prost = Vec::new();
    let mut from_protosocket = Vec::new();
    let mut serializer = ProstSerializer::<Blob>::default();
    for message in &messages {
        message.encode_length_delimited(&mut from_prost).unwrap();
        serializer.serialize_into_buffer(message.clone(), &mut from_protosocket);
    }
    assert!(from_prost == from_protosocket, "the two writers differ");
    assert!(decode_every_way(&from_prost) == messages);
    assert!(decode_every_way(&from_protosocket) == messages);
}

#[test]
fn our_frames_decode_with_protosocket_prost_and_prost() {
    let messages = boundary_blobs();
    let wire: Vec<u8> = messages.iter().cloned().flat_map(cleave_wire).collect();

    let mut decoder = ProstDecoder::<Blob>::default();
    let mut rest = &wire[..];
    let mut theirs = Vec::new();
    while !rest.is_empty() {
        let (consumed, message) = decoder.decode(rest).unwrap();
        assert!(consumed > 0 && consumed <= rest.len());
        theirs.push(message);
        rest = &rest[consumed..];
    }
    assert!(theirs == messages, "protosocket-prost read other messages");

    let mut rest = &wire[..];
    let mut prosts = Vec::new();
    while !rest.is_empty() {
        prosts.push(Blob::decode_length_delimited(&mut rest).unwrap());
    }
    assert!(prosts == messages, "prost read other messages");
}

/// Feeds `bad` one byte at a time: nothing until its 10th byte, then the
/// varint error pointing at that byte, final, with the bytes kept.
fn assert_refused_at_tenth_byte(bad: &[u8], field: VarintField) {
    let mut codec = ProstCodec::<Blob>::new();
    let mut buf = RecvBuf::new();
    for (i, byte) in bad[..9].iter().enumerate() {
        buf.feed(&[*byte]).unwrap();
        assert_eq!(codec.decode(&mut buf), Ok(None), "answered at byte {i}");
    }
    buf.feed(&bad[9..10]).unwrap();
    let expected = Error::InvalidInput {
        kind: InvalidInput::Varint(field),
        offset: 9,
    };
    assert_eq!(codec.decode(&mut buf), Err(expected.clone()));
    buf.feed(&bad[10..]).unwrap();
    assert_eq!(codec.decode(&mut buf), Err(expected.clone()));
    assert_eq!(codec.decode_eof(&mut buf), Err(expected));
    assert_eq!(&buf.take_tail()[..], bad);
    assert_eq!(codec.take_bad_message(), None);
}

#[test]
fn malformed_length_is_an_error_by_its_tenth_byte_where_protosocket_waits() {
    let too_long = [0x80u8; 11];
    let mut overflow = vec![0xffu8; 9];
    overflow.extend_from_slice(&[0x02, 0x00]);

    assert_refused_at_tenth_byte(&too_long, VarintField::TooLong);
    assert_refused_at_tenth_byte(&overflow, VarintField::Overflow);

    // The documented difference: protosocket-prost cannot tell a bad length
    // from a short one, and asks for more bytes, however many it has.
    for bad in [&too_long[..], &overflow[..]] {
        for len in [9, 10, bad.len()] {
            let answer = ProstDecoder::<Blob>::default().decode(&bad[..len]);
            assert!(
                matches!(
                    answer,
                    Err(DeserializeError::IncompleteBuffer {
                        next_message_size: 10
                    })
                ),
                "protosocket-prost on {len} bytes of {bad:02x?}: {answer:?}"
            );
        }
    }
}

/// `good`, a frame whose payload is not a `Blob`, and `good` again: the
/// first decodes, the second is a final `InvalidInput::Message` at its
/// offset, `take_bad_message` hands it back once, and the third stays in
/// the buffer.
fn assert_bad_payload_is_final(payload: &[u8]) {
    let good = sized(300, 7);
    let good_wire = good.encode_length_delimited_to_vec();
    let mut bad_wire = Vec::new();
    prost::encode_length_delimiter(payload.len(), &mut bad_wire).unwrap();
    bad_wire.extend_from_slice(payload);
    let input = [&good_wire[..], &bad_wire, &good_wire].concat();
    let prosts_error = Blob::decode(payload).unwrap_err();

    let mut codec = ProstCodec::<Blob>::new();
    let mut buf = RecvBuf::new();
    buf.feed(&input).unwrap();
    assert!(codec.decode(&mut buf).unwrap() == Some(good.clone()));
    let offset = good_wire.len() as u64;
    let expected = Error::InvalidInput {
        kind: InvalidInput::Message,
        offset,
    };
    assert_eq!(codec.decode(&mut buf), Err(expected.clone()));

    // Final: the same error, nothing more consumed.
    let (len, at) = (buf.len(), buf.offset());
    assert_eq!(codec.decode(&mut buf), Err(expected.clone()));
    assert_eq!(codec.decode_eof(&mut buf), Err(expected));
    assert_eq!((buf.len(), buf.offset()), (len, at));

    assert_eq!(
        codec.take_bad_message(),
        Some(BadMessage {
            error: prosts_error,
            payload: Bytes::copy_from_slice(payload),
            offset,
        })
    );
    assert_eq!(codec.take_bad_message(), None);
    assert_eq!(&buf.take_tail()[..], &good_wire[..]);
}

#[test]
fn payload_with_a_truncated_varint_field_is_a_final_message_error() {
    // Field 1 (a varint) whose value stops after a continuation byte.
    assert_bad_payload_is_final(&[0x08, 0x80]);
}

#[test]
fn payload_with_wire_type_seven_is_a_final_message_error() {
    // Field 1, wire type 7: no such wire type.
    assert_bad_payload_is_final(&[0x0f]);
}

#[test]
fn bytes_fields_are_views_of_the_receive_buffer() {
    let message = Blob {
        id: 9,
        data: Bytes::from(vec![0x5a; 4096]),
        ..Blob::default()
    };
    let wire = cleave_wire(message.clone());
    // The message's length (2 bytes: it is 4101), id (2 bytes), data's key
    // (1 byte) and length (2 bytes), then the data.
    let data_at = 2 + 2 + 1 + 2;
    assert_eq!(&wire[data_at..], &message.data[..]);

    let mut buf = RecvBuf::new();
    buf.feed(&wire).unwrap();
    let base = buf.peek().as_ptr() as usize;
    let end = base + buf.len();
    let decoded = ProstCodec::<Blob>::new().decode(&mut buf).unwrap().unwrap();
    assert!(decoded == message);
    let ptr = decoded.data.as_ptr() as usize;
    assert_eq!(
        ptr,
        base + data_at,
        "the field is not at its place in the buffer"
    );
    assert!(ptr + decoded.data.len() <= end);

    // The same with frames copied out: the field is then elsewhere, which
    // is what the assertion above would catch.
    let config = RecvBufConfig::default().copy_frames_up_to(8192);
    let mut buf = RecvBuf::with_config(config);
    buf.feed(&wire).unwrap();
    let base = buf.peek().as_ptr() as usize;
    let end = base + buf.len();
    let copied = ProstCodec::<Blob>::new().decode(&mut buf).unwrap().unwrap();
    assert!(copied == message);
    let ptr = copied.data.as_ptr() as usize;
    assert!(
        !(base..end).contains(&ptr),
        "a copied frame still in the buffer"
    );
}

#[test]
fn message_over_the_frame_limit_is_refused_by_the_encoder() {
    let mut codec = ProstCodec::<Blob>::with_config(VarintConfig::default().max_frame_length(10));
    assert_eq!(
        codec.encode(sized(20, 0)).unwrap_err(),
        Error::Misuse(Misuse::Unencodable(Unencodable::TooLong {
            len: 20,
            max: 10
        }))
    );
    // At the limit it encodes.
    let at_limit = sized(10, 0);
    let frame = codec.encode(at_limit.clone()).unwrap();
    assert_eq!(
        [frame.head(), &frame.body()[..]].concat(),
        at_limit.encode_length_delimited_to_vec()
    );
}

#[test]
fn end_of_stream_inside_a_frame_is_truncated_with_the_partial_bytes() {
    let first = sized(200, 1).encode_length_delimited_to_vec();
    let second = sized(300, 2).encode_length_delimited_to_vec();
    for cut in [1, 2, 5, second.len() - 1] {
        let partial = &second[..cut];
        let mut codec = ProstCodec::<Blob>::new();
        let mut buf = RecvBuf::new();
        buf.feed(&first).unwrap();
        buf.feed(partial).unwrap();
        assert!(codec.decode(&mut buf).unwrap() == Some(sized(200, 1)));
        assert_eq!(codec.decode(&mut buf), Ok(None));
        let expected = Error::Truncated {
            partial: Bytes::copy_from_slice(partial),
            offset: first.len() as u64,
        };
        assert_eq!(codec.decode_eof(&mut buf), Err(expected.clone()));
        assert!(buf.is_empty());
        assert_eq!(codec.decode_eof(&mut buf), Err(expected.clone()));
        assert_eq!(codec.decode(&mut buf), Err(expected));
        assert_eq!(codec.take_bad_message(), None);
    }
}

fn blob_strategy() -> impl Strategy<Value = Blob> {
    let data = prop_oneof![
        4 => prop::collection::vec(any::<u8>(), 0..200),
        1 => prop::collection::vec(any::<u8>(), 16_300..16_500),
    ];
    (
        any::<u64>(),
        data,
        "\\PC{0,24}",
        prop::collection::vec(any::<u32>(), 0..8),
    )
        .prop_map(|(id, data, name, scores)| Blob {
            id,
            data: Bytes::from(data),
            name,
            scores,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Any list of messages: our frames are prost's bytes, and they decode
    /// back to the list whatever the pieces.
    #[test]
    fn random_messages_round_trip_as_prost_bytes_whatever_the_pieces(
        messages in prop::collection::vec(blob_strategy(), 0..8),
        sizes in prop::collection::vec(prop_oneof![1usize..16, 1usize..5000], 1..6),
    ) {
        let ours: Vec<u8> = messages.iter().cloned().flat_map(cleave_wire).collect();
        let prosts: Vec<u8> = messages
            .iter()
            .flat_map(|m| m.encode_length_delimited_to_vec())
            .collect();
        prop_assert!(ours == prosts, "bytes differ from prost");
        let decoded = decode_pieces(&pieces(&ours, &sizes), RecvBufConfig::default());
        prop_assert!(decoded == Ok(messages));
    }
}

/// A message nested in itself.
#[derive(Clone, PartialEq, prost::Message)]
struct Node {
    #[prost(message, optional, boxed, tag = "1")]
    child: Option<Box<Node>>,
}

/// The payload of a `Node` with `depth` nested children.
fn nested(depth: usize) -> Vec<u8> {
    let mut payload = Vec::new();
    for _ in 0..depth {
        let mut outer = vec![0x0a];
        prost::encode_length_delimiter(payload.len(), &mut outer).unwrap();
        outer.extend_from_slice(&payload);
        payload = outer;
    }
    payload
}

/// prost's nesting budget: a message nested 99 deep is taken by both, one
/// nested 101 deep refused by both (a final `InvalidInput::Message`). At
/// exactly 100 they differ, as `ProstCodec`'s docs say: protosocket-prost
/// spends a level on the frame's length.
#[test]
fn nesting_past_prosts_budget_is_refused() {
    for depth in 95..=101 {
        let payload = nested(depth);
        let mut wire = Vec::new();
        prost::encode_length_delimiter(payload.len(), &mut wire).unwrap();
        wire.extend_from_slice(&payload);

        let theirs = ProstDecoder::<Node>::default().decode(&wire[..]).is_ok();
        assert_eq!(theirs, depth < 100, "depth {depth}");

        let mut buf = RecvBuf::new();
        buf.feed(&wire).unwrap();
        let ours = ProstCodec::<Node>::new().decode(&mut buf);
        assert_eq!(ours.is_ok(), depth <= 100, "depth {depth}: {ours:?}");
        if let Err(e) = ours {
            assert_eq!(
                e,
                Error::InvalidInput {
                    kind: InvalidInput::Message,
                    offset: 0
                }
            );
        }
    }
}
