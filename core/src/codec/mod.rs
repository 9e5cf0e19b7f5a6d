//! The framing codecs, one file each.
//!
//! | codec                                     | frame                          |
//! |-------------------------------------------|--------------------------------|
//! | [`Lines`](lines::Lines)                   | bytes up to a delimiter        |
//! | [`LengthPrefixed`](length::LengthPrefixed)| a 1-8 byte length field + body |
//! | [`Varint`](varint::Varint)                | a LEB128 length + body         |
//! | [`Heads`](heads::Heads)                   | an HTTP/1.x request head       |

pub mod heads;
pub mod length;
pub mod lines;
pub mod varint;
