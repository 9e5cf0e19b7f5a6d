//! Routing per request: a keep-alive connection's second request goes
//! where its own Host says, or is refused, never to the first's backend.

use std::time::Duration;

use cleave_proto::http1::{PerRequest, Routed, RoutedEvent};
use cleave_proto::route::{HostPattern, Match, Router};
use cleave_proto::Conn;

fn router() -> Router<&'static str> {
    Router::new("fallback")
        .rule(Match::HttpHost(HostPattern::new("example.com")), "example")
        .rule(Match::HttpHost(HostPattern::new("evil.com")), "evil")
}

/// `curl http://p/ -H 'Host: example.com' --next http://p/admin -H 'Host: evil.com'`,
/// as one keep-alive connection sends it.
const CURL_NEXT: &[u8] =
    b"GET / HTTP/1.1\r\nHost: example.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n\
GET /admin HTTP/1.1\r\nHost: evil.com\r\nUser-Agent: curl/8.5.0\r\nAccept: */*\r\n\r\n";

/// The routes of the heads, fed in `pieces` of `step` bytes.
fn routes(policy: PerRequest, input: &[u8], step: usize) -> (Vec<String>, Vec<u8>) {
    let mut conn = Conn::new(Routed::new(router(), policy), Duration::ZERO);
    let mut seen = Vec::new();
    for piece in input.chunks(step) {
        conn.feed(piece, Duration::ZERO).unwrap();
        while let Some(event) = conn.poll_event().unwrap() {
            match event {
                RoutedEvent::Head {
                    request, target, ..
                } => {
                    seen.push(format!(
                        "{} {} -> {target}",
                        request.host().unwrap(),
                        request.target()
                    ));
                }
                RoutedEvent::Misdirected { request, target } => {
                    seen.push(format!(
                        "{} {} -> 421 ({target})",
                        request.host().unwrap(),
                        request.target()
                    ));
                }
                RoutedEvent::Data(_) | RoutedEvent::Trailers(_) | RoutedEvent::End => {}
            }
        }
    }
    (seen, conn.recv_buf().peek().to_vec())
}

#[test]
fn each_request_follows_its_own_host() {
    for step in [1, 7, CURL_NEXT.len()] {
        let (seen, rest) = routes(PerRequest::Follow, CURL_NEXT, step);
        assert_eq!(
            seen,
            ["example.com / -> example", "evil.com /admin -> evil"],
            "step {step}"
        );
        assert!(rest.is_empty());
    }
}

#[test]
fn a_request_for_another_backend_is_refused_and_nothing_after_it_is_read() {
    let mut input = CURL_NEXT.to_vec();
    input.extend_from_slice(b"GET /more HTTP/1.1\r\nHost: example.com\r\n\r\n");
    for step in [1, 5, input.len()] {
        let (seen, rest) = routes(PerRequest::Refuse, &input, step);
        assert_eq!(
            seen,
            ["example.com / -> example", "evil.com /admin -> 421 (evil)"],
            "step {step}"
        );
        assert_eq!(
            rest, b"GET /more HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "step {step}"
        );
    }
}

#[test]
fn the_same_host_stays_on_its_route_and_bodies_do_not_route() {
    // The body of the first request holds what looks like a request for
    // another host: it is body, framed by Content-Length, never a head.
    let smuggled = b"GET /admin HTTP/1.1\r\nHost: evil.com\r\n\r\n";
    let mut input = format!(
        "POST /up HTTP/1.1\r\nHost: example.com\r\nContent-Length: {}\r\n\r\n",
        smuggled.len()
    )
    .into_bytes();
    input.extend_from_slice(smuggled);
    input.extend_from_slice(b"GET /b HTTP/1.1\r\nHost: EXAMPLE.com:80\r\n\r\n");
    for step in [1, 3, input.len()] {
        let (seen, _) = routes(PerRequest::Refuse, &input, step);
        assert_eq!(
            seen,
            ["example.com /up -> example", "EXAMPLE.com:80 /b -> example"],
            "step {step}"
        );
    }
}
