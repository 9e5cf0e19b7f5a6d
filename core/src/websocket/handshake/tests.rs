use super::*;
use crate::error::Misuse;
use crate::http1::{Client, ClientEvent, Request, Response, Server, ServerEvent};
use crate::Conn;
use alloc::format;
use alloc::string::ToString;
use core::time::Duration;

const KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";

fn parse_request(bytes: &[u8]) -> Request {
    let mut conn = Conn::new(Server::new(), Duration::ZERO);
    conn.feed(bytes, Duration::ZERO).unwrap();
    match conn.poll_event().unwrap() {
        Some(ServerEvent::Head(request)) => request,
        other => panic!("not a request head: {other:?}"),
    }
}

fn parse_response(bytes: &[u8]) -> Response {
    let mut client = Client::new();
    client.expect_upgrade("GET");
    let mut conn = Conn::new(client, Duration::ZERO);
    conn.feed(bytes, Duration::ZERO).unwrap();
    match conn.poll_event().unwrap() {
        Some(ClientEvent::Head(response)) => response,
        other => panic!("not a response head: {other:?}"),
    }
}

/// A valid request with `fields` in place of the handshake's own
/// (each `(name, None)` removes one, `(name, Some(value))` replaces
/// or adds it), after a request line.
fn request_with(line: &str, fields: &[(&str, Option<&str>)]) -> Request {
    let mut all: Vec<(String, String)> = [
        ("Host", "server.example.com"),
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", KEY),
        ("Sec-WebSocket-Version", "13"),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), v.to_string()))
    .collect();
    for (name, value) in fields {
        let at = all.iter().position(|(n, _)| n.eq_ignore_ascii_case(name));
        match (at, value) {
            (Some(at), Some(v)) => all[at].1 = v.to_string(),
            (Some(at), None) => drop(all.remove(at)),
            (None, Some(v)) => all.push((name.to_string(), v.to_string())),
            (None, None) => {}
        }
    }
    let mut text = format!("{line}\r\n");
    for (name, value) in all {
        text += &format!("{name}: {value}\r\n");
    }
    text += "\r\n";
    parse_request(text.as_bytes())
}

fn valid(fields: &[(&str, Option<&str>)]) -> Request {
    request_with("GET /chat HTTP/1.1", fields)
}

fn is_handshake_error(result: &Result<Accepted, Error>) -> bool {
    matches!(
        result,
        Err(Error::InvalidInput {
            kind: InvalidInput::WebSocket(WsField::Handshake),
            offset: 0
        })
    )
}

#[test]
fn accept_key_is_the_rfc_example() {
    assert_eq!(&accept_key(KEY.as_bytes()), b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

#[test]
fn accepts_a_valid_request() {
    let accepted = accept(&valid(&[]), &AcceptConfig::default()).unwrap();
    assert_eq!(
        accepted.response(),
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
    );
    assert_eq!(accepted.protocol(), None);
    let response = parse_response(accepted.response());
    assert!(response.switches());
}

#[test]
fn refuses_each_missing_or_wrong_requirement() {
    let config = AcceptConfig::default();
    let refused: &[(&str, Request)] = &[
        ("POST", request_with("POST /chat HTTP/1.1", &[])),
        ("HTTP/1.0", request_with("GET /chat HTTP/1.0", &[])),
        ("no Upgrade", valid(&[("Upgrade", None)])),
        ("Upgrade: h2c", valid(&[("Upgrade", Some("h2c"))])),
        (
            "Upgrade: websockets",
            valid(&[("Upgrade", Some("websockets"))]),
        ),
        ("no Connection", valid(&[("Connection", None)])),
        (
            "Connection: keep-alive",
            valid(&[("Connection", Some("keep-alive"))]),
        ),
        (
            "Connection: upgrades",
            valid(&[("Connection", Some("upgrades"))]),
        ),
        ("no key", valid(&[("Sec-WebSocket-Key", None)])),
        ("empty key", valid(&[("Sec-WebSocket-Key", Some(""))])),
        // 15 and 17 bytes, not base64, unpadded, non-canonical bits.
        (
            "short key",
            valid(&[("Sec-WebSocket-Key", Some("AAAAAAAAAAAAAAAAAAAA"))]),
        ),
        (
            "long key",
            valid(&[("Sec-WebSocket-Key", Some("AAAAAAAAAAAAAAAAAAAAAAA="))]),
        ),
        (
            "not base64",
            valid(&[("Sec-WebSocket-Key", Some("!!!!!!!!!!!!!!!!!!!!!!=="))]),
        ),
        (
            "unpadded",
            valid(&[("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZQ"))]),
        ),
        (
            "trailing bits",
            valid(&[("Sec-WebSocket-Key", Some("dGhlIHNhbXBsZSBub25jZR=="))]),
        ),
        ("no version", valid(&[("Sec-WebSocket-Version", None)])),
        ("version 8", valid(&[("Sec-WebSocket-Version", Some("8"))])),
        (
            "version 13, 8",
            valid(&[("Sec-WebSocket-Version", Some("13, 8"))]),
        ),
        ("a body", valid(&[("Content-Length", Some("3"))])),
    ];
    for (what, request) in refused {
        assert!(is_handshake_error(&accept(request, &config)), "{what}");
    }
}

#[test]
fn refuses_repeated_key_and_version() {
    let key = KEY.as_bytes();
    let two_keys = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Key: {KEY}\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    let request = parse_request(two_keys.as_bytes());
    assert_eq!(request.headers().get("sec-websocket-key"), Some(key));
    assert!(is_handshake_error(&accept(
        &request,
        &AcceptConfig::default()
    )));
    let two_versions = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n\
         Sec-WebSocket-Version: 13\r\n\r\n"
    );
    let request = parse_request(two_versions.as_bytes());
    assert!(is_handshake_error(&accept(
        &request,
        &AcceptConfig::default()
    )));
    assert!(refusal(&request).starts_with(b"HTTP/1.1 426 "));
}

#[test]
fn a_body_of_length_zero_is_no_body() {
    assert!(accept(
        &valid(&[("Content-Length", Some("0"))]),
        &AcceptConfig::default()
    )
    .is_ok());
}

#[test]
fn refusal_is_426_for_the_version_only() {
    let response = parse_response(&refusal(&valid(&[("Sec-WebSocket-Version", Some("8"))])));
    assert_eq!(response.status(), 426);
    assert_eq!(
        response.headers().get("sec-websocket-version"),
        Some(&b"13"[..])
    );
    assert_eq!(response.headers().get("content-length"), Some(&b"0"[..]));
    assert!(!response.keep_alive());

    for request in [
        valid(&[("Sec-WebSocket-Key", None)]),
        valid(&[("Connection", Some("keep-alive"))]),
        request_with("POST / HTTP/1.1", &[("Sec-WebSocket-Version", Some("8"))]),
    ] {
        let response = parse_response(&refusal(&request));
        assert_eq!(response.status(), 400);
        assert_eq!(response.headers().get("sec-websocket-version"), None);
        assert_eq!(response.headers().get("content-length"), Some(&b"0"[..]));
        assert!(!response.keep_alive());
    }
}

#[test]
fn tokens_are_compared_without_case() {
    let request = parse_request(
        format!(
            "GET / HTTP/1.1\r\nhost: a\r\nupgrade: WebSocket\r\nCONNECTION: UPGRADE\r\n\
             sec-websocket-key: {KEY}\r\nSEC-WEBSOCKET-VERSION: 13\r\n\r\n"
        )
        .as_bytes(),
    );
    assert!(accept(&request, &AcceptConfig::default()).is_ok());
}

#[test]
fn tokens_are_found_in_lists() {
    let config = AcceptConfig::default();
    for (upgrade, connection) in [
        ("websocket", "keep-alive, Upgrade"),
        ("h2c, websocket", "Upgrade,keep-alive"),
        ("websocket", "keep-alive , upgrade ,"),
    ] {
        let request = valid(&[("Upgrade", Some(upgrade)), ("Connection", Some(connection))]);
        assert!(
            accept(&request, &config).is_ok(),
            "{upgrade} / {connection}"
        );
    }
}

#[test]
fn chooses_the_servers_preferred_protocol_among_the_offered() {
    let config = AcceptConfig::default().protocols(["v3", "v2", "v1"]);
    let cases: &[(&[&str], Option<&str>)] = &[
        (&["v1, v2"], Some("v2")),
        (&["v1", "v3"], Some("v3")),
        (&["v1,,  v0"], Some("v1")),
        (&["V2, v4"], None),
        (&[], None),
    ];
    for (offers, chosen) in cases {
        let mut text = format!(
            "GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
             Sec-WebSocket-Key: {KEY}\r\nSec-WebSocket-Version: 13\r\n"
        );
        for offer in *offers {
            text += &format!("Sec-WebSocket-Protocol: {offer}\r\n");
        }
        text += "\r\n";
        let accepted = accept(&parse_request(text.as_bytes()), &config).unwrap();
        assert_eq!(accepted.protocol(), *chosen, "{offers:?}");
        let response = parse_response(accepted.response());
        let field = response.headers().get("sec-websocket-protocol");
        assert_eq!(field, chosen.map(str::as_bytes), "{offers:?}");
    }
    let request = valid(&[("Sec-WebSocket-Protocol", Some("v1"))]);
    assert_eq!(
        accept(&request, &AcceptConfig::default())
            .unwrap()
            .protocol(),
        None
    );
}

#[test]
fn extra_headers_follow_the_handshakes_own() {
    let config = AcceptConfig::default().header("Set-Cookie", b"a=1");
    let accepted = accept(&valid(&[]), &config).unwrap();
    assert!(accepted.response().ends_with(
        b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSet-Cookie: a=1\r\n\r\n"
    ));
}

#[test]
fn refuses_bad_configuration() {
    let is_config = |e: Error| matches!(e, Error::Misuse(Misuse::InvalidConfig { .. }));
    let request = valid(&[]);
    for config in [
        AcceptConfig::default().protocols(["a b"]),
        AcceptConfig::default().protocols([""]),
        AcceptConfig::default().protocols(["a", "b", "a"]),
        AcceptConfig::default().header("Sec-WebSocket-Accept", b"x"),
        AcceptConfig::default().header("connection", b"close"),
    ] {
        assert!(
            is_config(accept(&request, &config).unwrap_err()),
            "{config:?}"
        );
    }
    let config = AcceptConfig::default().header("X-Evil", b"1\r\nUpgrade: h2c");
    assert!(matches!(
        accept(&request, &config),
        Err(Error::Misuse(Misuse::Unencodable(_)))
    ));

    let mut entropy = |buf: &mut [u8]| buf.fill(0);
    for config in [
        ConnectConfig::default().protocols(["chat", "chat"]),
        ConnectConfig::default().protocols(["a,b"]),
        ConnectConfig::default().header("Host", b"elsewhere"),
        ConnectConfig::default().header("sec-websocket-key", b"x"),
    ] {
        let e = ClientHandshake::new("a", "/", &config, &mut entropy).unwrap_err();
        assert!(is_config(e), "{config:?}");
    }
    let e = ClientHandshake::new("a", "/a b", &ConnectConfig::default(), &mut entropy);
    assert!(matches!(e, Err(Error::Misuse(Misuse::Unencodable(_)))));
}

#[test]
fn the_key_comes_from_the_entropy() {
    let mut entropy = |buf: &mut [u8]| {
        for (b, i) in buf.iter_mut().zip(0u8..) {
            *b = i;
        }
    };
    let (_, request) =
        ClientHandshake::new("a", "/", &ConnectConfig::default(), &mut entropy).unwrap();
    let request = parse_request(&request);
    // base64 of the bytes 0 to 15.
    assert_eq!(
        request.headers().get("sec-websocket-key"),
        Some(&b"AAECAwQFBgcICQoLDA0ODw=="[..])
    );
}

/// The client's request through the server's parser and `accept`, the
/// 101 through the client's parser and `check`.
fn round_trip(
    connect: &ConnectConfig,
    server: &AcceptConfig,
) -> (Request, Accepted, Result<Negotiated, Error>) {
    let mut counter = 0u8;
    let mut entropy = |buf: &mut [u8]| {
        for b in buf {
            counter = counter.wrapping_add(37);
            *b = counter;
        }
    };
    let (handshake, request) =
        ClientHandshake::new("example.com:8080", "/chat?room=1", connect, &mut entropy).unwrap();
    let request = parse_request(&request);
    let accepted = accept(&request, server).unwrap();
    let negotiated = handshake.check(&parse_response(accepted.response()));
    (request, accepted, negotiated)
}

#[test]
fn round_trip_with_and_without_protocols() {
    let connect = ConnectConfig::default()
        .protocols(["v1.chat", "v2.chat"])
        .header("Origin", b"https://example.com");
    let server = AcceptConfig::default().protocols(["v2.chat", "v1.chat"]);
    let (request, accepted, negotiated) = round_trip(&connect, &server);
    assert_eq!(request.target(), "/chat?room=1");
    assert_eq!(request.host(), Some("example.com:8080"));
    assert_eq!(
        request.headers().get("origin"),
        Some(&b"https://example.com"[..])
    );
    assert_eq!(
        request.headers().get("sec-websocket-protocol"),
        Some(&b"v1.chat, v2.chat"[..])
    );
    assert_eq!(accepted.protocol(), Some("v2.chat"));
    assert_eq!(negotiated.unwrap().protocol(), Some("v2.chat"));

    let (request, accepted, negotiated) =
        round_trip(&ConnectConfig::default(), &AcceptConfig::default());
    assert_eq!(request.headers().get("sec-websocket-protocol"), None);
    assert_eq!(request.headers().get("sec-websocket-extensions"), None);
    assert_eq!(accepted.protocol(), None);
    assert_eq!(negotiated.unwrap().protocol(), None);
}

fn answer(handshake: &ClientHandshake, head: &str) -> Result<Negotiated, Error> {
    handshake.check(&parse_response(head.as_bytes()))
}

fn field_of(result: Result<Negotiated, Error>) -> Option<WsField> {
    match result {
        Err(Error::InvalidInput {
            kind: InvalidInput::WebSocket(field),
            offset: 0,
        }) => Some(field),
        _ => None,
    }
}

#[test]
fn check_refuses_what_the_server_may_not_answer() {
    let mut entropy = |buf: &mut [u8]| buf.fill(1);
    let config = ConnectConfig::default().protocols(["chat"]);
    let (handshake, request) = ClientHandshake::new("a", "/", &config, &mut entropy).unwrap();
    let request = parse_request(&request);
    let key = request.headers().get("sec-websocket-key").unwrap();
    let good = core::str::from_utf8(&accept_key(key)).unwrap().to_string();
    let head = |fields: &str| format!("HTTP/1.1 101 Switching Protocols\r\n{fields}\r\n");
    let ok =
        format!("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: {good}\r\n");

    assert!(answer(&handshake, &head(&ok)).is_ok());
    let upper = format!(
        "UPGRADE: WebSocket\r\nconnection: keep-alive, upgrade\r\n\
         sec-websocket-accept: {good}\r\n"
    );
    assert!(answer(&handshake, &head(&upper)).is_ok());
    let chat = format!("{ok}Sec-WebSocket-Protocol: chat\r\n");
    assert_eq!(
        answer(&handshake, &head(&chat)).unwrap().protocol(),
        Some("chat")
    );

    let handshake_errors = [
        ok.replace(&good, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
        ok.replace(&good, &good.to_lowercase()),
        format!("{ok}Sec-WebSocket-Accept: {good}\r\n"),
        ok.replace("Upgrade: websocket\r\n", ""),
        ok.replace("Upgrade: websocket", "Upgrade: websocket, h2c"),
        ok.replace("Connection: Upgrade", "Connection: keep-alive"),
        ok.replace(&format!("Sec-WebSocket-Accept: {good}\r\n"), ""),
    ];
    for fields in &handshake_errors {
        assert_eq!(
            field_of(answer(&handshake, &head(fields))),
            Some(WsField::Handshake),
            "{fields}"
        );
    }
    for status in [
        format!("HTTP/1.1 200 OK\r\n{ok}Content-Length: 0\r\n\r\n"),
        format!("HTTP/1.1 426 Upgrade Required\r\n{ok}Content-Length: 0\r\n\r\n"),
    ] {
        assert_eq!(
            field_of(answer(&handshake, &status)),
            Some(WsField::Handshake),
            "{status}"
        );
    }

    let negotiation_errors = [
        format!("{ok}Sec-WebSocket-Protocol: superchat\r\n"),
        format!("{ok}Sec-WebSocket-Protocol: Chat\r\n"),
        format!("{ok}Sec-WebSocket-Protocol: chat, chat\r\n"),
        format!("{ok}Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Protocol: chat\r\n"),
        format!("{ok}Sec-WebSocket-Extensions: x-unknown\r\n"),
        format!("{ok}Sec-WebSocket-Extensions: permessage-deflate\r\n"),
    ];
    for fields in &negotiation_errors {
        assert_eq!(
            field_of(answer(&handshake, &head(fields))),
            Some(WsField::Negotiation),
            "{fields}"
        );
    }
}

#[test]
fn a_protocol_answered_to_no_offer_is_refused() {
    let mut entropy = |buf: &mut [u8]| buf.fill(2);
    let (handshake, request) =
        ClientHandshake::new("a", "/", &ConnectConfig::default(), &mut entropy).unwrap();
    let key = parse_request(&request)
        .headers()
        .get("sec-websocket-key")
        .map(accept_key)
        .unwrap();
    let key = core::str::from_utf8(&key).unwrap().to_string();
    let head = format!(
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Accept: {key}\r\nSec-WebSocket-Protocol: chat\r\n\r\n"
    );
    assert_eq!(
        field_of(answer(&handshake, &head)),
        Some(WsField::Negotiation)
    );
}

#[cfg(feature = "deflate")]
mod deflate {
    use super::*;
    use crate::websocket::DeflateConfig;

    fn deflate_config() -> DeflateConfig {
        DeflateConfig::new()
    }

    #[test]
    fn round_trip_with_deflate() {
        let connect = ConnectConfig::default().deflate(deflate_config());
        let server = AcceptConfig::default().deflate(deflate_config().no_context_takeover(true));
        let (request, accepted, negotiated) = round_trip(&connect, &server);
        let offer = request.headers().get("sec-websocket-extensions").unwrap();
        assert!(offer.starts_with(b"permessage-deflate"));
        let params = accepted.deflate().unwrap();
        assert!(params.server_no_context_takeover);
        let response = parse_response(accepted.response());
        let answer = response.headers().get("sec-websocket-extensions").unwrap();
        assert_eq!(answer, params.to_header().as_bytes());
        assert_eq!(negotiated.unwrap().deflate(), Some(params));
    }

    #[test]
    fn deflate_needs_both_sides() {
        let offering = ConnectConfig::default().deflate(deflate_config());
        let (_, accepted, negotiated) = round_trip(&offering, &AcceptConfig::default());
        assert_eq!(accepted.deflate(), None);
        let response = parse_response(accepted.response());
        assert_eq!(response.headers().get("sec-websocket-extensions"), None);
        assert_eq!(negotiated.unwrap().deflate(), None);

        let accepting = AcceptConfig::default().deflate(deflate_config());
        let (request, accepted, negotiated) = round_trip(&ConnectConfig::default(), &accepting);
        assert_eq!(request.headers().get("sec-websocket-extensions"), None);
        assert_eq!(accepted.deflate(), None);
        assert_eq!(negotiated.unwrap().deflate(), None);
    }

    #[test]
    fn the_server_skips_other_extensions() {
        let request = valid(&[(
            "Sec-WebSocket-Extensions",
            Some("x-webkit-deflate-frame, permessage-deflate; client_max_window_bits"),
        )]);
        let config = AcceptConfig::default().deflate(deflate_config());
        assert!(accept(&request, &config).unwrap().deflate().is_some());
        let request = valid(&[("Sec-WebSocket-Extensions", Some("x-webkit-deflate-frame"))]);
        let accepted = accept(&request, &config).unwrap();
        assert_eq!(accepted.deflate(), None);
        assert!(!accepted.response().windows(10).any(|w| w == b"Extensions"));
    }

    #[test]
    fn check_refuses_an_extension_not_offered() {
        let mut entropy = |buf: &mut [u8]| buf.fill(3);
        let config = ConnectConfig::default().deflate(deflate_config());
        let (handshake, request) = ClientHandshake::new("a", "/", &config, &mut entropy).unwrap();
        let key = parse_request(&request)
            .headers()
            .get("sec-websocket-key")
            .map(accept_key);
        let key = core::str::from_utf8(&key.unwrap()).unwrap().to_string();
        let head = |extensions: &str| {
            format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Accept: {key}\r\n{extensions}\r\n"
            )
        };
        let deflate = "Sec-WebSocket-Extensions: permessage-deflate\r\n";
        assert!(answer(&handshake, &head(deflate))
            .unwrap()
            .deflate()
            .is_some());
        for extensions in [
            "Sec-WebSocket-Extensions: x-unknown\r\n".to_string(),
            "Sec-WebSocket-Extensions: permessage-deflate, x-unknown\r\n".to_string(),
            format!("{deflate}{deflate}"),
        ] {
            assert_eq!(
                field_of(answer(&handshake, &head(&extensions))),
                Some(WsField::Negotiation),
                "{extensions}"
            );
        }
    }
}
