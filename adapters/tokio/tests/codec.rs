//! `TokioCodec` (feature `codec`): a line in pieces is searched once, from
//! where the last search stopped, and error offsets count from the start
//! of the stream, not of the `Framed`'s buffer.

#![cfg(feature = "codec")]

use cleave_proto::{BytesMut, Error, Limit, Lines, LinesConfig};
use cleave_tokio::{ConnError, TokioCodec};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::StreamExt;
use tokio::io::{AsyncRead, ReadBuf};
use tokio_util::codec::{Decoder, FramedRead};

#[test]
fn a_line_in_pieces_is_searched_on_from_where_the_last_search_stopped() {
    let mut codec = TokioCodec::new(Lines::new());
    let mut buf = BytesMut::from(&b"abcd"[..]);
    assert!(codec.decode(&mut buf).unwrap().is_none());
    // A delimiter written behind the decoder's back into the bytes it has
    // searched: a search from the start would stop there.
    buf[1] = b'\n';
    buf.extend_from_slice(b"ef\n");
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap(), "a\ncdef");
    assert!(buf.is_empty());
    assert_eq!(codec.offset(), 7);
    // The next line is searched from its own start.
    buf.extend_from_slice(b"g\nh");
    assert_eq!(codec.decode(&mut buf).unwrap().unwrap(), "g");
    assert_eq!(codec.offset(), 9);
    assert_eq!(&buf[..], b"h");
}

#[tokio::test]
async fn error_offsets_count_from_the_start_of_the_stream() {
    let mut input = b"one\ntwo\n".to_vec();
    input.extend_from_slice(&[b'x'; 32]);
    input.push(b'\n');
    let lines = Lines::with_config(LinesConfig::default().max_length(10));
    // Small reads: the `Framed`'s buffer starts at a new offset each time.
    let reader = in_pieces(&input, 3);
    let mut framed = FramedRead::new(reader, TokioCodec::new(lines));
    assert_eq!(framed.next().await.unwrap().unwrap(), "one");
    assert_eq!(framed.next().await.unwrap().unwrap(), "two");
    match framed.next().await.unwrap() {
        Err(ConnError::Protocol(Error::LimitExceeded { limit, offset, .. })) => {
            assert_eq!((limit, offset), (Limit::LineLength, 8));
        }
        other => panic!("{other:?}"),
    }
}

/// `input`, handed out `step` bytes a read.
fn in_pieces(input: &[u8], step: usize) -> impl AsyncRead + Unpin {
    Trickle {
        data: input.to_vec(),
        at: 0,
        step,
    }
}

struct Trickle {
    data: Vec<u8>,
    at: usize,
    step: usize,
}

impl AsyncRead for Trickle {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let end = (self.at + self.step)
            .min(self.data.len())
            .min(self.at + buf.remaining());
        buf.put_slice(&self.data[self.at..end]);
        self.at = end;
        Poll::Ready(Ok(()))
    }
}
