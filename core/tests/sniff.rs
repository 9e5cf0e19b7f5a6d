//! Sniffers against bytes captured from real clients (see
//! `fixtures/README.md`), against the answers of rustls and the `ppp` crate
//! on the same bytes, and for prefix stability: every sniffer answers
//! "need more" until its answer is final, then keeps it, so any split of
//! the input gives the same answer.

#[path = "support/fixtures.rs"]
mod fixtures;

#[path = "support/sniff_model.rs"]
mod sniff_model;

use cleave_proto::sniff::{http, prefix, proxy, tls, Sniff};
use cleave_proto::{Bytes, Error, HttpField, InvalidInput, ProxyField, TlsField};
use fixtures::{fixture, ALL, PROXY_FIXTURES, TLS_FIXTURES};
use proptest::prelude::*;
use sniff_model::assert_prefix_stable;

fn tls(data: &[u8]) -> Sniff<tls::ClientHello> {
    tls::sniff(data, tls::DEFAULT_MAX_HELLO)
}
fn head(data: &[u8]) -> Sniff<http::RequestHead> {
    http::sniff(data, http::DEFAULT_MAX_HEAD, http::DEFAULT_MAX_HEADERS)
}
fn proxy(data: &[u8]) -> Sniff<proxy::ProxyHeader> {
    proxy::sniff(data, proxy::DEFAULT_MAX_HEADER)
}

/// The same fixture with more bytes after it gives the same answer.
fn with_trailing(data: &[u8]) -> Vec<u8> {
    let mut longer = data.to_vec();
    longer.extend_from_slice(b"\x17\x03\x03\x00\x10trailing bytes of another record");
    longer
}

/// rustls's reading of the same ClientHello: (server name, ALPN).
fn rustls_reads(data: &[u8]) -> (Option<String>, Option<Vec<Vec<u8>>>) {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut reader = data;
    while !reader.is_empty() {
        acceptor
            .read_tls(&mut reader)
            .expect("rustls reads the bytes");
    }
    let accepted = acceptor
        .accept()
        .map_err(|(e, _)| e)
        .expect("rustls accepts")
        .expect("complete hello");
    let hello = accepted.client_hello();
    (
        hello.server_name().map(String::from),
        hello.alpn().map(|list| list.map(<[u8]>::to_vec).collect()),
    )
}

#[test]
fn tls_fixtures_read_as_rustls_reads_them() {
    for name in TLS_FIXTURES {
        let data = fixture(name);
        let Sniff::Match { facts, len } = assert_prefix_stable(&data, tls) else {
            panic!("{name}: no match");
        };
        assert_eq!(len, data.len(), "{name}");
        let (server_name, alpn) = rustls_reads(&data);
        assert_eq!(facts.server_name, server_name, "{name}: SNI");
        let ours: Vec<Vec<u8>> = facts.alpn.iter().map(|p| p.to_vec()).collect();
        assert_eq!(Some(ours).filter(|v| !v.is_empty()), alpn, "{name}: ALPN");
        assert_eq!(
            (facts.record_version, facts.legacy_version),
            (0x0301, 0x0303),
            "{name}"
        );
        assert!(facts.offers_tls13(), "{name}");
        assert_eq!(
            tls(&with_trailing(&data)),
            tls(&data),
            "{name}: trailing bytes changed the answer"
        );
    }
}

#[test]
fn tls_facts_of_each_client() {
    let sni = |name| match tls(&fixture(name)) {
        Sniff::Match { facts, .. } => facts,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        sni("tls_openssl_sni_alpn.bin").server_name.as_deref(),
        Some("example.com")
    );
    assert_eq!(sni("tls_openssl_no_sni.bin").server_name, None);
    assert_eq!(
        sni("tls_python.bin").server_name.as_deref(),
        Some("api.example.org")
    );
    assert_eq!(sni("tls_python.bin").supported_versions, [0x0304, 0x0303]);
    let split = sni("tls_openssl_split_records.bin");
    assert_eq!(split.server_name.as_deref(), Some("split.example.com"));
    assert_eq!(split.alpn.len(), 22);
    assert_eq!(
        sni("tls_curl.bin").supported_versions,
        [0x0304, 0x0303, 0x0302, 0x0301]
    );
}

#[test]
fn proxy_fixtures_read_as_ppp_reads_them() {
    for name in PROXY_FIXTURES {
        let data = fixture(name);
        let Sniff::Match { facts, len } = assert_prefix_stable(&data, proxy) else {
            panic!("{name}: no match");
        };
        assert_eq!(
            &data[len..],
            b"hello after proxy header\n",
            "{name}: header length"
        );
        let theirs = match facts.version {
            1 => match ppp::v1::Header::try_from(std::str::from_utf8(&data[..len]).unwrap())
                .unwrap()
                .addresses
            {
                ppp::v1::Addresses::Tcp4(a) => Some((
                    std::net::SocketAddr::from((a.source_address, a.source_port)),
                    std::net::SocketAddr::from((a.destination_address, a.destination_port)),
                )),
                ppp::v1::Addresses::Tcp6(a) => Some((
                    std::net::SocketAddr::from((a.source_address, a.source_port)),
                    std::net::SocketAddr::from((a.destination_address, a.destination_port)),
                )),
                ppp::v1::Addresses::Unknown => None,
            },
            _ => match ppp::v2::Header::try_from(&data[..len]).unwrap().addresses {
                ppp::v2::Addresses::IPv4(a) => Some((
                    std::net::SocketAddr::from((a.source_address, a.source_port)),
                    std::net::SocketAddr::from((a.destination_address, a.destination_port)),
                )),
                ppp::v2::Addresses::IPv6(a) => Some((
                    std::net::SocketAddr::from((a.source_address, a.source_port)),
                    std::net::SocketAddr::from((a.destination_address, a.destination_port)),
                )),
                _ => None,
            },
        };
        let ours = match facts.addresses {
            proxy::Addresses::Inet {
                source,
                destination,
            } => Some((source, destination)),
            _ => None,
        };
        assert_eq!(ours, theirs, "{name}: addresses");
        assert_eq!(ours.map(|(_, d)| d.port()), Some(40201), "{name}");
    }
}

#[test]
fn proxy_v2_tlvs_from_haproxy() {
    let facts = |name| match proxy(&fixture(name)) {
        Sniff::Match { facts, .. } => facts,
        other => panic!("{other:?}"),
    };
    let tlvs = facts("proxy_v2_tlvs.bin");
    assert!(tlvs.checksum_verified);
    assert_eq!(tlvs.authority.as_deref(), Some("proxy.example.net"));
    assert_eq!(tlvs.unique_id.as_ref().map(|u| u.len()), Some(46));
    let no_authority = facts("proxy_v2_tlvs_no_authority.bin");
    assert!(no_authority.checksum_verified && no_authority.authority.is_none());
    let ssl = facts("proxy_v2_tlvs_ssl.bin").ssl.expect("SSL TLV");
    assert_eq!(
        (ssl.client, ssl.verify, ssl.version.as_deref()),
        (1, 0, Some("TLSv1.3"))
    );
    assert!(!facts("proxy_v2_tcp4.bin").checksum_verified);
}

#[test]
fn a_wrong_checksum_is_refused_where_it_is() {
    let mut data = fixture("proxy_v2_tlvs.bin");
    // The CRC32C value sits right after the addresses: 16 + 12 + 3.
    data[31] ^= 0xff;
    assert_eq!(
        proxy(&data),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Proxy(ProxyField::V2Checksum),
            offset: 31
        })
    );
}

/// A v2 header built by hand: command, family, addresses and TLVs.
fn v2(command: u8, family: u8, addresses: &[u8], tlvs: &[u8]) -> Vec<u8> {
    let mut h = proxy::V2_SIGNATURE.to_vec();
    h.extend_from_slice(&[0x20 | command, family]);
    h.extend_from_slice(&((addresses.len() + tlvs.len()) as u16).to_be_bytes());
    h.extend_from_slice(addresses);
    h.extend_from_slice(tlvs);
    h
}

#[test]
fn proxy_headers_haproxy_did_not_send_here() {
    let facts = |data: &[u8]| match assert_prefix_stable(data, proxy) {
        Sniff::Match { facts, len } => {
            assert_eq!(len, data.len());
            facts
        }
        other => panic!("{other:?}"),
    };
    // UNIX stream sockets, NUL-padded paths.
    let mut paths = [0u8; 216];
    paths[..9].copy_from_slice(b"/run/a.sk");
    paths[108..117].copy_from_slice(b"/run/b.sk");
    let unix = facts(&v2(1, 0x31, &paths, &[]));
    assert_eq!(
        unix.addresses,
        proxy::Addresses::Unix {
            source: "/run/a.sk".into(),
            destination: "/run/b.sk".into()
        }
    );
    assert_eq!(unix.transport, proxy::Transport::Stream);
    // LOCAL (a health check): addresses ignored.
    let local = facts(&v2(0, 0x11, &[1; 12], &[]));
    assert_eq!(
        (local.command, local.addresses),
        (proxy::Command::Local, proxy::Addresses::Unknown)
    );
    // LOCAL with no address block, or any family and transport, or TLVs
    // that make no sense: the block is discarded, as the spec says.
    for (family, block) in [
        (0x11, &[][..]),
        (0xFF, &[9; 5][..]),
        (0x21, &[0x02, 0, 9, b'a'][..]),
    ] {
        let local = facts(&v2(0, family, block, &[]));
        assert_eq!(
            (local.command, local.addresses, local.transport),
            (
                proxy::Command::Local,
                proxy::Addresses::Unknown,
                proxy::Transport::Unspecified
            ),
            "{family:#x} {block:?}"
        );
    }
    // An SSL TLV with a binary sub-TLV nobody knows yet: skipped.
    // Kind 0x20, 10 bytes: client 1, verify 0, then sub-TLV 0x28 [ff fe].
    let ssl = [0x20, 0, 10, 0x01, 0, 0, 0, 0, 0x28, 0, 2, 0xff, 0xfe];
    let with_ssl = facts(&v2(1, 0x11, &[0; 12], &ssl));
    let info = with_ssl.ssl.expect("the SSL TLV");
    assert_eq!((info.client, info.common_name), (1, None));
    // A known text sub-TLV that is not text is still malformed.
    let bad_cn = [&[0x20, 0, 9, 0x01, 0, 0, 0, 0][..], &[0x22, 0, 1, 0xff]].concat();
    assert!(matches!(
        proxy(&v2(1, 0x11, &[0; 12], &bad_cn)),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Proxy(ProxyField::V2Tlv),
            ..
        })
    ));
    // UNSPEC with an ALPN TLV, a NOOP and an unknown TLV kept raw.
    let tlvs = [
        &[0x01, 0, 2][..],
        b"h2",
        &[0x04, 0, 1, 0],
        &[0xE0, 0, 3],
        b"xyz",
    ]
    .concat();
    let unspec = facts(&v2(1, 0x00, &[], &tlvs));
    assert_eq!(unspec.alpn.as_deref(), Some(&b"h2"[..]));
    assert_eq!(unspec.other_tlvs, [(0xE0, Bytes::from_static(b"xyz"))]);
    // UDP over IPv4.
    let udp = facts(&v2(1, 0x12, &[10, 0, 0, 1, 10, 0, 0, 2, 0, 53, 1, 0], &[]));
    assert_eq!(udp.transport, proxy::Transport::Datagram);
    assert_eq!(udp.source(), Some("10.0.0.1:53".parse().unwrap()));
    // v1 UNKNOWN: the rest of the line is ignored.
    let unknown = facts(b"PROXY UNKNOWN ffff::1 whatever\r\n");
    assert_eq!(unknown.addresses, proxy::Addresses::Unknown);
    // A TLV that runs past the header, an address block too short.
    assert!(matches!(
        proxy(&v2(1, 0x11, &[0; 12], &[0x02, 0, 9, b'a'])),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Proxy(ProxyField::V2Tlv),
            ..
        })
    ));
    assert!(matches!(
        proxy(&v2(1, 0x21, &[0; 12], &[])),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Proxy(ProxyField::V2Address),
            ..
        })
    ));
    assert!(matches!(
        proxy(&v2(3, 0x11, &[0; 12], &[])),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Proxy(ProxyField::V2Header),
            ..
        })
    ));
    assert!(matches!(
        proxy(b"PROXY TCP4 1.2.3.4 5.6.7.8 01 2\r\n"),
        Sniff::Invalid(_)
    ));
}

#[test]
fn http_fixtures() {
    let Sniff::Match { facts, len } = assert_prefix_stable(&fixture("http_curl_get.bin"), head)
    else {
        panic!()
    };
    assert_eq!(
        (facts.method(), facts.path(), len),
        ("GET", "/path?q=1", 89)
    );
    assert_eq!(facts.host_name().as_deref(), Some("example.com"));
    assert!(!facts.is_upgrade());
    let Sniff::Match { facts, .. } = assert_prefix_stable(&fixture("http_curl_upgrade.bin"), head)
    else {
        panic!()
    };
    assert!(facts.is_upgrade());
    assert_eq!(facts.upgrade(), Some("websocket"));
}

/// The Host error at `offset`, if that is what `data` gives.
fn bad_host_at(data: &[u8]) -> Option<u64> {
    match assert_prefix_stable(data, head) {
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Http(HttpField::Host),
            offset,
        }) => Some(offset),
        _ => None,
    }
}

fn host_of(data: &[u8]) -> (Option<String>, Option<String>) {
    match assert_prefix_stable(data, head) {
        Sniff::Match { facts, .. } => (facts.host().map(String::from), facts.host_name()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_host_that_could_route_a_request_elsewhere_is_refused() {
    // Sent twice: servers disagree on which one counts.
    let twice = b"GET / HTTP/1.1\r\nHost: public.example\r\nHost: admin.internal\r\n\r\n";
    assert_eq!(bad_host_at(twice), Some(44), "the second Host");
    // An absolute-form target names another host: origin servers serve
    // the target's (RFC 9112, section 3.2.2).
    let absolute = b"GET http://admin.internal/ HTTP/1.1\r\nHost: public.example\r\n\r\n";
    assert_eq!(bad_host_at(absolute), Some(43));
    let connect = b"CONNECT admin.internal:443 HTTP/1.1\r\nHost: public.example:443\r\n\r\n";
    assert_eq!(bad_host_at(connect), Some(43));
    // A target's authority that is not a host[:port]: the request line's
    // fault, as the server reports it.
    let userinfo = b"GET http://public.example@admin.internal/ HTTP/1.1\r\n\r\n";
    assert!(matches!(
        assert_prefix_stable(userinfo, head),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Http(HttpField::RequestLine),
            offset: 4,
        })
    ));
    // A target of no form, as the server refuses it.
    for target in [
        "http:/admin.internal/",
        "@admin.internal/x",
        "a:@admin.internal/",
    ] {
        let request = format!("GET {target} HTTP/1.1\r\nHost: public.example\r\n\r\n");
        assert!(
            matches!(
                assert_prefix_stable(request.as_bytes(), head),
                Sniff::Invalid(Error::InvalidInput {
                    kind: InvalidInput::Http(HttpField::RequestLine),
                    offset: 4,
                })
            ),
            "{target}"
        );
    }
    // Not a host[:port].
    for host in [
        "[::1",
        "::1",
        "a b",
        "example.com:80x",
        "a/b",
        "example.com:80:80",
        "x]",
    ] {
        let data = format!("GET / HTTP/1.1\r\nHost: {host}\r\n\r\n");
        assert_eq!(bad_host_at(data.as_bytes()), Some(22), "{host}");
    }
}

#[test]
fn the_host_is_the_header_or_the_targets_authority() {
    let same = b"GET http://Example.COM:8080/x HTTP/1.1\r\nHost: example.com:8080\r\n\r\n";
    assert_eq!(
        host_of(same),
        (Some("example.com:8080".into()), Some("example.com".into()))
    );
    let no_header = b"GET http://example.com/x?y HTTP/1.0\r\n\r\n";
    assert_eq!(
        host_of(no_header),
        (Some("example.com".into()), Some("example.com".into()))
    );
    let connect = b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n";
    assert_eq!(host_of(connect).1.as_deref(), Some("example.com"));
    let v6 = b"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n";
    assert_eq!(host_of(v6), (Some("[::1]:8080".into()), Some("::1".into())));
    let empty = b"GET / HTTP/1.1\r\nHost:\r\n\r\n";
    assert_eq!(host_of(empty), (Some(String::new()), Some(String::new())));
    let none = b"GET / HTTP/1.0\r\n\r\n";
    assert_eq!(host_of(none), (None, None));
}

/// A request that a server reads (it skips empty lines before the
/// request line, RFC 9112 section 2.2, and a method is any token, RFC
/// 9110 section 9.1) is read here too, with its Host: answering "not
/// HTTP" would send it past every Host rule to the fallback.
#[test]
fn empty_lines_before_a_request_and_any_method_are_read() {
    for (data, method, len) in [
        (
            &b"\r\nGET / HTTP/1.1\r\nHost: admin.example\r\n\r\n"[..],
            "GET",
            41,
        ),
        (
            b"\r\n\r\n\nGET / HTTP/1.1\r\nHost: admin.example\r\n\r\n",
            "GET",
            44,
        ),
        (b"get / HTTP/1.1\r\nHost: admin.example\r\n\r\n", "get", 39),
        (
            b"m-search * HTTP/1.1\r\nHost: admin.example\r\n\r\n",
            "m-search",
            44,
        ),
        (
            b"\r\n1x / HTTP/1.1\r\nHost: admin.example\r\n\r\n",
            "1x",
            40,
        ),
    ] {
        let data = with_trailing(data);
        let Sniff::Match { facts, len: n } = assert_prefix_stable(&data, head) else {
            panic!("{:?}", data.escape_ascii().to_string())
        };
        assert_eq!(
            (facts.method(), facts.host(), n),
            (method, Some("admin.example"), len)
        );
        // Resumed a byte at a time: the same answer.
        let mut sniffer = http::Sniffer::new();
        for end in 1..=data.len() {
            sniffer.sniff(
                &data[..end],
                http::DEFAULT_MAX_HEAD,
                http::DEFAULT_MAX_HEADERS,
            );
        }
        assert_eq!(sniffer.answer(), &head(&data));
    }
    // What no request starts with is still refused at its first byte,
    // after empty lines too; the PROXY v2 signature (empty lines, then a
    // NUL) among them.
    for data in [
        &b"{\"id\":1}"[..],
        b"\r\n\x16\x03\x01",
        b"\r\n\r\n\0\r\nQUIT\n",
        b"\r\r\n",
    ] {
        assert_eq!(
            head(data),
            Sniff::NoMatch,
            "{:?}",
            data.escape_ascii().to_string()
        );
    }
    // Empty lines alone are not an answer yet, and count to the budget.
    assert_eq!(head(b"\r\n\r\n\r"), Sniff::NeedMore);
    assert!(matches!(
        http::sniff(&[b'\n'; 9], 8, http::DEFAULT_MAX_HEADERS),
        Sniff::Invalid(Error::LimitExceeded { .. })
    ));
}

#[test]
fn each_fixture_matches_its_own_sniffer_only() {
    for name in ALL {
        let data = fixture(name);
        let kind = name.split('_').next().unwrap();
        let answers = [
            (
                "tls",
                !matches!(assert_prefix_stable(&data, tls), Sniff::NoMatch),
            ),
            (
                "http",
                !matches!(assert_prefix_stable(&data, head), Sniff::NoMatch),
            ),
            (
                "proxy",
                !matches!(assert_prefix_stable(&data, proxy), Sniff::NoMatch),
            ),
            (
                "ssh",
                !matches!(
                    assert_prefix_stable(&data, |d| prefix::sniff(d, b"SSH-")),
                    Sniff::NoMatch
                ),
            ),
        ];
        for (sniffer, matched) in answers {
            assert_eq!(matched, sniffer == kind, "{name}: {sniffer} sniffer");
        }
    }
}

#[test]
fn budgets_are_kept() {
    let data = fixture("tls_curl.bin");
    let answer = tls::sniff(&data, 300);
    assert!(
        matches!(
            answer,
            Sniff::Invalid(Error::LimitExceeded {
                limit: cleave_proto::Limit::SniffBudget,
                max: 300,
                ..
            })
        ),
        "{answer:?}"
    );
    let many_headers = format!("GET / HTTP/1.1\r\n{}\r\n", "X: y\r\n".repeat(65));
    assert!(matches!(
        head(many_headers.as_bytes()),
        Sniff::Invalid(Error::LimitExceeded { .. })
    ));
    let endless = format!("GET /{} HTTP/1.1\r\n", "a".repeat(9000));
    assert!(matches!(
        head(endless.as_bytes()),
        Sniff::Invalid(Error::LimitExceeded { .. })
    ));
    let long_v1 = format!("PROXY TCP4 {}\r\n", "1".repeat(120));
    assert!(matches!(proxy(long_v1.as_bytes()), Sniff::Invalid(_)));
    // A zero budget decides at the first byte, like the other sniffers.
    assert!(matches!(
        tls::sniff(&data, 0),
        Sniff::Invalid(Error::LimitExceeded { max: 0, .. })
    ));
    assert_eq!(tls::sniff(b"GET", 0), Sniff::NoMatch);
    assert_eq!(tls::sniff(b"", 0), Sniff::NeedMore);
    assert!(matches!(
        http::sniff(b"GET", 0, 8),
        Sniff::Invalid(Error::LimitExceeded { max: 0, .. })
    ));
    assert!(matches!(
        proxy::sniff(b"PROXY", 0),
        Sniff::Invalid(Error::LimitExceeded { max: 0, .. })
    ));
}

#[test]
fn malformed_tls_lengths_are_typed_errors() {
    let data = fixture("tls_curl.bin");
    // The handshake length claims more than the record holds.
    let mut bad = data.clone();
    bad[6] = 0xff;
    assert!(matches!(
        tls(&bad),
        Sniff::Invalid(Error::LimitExceeded { .. }) | Sniff::NeedMore
    ));
    // A record of length zero.
    assert_eq!(
        tls(b"\x16\x03\x01\x00\x00"),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Tls(TlsField::Record),
            offset: 3
        })
    );
    // A handshake that is not a ClientHello.
    assert!(matches!(
        tls(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00"),
        Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Tls(TlsField::Handshake),
            ..
        })
    ));
    // An extension that runs past the hello: cut the extensions length.
    let mut bad = data;
    let body = &bad[9..];
    let sid = body[34] as usize;
    let suites = u16::from_be_bytes([body[35 + sid], body[36 + sid]]) as usize;
    let comp = body[37 + sid + suites] as usize;
    let ext_at = 9 + 38 + sid + suites + comp;
    bad[ext_at] = 0xff;
    assert!(
        matches!(
            tls(&bad),
            Sniff::Invalid(Error::InvalidInput {
                kind: InvalidInput::Tls(TlsField::ClientHello | TlsField::Extension),
                ..
            })
        ),
        "{:?}",
        tls(&bad)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Fixtures with random bytes changed: no panic, and every sniffer is
    /// still prefix-stable.
    #[test]
    fn mutated_fixtures_stay_prefix_stable(which in 0usize..15, edits in prop::collection::vec((any::<usize>(), any::<u8>()), 1..4)) {
        let mut data = fixture(ALL[which]);
        for (at, byte) in edits {
            let at = at % data.len();
            data[at] = byte;
        }
        assert_prefix_stable(&data, tls);
        assert_prefix_stable(&data, head);
        assert_prefix_stable(&data, proxy);
    }

    /// Any budget, even one shorter than a header: still prefix-stable
    /// (found by fuzzing: a v2 header under a budget of 0 once answered
    /// differently at 12 bytes and at 16).
    #[test]
    fn tight_budgets_stay_prefix_stable(which in 0usize..15, budget in 0usize..400) {
        let data = fixture(ALL[which]);
        assert_prefix_stable(&data, |d| tls::sniff(d, budget));
        assert_prefix_stable(&data, |d| http::sniff(d, budget, 8));
        assert_prefix_stable(&data, |d| proxy::sniff(d, budget));
    }
}

/// A PROXY v2 header with `family_transport` and `addresses` bytes of
/// addresses, command PROXY.
fn proxy_v2(family_transport: u8, addresses: &[u8]) -> Vec<u8> {
    let mut header = proxy::V2_SIGNATURE.to_vec();
    header.extend_from_slice(&[0x21, family_transport]);
    header.extend_from_slice(&u16::try_from(addresses.len()).unwrap().to_be_bytes());
    header.extend_from_slice(addresses);
    header
}

/// The family and transport byte of a PROXY v2 header: seven values are
/// defined, and "other values ... must be rejected as invalid by
/// receivers" (proxy-protocol.txt, section 2.2): UNSPEC with a transport,
/// a family with none, and undefined nibbles.
#[test]
fn proxy_v2_takes_only_the_seven_defined_family_transport_bytes() {
    let defined = [
        (0x00, 0),
        (0x11, 12),
        (0x12, 12),
        (0x21, 36),
        (0x22, 36),
        (0x31, 216),
        (0x32, 216),
    ];
    for byte in 0..=u8::MAX {
        let len = defined.iter().find(|(b, _)| *b == byte).map(|(_, n)| *n);
        let header = proxy_v2(byte, &vec![1; len.unwrap_or(216)]);
        let got = proxy::sniff(&header, proxy::DEFAULT_MAX_HEADER);
        if len.is_some() {
            assert!(
                matches!(got, Sniff::Match { len, .. } if len == header.len()),
                "{byte:#04x}: {got:?}"
            );
        } else {
            assert!(
                matches!(
                    got,
                    Sniff::Invalid(Error::InvalidInput {
                        kind: InvalidInput::Proxy(ProxyField::V2Header),
                        offset: 13
                    })
                ),
                "{byte:#04x}: {got:?}"
            );
        }
    }
}

/// PROXY v1 UNKNOWN: "the receiver must ignore anything presented before
/// the CRLF is found" (section 2.1), bytes that are not UTF-8 too.
#[test]
fn proxy_v1_unknown_ignores_the_rest_of_its_line_whatever_its_bytes() {
    for line in [
        &b"PROXY UNKNOWN\r\nGET / HTTP/1.1\r\n"[..],
        b"PROXY UNKNOWN ffff::1 ffff::2 1 2\r\nGET / HTTP/1.1\r\n",
        b"PROXY UNKNOWN \xff\xfe garbage\r\nGET / HTTP/1.1\r\n",
    ] {
        let end = line.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        match proxy::sniff(line, proxy::DEFAULT_MAX_HEADER) {
            Sniff::Match { len, .. } => assert_eq!(len, end, "{line:?}"),
            other => panic!("{line:?}: {other:?}"),
        }
    }
    // Not UNKNOWN: a protocol that only starts like it is malformed.
    let got = proxy::sniff(b"PROXY UNKNOWNX\r\n", proxy::DEFAULT_MAX_HEADER);
    assert!(matches!(got, Sniff::Invalid(_)), "{got:?}");
}

/// Each prefix of `data` through one resumed `proxy::Sniffer` answers as
/// `proxy::sniff` on that prefix.
fn proxy_resumes_as_pure(data: &[u8]) {
    let mut sniffer = proxy::Sniffer::new();
    for end in 0..=data.len() {
        let resumed = sniffer
            .sniff(&data[..end], proxy::DEFAULT_MAX_HEADER)
            .clone();
        let pure = proxy::sniff(&data[..end], proxy::DEFAULT_MAX_HEADER);
        assert_eq!(
            resumed,
            pure,
            "{:?} at {end}",
            String::from_utf8_lossy(data)
        );
    }
}

/// "If ... the 5 first characters match ... "PROXY" then the protocol
/// must be parsed as version 1" (section 2.2): "PROXY" without its space
/// is a malformed v1 header, not another protocol (with an optional PROXY
/// header, that would hand the bytes on as the client's own).
#[test]
fn proxy_without_its_space_is_a_malformed_v1_header() {
    for data in [
        &b"PROXY\tTCP4 192.0.2.1 198.51.100.1 56324 443\r\n"[..],
        b"PROXY\r\nGET / HTTP/1.1\r\n",
        b"PROXYTCP4 192.0.2.1 198.51.100.1 56324 443\r\n",
    ] {
        let got = proxy::sniff(data, proxy::DEFAULT_MAX_HEADER);
        assert_eq!(
            got,
            Sniff::Invalid(Error::InvalidInput {
                kind: InvalidInput::Proxy(ProxyField::V1),
                offset: 5
            }),
            "{:?}",
            String::from_utf8_lossy(data)
        );
        proxy_resumes_as_pure(data);
    }
    for undecided in [&b"PROX"[..], b"PROXY"] {
        let got = proxy::sniff(undecided, proxy::DEFAULT_MAX_HEADER);
        assert_eq!(got, Sniff::NeedMore, "{undecided:?}");
    }
    let got = proxy::sniff(b"PROXZ", proxy::DEFAULT_MAX_HEADER);
    assert_eq!(got, Sniff::NoMatch);
}

/// An UNKNOWN line ends at its CRLF: a lone LF before it is one of the
/// bytes "presented before the CRLF" that a receiver ignores (section
/// 2.1), however the bytes arrive. In any other line a bare LF is
/// malformed, as before.
#[test]
fn proxy_v1_unknown_reads_to_its_crlf_past_a_lone_lf() {
    for data in [
        &b"PROXY UNKNOWN a\nb\r\nGET / HTTP/1.1\r\n"[..],
        b"PROXY UNKNOWN\n\n\r\nGET / HTTP/1.1\r\n",
        b"PROXY UNKNOWN \n x \n\r\n",
    ] {
        let end = data.windows(2).position(|w| w == b"\r\n").unwrap() + 2;
        match proxy::sniff(data, proxy::DEFAULT_MAX_HEADER) {
            Sniff::Match { facts, len } => {
                assert_eq!(facts.addresses, proxy::Addresses::Unknown);
                assert_eq!(len, end, "{data:?}");
            }
            other => panic!("{data:?}: {other:?}"),
        }
        proxy_resumes_as_pure(data);
    }
    for data in [
        &b"PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\n\r\n"[..],
        b"PROXY UNKNOWNX\nfoo\r\n",
    ] {
        let got = proxy::sniff(data, proxy::DEFAULT_MAX_HEADER);
        assert!(
            matches!(
                got,
                Sniff::Invalid(Error::InvalidInput {
                    kind: InvalidInput::Proxy(ProxyField::V1),
                    ..
                })
            ),
            "{data:?}: {got:?}"
        );
        proxy_resumes_as_pure(data);
    }
    // The line limit (107 bytes) holds with lone LFs in it.
    let mut long = b"PROXY UNKNOWN ".to_vec();
    long.extend(std::iter::repeat_n(b'\n', 120));
    long.extend_from_slice(b"\r\n");
    let got = proxy::sniff(&long, proxy::DEFAULT_MAX_HEADER);
    assert!(matches!(got, Sniff::Invalid(_)), "{got:?}");
    proxy_resumes_as_pure(&long);
}

/// A resumed sniffer given a smaller budget than the bytes it already
/// looked at starts over: it answers as the pure sniff on the same bytes
/// with that budget, where it used to index past its window.
#[test]
fn a_smaller_budget_starts_a_resumed_sniffer_over() {
    let head = b"GET / HTTP/1.1\r\nHost: example.com\r\nX-Pad: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    for small in [0, 1, 10, 20, 40] {
        let mut sniffer = http::Sniffer::new();
        sniffer.sniff(head, http::DEFAULT_MAX_HEAD, http::DEFAULT_MAX_HEADERS);
        assert!(sniffer.answer().is_need_more());
        let resumed = sniffer
            .sniff(head, small, http::DEFAULT_MAX_HEADERS)
            .clone();
        assert_eq!(
            resumed,
            http::sniff(head, small, http::DEFAULT_MAX_HEADERS),
            "HTTP, budget {small}"
        );
    }
    let line = b"PROXY TCP4 192.0.2.1 198.51.100.2 1 2";
    for small in [0, 1, 6, 16, 30] {
        let mut sniffer = proxy::Sniffer::new();
        sniffer.sniff(line, proxy::DEFAULT_MAX_HEADER);
        assert!(sniffer.answer().is_need_more());
        let resumed = sniffer.sniff(line, small).clone();
        assert_eq!(resumed, proxy::sniff(line, small), "PROXY, budget {small}");
    }
}
