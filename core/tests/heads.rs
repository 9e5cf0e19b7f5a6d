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

/// Empty lines before a head count toward `max_head` on their own, as for
/// a `Server` with the same limit: both refuse at the same line, at the
/// same offset, whole or a byte at a time; one fewer line is taken.
#[test]
fn empty_lines_before_a_head_count_toward_max_head_as_for_the_server() {
    use cleave_proto::http1::{Http1Config, Server};
    use cleave_proto::{Conn, Limit};
    use std::time::Duration;

    let t0 = Duration::ZERO;
    for (lines, refused) in [(32, false), (33, true), (100, true)] {
        let mut input = b"\r\n".repeat(lines);
        input.extend_from_slice(HEAD);
        let config = Http1Config::default()
            .max_head(64)
            .unwrap()
            .max_headers(16)
            .unwrap();
        let mut server = Conn::new(Server::with_config(config), t0);
        server.feed(&input, t0).unwrap();
        let served = server.poll_event();

        for step in [input.len(), 1] {
            let mut heads = Heads::new(64, 16).unwrap();
            let mut buf = RecvBuf::new();
            let mut result = (Vec::new(), None);
            for piece in input.chunks(step) {
                buf.feed(piece).unwrap();
                let (frames, error) = outcome(&mut heads, &mut buf);
                result.0.extend(frames);
                if error.is_some() {
                    result.1 = error;
                    break;
                }
            }
            if refused {
                let error = result.1.expect("refused");
                assert!(
                    matches!(
                        error,
                        Error::LimitExceeded {
                            limit: Limit::HeadLength,
                            ..
                        }
                    ),
                    "{lines} lines, step {step}: {error:?}"
                );
                assert_eq!(served, Err(error), "{lines} lines: as the server");
                assert!(result.0.is_empty());
            } else {
                assert_eq!(result, (vec![HEAD.to_vec()], None), "{lines} lines");
                assert!(matches!(served, Ok(Some(_))), "{served:?}");
            }
        }
    }
}

/// Empty lines after the last head are skipped at the end of the stream,
/// as a server skips them: a clean end, not a truncated frame. A lone CR
/// is still a truncated line.
#[test]
fn empty_lines_after_the_last_head_end_the_stream_cleanly() {
    for (tail, clean) in [
        (&b"\r\n"[..], true),
        (b"\r\n\r\n", true),
        (b"\r", false),
        (b"\r\nG", false),
    ] {
        let input = [HEAD, tail].concat();
        let mut heads = Heads::default();
        let mut buf = RecvBuf::new();
        buf.feed(&input).unwrap();
        assert_eq!(heads.decode_eof(&mut buf).unwrap().as_deref(), Some(HEAD));
        let end = heads.decode_eof(&mut buf);
        if clean {
            assert_eq!(end, Ok(None), "{tail:?}");
            assert!(buf.is_empty());
        } else {
            assert!(
                matches!(end, Err(Error::Truncated { .. })),
                "{tail:?}: {end:?}"
            );
        }
    }
}

/// A head cut short after empty lines is reported as a server reports
/// it: the empty lines skipped, the truncated head's bytes and offset.
#[test]
fn a_truncated_head_after_empty_lines_is_reported_as_the_server_reports_it() {
    use cleave_proto::http1::{Server, ServerEvent};
    use cleave_proto::Conn;
    use std::time::Duration;

    let t0 = Duration::ZERO;
    for tail in [&b"\r\nGET / HT"[..], b"\r\n\r\n\r", b"\r\n\r\nG"] {
        let input = [HEAD, tail].concat();
        let mut server = Conn::new(Server::new(), t0);
        server.feed(&input, t0).unwrap();
        server.handle_eof(t0);
        let served = loop {
            match server.poll_event() {
                Ok(Some(ServerEvent::Head(_) | ServerEvent::End)) => {}
                other => break other,
            }
        };

        let mut heads = Heads::default();
        let mut buf = RecvBuf::new();
        buf.feed(&input).unwrap();
        assert_eq!(heads.decode_eof(&mut buf).unwrap().as_deref(), Some(HEAD));
        let end = heads.decode_eof(&mut buf);
        assert!(
            matches!(end, Err(Error::Truncated { .. })),
            "{tail:?}: {end:?}"
        );
        assert_eq!(end.map(|_| None), served, "{tail:?}");
    }
}

/// `Heads::new` takes what `RouterConfig::http_limits` takes (its errors
/// are documented as the same): a `max_head` past 4 GiB too.
#[cfg(target_pointer_width = "64")]
#[test]
fn heads_take_the_limits_the_router_takes() {
    use cleave_proto::route::RouterConfig;
    for max_head in [
        1,
        4096,
        u32::MAX as usize,
        u32::MAX as usize + 1,
        usize::MAX,
    ] {
        let router = RouterConfig::default().http_limits(max_head, 64).is_ok();
        assert_eq!(Heads::new(max_head, 64).is_ok(), router, "{max_head}");
    }
    for (max_head, max_headers) in [(0, 64), (4096, 0), (4096, 100_000)] {
        assert!(RouterConfig::default()
            .http_limits(max_head, max_headers)
            .is_err());
        assert!(Heads::new(max_head, max_headers).is_err());
    }
}

/// A head that announces a body is refused, however the bytes come, with
/// nothing decoded and nothing consumed: `Heads` frames no bodies, and
/// would take this one for the next head (a request smuggled inside it).
/// A `Content-Length: 0` announces none.
#[test]
fn a_head_that_announces_a_body_is_refused_not_read_as_heads() {
    use cleave_proto::{HttpField, InvalidInput};
    let smuggled = b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 35\r\n\r\n\
                     GET /admin HTTP/1.1\r\nHost: a\r\n\r\n";
    let chunked = b"\r\nPOST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    for (input, at) in [(&smuggled[..], 0), (&chunked[..], 2)] {
        for cut in 1..input.len() {
            let mut heads = Heads::default();
            let mut buf = RecvBuf::new();
            let mut seen = Vec::new();
            let mut error = None;
            for piece in [&input[..cut], &input[cut..]] {
                buf.feed(piece).unwrap();
                match heads.decode(&mut buf) {
                    Ok(Some(head)) => seen.push(head),
                    Ok(None) => {}
                    Err(e) => error = Some(e),
                }
                if error.is_some() {
                    break;
                }
            }
            assert!(seen.is_empty(), "cut at {cut}: {seen:?}");
            assert_eq!(
                error,
                Some(Error::InvalidInput {
                    kind: InvalidInput::Http(HttpField::UnframedBody),
                    offset: at,
                }),
                "cut at {cut}"
            );
            assert_eq!(buf.offset(), 0, "nothing consumed");
        }
    }
    let mut heads = Heads::default();
    let mut buf = RecvBuf::new();
    buf.feed(
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
    )
    .unwrap();
    let (got, error) = outcome(&mut heads, &mut buf);
    assert_eq!((got.len(), error), (2, None));
}
