//! [`HeadSlice`]: a request or response head whose parts are borrowed,
//! written straight into the write queue's run buffer when it is pushed.

use bytes::BytesMut;

use crate::error::{Error, Refusal, Rejected};
use crate::http1::encode::{check_request, check_response, write_request, write_response};
use crate::http1::head::Body;
use crate::write::{Lane, Push, Ticket, WriteQueue};

/// A head to push, checked already, whose parts are still the caller's:
/// from [`response_slice`] or [`request_slice`].
///
/// Pushed, it is written into the lane's run buffer: the caller's bytes
/// are copied once, into the queue, and no [`Bytes`](bytes::Bytes) is
/// made or dropped. [`response_into`](crate::http1::response_into) and a
/// push of the result copy a head twice (into the caller's buffer, then,
/// below [`coalesce_below`](crate::WriteQueueConfig::coalesce_below), into
/// the queue's). A refused push gives the head back, to push again.
#[derive(Clone, Copy, Debug)]
#[must_use = "a head does nothing until it is pushed"]
pub struct HeadSlice<'a> {
    line: Line<'a>,
    headers: &'a [(&'a str, &'a [u8])],
    body: Body,
    len: usize,
}

#[derive(Clone, Copy, Debug)]
enum Line<'a> {
    Request { method: &'a str, target: &'a str },
    Response { status: u16, reason: &'a str },
}

/// [`response`](crate::http1::response), checked now and written when it
/// is pushed: straight into the write queue, with no buffer of the
/// caller's between.
///
/// ```
/// use cleave_proto::http1::{response_slice, Body, Server};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let mut conn = Conn::new(Server::new(), Duration::ZERO);
/// conn.push(response_slice(200, "OK", &[("Content-Type", b"text/plain")], Body::Length(5))?)?;
/// conn.push(&b"hello"[..])?;
/// let mut wire = Vec::new();
/// while let Some(chunk) = conn.poll_transmit_chunk() {
///     wire.extend_from_slice(&chunk);
///     conn.handle_written(chunk.len(), Duration::ZERO)?;
/// }
/// assert_eq!(wire, b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
///
/// As [`response`](crate::http1::response).
#[inline]
pub fn response_slice<'a>(
    status: u16,
    reason: &'a str,
    headers: &'a [(&'a str, &'a [u8])],
    body: Body,
) -> Result<HeadSlice<'a>, Error> {
    let (body, len) = check_response(status, reason, headers, body)?;
    Ok(HeadSlice {
        line: Line::Response { status, reason },
        headers,
        body,
        len,
    })
}

/// [`request`](crate::http1::request), checked now and written when it
/// is pushed: straight into the write queue, with no buffer of the
/// caller's between.
///
/// ```
/// use cleave_proto::http1::{request_slice, Body};
///
/// let head = request_slice("GET", "/", &[("Host", b"example.com")], Body::Empty)?;
/// assert_eq!(head.len(), "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n".len());
/// assert!(request_slice("GET", "/", &[], Body::Empty).is_err()); // no Host
/// # Ok::<(), cleave_proto::Error>(())
/// ```
///
/// # Errors
///
/// As [`request`](crate::http1::request).
pub fn request_slice<'a>(
    method: &'a str,
    target: &'a str,
    headers: &'a [(&'a str, &'a [u8])],
    body: Body,
) -> Result<HeadSlice<'a>, Error> {
    let len = check_request(method, target, headers, body)?;
    Ok(HeadSlice {
        line: Line::Request { method, target },
        headers,
        body,
        len,
    })
}

impl HeadSlice<'_> {
    /// The bytes the head takes on the wire.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it takes none: never (a head has at least its first line).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How the body after it is framed.
    #[must_use]
    pub fn body(&self) -> Body {
        self.body
    }

    /// Writes the head at the end of `out`: exactly [`len`](Self::len)
    /// bytes.
    #[inline(always)]
    fn fill(self, out: &mut BytesMut) {
        match self.line {
            Line::Request { method, target } => {
                write_request(out, method, target, self.headers, self.body, self.len);
            }
            Line::Response { status, reason } => {
                write_response(out, status, reason, self.headers, self.body, self.len);
            }
        }
    }
}

impl Push for HeadSlice<'_> {
    #[inline(always)]
    fn push_into(
        self,
        queue: &mut WriteQueue,
        lane: Lane,
    ) -> Result<Ticket, Rejected<Self, Refusal>> {
        let len = self.len;
        queue.push_filled(lane, self, len, Self::fill)
    }

    fn wire_len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http1::{request, response};
    use crate::write::WriteQueueConfig;

    type Fields<'a> = &'a [(&'a str, &'a [u8])];

    /// What the queue holds, in order.
    fn drained(queue: &mut WriteQueue) -> Vec<u8> {
        let mut chunks = Vec::new();
        queue.chunks_owned(&mut chunks, usize::MAX);
        let wire = chunks.concat();
        queue.advance(wire.len()).unwrap();
        assert!(queue.is_empty());
        wire
    }

    #[test]
    fn writes_what_the_buffered_encoders_write() {
        let fields: &[(&str, &[u8])] = &[("Host", b"example.com"), ("Accept", b"*/*")];
        let responses = [
            (200, "OK", &[][..], Body::Length(5)),
            (200, "OK", fields, Body::Chunked),
            (204, "No Content", fields, Body::Empty),
            (404, "", &[][..], Body::Empty),
            (200, "OK", fields, Body::UntilClose),
            (
                101,
                "Switching Protocols",
                &[("Upgrade", &b"websocket"[..])][..],
                Body::Empty,
            ),
            (999, "x", &[][..], Body::Length(u64::MAX)),
        ];
        for (status, reason, headers, body) in responses {
            let slice = response_slice(status, reason, headers, body).unwrap();
            let whole = response(status, reason, headers, body).unwrap();
            assert_eq!(slice.len(), whole.len());
            let mut queue = WriteQueue::new();
            queue.push_to(Lane::Bulk, slice).unwrap();
            assert_eq!(drained(&mut queue), whole, "{status} {reason}");
        }
        let requests = [
            ("GET", "/", fields, Body::Empty),
            ("POST", "/upload?a=b", fields, Body::Length(12_345)),
            ("PUT", "http://example.com/x", fields, Body::Chunked),
            (
                "CONNECT",
                "example.com:443",
                &[("Host", &b"example.com:443"[..])][..],
                Body::Empty,
            ),
        ];
        for (method, target, headers, body) in requests {
            let slice = request_slice(method, target, headers, body).unwrap();
            let whole = request(method, target, headers, body).unwrap();
            assert_eq!(slice.len(), whole.len());
            let mut queue = WriteQueue::new();
            queue.push_to(Lane::Bulk, slice).unwrap();
            assert_eq!(drained(&mut queue), whole, "{method} {target}");
        }
    }

    #[test]
    fn refuses_what_the_buffered_encoders_refuse() {
        let cases: [(u16, &str, Fields<'_>, Body); 5] = [
            (99, "x", &[], Body::Empty),
            (200, "O\r\nK", &[], Body::Empty),
            (200, "OK", &[("X", b"a\r\nEvil: 1")], Body::Empty),
            (200, "OK", &[("Content-Length", b"5")], Body::Length(5)),
            (304, "Not Modified", &[], Body::Length(3)),
        ];
        for (status, reason, headers, body) in cases {
            assert_eq!(
                response_slice(status, reason, headers, body).unwrap_err(),
                response(status, reason, headers, body).unwrap_err(),
            );
        }
        let requests: [(&str, &str, Fields<'_>, Body); 4] = [
            ("GET", "/", &[], Body::Empty),
            ("GE T", "/", &[("Host", b"a")], Body::Empty),
            ("GET", "/", &[("Host", b"a"), ("Host", b"b")], Body::Empty),
            ("CONNECT", "a:1", &[("Host", b"a:1")], Body::Length(1)),
        ];
        for (method, target, headers, body) in requests {
            assert_eq!(
                request_slice(method, target, headers, body).unwrap_err(),
                request(method, target, headers, body).unwrap_err(),
            );
        }
    }

    #[test]
    fn a_refused_push_gives_the_head_back_and_changes_nothing() {
        let config = WriteQueueConfig::default().max_items(1).unwrap();
        let mut queue = WriteQueue::with_config(config);
        let head = response_slice(200, "OK", &[], Body::Length(5)).unwrap();
        queue.push_to(Lane::Bulk, head).unwrap();
        let refused = queue.push_to(Lane::Bulk, head).unwrap_err();
        assert_eq!((queue.len(), queue.items()), (head.len(), 1));
        assert_eq!(
            drained(&mut queue),
            response(200, "OK", &[], Body::Length(5)).unwrap()
        );
        let (_, back) = refused.into_parts();
        assert_eq!(back.len(), head.len());
        assert_eq!(back.body(), Body::Length(5));
    }
}
