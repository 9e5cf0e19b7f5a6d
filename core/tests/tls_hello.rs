//! ClientHellos as servers read them: the record layer's version is
//! ignored (RFC 8446, section 5.1), and the server_name extension is read
//! as rustls reads it, trailing bytes included. Every case is held against
//! rustls's `Acceptor` on the same bytes.

#[path = "support/fixtures.rs"]
mod fixtures;

use core::time::Duration;
use fixtures::{fixture, TLS_FIXTURES};

use cleave_proto::route::{HostPattern, Match, Reason, Router};
use cleave_proto::sniff::{tls, Sniff};
use cleave_proto::{Error, InvalidInput, TlsField};

/// rustls's server name for the hello, or its error.
fn rustls_sni(data: &[u8]) -> Result<Option<String>, String> {
    let mut acceptor = rustls::server::Acceptor::default();
    let mut reader = data;
    while !reader.is_empty() {
        acceptor.read_tls(&mut reader).map_err(|e| e.to_string())?;
    }
    match acceptor.accept() {
        Ok(Some(accepted)) => Ok(accepted.client_hello().server_name().map(String::from)),
        Ok(None) => Err("incomplete".into()),
        Err((e, _)) => Err(e.to_string()),
    }
}

/// cleave's server name for the hello, or its answer when it is not a
/// match.
fn cleave_sni(data: &[u8]) -> Result<Option<String>, Sniff<tls::ClientHello>> {
    match tls::sniff(data, tls::DEFAULT_MAX_HELLO) {
        Sniff::Match { facts, len } if len == data.len() => Ok(facts.server_name),
        other => Err(other),
    }
}

/// Sets every record header's version to `version`.
fn with_record_version(data: &[u8], version: u16) -> Vec<u8> {
    let mut out = data.to_vec();
    let mut at = 0;
    while at + 5 <= out.len() {
        out[at + 1..at + 3].copy_from_slice(&version.to_be_bytes());
        at += 5 + usize::from(u16::from_be_bytes([out[at + 3], out[at + 4]]));
    }
    out
}

#[test]
fn any_record_version_3_x_routes_by_sni_as_rustls_reads_it() {
    for name in TLS_FIXTURES {
        let data = fixture(name);
        let expected = cleave_sni(&data).expect("the capture matches");
        let mut router = Router::new("fallback");
        if let Some(sni) = &expected {
            router = router.rule(Match::TlsServerName(HostPattern::new(sni)), "sni");
        }
        let router = router.rule(Match::Tls, "tls");
        for minor in 0..=0xffu16 {
            let hello = with_record_version(&data, 0x0300 | minor);
            let ours = cleave_sni(&hello);
            assert_eq!(
                ours.as_ref().ok(),
                Some(&expected),
                "{name}, 0x03{minor:02x}"
            );
            assert_eq!(
                rustls_sni(&hello),
                Ok(expected.clone()),
                "{name}, 0x03{minor:02x}"
            );
            let decision = router.route(&hello, Duration::ZERO).expect("decided");
            let target = if expected.is_some() { "sni" } else { "tls" };
            assert_eq!(
                (decision.target, decision.reason),
                (target, Reason::Matched)
            );
            assert_eq!(
                tls::sniff(&hello, tls::DEFAULT_MAX_HELLO)
                    .facts()
                    .map(|f| f.record_version),
                Some(0x0300 | minor)
            );
        }
    }
}

#[test]
fn a_record_major_version_other_than_3_is_not_tls() {
    let data = fixture("tls_curl.bin");
    for version in [0x0001, 0x0201, 0x0401, 0xfe01] {
        let hello = with_record_version(&data, version);
        assert_eq!(cleave_sni(&hello), Err(Sniff::NoMatch), "0x{version:04x}");
        assert!(rustls_sni(&hello).is_err(), "0x{version:04x}");
    }
}

/// A ClientHello record with its server_name extension's data replaced by
/// `sni` (or added if it had none).
fn with_server_name_extension(record: &[u8], sni: &[u8]) -> Vec<u8> {
    let hs = &record[5..];
    let mut at = 4 + 2 + 32;
    at += 1 + usize::from(hs[at]);
    at += 2 + usize::from(u16::from_be_bytes([hs[at], hs[at + 1]]));
    at += 1 + usize::from(hs[at]);
    let mut extensions = Vec::new();
    let mut e = at + 2;
    let mut replaced = false;
    while e < hs.len() {
        let kind = u16::from_be_bytes([hs[e], hs[e + 1]]);
        let len = usize::from(u16::from_be_bytes([hs[e + 2], hs[e + 3]]));
        let data = if kind == 0 {
            replaced = true;
            sni
        } else {
            &hs[e + 4..e + 4 + len]
        };
        extensions.extend_from_slice(&kind.to_be_bytes());
        extensions.extend_from_slice(&u16::try_from(data.len()).unwrap().to_be_bytes());
        extensions.extend_from_slice(data);
        e += 4 + len;
    }
    if !replaced {
        let mut first = vec![0, 0];
        first.extend_from_slice(&u16::try_from(sni.len()).unwrap().to_be_bytes());
        first.extend_from_slice(sni);
        extensions.splice(0..0, first);
    }
    let mut body = hs[4..at].to_vec();
    body.extend_from_slice(&u16::try_from(extensions.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut handshake = vec![1];
    handshake.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut out = vec![22, 3, 1];
    out.extend_from_slice(&u16::try_from(handshake.len()).unwrap().to_be_bytes());
    out.extend_from_slice(&handshake);
    out
}

/// A server_name list's entries: (name type, value).
type Entries<'a> = &'a [(u8, &'a [u8])];

/// A server_name list: (name type, value) entries, then `after` bytes
/// inside the list, then `trailing` bytes after it in the extension.
fn sni_list(entries: &[(u8, &[u8])], after: &[u8], trailing: &[u8]) -> Vec<u8> {
    let mut list = Vec::new();
    for (kind, value) in entries {
        list.push(*kind);
        list.extend_from_slice(&u16::try_from(value.len()).unwrap().to_be_bytes());
        list.extend_from_slice(value);
    }
    list.extend_from_slice(after);
    let mut out = u16::try_from(list.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(&list);
    out.extend_from_slice(trailing);
    out
}

fn refused_as_server_name(answer: Result<Option<String>, Sniff<tls::ClientHello>>) -> bool {
    matches!(
        answer,
        Err(Sniff::Invalid(Error::InvalidInput {
            kind: InvalidInput::Tls(TlsField::ServerName),
            ..
        }))
    )
}

#[test]
fn the_rebuilt_hello_is_read_as_the_capture() {
    let data = fixture("tls_openssl_sni_alpn.bin");
    let same = with_server_name_extension(&data, &sni_list(&[(0, b"example.com")], b"", b""));
    assert_eq!(same, data);
}

#[test]
fn trailing_bytes_after_the_server_name_list_are_refused_as_rustls_and_openssl_refuse_them() {
    let data = fixture("tls_openssl_sni_alpn.bin");
    for trailing in [&b"\0"[..], b"\x01", b"\0\0\0"] {
        let hello =
            with_server_name_extension(&data, &sni_list(&[(0, b"example.com")], b"", trailing));
        assert!(
            refused_as_server_name(cleave_sni(&hello)),
            "{trailing:?}: {:?}",
            cleave_sni(&hello)
        );
        assert!(rustls_sni(&hello).is_err(), "{trailing:?}");
    }
}

#[test]
fn an_entry_of_unknown_type_ends_the_list_as_rustls_reads_it() {
    let data = fixture("tls_openssl_sni_alpn.bin");
    let cases: [(Entries<'_>, &[u8], Option<&str>); 3] = [
        // host_name, then an entry of another type: ignored.
        (
            &[(0, b"example.com"), (1, b"other.example.net")],
            b"",
            Some("example.com"),
        ),
        // host_name, then one byte of an unknown type and nothing more.
        (&[(0, b"example.com")], b"\x07", Some("example.com")),
        (
            &[(0, b"example.com")],
            b"\x02garbage that cannot be skipped",
            Some("example.com"),
        ),
    ];
    for (entries, after, expected) in cases {
        let hello = with_server_name_extension(&data, &sni_list(entries, after, b""));
        let expected = expected.map(String::from);
        assert_eq!(
            cleave_sni(&hello),
            Ok(expected.clone()),
            "{entries:?} {after:?}"
        );
        assert_eq!(rustls_sni(&hello), Ok(expected), "{entries:?} {after:?}");
    }
}

#[test]
fn a_second_host_name_a_cut_entry_or_no_host_name_is_refused_as_rustls_refuses_it() {
    let data = fixture("tls_openssl_sni_alpn.bin");
    let cases: [(Entries<'_>, &[u8]); 5] = [
        (&[(0, b"example.com"), (0, b"evil.example.net")], b""),
        // An unknown type first: the host name after it is not read, and
        // a list without one is refused.
        (&[(9, b"x")], b"\0\0\x0bexample.com"),
        (&[(1, b"example.com")], b""),
        (&[(0, b"example.com")], b"\0"),
        (&[(0, b"example.com")], b"\0\0\x09evil"),
    ];
    for (entries, after) in cases {
        let hello = with_server_name_extension(&data, &sni_list(entries, after, b""));
        assert!(
            refused_as_server_name(cleave_sni(&hello)),
            "{entries:?} {after:?}"
        );
        assert!(rustls_sni(&hello).is_err(), "{entries:?} {after:?}");
    }
}

/// An IP address given as the host name (RFC 6066 forbids it; some
/// clients send it): rustls ignores it and takes the hello as one with no
/// server name, and so does cleave, so `Match::Tls` still routes it. A
/// name that is neither is refused by both.
#[test]
fn an_ip_address_as_host_name_is_ignored_as_rustls_ignores_it() {
    let data = fixture("tls_openssl_sni_alpn.bin");
    for ip in [&b"192.0.2.1"[..], b"::1", b"2001:db8::7"] {
        let hello = with_server_name_extension(&data, &sni_list(&[(0, ip)], b"", b""));
        assert_eq!(rustls_sni(&hello), Ok(None), "{ip:?}");
        assert_eq!(cleave_sni(&hello), Ok(None), "{ip:?}");
        let router = Router::new("fallback").rule(Match::Tls, "tls");
        let decision = router.route(&hello, Duration::ZERO).unwrap();
        assert_eq!(decision.target, "tls", "{ip:?}: {:?}", decision.reason);
    }
    let hello = with_server_name_extension(&data, &sni_list(&[(0, b"bad name!")], b"", b""));
    assert!(refused_as_server_name(cleave_sni(&hello)));
    assert!(rustls_sni(&hello).is_err());
}

/// Host names as rustls (pki-types) judges them, held against it both
/// ways: a last label that is a number (decimal, or hex after `0x`: an
/// IPv4 address in another form) and a name past 253 bytes with its
/// trailing dot are refused; names that only look numeric elsewhere, a
/// trailing dot, `_`, and 63-byte labels are taken.
#[test]
fn host_names_are_judged_as_rustls_judges_them() {
    let data = fixture("tls_openssl_sni_alpn.bin");
    let a63 = "a".repeat(63);
    let long = format!("{a63}.{a63}.{a63}.{}.", "b".repeat(61)); // 254 bytes
    let longest = format!("{a63}.{a63}.{a63}.{}.", "b".repeat(60)); // 253
    let refused = [
        "0x7f.0.0.1",
        "a.123",
        "example.0x1f",
        "example.0X",
        "x.0",
        "x.00",
        "a.1.",
        long.as_str(),
        "-a.example",
        "a-.example",
        "a..example",
        ".",
    ];
    for name in refused {
        let hello = with_server_name_extension(&data, &sni_list(&[(0, name.as_bytes())], b"", b""));
        assert!(rustls_sni(&hello).is_err(), "rustls takes {name:?}");
        assert!(
            refused_as_server_name(cleave_sni(&hello)),
            "{name:?}: {:?}",
            cleave_sni(&hello)
        );
    }
    let taken = [
        "123.example",
        "0x1f.example",
        "example.0xg",
        "example.1a",
        "a_b.example",
        "example.com.",
        longest.as_str(),
        "x",
    ];
    for name in taken {
        let hello = with_server_name_extension(&data, &sni_list(&[(0, name.as_bytes())], b"", b""));
        // rustls gives the name without its trailing dot; cleave keeps
        // it as sent (its `HostPattern`s match either way).
        let bare = name.strip_suffix('.').unwrap_or(name);
        assert_eq!(
            rustls_sni(&hello),
            Ok(Some(bare.to_owned())),
            "rustls, {name:?}"
        );
        assert_eq!(cleave_sni(&hello), Ok(Some(name.to_owned())), "{name:?}");
    }
}
