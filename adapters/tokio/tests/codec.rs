//! `TokioCodec` (feature `codec`): a line in pieces is searched once, from
//! where the last search stopped, and error offsets count from the start
//! of the stream, not of the `Framed`'s buffer. The `Framed`'s buffer is
//! taken as the `Framed` sized it: however much it read ahead, and with
//! its block kept when a frame empties it.

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

/// A legal frame of `LengthPrefixed`'s largest size, then a million small
/// ones, read by a default `FramedRead`, which doubles its buffer while a
/// frame is incomplete and reads ahead into all of it: every frame comes
/// out (the lent buffer was refused for being over the receive buffer's
/// limit, and the stream failed).
#[tokio::test]
async fn a_largest_frame_followed_by_small_ones_is_read_whatever_the_framed_read_ahead() {
    use cleave_proto::LengthPrefixed;
    let body = 8 * 1024 * 1024;
    let mut input = Vec::with_capacity(17 << 20);
    input.extend_from_slice(&(body as u32).to_be_bytes());
    input.resize(4 + body, b'x');
    for _ in 0..(1 << 20) {
        input.extend_from_slice(b"\0\0\0\x02hi");
    }
    let mut framed = FramedRead::new(&input[..], TokioCodec::new(LengthPrefixed::new()));
    let first = framed.next().await.unwrap();
    assert_eq!(first.map(|f| f.len()).map_err(|e| e.to_string()), Ok(body));
    let mut small = 0;
    while let Some(frame) = framed.next().await {
        assert_eq!(&frame.unwrap()[..], b"hi");
        small += 1;
    }
    assert_eq!(small, 1 << 20);
}

/// Hands out `chunks` one a read (less when the room is smaller), and
/// records the room each read is offered.
struct Chunks {
    chunks: std::collections::VecDeque<Vec<u8>>,
    offered: Vec<usize>,
}

impl AsyncRead for Chunks {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let room = buf.remaining();
        self.offered.push(room);
        if let Some(chunk) = self.chunks.front_mut() {
            let n = room.min(chunk.len());
            buf.put_slice(&chunk[..n]);
            chunk.drain(..n);
            if chunk.is_empty() {
                self.chunks.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// The reads a `FramedRead` makes after the first frame, for `codec` over
/// one 60 KiB line and then 64 KiB of 16-byte lines in 4 KiB reads.
async fn reads_after_a_big_line<C>(codec: C) -> usize
where
    C: Decoder,
    C::Error: std::fmt::Debug,
{
    let mut big = vec![b'a'; 60 * 1024];
    big.push(b'\n');
    let mut chunks = std::collections::VecDeque::from([big]);
    for _ in 0..16 {
        chunks.push_back(b"0123456789abcde\n".repeat(256));
    }
    let reader = Chunks {
        chunks,
        offered: Vec::new(),
    };
    let mut framed = FramedRead::new(reader, codec);
    framed.next().await.unwrap().unwrap();
    let before = framed.get_ref().offered.len();
    let mut lines = 0;
    while let Some(line) = framed.next().await {
        line.unwrap();
        lines += 1;
    }
    assert_eq!(lines, 16 * 256);
    framed.get_ref().offered.len() - before
}

/// After a big line that ends a read, the `FramedRead` goes on reading
/// in sizeable pieces, as with tokio-util's `LinesCodec`: the lent
/// buffer's block is not given back when a frame empties it (the
/// `FramedRead` was then offered 8 or 16 bytes a read, a system call per
/// line, for the rest of the stream).
#[tokio::test]
async fn the_framed_read_size_holds_after_a_big_frame() {
    let peer = reads_after_a_big_line(tokio_util::codec::LinesCodec::new()).await;
    let cleave = reads_after_a_big_line(TokioCodec::new(Lines::new())).await;
    // 16 reads of 4 KiB and the end, give or take the buffer's growth.
    assert!(peer <= 64, "LinesCodec: {peer} reads");
    assert!(
        cleave <= 64,
        "{cleave} reads after the big line (LinesCodec: {peer})"
    );
}
