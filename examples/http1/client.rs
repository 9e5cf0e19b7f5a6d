//! The client side: one request, its answer read whole.

use std::net::SocketAddr;

use cleave_proto::http1::{Body, Client, ClientEvent};
use cleave_proto::Bytes;
use cleave_tokio::Connection;
use futures_util::StreamExt;

use super::BoxError;

/// One request for [`fetch`].
#[derive(Clone, Copy, Debug)]
pub struct Ask<'a> {
    /// The method: `GET`, `POST`, `HEAD`.
    pub method: &'a str,
    /// The origin-form target: `/path?query`.
    pub target: &'a str,
    /// The body, sent with a Content-Length; `None` for no body.
    pub body: Option<&'a [u8]>,
}

impl<'a> Ask<'a> {
    /// A GET of `target`.
    #[must_use]
    pub fn get(target: &'a str) -> Self {
        Self {
            method: "GET",
            target,
            body: None,
        }
    }

    /// A POST of `body` to `target`.
    #[must_use]
    pub fn post(target: &'a str, body: &'a [u8]) -> Self {
        Self {
            method: "POST",
            target,
            body: Some(body),
        }
    }
}

/// One response [`fetch`] read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The header fields, as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body, whole (chunks joined).
    pub body: Vec<u8>,
    /// A chunked body's trailer fields.
    pub trailers: Vec<(String, Vec<u8>)>,
}

fn fields(headers: &cleave_proto::http1::Headers) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|h| (h.name().to_owned(), h.value().to_vec()))
        .collect()
}

/// Sends every request on one connection to `addr` at once (pipelined,
/// with `Host: host`), then reads the responses in order; interim ones
/// (`100 Continue`) are skipped.
///
/// # Errors
///
/// What the socket says, a response the codec refuses, or the server
/// closing before it answered every request.
pub async fn fetch(
    addr: SocketAddr,
    host: &str,
    asks: &[Ask<'_>],
) -> Result<Vec<Answer>, BoxError> {
    let socket = tokio::net::TcpStream::connect(addr).await?;
    socket.set_nodelay(true)?;
    let mut conn = Connection::new(socket, Client::new());
    for ask in asks {
        let body = match ask.body {
            Some(body) => Body::Length(u64::try_from(body.len())?),
            None => Body::Empty,
        };
        let fields: [(&str, &[u8]); 1] = [("Host", host.as_bytes())];
        let head = conn
            .conn_mut()
            .protocol_mut()
            .request(ask.method, ask.target, &fields, body)?;
        conn.send(head).await?;
        if let Some(body) = ask.body.filter(|body| !body.is_empty()) {
            conn.send(Bytes::copy_from_slice(body)).await?;
        }
    }
    conn.flush().await?;
    let mut answers = Vec::with_capacity(asks.len());
    let mut current = Answer::default();
    while answers.len() < asks.len() {
        let Some(event) = conn.next().await else {
            return Err(format!("the server closed after {} answers", answers.len()).into());
        };
        match event? {
            ClientEvent::Interim(_) => {}
            ClientEvent::Head(head) => {
                current = Answer {
                    status: head.status(),
                    headers: fields(head.headers()),
                    ..Answer::default()
                };
            }
            ClientEvent::Data(data) => current.body.extend_from_slice(&data),
            ClientEvent::Trailers(trailers) => current.trailers = fields(&trailers),
            ClientEvent::End => answers.push(std::mem::take(&mut current)),
        }
    }
    conn.close().await?;
    Ok(answers)
}
