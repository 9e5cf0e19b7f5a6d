//! `ProstCodec` on any bytes: no panic; whole, byte-at-a-time and cut
//! input give the same messages and outcome; errors are final and consume
//! nothing; each message re-encodes to a frame prost reads back as equal.

#![no_main]

use cleave_proto::codec::message::ProstCodec;
use cleave_proto::{Decoder, Encoder, Error, RecvBuf, VarintConfig};
use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/support/harness.rs"]
mod harness;

/// A message with a field of each wire type, nested and repeated.
#[derive(Clone, PartialEq, prost::Message)]
struct Message {
    #[prost(uint64, tag = "1")]
    id: u64,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(bytes = "bytes", tag = "3")]
    payload: prost::bytes::Bytes,
    #[prost(fixed32, tag = "4")]
    flags: u32,
    #[prost(sint64, tag = "5")]
    value: i64,
    #[prost(message, repeated, tag = "6")]
    children: Vec<Message>,
}

type Run = (Vec<Message>, Result<(), Error>, Vec<u8>);

fn run(pieces: &[&[u8]], config: VarintConfig) -> Run {
    let mut codec = ProstCodec::<Message>::with_config(config);
    let mut buf = RecvBuf::new();
    let mut out = Vec::new();
    let fail =
        |codec: &mut ProstCodec<Message>, buf: &mut RecvBuf, e: Error, out, rest: &[&[u8]]| {
            let len = buf.len();
            assert_eq!(codec.decode(buf), Err(e.clone()), "error is not final");
            assert_eq!(codec.decode_eof(buf), Err(e.clone()));
            assert_eq!(buf.len(), len, "consumed after an error");
            let mut tail = match &e {
                Error::Truncated { partial, .. } => partial.to_vec(),
                _ => buf.take_tail().to_vec(),
            };
            tail.extend(rest.concat());
            (out, Err(e), tail)
        };
    for (i, piece) in pieces.iter().enumerate() {
        buf.feed(piece).unwrap();
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(m)) => out.push(m),
                Ok(None) => break,
                Err(e) => return fail(&mut codec, &mut buf, e, out, &pieces[i + 1..]),
            }
        }
    }
    loop {
        match codec.decode_eof(&mut buf) {
            Ok(Some(m)) => out.push(m),
            Ok(None) => return (out, Ok(()), Vec::new()),
            Err(e) => return fail(&mut codec, &mut buf, e, out, &[]),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&[knobs, a, b], input)) = data.split_first_chunk::<3>() else {
        return;
    };
    let config = VarintConfig::default().allow_non_minimal(knobs & 1 != 0);
    let whole = run(&[input], config);
    assert_eq!(run(&harness::pieces(input, &[1]), config), whole);
    let sizes = [usize::from(a % 64) + 1, usize::from(b % 64) + 1];
    assert_eq!(run(&harness::pieces(input, &sizes), config), whole);
    let mut codec = ProstCodec::<Message>::new();
    for message in whole.0 {
        let frame = codec.encode(message.clone()).unwrap();
        let wire = [frame.head(), &frame.body()[..]].concat();
        let back = <Message as prost::Message>::decode_length_delimited(&wire[..]).unwrap();
        assert_eq!(back, message);
    }
});
