//! The demo's HTTP path over loopback: two backends that answer with the
//! Host they were asked for, a proxy that routes the first bytes with a
//! `Session` and then every request with `http1::Routed` (the demo's
//! `serve`), and clients that put requests for both Hosts on one
//! keep-alive connection: one after the other (what `curl URL1 -H 'Host:
//! a' --next URL2 -H 'Host: b'` does) and pipelined in one write. No
//! request may reach the other Host's backend.

use std::net::SocketAddr;
use std::process::Command;
use std::time::Duration;

use cleave_examples::http_proxy;
use cleave_proto::http1::{self, Body, Client, ClientEvent, Server, ServerEvent};
use cleave_proto::route::{Facts, HostPattern, Match, Router};
use cleave_proto::{Bytes, Event, Session, SessionConfig};
use cleave_tokio::{Connection, SessionReader};
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// A backend that answers every request with its name, the Host and the
/// target it was asked for.
async fn backend(name: &'static str) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut conn = Connection::new(socket, Server::new());
                while let Some(Ok(event)) = conn.next().await {
                    if let ServerEvent::Head(request) = event {
                        let body = format!(
                            "{name} host={} target={}",
                            request.host().unwrap_or("-"),
                            request.target()
                        );
                        let head = http1::response(200, "OK", &[], Body::Length(body.len() as u64))
                            .unwrap();
                        conn.send(head).await.unwrap();
                        conn.send(Bytes::from(body)).await.unwrap();
                        conn.flush().await.unwrap();
                    }
                }
            });
        }
    });
    addr
}

/// The proxy, as the demo wires it: a Session routes the first bytes;
/// HTTP goes to `http_proxy::serve`, request by request.
async fn proxy(backends: Vec<Option<SocketAddr>>) -> SocketAddr {
    let router = Router::new(0usize)
        .rule(Match::HttpHost(HostPattern::new("example.com")), 0)
        .rule(Match::HttpHost(HostPattern::new("evil.com")), 1);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else {
                return;
            };
            let (router, backends) = (router.clone(), backends.clone());
            tokio::spawn(async move {
                let session = Session::tunnel(router.clone(), SessionConfig::default());
                let mut events = SessionReader::new(socket, session);
                while let Some(Ok(event)) = events.next().await {
                    if let Event::Routed(decision) = event {
                        assert!(matches!(decision.facts, Facts::Http(_)));
                        let client = http_proxy::routed(events, router);
                        http_proxy::serve(client, &backends).await.unwrap();
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A proxy with the two backends.
async fn setup() -> SocketAddr {
    let example = backend("example-backend").await;
    let evil = backend("evil-backend").await;
    proxy(vec![Some(example), Some(evil)]).await
}

fn get(target: &str, host: &str) -> Bytes {
    http1::request("GET", target, &[("Host", host.as_bytes())], Body::Empty).unwrap()
}

/// The next response's body.
async fn body(conn: &mut Connection<TcpStream, Client>) -> String {
    let mut body = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(10), conn.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap()
        {
            ClientEvent::Head(response) => assert_eq!(response.status(), 200),
            ClientEvent::Data(data) => body.extend_from_slice(&data),
            ClientEvent::End => return String::from_utf8(body).unwrap(),
            other => panic!("{other:?}"),
        }
    }
}

#[tokio::test]
async fn one_after_the_other_on_one_connection_each_reaches_its_own_backend() {
    let proxy = setup().await;
    let mut conn = Connection::new(TcpStream::connect(proxy).await.unwrap(), Client::new());
    conn.conn_mut().protocol_mut().expect_response("GET");
    conn.send(get("/", "example.com")).await.unwrap();
    conn.flush().await.unwrap();
    assert_eq!(
        body(&mut conn).await,
        "example-backend host=example.com target=/"
    );
    conn.conn_mut().protocol_mut().expect_response("GET");
    conn.send(get("/admin", "evil.com")).await.unwrap();
    conn.flush().await.unwrap();
    assert_eq!(
        body(&mut conn).await,
        "evil-backend host=evil.com target=/admin"
    );
}

#[tokio::test]
async fn a_pipelined_pair_with_different_hosts_is_split_between_the_backends() {
    let proxy = setup().await;
    let mut socket = TcpStream::connect(proxy).await.unwrap();
    let mut both = get("/admin", "evil.com").to_vec();
    both.extend_from_slice(&get("/", "example.com"));
    both.extend_from_slice(&get("/again", "evil.com"));
    socket.write_all(&both).await.unwrap();
    let mut conn = Connection::new(socket, Client::new());
    for _ in 0..3 {
        conn.conn_mut().protocol_mut().expect_response("GET");
    }
    assert_eq!(
        body(&mut conn).await,
        "evil-backend host=evil.com target=/admin"
    );
    assert_eq!(
        body(&mut conn).await,
        "example-backend host=example.com target=/"
    );
    assert_eq!(
        body(&mut conn).await,
        "evil-backend host=evil.com target=/again"
    );
}

#[tokio::test]
async fn curl_next_reaches_each_hosts_backend() {
    if Command::new("curl").arg("--version").output().is_err() {
        assert!(std::env::var_os("CI").is_none(), "curl is not installed");
        eprintln!("skipped: curl not installed");
        return;
    }
    let proxy = setup().await;
    let url = move |path: &str| format!("http://{proxy}{path}");
    let out = tokio::task::spawn_blocking(move || {
        Command::new("curl")
            .args([
                "-s",
                "--max-time",
                "10",
                "-w",
                " connects=%{num_connects}\n",
            ])
            .args([
                &url("/"),
                "-H",
                "Host: example.com",
                "--next",
                "-s",
                "--max-time",
                "10",
            ])
            .args([
                "-w",
                " connects=%{num_connects}\n",
                &url("/admin"),
                "-H",
                "Host: evil.com",
            ])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "example-backend host=example.com target=/ connects=1\n\
         evil-backend host=evil.com target=/admin connects=0\n"
    );
}
