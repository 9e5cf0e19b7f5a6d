//! The `Heads` decoder (request heads as frames, as the router's HTTP
//! rules read them): its search note belongs to one stream, and a lone CR
//! is judged as its LF decides, however the bytes come.

use cleave_proto::{Decoder, Error, Heads, RecvBuf};

const HEAD: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";

/// A decoder that searched part of one stream's head, then given another
/// stream's buffer at the same offset (`RecvBuf::from_tail` after a
/// switch, a pool of buffers), starts over there: a longer note than the
/// new bytes panicked, a shorter one skipped the new head's end and gave
/// two pipelined heads as one.
#[test]
fn a_decoder_given_another_streams_buffer_starts_over() {
    let cases: [(&[u8], &[u8]); 3] = [
        (
            b"GET /a-long-path-that-is-not-finished",
            b" HTTP/1.1\r\nHost: a\r\n\r\n",
        ),
        (
            b"GET /aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b" HTTP/1.1\r\nHost: a\r\n\r\n",
        ),
        (b"GET / HTTP/1.1\r\nHost: a\r\n", b"\r\n"),
    ];
    for (unfinished, end) in cases {
        for second in [
            HEAD.to_vec(),
            [HEAD, b"GET /b HTTP/1.1\r\nHost: a\r\n\r\n"].concat(),
        ] {
            let mut heads = Heads::default();
            let mut first = RecvBuf::new();
            first.feed(unfinished).unwrap();
            assert_eq!(heads.decode(&mut first), Ok(None));

            let mut other = RecvBuf::new();
            other.feed(&second).unwrap();
            assert_eq!(first.offset(), other.offset());
            let head = heads.decode(&mut other).unwrap();
            assert_eq!(
                head.as_deref(),
                Some(HEAD),
                "{unfinished:?} then {second:?}"
            );
            // Back on the first stream, its head is found whole.
            first.feed(end).unwrap();
            let whole = [unfinished, end].concat();
            let head = heads.decode(&mut first).unwrap();
            assert_eq!(head.as_deref(), Some(&whole[..]), "{unfinished:?}");
        }
    }
}

/// The same answer for `\r\n` before a head, whole or a byte at a time,
/// even when the head's limit is one byte: the CR alone may start an
/// empty line to skip, and its LF decides.
#[test]
fn a_lone_cr_waits_for_its_lf_whatever_the_limit() {
    for max_head in [1, 2, 64] {
        for input in [
            &b"\r\n"[..],
            b"\r\n\r\nHTTP/1.1",
            b"\r\nGET / HTTP/1.1\r\n\r\n",
        ] {
            let whole = {
                let mut heads = Heads::new(max_head, 4).unwrap();
                let mut buf = RecvBuf::new();
                buf.feed(input).unwrap();
                outcome(&mut heads, &mut buf)
            };
            let mut heads = Heads::new(max_head, 4).unwrap();
            let mut buf = RecvBuf::new();
            let mut bytewise = (Vec::new(), None);
            for byte in input {
                buf.feed(&[*byte]).unwrap();
                let (frames, error) = outcome(&mut heads, &mut buf);
                bytewise.0.extend(frames);
                if error.is_some() {
                    bytewise.1 = error;
                    break;
                }
            }
            assert_eq!(bytewise, whole, "max_head {max_head}, {input:?}");
        }
    }
}

/// Every frame the decoder gives now, and its error if it stops at one.
fn outcome(heads: &mut Heads, buf: &mut RecvBuf) -> (Vec<Vec<u8>>, Option<Error>) {
    let mut frames = Vec::new();
    loop {
        match heads.decode(buf) {
            Ok(Some(frame)) => frames.push(frame.to_vec()),
            Ok(None) => return (frames, None),
            Err(e) => return (frames, Some(e)),
        }
    }
}
