//! The framing codecs, one file each.
//!
//! | codec                                     | frame                          |
//! |-------------------------------------------|--------------------------------|
//! | [`Lines`](lines::Lines)                   | bytes up to a delimiter        |
//! | [`LengthPrefixed`](length::LengthPrefixed)| a 1-8 byte length field + body |
//! | [`Varint`](varint::Varint)                | a LEB128 length + body         |
//! | [`Heads`](heads::Heads)                   | an HTTP/1.x request head       |
//! | [`Checked`](checked::Checked)             | u32 LE length + checksum + body |
//!
//! On top of a codec, a typed layer: `message::ProstCodec` (feature
//! `prost`) decodes and encodes prost messages over [`Varint`](varint::Varint)
//! frames.

pub mod checked;
pub(crate) mod checksum;
pub mod heads;
pub mod length;
pub mod lines;
#[cfg(feature = "prost")]
pub mod message;
pub mod varint;
