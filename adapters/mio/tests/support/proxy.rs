//! A small routing proxy on one mio poll loop, built like the demo: a
//! `Session` whose router sends HTTP to a web backend and everything else
//! (and whatever has not decided within the inspect delay) to an echo
//! backend, then a raw tunnel of two `Conn`s; the client connections and
//! the proxy's own connections to the backends carry the connection
//! timeouts. The backends run on the same loop, without timeouts: the
//! proxy must close what it opened.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cleave_mio::{Conn, ConnError};
use cleave_proto::route::{Match, Router, RouterConfig};
use cleave_proto::{
    Bytes, ConnConfig, Error, Event, Framed, Heads, Protocol, Raw, Refusal, Session, SessionConfig,
    Timeout, Timeouts,
};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};
use slab::Slab;

/// The proxy's timeouts, the demo's scaled down: the inspect delay routes
/// a silent client to the fallback, the frame timeout ends a client that
/// starts a request head and never finishes it, the tunnel idle timeout
/// ends a tunnel nobody uses, on both of its sides.
const INSPECT_DELAY: Duration = Duration::from_millis(4000);
const FRAME: Duration = Duration::from_millis(2500);
const IDLE: Duration = Duration::from_secs(10);
const TUNNEL_IDLE: Duration = Duration::from_millis(1500);
/// How often the proxy looks for deadlines that passed.
const TICK: Duration = Duration::from_millis(20);

/// The proxy's listener.
pub const CLIENTS: Token = Token(usize::MAX);
const WEB: Token = Token(usize::MAX - 1);
const ECHO: Token = Token(usize::MAX - 2);

/// The normal client's request, and the web backend's answer.
pub const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n";
pub const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

/// Where the router sends a client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Web,
    /// The fallback.
    Echo,
}

/// One connection on the proxy's loop.
enum Entry {
    /// A client, sniffed until the router decides.
    Routing(Conn<TcpStream, Session<Route>>),
    /// One side of a tunnel (a routed client, or the proxy's connection to
    /// its backend) and the other side's token while it lives.
    Tunnel {
        conn: Conn<TcpStream, Raw>,
        peer: Option<Token>,
        client: bool,
    },
    /// The fallback backend's side of a connection from the proxy: it
    /// echoes.
    Echo(Conn<TcpStream, Raw>),
    /// The web backend's side: one answer to a request head, then the end.
    Web(Conn<TcpStream, Framed<Heads>>),
    /// For a moment, while a client's connection switches protocol.
    Switching,
}

/// `$body` with the entry's connection, whatever its protocol.
macro_rules! with_conn {
    ($entry:expr, $conn:ident => $body:expr) => {
        match $entry {
            Entry::Routing($conn) => $body,
            Entry::Tunnel { conn: $conn, .. } => $body,
            Entry::Echo($conn) => $body,
            Entry::Web($conn) => $body,
            Entry::Switching => unreachable!("between protocols"),
        }
    };
}

/// What the proxy saw, shared with the test.
#[derive(Debug, Default)]
pub struct Stats {
    /// Open now: the proxy's clients, its connections to the backends, and
    /// the backends' connections from it.
    pub clients: AtomicUsize,
    pub upstreams: AtomicUsize,
    pub backends: AtomicUsize,
    /// Connections the fallback backend accepted.
    pub echoed: AtomicUsize,
    /// How each client connection ended: the timeout that ended it, or
    /// `None` when none did.
    pub ends: Mutex<Vec<Option<Timeout>>>,
}

impl Stats {
    /// Open now: clients, upstreams, backends.
    pub fn open(&self) -> [usize; 3] {
        [&self.clients, &self.upstreams, &self.backends].map(|n| n.load(Ordering::Acquire))
    }
}

/// Why a connection is handled now.
#[derive(Clone, Copy)]
enum Wake<'a> {
    Event(&'a mio::event::Event),
    Timeout,
    /// After a protocol switch: what the new protocol has to hand out.
    Read,
}

/// Reads (and writes, on a writable event) as `wake` says, all the read
/// budget allows.
fn drive<P: Protocol>(
    conn: &mut Conn<TcpStream, P>,
    wake: Wake<'_>,
    out: &mut Vec<P::Event>,
) -> Result<(), ConnError> {
    let mut read = match wake {
        Wake::Event(event) => conn.on_event(event, out)?,
        Wake::Timeout => return conn.on_timeout(out),
        Wake::Read => conn.on_readable(out)?,
    };
    while read.more {
        read = conn.on_readable(out)?;
    }
    Ok(())
}

/// Queues bytes for `conn`'s peer. A side that is closing takes nothing
/// more (its peer is gone); the few bytes here never fill a queue.
fn forward(conn: &mut Conn<TcpStream, Raw>, bytes: Bytes) {
    if let Err(refused) = conn.conn_mut().push(bytes) {
        assert_eq!(*refused.error(), Refusal::Closed, "a queue filled up");
    }
}

/// A listener whose accept queue holds a burst of a thousand connects.
fn listen() -> TcpListener {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    let addr: SocketAddr = "127.0.0.1:0".parse().unwrap();
    socket.bind(&addr.into()).unwrap();
    socket.listen(4096).unwrap();
    socket.set_nonblocking(true).unwrap();
    TcpListener::from_std(socket.into())
}

/// A routing proxy and its two backends on one poll loop: HTTP goes to the
/// web backend, everything else (and whatever has not decided within the
/// inspect delay) to the echo backend, through a raw tunnel.
pub struct Proxy {
    poll: Poll,
    /// By token: the proxy's, the web backend's, the echo backend's.
    listeners: [(Token, TcpListener); 3],
    router: Router<Route>,
    entries: Slab<Entry>,
    stats: Arc<Stats>,
}

impl Proxy {
    pub fn new(stats: Arc<Stats>) -> Self {
        let poll = Poll::new().unwrap();
        let mut listeners = [(CLIENTS, listen()), (WEB, listen()), (ECHO, listen())];
        for (token, listener) in &mut listeners {
            poll.registry()
                .register(listener, *token, Interest::READABLE)
                .unwrap();
        }
        let config = RouterConfig::default().inspect_delay(INSPECT_DELAY);
        let router = Router::with_config(Route::Echo, config).rule(Match::Http, Route::Web);
        Self {
            poll,
            listeners,
            router,
            entries: Slab::new(),
            stats,
        }
    }

    pub fn addr(&self, which: Token) -> SocketAddr {
        let (_, listener) = self.listeners.iter().find(|(t, _)| *t == which).unwrap();
        listener.local_addr().unwrap()
    }

    /// Serves until `stop`.
    pub fn run(mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(1024);
        let mut swept = Instant::now();
        while !stop.load(Ordering::Acquire) {
            self.poll.poll(&mut events, Some(TICK)).unwrap();
            for event in &events {
                match event.token() {
                    CLIENTS | WEB | ECHO => self.accept(event.token()),
                    token => self.wake(token, Wake::Event(event)),
                }
            }
            if swept.elapsed() >= TICK {
                swept = Instant::now();
                let due: Vec<Token> = self
                    .entries
                    .iter()
                    .filter(|(_, entry)| with_conn!(entry, c => c.deadline().is_some_and(|d| d <= swept)))
                    .map(|(key, _)| Token(key))
                    .collect();
                for token in due {
                    self.wake(token, Wake::Timeout);
                }
            }
        }
    }

    fn accept(&mut self, which: Token) {
        loop {
            let (_, listener) = self.listeners.iter().find(|(t, _)| *t == which).unwrap();
            let socket = match listener.accept() {
                Ok((socket, _)) => socket,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => panic!("accept: {e}"),
            };
            socket.set_nodelay(true).unwrap();
            let entry = match which {
                CLIENTS => {
                    self.stats.clients.fetch_add(1, Ordering::AcqRel);
                    let session = Session::tunnel(self.router.clone(), SessionConfig::default());
                    Entry::Routing(Conn::with_config(socket, session, proxy_config()))
                }
                WEB => {
                    self.stats.backends.fetch_add(1, Ordering::AcqRel);
                    Entry::Web(Conn::new(socket, Framed::new(Heads::default())))
                }
                _ => {
                    self.stats.backends.fetch_add(1, Ordering::AcqRel);
                    self.stats.echoed.fetch_add(1, Ordering::AcqRel);
                    Entry::Echo(Conn::new(socket, Raw::new()))
                }
            };
            self.insert(entry);
        }
    }

    fn insert(&mut self, mut entry: Entry) -> Token {
        let vacant = self.entries.vacant_entry();
        let token = Token(vacant.key());
        with_conn!(&mut entry, c => c.register(self.poll.registry(), token)).unwrap();
        vacant.insert(entry);
        token
    }

    fn wake(&mut self, token: Token, wake: Wake<'_>) {
        let Some(entry) = self.entries.get_mut(token.0) else {
            return; // an event for a connection that is gone
        };
        match entry {
            Entry::Routing(_) => return self.route(token, wake),
            Entry::Tunnel { .. } => return self.tunnel(token, wake),
            Entry::Echo(conn) => echo(conn, wake),
            Entry::Web(conn) => web(conn, wake),
            Entry::Switching => {}
        }
        self.settle(token);
    }

    /// A client before its routing decision.
    fn route(&mut self, token: Token, wake: Wake<'_>) {
        let Some(Entry::Routing(conn)) = self.entries.get_mut(token.0) else {
            return;
        };
        let mut out = Vec::new();
        let result = drive(conn, wake, &mut out);
        // A timeout ended the connection itself (a FIN, or a reset when a
        // head was left half sent); any other failure is a reset.
        let failed =
            matches!(&result, Err(e) if !matches!(e, ConnError::Protocol(Error::TimedOut(_))));
        if failed {
            let _ = conn.reset();
        }
        let mut upstream = None;
        for event in out {
            match event {
                Event::Routed(decision) => upstream = Some(self.connect(decision.target, token)),
                Event::Tunnel(bytes) | Event::Closed(bytes) => {
                    if let Some(Entry::Tunnel { conn, .. }) =
                        upstream.and_then(|t| self.entries.get_mut(t.0))
                    {
                        forward(conn, bytes);
                    }
                }
                _ => {}
            }
        }
        let Some(upstream) = upstream else {
            return self.settle(token);
        };
        // Routed: the client's connection becomes a raw tunnel, its unread
        // bytes in place, and the protocol's memory (the router) goes.
        let Entry::Routing(conn) = std::mem::replace(&mut self.entries[token.0], Entry::Switching)
        else {
            unreachable!("routing a connection that is not");
        };
        let mut conn = conn.switch(|_| Raw::new());
        if failed {
            let _ = conn.reset();
        }
        self.entries[token.0] = Entry::Tunnel {
            conn,
            peer: Some(upstream),
            client: true,
        };
        self.tunnel(token, Wake::Read);
    }

    /// Opens the proxy's connection to `route`'s backend, a tunnel side
    /// whose peer is `client`.
    fn connect(&mut self, route: Route, client: Token) -> Token {
        let addr = self.addr(match route {
            Route::Web => WEB,
            Route::Echo => ECHO,
        });
        // A connecting socket: writes wait (WouldBlock) until it is connected.
        let socket = TcpStream::connect(addr).unwrap();
        socket.set_nodelay(true).unwrap();
        self.stats.upstreams.fetch_add(1, Ordering::AcqRel);
        self.insert(Entry::Tunnel {
            conn: Conn::with_config(socket, Raw::new(), proxy_config()),
            peer: Some(client),
            client: false,
        })
    }

    /// One side of a tunnel: what it reads goes to the other side; its end
    /// (the peer's, or a timeout's) ends the other side cleanly; a failure
    /// on either resets both.
    fn tunnel(&mut self, token: Token, wake: Wake<'_>) {
        let Some(Entry::Tunnel { conn, peer, .. }) = self.entries.get_mut(token.0) else {
            return;
        };
        let mut out = Vec::new();
        let result = drive(conn, wake, &mut out);
        let peer = *peer;
        if let Some((Entry::Tunnel { conn: this, .. }, Entry::Tunnel { conn: other, .. })) =
            peer.and_then(|p| self.entries.get2_mut(token.0, p.0))
        {
            for bytes in out {
                forward(other, bytes);
            }
            let mut failed = matches!(result, Err(ConnError::Io(_)));
            if !failed && this.is_read_closed() {
                other.close();
            }
            failed |= matches!(other.on_writable(), Err(ConnError::Io(_)));
            if failed {
                let _ = this.reset();
                let _ = other.reset();
            }
        }
        // (Alone, the other side is gone, and this one was ended with it.)
        if let Some(peer) = peer {
            self.settle(peer);
        }
        self.settle(token);
    }

    /// Brings the registration up to date, or drops a finished connection.
    fn settle(&mut self, token: Token) {
        let Some(entry) = self.entries.get_mut(token.0) else {
            return;
        };
        let registry = self.poll.registry();
        if !with_conn!(&*entry, c => c.is_finished()) {
            with_conn!(entry, c => c.update_registration(registry, token)).unwrap();
            return;
        }
        let mut entry = self.entries.remove(token.0);
        with_conn!(&mut entry, c => c.deregister(registry)).unwrap();
        let counter = match &entry {
            Entry::Routing(conn) => self.client_ended(conn.conn().error()),
            Entry::Tunnel { conn, peer, client } => {
                if let Some(Entry::Tunnel { peer: link, .. }) =
                    peer.and_then(|p| self.entries.get_mut(p.0))
                {
                    *link = None;
                }
                if *client {
                    self.client_ended(conn.conn().error())
                } else {
                    &self.stats.upstreams
                }
            }
            _ => &self.stats.backends,
        };
        drop(entry); // the socket closes
        counter.fetch_sub(1, Ordering::AcqRel);
    }

    fn client_ended(&self, error: Option<&Error>) -> &AtomicUsize {
        let timeout = match error {
            Some(Error::TimedOut(timeout)) => Some(*timeout),
            _ => None,
        };
        self.stats.ends.lock().unwrap().push(timeout);
        &self.stats.clients
    }
}

/// The client connections' timeouts (and the proxy's connections to the
/// backends': only the tunnel idle one runs in a tunnel).
fn proxy_config() -> ConnConfig {
    let timeouts = Timeouts::default()
        .idle(Some(IDLE))
        .frame(Some(FRAME))
        .tunnel_idle(Some(TUNNEL_IDLE));
    ConnConfig::default().timeouts(timeouts)
}

/// The fallback backend: echoes, and ends its side when the proxy does.
/// It has no timeouts: the proxy must close what it opened.
fn echo(conn: &mut Conn<TcpStream, Raw>, wake: Wake<'_>) {
    let mut out = Vec::new();
    if drive(conn, wake, &mut out).is_err() {
        let _ = conn.reset();
        return;
    }
    for bytes in out {
        forward(conn, bytes);
    }
    if conn.is_read_closed() {
        conn.close();
    }
    if conn.on_writable().is_err() {
        let _ = conn.reset();
    }
}

/// The web backend: one answer to the first request head, then its end.
fn web(conn: &mut Conn<TcpStream, Framed<Heads>>, wake: Wake<'_>) {
    let mut heads = Vec::new();
    if drive(conn, wake, &mut heads).is_err() {
        let _ = conn.reset();
        return;
    }
    if !heads.is_empty() && !conn.conn().queue().is_closed() {
        conn.conn_mut().push(Bytes::from_static(RESPONSE)).unwrap();
        conn.close();
    }
    if conn.is_read_closed() {
        conn.close();
    }
    if conn.on_writable().is_err() {
        let _ = conn.reset();
    }
}
