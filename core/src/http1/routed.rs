//! [`Routed`]: a server connection that routes every request by its own
//! head, not the connection by its first.

use core::time::Duration;

use bytes::Bytes;

use crate::conn::{Close, Phase, Protocol, Wire};
use crate::error::{Error, Timeout};
use crate::http1::head::{Headers, Request};
use crate::http1::server::{Server, ServerEvent};
use crate::route::Router;

/// What to do with a request on a keep-alive connection that routes
/// somewhere else than the connection's first request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum PerRequest {
    /// Send it where it routes: the proxy keeps a backend per target.
    #[default]
    Follow,
    /// Refuse it: [`RoutedEvent::Misdirected`], which a proxy answers
    /// with 421 (Misdirected Request, RFC 9110 section 15.5.20) and a
    /// close; nothing after it is parsed. For proxies that hold one
    /// backend per client connection.
    Refuse,
}

/// What a [`Routed`] connection reads: a [`Server`]'s events, each
/// request head with where it goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RoutedEvent<T> {
    /// A request head and its route: the rule that matched (its index) or
    /// the fallback (`None`).
    Head {
        /// The request.
        request: Request,
        /// Where it goes.
        target: T,
        /// The rule that matched.
        rule: Option<usize>,
    },
    /// Body bytes of the current request.
    Data(Bytes),
    /// Trailers of the current request.
    Trailers(Headers),
    /// The current request is complete.
    End,
    /// Under [`PerRequest::Refuse`], a request that routes elsewhere than
    /// the connection's first: answer 421 after the responses before it,
    /// and close. Nothing more is parsed; its bytes from the end of its
    /// head on stay in the buffer.
    Misdirected {
        /// The request.
        request: Request,
        /// Where it would go.
        target: T,
    },
}

/// HTTP/1.1 server side with routing per request: every head is routed
/// by its own Host ([`Router::route_request`]), so a keep-alive client
/// cannot reach one backend with a request meant for another (`curl
/// URL1 -H 'Host: a' --next URL2 -H 'Host: b'`). A request that routes
/// elsewhere than the first is followed or refused, as configured
/// ([`PerRequest`]).
///
/// ```
/// use cleave_proto::http1::{PerRequest, Routed, RoutedEvent};
/// use cleave_proto::route::{HostPattern, Match, Router};
/// use cleave_proto::Conn;
/// use std::time::Duration;
///
/// let router = Router::new("default").rule(Match::HttpHost(HostPattern::new("admin.example")), "admin");
/// let mut conn = Conn::new(Routed::new(router, PerRequest::Refuse), Duration::ZERO);
/// conn.feed(
///     b"GET / HTTP/1.1\r\nHost: www.example\r\n\r\nGET /admin HTTP/1.1\r\nHost: admin.example\r\n\r\n",
///     Duration::ZERO,
/// )?;
/// assert!(matches!(conn.poll_event()?, Some(RoutedEvent::Head { target: "default", .. })));
/// assert_eq!(conn.poll_event()?, Some(RoutedEvent::End));
/// assert!(matches!(conn.poll_event()?, Some(RoutedEvent::Misdirected { target: "admin", .. })));
/// assert_eq!(conn.poll_event()?, None);
/// # Ok::<(), cleave_proto::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Routed<T> {
    server: Server,
    router: Router<T>,
    policy: PerRequest,
    /// The first request's route.
    first: Option<T>,
    /// A request was refused: nothing more is parsed.
    refused: bool,
}

impl<T: Clone + PartialEq> Routed<T> {
    /// Routes the requests of a connection with `router`, default limits.
    #[must_use]
    pub fn new(router: Router<T>, policy: PerRequest) -> Self {
        Self::with_server(Server::new(), router, policy)
    }

    /// Routes the requests `server` reads (with its limits) with `router`.
    #[must_use]
    pub fn with_server(server: Server, router: Router<T>, policy: PerRequest) -> Self {
        Self {
            server,
            router,
            policy,
            first: None,
            refused: false,
        }
    }

    /// The server side underneath ([`Server::resume`] after a declined
    /// upgrade).
    pub fn server_mut(&mut self) -> &mut Server {
        &mut self.server
    }

    /// The route of the connection's first request.
    #[must_use]
    pub fn first(&self) -> Option<&T> {
        self.first.as_ref()
    }
}

impl<T: Clone + PartialEq> Protocol for Routed<T> {
    type Event = RoutedEvent<T>;

    fn poll_event(&mut self, wire: &mut Wire<'_>) -> Result<Option<RoutedEvent<T>>, Error> {
        if self.refused {
            return Ok(None);
        }
        Ok(self.server.poll_event(wire)?.map(|event| match event {
            ServerEvent::Head(request) => {
                let (target, rule) = self.router.route_request(&request);
                let target = target.clone();
                match &self.first {
                    None => self.first = Some(target.clone()),
                    Some(first) if *first != target && self.policy == PerRequest::Refuse => {
                        self.refused = true;
                        return RoutedEvent::Misdirected { request, target };
                    }
                    Some(_) => {}
                }
                RoutedEvent::Head {
                    request,
                    target,
                    rule,
                }
            }
            ServerEvent::Data(data) => RoutedEvent::Data(data),
            ServerEvent::Trailers(trailers) => RoutedEvent::Trailers(trailers),
            ServerEvent::End => RoutedEvent::End,
        }))
    }

    fn phase(&self) -> Phase {
        if self.refused {
            Phase::Done
        } else {
            self.server.phase()
        }
    }

    // The rest is the server's: its 408, its reset of a body cut short.

    fn start(&mut self, now: Duration) {
        self.server.start(now);
    }

    fn poll_timeout(&self) -> Option<Duration> {
        self.server.poll_timeout()
    }

    fn on_timeout(&mut self, wire: &mut Wire<'_>, timeout: Timeout) -> Close {
        self.server.on_timeout(wire, timeout)
    }

    fn release_idle(&mut self) {
        self.server.release_idle();
    }
}
