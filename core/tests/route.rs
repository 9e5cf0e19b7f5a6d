//! The router: decisions on real first flights, rule order, budget,
//! deadline, and the same decision whatever the pieces.

#[path = "support/fixtures.rs"]
mod fixtures;

use fixtures::fixture;
use std::time::Duration;

use cleave_proto::route::{
    Decision, Facts, FrameRouter, HostPattern, Match, Reason, Router, RouterConfig,
};
use cleave_proto::sniff::{proxy, Sniff};
use cleave_proto::{Error, HttpField, InvalidInput};
use proptest::prelude::*;

fn rules() -> Router<&'static str> {
    Router::new("other")
        .rule(
            Match::TlsServerName(HostPattern::new("example.com")),
            "tls-example",
        )
        .rule(
            Match::TlsServerName(HostPattern::new("*.example.org")),
            "tls-org",
        )
        .rule(Match::TlsAlpn("h2".into()), "tls-h2")
        .rule(Match::HttpUpgrade(Some("websocket".into())), "ws")
        .rule(Match::HttpHost(HostPattern::new("example.com")), "web")
        .rule(Match::Prefix("SSH-".into()), "ssh")
}

/// Routes every prefix of `data`: none until the decision, then always the
/// same one; returns it.
fn assert_stable(router: &Router<&'static str>, data: &[u8]) -> Decision<&'static str> {
    let mut decided: Option<Decision<&'static str>> = None;
    for k in 0..=data.len() {
        match (router.route(&data[..k], Duration::ZERO), &decided) {
            (None, None) => {}
            (Some(d), None) => decided = Some(d),
            (Some(d), Some(first)) => assert_eq!(&d, first, "decision changed at {k} bytes"),
            (None, Some(_)) => panic!("undecided again at {k} bytes"),
        }
    }
    decided.unwrap_or_else(|| router.route_at_end(data))
}

/// The bytes after a PROXY header, if there is one.
fn after_proxy(data: &[u8]) -> &[u8] {
    match proxy::sniff(data, proxy::DEFAULT_MAX_HEADER) {
        Sniff::Match { len, .. } => &data[len..],
        _ => data,
    }
}

#[test]
fn real_first_flights_go_where_they_should() {
    let router = rules();
    let cases = [
        ("tls_openssl_sni_alpn.bin", "tls-example"),
        ("tls_curl.bin", "tls-example"),
        ("tls_python.bin", "tls-org"),
        ("tls_openssl_split_records.bin", "tls-h2"),
        ("tls_openssl_no_sni.bin", "other"),
        ("http_curl_get.bin", "web"),
        ("http_curl_upgrade.bin", "ws"),
        ("ssh_openssh.bin", "ssh"),
        ("proxy_v1_tcp4.bin", "other"),
    ];
    for (name, target) in cases {
        let data = fixture(name);
        let decision = assert_stable(&router, &data);
        assert_eq!(decision.target, target, "{name}");
    }
    // No SNI, no ALPN: every TLS rule decided "no", so the fallback, with
    // the hello's facts.
    let decision = assert_stable(&router, &fixture("tls_openssl_no_sni.bin"));
    assert_eq!(decision.reason, Reason::NoRuleMatched);
    assert!(matches!(decision.facts, Facts::Tls(_)));
}

#[test]
fn the_bytes_after_a_proxy_header_route_like_the_bare_ones() {
    let router = Router::new("other").rule(Match::Prefix("hello".into()), "hello");
    for name in [
        "proxy_v1_tcp4.bin",
        "proxy_v2_tlvs.bin",
        "proxy_v2_tcp6.bin",
    ] {
        let data = fixture(name);
        assert_eq!(
            assert_stable(&router, after_proxy(&data)).target,
            "hello",
            "{name}"
        );
    }
}

#[test]
fn an_undecided_earlier_rule_holds_a_later_match() {
    let router = Router::new("other")
        .rule(Match::HttpHost(HostPattern::new("example.com")), "web")
        .rule(Match::Prefix("GET ".into()), "get");
    assert_eq!(router.route(b"GET / HTTP/1.1\r\nHo", Duration::ZERO), None);
    let decision = router
        .route(b"GET / HTTP/1.1\r\nHost: other.com\r\n\r\n", Duration::ZERO)
        .unwrap();
    assert_eq!((decision.target, decision.rule), ("get", Some(1)));
}

#[test]
fn the_budget_and_the_deadline_decide_by_the_fallback() {
    let router = Router::with_config("other", RouterConfig::default().budget(64))
        .rule(Match::HttpHost(HostPattern::new("example.com")), "web");
    let long = format!(
        "GET /{} HTTP/1.1\r\nHost: example.com\r\n\r\n",
        "a".repeat(100)
    );
    let decision = assert_stable(&router, long.as_bytes());
    assert_eq!(
        (decision.target, decision.reason),
        ("other", Reason::BudgetSpent)
    );

    let rules = rules();
    assert_eq!(rules.route(b"GET / HT", Duration::from_millis(4999)), None);
    let late = rules.route(b"GET / HT", Duration::from_secs(5)).unwrap();
    assert_eq!(
        (late.target, late.reason),
        ("other", Reason::DeadlinePassed)
    );
    let silent = rules.route(b"", Duration::from_secs(5)).unwrap();
    assert_eq!(silent.reason, Reason::DeadlinePassed);
    assert_eq!(rules.route_at_end(b"GET / HT").reason, Reason::EndOfStream);
}

#[test]
fn malformed_hellos_do_not_match_and_are_reported() {
    let mut data = fixture("tls_curl.bin");
    data[5] = 2; // a ServerHello where a ClientHello must be
    let decision = assert_stable(&rules(), &data);
    assert_eq!(decision.target, "other");
    assert!(decision.malformed.is_some());
}

#[test]
fn a_host_rule_is_not_fooled_by_a_target_or_a_second_host() {
    let router = Router::new("other")
        .rule(
            Match::HttpHost(HostPattern::new("public.example")),
            "public",
        )
        .rule(Match::Http, "any-http");
    let honest = b"GET http://public.example/ HTTP/1.1\r\nHost: public.example\r\n\r\n";
    assert_eq!(assert_stable(&router, honest).target, "public");
    for smuggled in [
        &b"GET http://admin.internal/ HTTP/1.1\r\nHost: public.example\r\n\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: public.example\r\nHost: admin.internal\r\n\r\n",
    ] {
        let decision = assert_stable(&router, smuggled);
        // Neither HTTP rule matches a head the sniffer refuses.
        assert_eq!(decision.target, "other");
        assert!(matches!(
            decision.malformed,
            Some(Error::InvalidInput {
                kind: InvalidInput::Http(HttpField::Host),
                ..
            })
        ));
    }
}

#[test]
fn frames_route_by_prefix() {
    let router = FrameRouter::new(0).prefix("ROUTE a", 1).prefix("ROUTE", 2);
    assert_eq!(*router.route(b"ROUTE a x"), 1);
    assert_eq!(*router.route(b"ROUTE b x"), 2);
    assert_eq!(*router.route(b"PING"), 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any fixture, cut anywhere and with bytes added after it, routes the
    /// same as whole.
    #[test]
    fn decisions_do_not_depend_on_the_pieces(which in 0usize..9, extra in prop::collection::vec(any::<u8>(), 0..64)) {
        let names = [
            "tls_openssl_sni_alpn.bin", "tls_curl.bin", "tls_python.bin", "tls_openssl_split_records.bin",
            "tls_openssl_no_sni.bin", "http_curl_get.bin", "http_curl_upgrade.bin", "ssh_openssh.bin", "proxy_v2_tlvs.bin",
        ];
        let mut data = fixture(names[which]);
        let whole = assert_stable(&rules(), &data);
        data.extend_from_slice(&extra);
        let longer = assert_stable(&rules(), &data);
        prop_assert_eq!(longer, whole);
    }
}

/// `Match::HttpUpgrade` reads an upgrade as cleave's HTTP/1.1 server does
/// (`route_request`): `Connection` lines combine (RFC 9110, section 5.3),
/// and an HTTP/1.0 request's Upgrade is ignored (section 7.8).
#[test]
fn http_upgrade_rules_read_an_upgrade_as_the_server_does() {
    use cleave_proto::http1::{Server, ServerEvent};
    use cleave_proto::Conn;
    let router = Router::new("other").rule(Match::HttpUpgrade(Some("websocket".into())), "ws");
    let cases: [(&[u8], &str); 4] = [
        (
            b"GET /chat HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "ws",
        ),
        (
            b"GET /chat HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "ws",
        ),
        (
            b"GET /chat HTTP/1.0\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n",
            "other",
        ),
        (
            b"GET /chat HTTP/1.1\r\nHost: a\r\nConnection: keep-alive\r\nUpgrade: websocket\r\n\r\n",
            "other",
        ),
    ];
    for (head, want) in cases {
        let mut conn = Conn::new(Server::new(), Duration::ZERO);
        conn.feed(head, Duration::ZERO).unwrap();
        let Ok(Some(ServerEvent::Head(request))) = conn.poll_event() else {
            panic!("no head")
        };
        assert_eq!(router.route_request(&request).0, &want, "server: {head:?}");
        let decision = router.route(head, Duration::ZERO).unwrap();
        assert_eq!(decision.target, want, "sniffer: {head:?}");
    }
}

/// A pattern written with a trailing dot is the same name.
#[test]
fn a_pattern_written_with_a_trailing_dot_matches_its_name() {
    for pattern in ["example.com.", "EXAMPLE.com"] {
        let pattern = HostPattern::new(pattern);
        assert!(pattern.matches("example.com."), "{pattern:?}");
        assert!(pattern.matches("example.com"), "{pattern:?}");
    }
    let wildcard = HostPattern::new("*.example.com.");
    assert!(wildcard.matches("www.example.com"));
    assert!(!wildcard.matches("example.com"));
}
