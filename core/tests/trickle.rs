//! Sniffing under trickled bytes: a resumable sniffer gives, on every
//! prefix, the answer the pure function gives on the same bytes, and the
//! work it does (an instrumented count of the bytes it looks at, not a
//! timing) stays linear in the input when the input arrives one byte at a
//! time — a 16 KiB ClientHello in one-byte records, a 16 KiB request head,
//! a PROXY v2 header with an 8 KiB TLV — through each sniffer, the router
//! and the session.

#[path = "support/fixtures.rs"]
mod fixtures;

#[path = "support/flights.rs"]
mod flights;

use core::time::Duration;
use fixtures::{fixture, ALL};

use cleave_proto::conn::Conn;
use cleave_proto::route::{HostPattern, Match, Reason, RouteState, Router, RouterConfig};
use cleave_proto::sniff::{http, proxy, tls, Sniff};
use cleave_proto::{Event, ProxyMode, Session, SessionConfig};
use proptest::prelude::*;

/// At most this many bytes looked at per byte received. The HTTP sniffer
/// is the most thorough: each byte scanned once, each line parsed once,
/// and the whole head parsed and copied once (4x).
const LINEAR: u64 = 5;

/// Feeds `data` to one resumable sniffer in pieces ending at `ends`
/// (ascending), and checks every answer against the pure function's on the
/// same bytes.
fn assert_resumes_as_pure<T: PartialEq + std::fmt::Debug>(
    data: &[u8],
    ends: impl IntoIterator<Item = usize>,
    mut resumed: impl FnMut(&[u8]) -> Sniff<T>,
    pure: impl Fn(&[u8]) -> Sniff<T>,
) {
    for end in ends {
        let end = end.min(data.len());
        assert_eq!(resumed(&data[..end]), pure(&data[..end]), "at {end} bytes");
    }
}

/// Every sniffer, resumed over `ends`, against its pure function.
fn check_all(data: &[u8], ends: &[usize], budget: usize) {
    let mut t = tls::Sniffer::new();
    assert_resumes_as_pure(
        data,
        ends.iter().copied(),
        |d| t.sniff(d, budget).clone(),
        |d| tls::sniff(d, budget),
    );
    let mut h = http::Sniffer::new();
    assert_resumes_as_pure(
        data,
        ends.iter().copied(),
        |d| h.sniff(d, budget, 8).clone(),
        |d| http::sniff(d, budget, 8),
    );
    let mut p = proxy::Sniffer::new();
    assert_resumes_as_pure(
        data,
        ends.iter().copied(),
        |d| p.sniff(d, budget).clone(),
        |d| proxy::sniff(d, budget),
    );
}

#[test]
fn resumed_sniffers_answer_as_the_pure_functions_on_every_prefix() {
    for name in ALL {
        let data = fixture(name);
        let every: Vec<usize> = (0..=data.len()).collect();
        check_all(&data, &every, 16 * 1024);
    }
    let hello = flights::trickled_hello(tls::DEFAULT_MAX_HELLO);
    let mut t = tls::Sniffer::new();
    assert_resumes_as_pure(
        &hello,
        0..=hello.len(),
        |d| t.sniff(d, tls::DEFAULT_MAX_HELLO).clone(),
        |d| tls::sniff(d, tls::DEFAULT_MAX_HELLO),
    );
}

#[test]
fn shorter_input_starts_a_sniffer_over() {
    let head = fixture("http_curl_get.bin");
    let mut h = http::Sniffer::new();
    assert!(h.sniff(&head, 8192, 64).facts().is_some());
    assert_eq!(h.sniff(b"SSH-2.0-x\r\n", 8192, 64), &Sniff::NoMatch);
    assert_eq!(h.sniff(b"GET", 8192, 64), &Sniff::NeedMore);
    assert!(h.sniff(&head, 8192, 64).facts().is_some());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Mutated fixtures in random pieces: the resumed answer is the pure
    /// one at every piece's end, whatever the budget.
    #[test]
    fn mutated_fixtures_in_random_pieces_resume_as_pure(
        which in 0usize..15,
        edits in prop::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        pieces in prop::collection::vec(1usize..40, 1..200),
        budget in prop_oneof![Just(16 * 1024), 0usize..300],
    ) {
        let mut data = fixture(ALL[which]);
        for (at, byte) in edits {
            let at = at % data.len();
            data[at] = byte;
        }
        let mut ends = vec![0];
        let mut end = 0;
        for piece in pieces {
            end += piece;
            ends.push(end);
        }
        check_all(&data, &ends, budget);
    }
}

/// The work of one-byte pieces (`examined`) is at most [`LINEAR`] times
/// the input, and at most 1.5 times `whole`, the work of the same input at
/// once (the HTTP sniffer judges each line on its own when a head comes in
/// pieces, one look per byte more than its one pass over a whole head): no
/// byte is looked at again and again because it arrived alone.
fn assert_linear(what: &str, examined: u64, whole: u64, input: usize) {
    let ratio = examined as f64 / input as f64;
    println!(
        "{what}: {examined} bytes examined in one-byte pieces, {whole} at once, \
         for {input} bytes received ({ratio:.2}x)"
    );
    assert!(
        examined <= LINEAR * input as u64,
        "{what}: {examined} bytes examined for {input} bytes ({ratio:.2}x)"
    );
    assert!(
        2 * examined <= 3 * whole,
        "{what}: {examined} bytes examined in pieces, {whole} at once"
    );
}

/// What a fresh sniffer looks at for the whole input at once.
fn examined_at_once<S: Default>(sniff: impl FnOnce(&mut S) -> u64) -> u64 {
    sniff(&mut S::default())
}

#[test]
fn a_16k_hello_in_one_byte_records_one_byte_at_a_time_is_linear() {
    let hello = flights::trickled_hello(tls::DEFAULT_MAX_HELLO);
    assert!(hello.len() > 16_000, "{}", hello.len());
    let mut t = tls::Sniffer::new();
    for end in 0..hello.len() {
        assert_eq!(
            t.sniff(&hello[..end], tls::DEFAULT_MAX_HELLO),
            &Sniff::NeedMore
        );
    }
    let facts = t.sniff(&hello, tls::DEFAULT_MAX_HELLO).facts().cloned();
    assert_eq!(
        facts.and_then(|f| f.server_name).as_deref(),
        Some("example.com")
    );
    let whole = examined_at_once(|t: &mut tls::Sniffer| {
        t.sniff(&hello, tls::DEFAULT_MAX_HELLO);
        t.examined()
    });
    assert_linear("tls, one-byte records", t.examined(), whole, hello.len());

    // The same hello in one record of 16 KiB, one byte at a time.
    let hs = flights::hello_handshake(flights::TLS_CURL, 16 * 1024 - 5);
    let one = flights::in_records(&hs, hs.len());
    let mut t = tls::Sniffer::new();
    for end in 0..=one.len() {
        t.sniff(&one[..end], tls::DEFAULT_MAX_HELLO);
    }
    assert!(t.answer().facts().is_some());
    let whole = examined_at_once(|t: &mut tls::Sniffer| {
        t.sniff(&one, tls::DEFAULT_MAX_HELLO);
        t.examined()
    });
    assert_linear("tls, one record", t.examined(), whole, one.len());
}

#[test]
fn a_16k_head_one_byte_at_a_time_is_linear() {
    let head = flights::long_head(16 * 1024);
    let mut h = http::Sniffer::new();
    for end in 0..head.len() {
        assert_eq!(h.sniff(&head[..end], 16 * 1024, 128), &Sniff::NeedMore);
    }
    let facts = h.sniff(&head, 16 * 1024, 128).facts().cloned();
    assert_eq!(
        facts.and_then(|f| f.host_name()).as_deref(),
        Some("example.com")
    );
    let whole = examined_at_once(|h: &mut http::Sniffer| {
        h.sniff(&head, 16 * 1024, 128);
        h.examined()
    });
    assert_linear("http", h.examined(), whole, head.len());
}

#[test]
fn a_proxy_header_one_byte_at_a_time_is_linear() {
    for header in [flights::proxy_v2_with_tlv(8 * 1024), proxy_v1()] {
        let mut p = proxy::Sniffer::new();
        for end in 0..header.len() {
            assert_eq!(p.sniff(&header[..end], 16 * 1024), &Sniff::NeedMore);
        }
        assert!(p.sniff(&header, 16 * 1024).facts().is_some());
        let whole = examined_at_once(|p: &mut proxy::Sniffer| {
            p.sniff(&header, 16 * 1024);
            p.examined()
        });
        assert_linear("proxy", p.examined(), whole, header.len());
    }
}

/// haproxy's v1 header, without the bytes captured after it.
fn proxy_v1() -> Vec<u8> {
    let mut data = fixture("proxy_v1_tcp6.bin");
    let Sniff::Match { len, .. } = proxy::sniff(&data, 107) else {
        panic!("a v1 header");
    };
    data.truncate(len);
    data
}

fn router() -> Router<&'static str> {
    let config = RouterConfig::default()
        .http_limits(16 * 1024, 128)
        .expect("in range");
    Router::with_config("fallback", config)
        .rule(Match::Prefix("SSH-".into()), "ssh")
        .rule(Match::TlsServerName(HostPattern::new("example.com")), "tls")
        .rule(Match::HttpHost(HostPattern::new("example.com")), "web")
}

#[test]
fn the_router_on_trickled_16k_flights_is_linear_and_decides_as_on_the_whole() {
    let router = router();
    let flights = [
        (flights::trickled_hello(tls::DEFAULT_MAX_HELLO), "tls"),
        (flights::long_head(16 * 1024), "web"),
    ];
    for (flight, target) in flights {
        let mut state = RouteState::new();
        let mut decision = None;
        for end in 1..=flight.len() {
            decision = router.route_with(&mut state, &flight[..end], Duration::ZERO);
            if decision.is_some() {
                assert_eq!(end, flight.len(), "decided early: {decision:?}");
            }
        }
        let decision = decision.expect("decided");
        assert_eq!(
            Some(decision.clone()),
            router.route(&flight, Duration::ZERO)
        );
        assert_eq!(
            (decision.target, decision.reason),
            (target, Reason::Matched)
        );
        let mut at_once = RouteState::new();
        assert!(router
            .route_with(&mut at_once, &flight, Duration::ZERO)
            .is_some());
        assert_linear(target, state.examined(), at_once.examined(), flight.len());
    }
}

#[test]
fn a_session_fed_a_byte_at_a_time_is_linear() {
    let cases = [
        (
            flights::proxy_v2_with_tlv(8 * 1024),
            flights::long_head(8 * 1024),
            "web",
        ),
        (
            proxy_v1(),
            flights::trickled_hello(tls::DEFAULT_MAX_HELLO),
            "tls",
        ),
    ];
    for (header, flight, target) in cases {
        let config = SessionConfig::default()
            .proxy(ProxyMode::Required)
            .proxy_max(16 * 1024)
            .expect("in range");
        let mut conn = Conn::new(Session::tunnel(router(), config), Duration::ZERO);
        let input = [&header[..], &flight[..]].concat();
        let mut events = Vec::new();
        for byte in &input {
            conn.feed(std::slice::from_ref(byte), Duration::ZERO)
                .expect("fits");
            while let Some(event) = conn.poll_event().expect("valid") {
                events.push(event);
            }
        }
        assert!(matches!(&events[0], Event::Proxy { len, .. } if *len == header.len()));
        assert!(matches!(&events[1], Event::Routed(d) if d.target == target));
        let tunneled: usize = events[2..]
            .iter()
            .map(|e| match e {
                Event::Tunnel(bytes) => bytes.len(),
                other => panic!("{other:?}"),
            })
            .sum();
        assert_eq!(tunneled, flight.len(), "every routed byte goes on");
        let mut at_once = Conn::new(Session::tunnel(router(), config), Duration::ZERO);
        at_once.feed(&input, Duration::ZERO).expect("fits");
        while at_once.poll_event().expect("valid").is_some() {}
        assert_linear(
            "session",
            conn.protocol().examined(),
            at_once.protocol().examined(),
            input.len(),
        );
    }
}
