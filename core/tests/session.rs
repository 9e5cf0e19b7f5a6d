//! The session: PROXY header, routing, frames, the switch to raw bytes and
//! the end, with the same events (and every byte accounted for) whatever
//! the pieces.

#[path = "support/fixtures.rs"]
mod fixtures;

#[path = "support/harness.rs"]
mod harness;
#[path = "support/session_model.rs"]
mod session_model;

use fixtures::fixture;
use std::time::Duration;

use cleave_proto::conn::{Conn, ConnConfig};
use cleave_proto::route::Reason;
use cleave_proto::sniff::http::is_upgrade_head;
use cleave_proto::Heads;
use cleave_proto::{
    Bytes, Error, Event, InvalidInput, Lines, ProxyField, ProxyMode, Session, SessionConfig,
};
use harness::pieces;
use proptest::prelude::*;
use session_model::{accounted, drive, drive_with, rules};

fn optional_proxy() -> SessionConfig {
    SessionConfig::default().proxy(ProxyMode::Optional)
}

#[test]
fn each_real_first_flight_routes_and_tunnels_every_byte() {
    let cases = [
        ("tls_curl.bin", "tls"),
        ("http_curl_upgrade.bin", "upgrade"),
        ("ssh_openssh.bin", "ssh"),
        ("proxy_v1_tcp4.bin", "hello"),
        ("proxy_v2_tlvs.bin", "hello"),
        ("proxy_v2_tcp6.bin", "hello"),
        ("tls_openssl_no_sni.bin", "other"),
    ];
    for (name, target) in cases {
        let data = fixture(name);
        let (events, error) = drive(Session::tunnel(rules(), optional_proxy()), &[&data]);
        assert_eq!(error, None, "{name}");
        let routed = events.iter().find_map(|e| match e {
            Event::Routed(d) => Some(d.target),
            _ => None,
        });
        assert_eq!(routed, Some(target), "{name}");
        assert_eq!(
            accounted(&events, 0),
            data.len(),
            "{name}: bytes lost or doubled"
        );
        assert!(
            matches!(events.last(), Some(Event::Closed(rest)) if rest.is_empty()),
            "{name}"
        );
        for sizes in [&[1][..], &[3, 7], &[64]] {
            let (again, _) = drive(
                Session::tunnel(rules(), optional_proxy()),
                &pieces(&data, sizes),
            );
            assert_eq!(again, events, "{name} in pieces of {sizes:?}");
        }
    }
}

#[test]
fn lines_until_a_marker_then_the_raw_tail() {
    let input = b"LINE one\r\nLINE two\nTUNNEL\nraw \x00\x01 bytes";
    let session = || {
        Session::framed(
            rules(),
            Lines::new(),
            |l: &Bytes| &l[..] == b"TUNNEL",
            optional_proxy(),
        )
    };
    let (events, error) = drive(session(), &[input]);
    assert_eq!(error, None);
    assert!(matches!(&events[0], Event::Routed(d) if d.target == "lines"));
    assert_eq!(
        events[1..4],
        [
            Event::Frame("LINE one".into()),
            Event::Frame("LINE two".into()),
            Event::Frame("TUNNEL".into())
        ]
    );
    assert_eq!(
        events[4],
        Event::Tunnel(Bytes::from_static(b"raw \x00\x01 bytes"))
    );
    assert_eq!(events[5], Event::Closed(Bytes::new()));
    // 3 delimiters and one `\r`.
    assert_eq!(accounted(&events, 0) + 4, input.len());
}

#[test]
fn an_http_upgrade_hands_the_rest_over_after_the_head() {
    let mut input = fixture("http_curl_upgrade.bin");
    let head_len = input.len();
    input.extend_from_slice(b"\x81\x05hello websocket frames");
    let session = || {
        Session::framed(
            rules(),
            Heads::default(),
            is_upgrade_head,
            SessionConfig::default(),
        )
    };
    let (events, _) = drive(session(), &[&input]);
    assert!(matches!(&events[0], Event::Routed(d) if d.target == "upgrade"));
    assert_eq!(
        events[1],
        Event::Frame(Bytes::copy_from_slice(&input[..head_len]))
    );
    assert_eq!(
        events[2],
        Event::Tunnel(Bytes::copy_from_slice(&input[head_len..]))
    );
    let (bytewise, _) = drive(session(), &pieces(&input, &[1]));
    assert_eq!(bytewise, events);
}

#[test]
fn a_silent_client_is_routed_by_the_fallback_at_the_deadline() {
    let session = Session::tunnel(rules(), SessionConfig::default());
    let start = Duration::from_secs(100);
    let mut conn = Conn::new(session, start);
    // The inspect delay runs from the connection's start: the deadline is
    // known before the first byte.
    assert_eq!(conn.poll_timeout(), Some(Duration::from_secs(105)));
    conn.feed(b"GET / HT", Duration::from_secs(101)).unwrap();
    assert_eq!(conn.poll_event().unwrap(), None);
    assert_eq!(conn.poll_timeout(), Some(Duration::from_secs(105)));
    conn.handle_timeout(Duration::from_secs(104));
    assert_eq!(conn.poll_event().unwrap(), None);
    conn.handle_timeout(Duration::from_secs(105));
    let Some(Event::Routed(decision)) = conn.poll_event().unwrap() else {
        panic!("not routed at the deadline")
    };
    assert_eq!(
        (decision.target, decision.reason),
        ("other", Reason::DeadlinePassed)
    );
    assert_eq!(
        conn.poll_event().unwrap(),
        Some(Event::Tunnel("GET / HT".into()))
    );
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn a_client_that_sends_nothing_at_all_is_routed_at_the_deadline() {
    let session = Session::tunnel(rules(), SessionConfig::default());
    let mut conn = Conn::new(session, Duration::ZERO);
    assert_eq!(conn.poll_timeout(), Some(Duration::from_secs(5)));
    conn.handle_timeout(Duration::from_secs(5));
    assert!(matches!(
        conn.poll_event().unwrap(),
        Some(Event::Routed(d)) if d.target == "other" && d.reason == Reason::DeadlinePassed
    ));
    assert_eq!(
        conn.poll_event().unwrap(),
        Some(Event::Tunnel(Bytes::new()))
    );
    assert_eq!(conn.poll_event().unwrap(), None);
}

/// With an optional PROXY header, a silent client, or one whose first
/// bytes could start a header, is routed by the deadline all the same,
/// where it would go with no PROXY header at all; the bytes come out as
/// the client's.
#[test]
fn with_an_optional_proxy_header_a_silent_client_is_routed_at_the_deadline() {
    let at_deadline = |config: SessionConfig, sent: &[u8]| {
        let mut conn = Conn::new(Session::tunnel(rules(), config), Duration::ZERO);
        assert_eq!(
            conn.poll_timeout(),
            Some(Duration::from_secs(5)),
            "{sent:?}"
        );
        conn.feed(sent, Duration::from_secs(1)).unwrap();
        let mut routed = conn.poll_event().unwrap();
        if routed.is_none() {
            conn.handle_timeout(Duration::from_secs(5));
            routed = conn.poll_event().unwrap();
        }
        let Some(Event::Routed(decision)) = routed else {
            panic!("{sent:?}: not routed by the deadline")
        };
        let tail = conn.poll_event().unwrap();
        (decision.target, decision.reason, tail)
    };
    for sent in [&b""[..], b"P", b"PROXY TCP4", b"\r\n\r\n"] {
        let got = at_deadline(optional_proxy(), sent);
        assert_eq!(got, at_deadline(SessionConfig::default(), sent), "{sent:?}");
        assert_eq!(got.0, "other", "{sent:?}");
        assert_eq!(
            got.2,
            Some(Event::Tunnel(Bytes::copy_from_slice(sent))),
            "{sent:?}"
        );
    }
    // A required header keeps no deadline of its own: the connection's
    // opening timeout ends a client that does not send it.
    let required = SessionConfig::default().proxy(ProxyMode::Required);
    let conn = Conn::new(Session::tunnel(rules(), required), Duration::ZERO);
    assert_eq!(conn.poll_timeout(), None);
}

#[test]
fn a_required_proxy_header_that_is_missing_is_a_final_error() {
    let config = SessionConfig::default().proxy(ProxyMode::Required);
    let (events, error) = drive(Session::tunnel(rules(), config), &[b"hello"]);
    assert!(events.is_empty());
    assert_eq!(
        error,
        Some(Error::InvalidInput {
            kind: InvalidInput::Proxy(ProxyField::Missing),
            offset: 0
        })
    );
    let mut conn = Conn::new(Session::tunnel(rules(), config), Duration::ZERO);
    conn.feed(b"hello", Duration::ZERO).unwrap();
    assert!(conn.poll_event().is_err());
    let (_, mut buf, _) = conn.into_parts();
    assert_eq!(&buf.take_tail()[..], b"hello", "the bytes come back");
}

#[test]
fn the_end_of_the_stream_inside_something_gives_its_bytes_back() {
    let header = &fixture("proxy_v2_tlvs.bin")[..40];
    let config = SessionConfig::default().proxy(ProxyMode::Required);
    let (events, _) = drive(Session::tunnel(rules(), config), &[header]);
    assert_eq!(events, [Event::Closed(Bytes::copy_from_slice(header))]);

    let session = Session::framed(
        rules(),
        Lines::new(),
        |_: &Bytes| false,
        SessionConfig::default(),
    );
    let (events, _) = drive(session, &[b"LINE a\nLINE b"]);
    assert_eq!(
        events[1..],
        [
            Event::Frame("LINE a".into()),
            Event::Closed("LINE b".into())
        ]
    );
}

#[test]
fn an_optional_header_cut_by_the_end_is_the_clients_bytes() {
    // What could have started a PROXY header is routed and tunnelled, as
    // without PROXY support.
    for data in [&b"P"[..], b"PROX", b"\r\n", b"\r\n\r\n\0\r\nQ"] {
        let off = drive(Session::tunnel(rules(), SessionConfig::default()), &[data]);
        let optional = drive(Session::tunnel(rules(), optional_proxy()), &[data]);
        assert_eq!(optional, off, "{data:?}");
        assert!(matches!(optional.0[0], Event::Routed(_)));
    }
}

#[test]
fn a_buffer_too_small_to_decide_is_a_final_limit_error() {
    let small = cleave_proto::RecvBufConfig::default()
        .max_buffered(64)
        .unwrap();
    let buffer_full = |error: &Option<Error>| {
        matches!(
            error,
            Some(Error::LimitExceeded {
                limit: cleave_proto::Limit::Buffer,
                max: 64,
                attempted: 65,
                offset: 0
            })
        )
    };
    // A valid 104-byte PROXY v1 header does not fit in 64 bytes.
    let header = b"PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n";
    let config = SessionConfig::default().proxy(ProxyMode::Required);
    let small = ConnConfig::default().recv_buf(small);
    let mut conn = Conn::with_config(Session::tunnel(rules(), config), small, Duration::ZERO);
    conn.feed(&header[..64], Duration::ZERO).unwrap();
    let error = conn.poll_event().err();
    assert!(buffer_full(&error), "{error:?}");
    assert!(conn.is_read_done() && !conn.wants_read());
    assert_eq!(conn.poll_event().err(), error, "final");
    assert_eq!(conn.recv_buf().len(), 64, "the bytes stay");

    // The router's budget is larger than the buffer: an HTTP head that
    // does not end within 64 bytes.
    let session = Session::tunnel(rules(), SessionConfig::default());
    let (events, error) = drive_with(session, small, &[&[b'G'; 64]]);
    assert!(events.is_empty());
    assert!(buffer_full(&error), "{error:?}");
}

#[test]
fn a_proxy_budget_no_header_fits_is_refused() {
    assert!(matches!(
        SessionConfig::default().proxy_max(15),
        Err(Error::Misuse(cleave_proto::Misuse::InvalidConfig {
            setting: "proxy_max",
            ..
        }))
    ));
    assert!(SessionConfig::default().proxy_max(16).is_ok());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A PROXY header (or none), lines, a marker and raw bytes, in any
    /// pieces: the same events, and every byte accounted for.
    #[test]
    fn events_do_not_depend_on_the_pieces(
        proxy in prop::sample::select(vec!["", "proxy_v1_tcp4.bin", "proxy_v2_tlvs.bin"]),
        lines in prop::collection::vec("[a-z ]{0,12}", 0..6),
        raw in prop::collection::vec(any::<u8>(), 0..40),
        cut in any::<bool>(),
        sizes in prop::collection::vec(1usize..20, 1..5),
    ) {
        let mut input = match proxy {
            "" => Vec::new(),
            name => {
                let data = fixture(name);
                let payload = b"hello after proxy header\n".len();
                data[..data.len() - payload].to_vec()
            }
        };
        for line in &lines {
            input.extend_from_slice(format!("LINE {line}\n").as_bytes());
        }
        input.extend_from_slice(b"TUNNEL\n");
        input.extend_from_slice(&raw);
        if cut {
            input.truncate(input.len() / 2);
        }
        // Lines keep their `\r`, so each frame's framing is one byte (a
        // PROXY header cut by the end is lines too: the client's bytes).
        let lines = Lines::with_config(cleave_proto::LinesConfig::default().strip_cr(false));
        let session = || Session::framed(rules(), lines.clone(), |l: &Bytes| &l[..] == b"TUNNEL", optional_proxy());
        let (whole, whole_error) = drive(session(), &[&input]);
        let (bytewise, bytewise_error) = drive(session(), &pieces(&input, &[1]));
        let (cut_up, cut_error) = drive(session(), &pieces(&input, &sizes));
        prop_assert_eq!(&bytewise, &whole);
        prop_assert_eq!(&cut_up, &whole);
        prop_assert_eq!(&bytewise_error, &whole_error);
        prop_assert_eq!(&cut_error, &whole_error);
        let frames = whole.iter().filter(|e| matches!(e, Event::Frame(_))).count();
        if whole_error.is_none() {
            prop_assert_eq!(accounted(&whole, 1), input.len(), "frames: {}", frames);
        }
    }
}

#[test]
fn a_consumed_prefix_is_taken_off_the_stream() {
    let router = cleave_proto::route::Router::new("other").rule(
        cleave_proto::route::Match::PrefixConsumed("@shard-7 ".into()),
        "shard-7",
    );
    let input = b"@shard-7 GET / HTTP/1.1\r\n\r\n";
    let (events, _) = drive(Session::tunnel(router, SessionConfig::default()), &[input]);
    assert!(matches!(&events[0], Event::Routed(d) if d.target == "shard-7" && d.consume == 9));
    assert_eq!(
        events[1],
        Event::Tunnel(Bytes::from_static(b"GET / HTTP/1.1\r\n\r\n"))
    );
    assert_eq!(accounted(&events, 0), input.len());
}

/// A request a server reads is routed by its Host, however it starts:
/// after empty lines (which a server skips, RFC 9112 section 2.2, and
/// `Heads` too), or with a method that is not upper-case (any token is a
/// method, RFC 9110 section 9.1). Each once went to the fallback, past
/// the Host rule, and the same session then framed a head for the host
/// the rule was for. Every split of the input gives the same events.
#[test]
fn a_request_after_empty_lines_or_with_any_method_follows_its_host_rule() {
    use cleave_proto::route::{HostPattern, Match, Router};
    let router =
        || Router::new("public").rule(Match::HttpHost(HostPattern::new("admin.example")), "admin");
    for input in [
        &b"\r\nGET / HTTP/1.1\r\nHost: admin.example\r\n\r\n"[..],
        b"\r\n\r\nGET / HTTP/1.1\r\nHost: admin.example\r\n\r\n",
        b"get / HTTP/1.1\r\nHost: admin.example\r\n\r\n",
    ] {
        let decision = router().route(input, Duration::ZERO).expect("a decision");
        assert_eq!(
            (decision.target, decision.reason),
            ("admin", Reason::Matched)
        );
        let mut whole = None;
        for piece in 1..=input.len() {
            let session = Session::framed(
                router(),
                Heads::default(),
                is_upgrade_head,
                SessionConfig::default(),
            );
            let mut conn = Conn::new(session, Duration::ZERO);
            let mut events = Vec::new();
            for chunk in input.chunks(piece) {
                conn.feed(chunk, Duration::ZERO).expect("room");
                while let Some(event) = conn.poll_event().expect("no error") {
                    events.push(event);
                }
            }
            let Some(Event::Routed(decision)) = events.first() else {
                panic!("{events:?}")
            };
            assert_eq!(
                decision.target,
                "admin",
                "{:?}",
                input.escape_ascii().to_string()
            );
            let head = input.trim_ascii_start();
            assert!(
                matches!(&events[1..], [Event::Frame(frame)] if &frame[..] == head),
                "{events:?}"
            );
            assert_eq!(whole.get_or_insert_with(|| events.clone()), &events);
        }
    }
}
