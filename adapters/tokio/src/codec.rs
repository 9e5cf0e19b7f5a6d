//! cleave's codecs as tokio-util codecs (feature `codec`), to drop into an
//! existing `Framed`.

use bytes::BytesMut;
use cleave_proto::{Bytes, Decoder, Encoder, RecvBuf, RecvBufConfig};

use crate::error::ReadError;

/// A cleave codec (decoder, encoder, or both) as a
/// `tokio_util::codec::{Decoder, Encoder}`.
///
/// The `Framed`'s `BytesMut` is lent to a `RecvBuf` for each call and given
/// back, no copy. Three things differ from using cleave directly: a line
/// arriving in pieces is searched again from its start on each call (the
/// note of how far a search went lives in the `RecvBuf`); the offsets in
/// errors count from the start of the `Framed`'s buffer at that call, not
/// of the stream; and encoding copies the frame into the `Framed`'s
/// buffer, as every tokio-util encoder does.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), cleave_tokio::ReadError> {
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
#[derive(Clone, Debug, Default)]
pub struct TokioCodec<C> {
    codec: C,
    config: RecvBufConfig,
}

impl<C> TokioCodec<C> {
    /// Wraps `codec`.
    pub fn new(codec: C) -> Self {
        Self {
            codec,
            config: RecvBufConfig::default(),
        }
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
    ) -> Result<Option<T>, ReadError> {
        let mut buf = match RecvBuf::from_buffer(std::mem::take(src), self.config) {
            Ok(buf) => buf,
            Err(rejected) => {
                let (error, bytes) = rejected.into_parts();
                *src = bytes;
                return Err(error.into());
            }
        };
        let result = step(&mut self.codec, &mut buf);
        *src = buf.into_buffer();
        Ok(result?)
    }
}

impl<C: Decoder> tokio_util::codec::Decoder for TokioCodec<C> {
    type Item = C::Item;
    type Error = ReadError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<C::Item>, ReadError> {
        self.lend(src, |codec, buf| codec.decode(buf))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<C::Item>, ReadError> {
        self.lend(src, |codec, buf| codec.decode_eof(buf))
    }
}

impl<C: Encoder<Item = Bytes>> tokio_util::codec::Encoder<Bytes> for TokioCodec<C> {
    type Error = ReadError;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), ReadError> {
        let frame = self.codec.encode(item)?;
        dst.reserve(frame.len());
        dst.extend_from_slice(frame.head());
        dst.extend_from_slice(frame.body());
        dst.extend_from_slice(frame.tail());
        Ok(())
    }
}
