//! cleave's codecs as tokio-util codecs (feature `codec`), to drop into an
//! existing `Framed`.

use bytes::BytesMut;
use cleave_proto::{Bytes, Decoder, Encoder, Position, RecvBuf, RecvBufConfig};

use crate::error::ConnError;

/// A cleave codec (decoder, encoder, or both) as a
/// `tokio_util::codec::{Decoder, Encoder}`.
///
/// The `Framed`'s `BytesMut` is lent to a `RecvBuf` for each call and given
/// back, no copy, at the stream offset the codec keeps count of: offsets
/// in errors count from the start of the stream, and a decoder that notes
/// how far it searched ([`Lines`](cleave_proto::Lines)) resumes there when
/// a line arrives in pieces instead of searching it again from its start.
/// One thing differs from using cleave directly: encoding copies the frame
/// into the `Framed`'s buffer, as every tokio-util encoder does.
///
/// The count assumes one stream: give each connection its own codec, and
/// do not take bytes out of the `Framed`'s buffer behind its back.
///
/// The `Framed` owns its buffer and sizes its reads by it, so the lent
/// buffer is taken as it is: however much the `Framed` read ahead (it
/// doubles its buffer while a frame is incomplete), and its block is
/// never given back when a frame empties it (the next read would be
/// offered a few bytes). What bounds memory is the codec's own limits (a
/// line's length, a frame's length), as with tokio-util's codecs.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), cleave_tokio::ConnError> {
/// use cleave_proto::Lines;
/// use cleave_tokio::TokioCodec;
/// use futures_util::StreamExt;
/// use tokio_util::codec::FramedRead;
///
/// let input: &[u8] = b"alpha\r\nbeta\n";
/// let mut framed = FramedRead::new(input, TokioCodec::new(Lines::new()));
/// assert_eq!(&framed.next().await.unwrap()?[..], b"alpha");
/// assert_eq!(&framed.next().await.unwrap()?[..], b"beta");
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug)]
pub struct TokioCodec<C> {
    codec: C,
    config: RecvBufConfig,
    /// Where the `Framed`'s buffer stands in the stream.
    position: Position,
}

impl<C: Default> Default for TokioCodec<C> {
    fn default() -> Self {
        Self::new(C::default())
    }
}

impl<C> TokioCodec<C> {
    /// Wraps `codec`.
    pub fn new(codec: C) -> Self {
        Self {
            codec,
            config: lent_config(),
            position: Position::start(),
        }
    }

    /// The wrapped codec.
    pub fn get_ref(&self) -> &C {
        &self.codec
    }

    /// How many bytes the decoder consumed so far: the stream offset of
    /// the first byte of the `Framed`'s buffer.
    pub fn offset(&self) -> u64 {
        self.position.offset()
    }

    /// The wrapped codec.
    pub fn into_inner(self) -> C {
        self.codec
    }

    /// Runs `step` on a `RecvBuf` that holds `src`'s bytes, then gives them
    /// back.
    fn lend<T>(
        &mut self,
        src: &mut BytesMut,
        step: impl FnOnce(&mut C, &mut RecvBuf) -> Result<Option<T>, cleave_proto::Error>,
    ) -> Result<Option<T>, ConnError> {
        let lent = std::mem::take(src);
        let mut buf = match RecvBuf::from_buffer_at(lent, self.position, self.config) {
            Ok(buf) => buf,
            Err(rejected) => {
                let (error, bytes) = rejected.into_parts();
                *src = bytes;
                return Err(error.into());
            }
        };
        let result = step(&mut self.codec, &mut buf);
        self.position = buf.position();
        *src = buf.into_buffer();
        Ok(result?)
    }
}

/// The receive-buffer settings for a buffer the `Framed` owns: no limit
/// of its own (the `Framed` decides how much it reads), and no block
/// given back when it empties (the `Framed` reads into what it gets
/// back).
fn lent_config() -> RecvBufConfig {
    RecvBufConfig::default()
        .max_buffered(usize::MAX)
        .unwrap_or_default()
        .idle_capacity(usize::MAX)
        .release_when_idle(false)
}

impl<C: Decoder> tokio_util::codec::Decoder for TokioCodec<C> {
    type Item = C::Item;
    type Error = ConnError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<C::Item>, ConnError> {
        self.lend(src, |codec, buf| codec.decode(buf))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<C::Item>, ConnError> {
        self.lend(src, |codec, buf| codec.decode_eof(buf))
    }
}

impl<C: Encoder<Item = Bytes>> tokio_util::codec::Encoder<Bytes> for TokioCodec<C> {
    type Error = ConnError;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), ConnError> {
        let frame = self.codec.encode(item)?;
        dst.reserve(frame.len());
        dst.extend_from_slice(frame.head());
        dst.extend_from_slice(frame.body());
        dst.extend_from_slice(frame.tail());
        Ok(())
    }
}
