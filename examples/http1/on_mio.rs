//! The application served on one thread's `mio::Poll`.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cleave_mio::{Conns, ReadOutcome};
use cleave_proto::http1::{Server, ServerEvent};
use cleave_proto::{ConnError, Frame};

use super::{conn_config, server, App};

const LISTENER: mio::Token = mio::Token(0);
const WAKER: mio::Token = mio::Token(1);
const FIRST_CONN: mio::Token = mio::Token(2);

type MioConn = cleave_mio::Conn<mio::net::TcpStream, Server>;

/// One mio connection's application and the frames the write queue had
/// no room for yet (reading pauses while there are any).
#[derive(Debug, Default)]
struct Peer {
    app: App,
    backlog: VecDeque<Frame>,
    /// The peer ended its side or reading stopped: close once answered.
    ended: bool,
    paused: bool,
}

/// The server on one thread's `mio::Poll`: every connection a
/// [`cleave_mio::Conn`] in a [`Conns`] slab, the same [`App`] as the tokio
/// server. [`run`](Self::run) serves until the [`MioStop`] is pulled.
#[derive(Debug)]
pub struct MioServer {
    poll: mio::Poll,
    listener: mio::net::TcpListener,
    stop: Arc<AtomicBool>,
}

/// Stops a [`MioServer`] from another thread.
#[derive(Clone, Debug)]
pub struct MioStop {
    waker: Arc<mio::Waker>,
    stop: Arc<AtomicBool>,
}

impl MioStop {
    /// Asks the server to stop: its loop ends at its next wake-up, which
    /// this causes. The open connections are dropped.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        // A failed wake leaves the server running; nothing better to do.
        let _ = self.waker.wake();
    }
}

impl MioServer {
    /// A server listening on `addr` (port 0: any free port), and its stop.
    ///
    /// # Errors
    ///
    /// What binding or mio says.
    pub fn bind(addr: SocketAddr) -> io::Result<(Self, MioStop)> {
        let poll = mio::Poll::new()?;
        let mut listener = mio::net::TcpListener::bind(addr)?;
        poll.registry()
            .register(&mut listener, LISTENER, mio::Interest::READABLE)?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let stop = Arc::new(AtomicBool::new(false));
        let handle = MioStop {
            waker,
            stop: Arc::clone(&stop),
        };
        Ok((
            Self {
                poll,
                listener,
                stop,
            },
            handle,
        ))
    }

    /// Where it listens.
    ///
    /// # Errors
    ///
    /// What the socket says.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until stopped.
    ///
    /// # Errors
    ///
    /// What `poll` or `accept` say about the listener.
    pub fn run(mut self) -> io::Result<()> {
        let mut conns: Conns<mio::net::TcpStream, Server> = Conns::starting_at(FIRST_CONN);
        let mut peers: HashMap<mio::Token, Peer> = HashMap::new();
        let mut events = mio::Events::with_capacity(256);
        let mut parsed = Vec::new();
        // Connections to read again: their read budget ran out (or reading
        // resumed), and no new event will say that bytes wait. Each is
        // read again once the others had their turn: one busy client does
        // not keep the rest waiting.
        let mut again: Vec<mio::Token> = Vec::new();
        // After an accept error (out of descriptors): when to try again.
        let mut accept_at: Option<Instant> = None;
        while !self.stop.load(Ordering::SeqCst) {
            let timeout = if again.is_empty() {
                [conns.next_deadline(), accept_at]
                    .into_iter()
                    .flatten()
                    .min()
                    .map(|d| d.saturating_duration_since(Instant::now()))
            } else {
                Some(Duration::ZERO)
            };
            self.poll.poll(&mut events, timeout)?;
            let mut accept = accept_at.is_some_and(|at| at <= Instant::now());
            for event in &events {
                let token = event.token();
                if token == WAKER {
                    continue;
                }
                if token == LISTENER {
                    accept = true;
                    continue;
                }
                let Some(conn) = conns.get_mut(token) else {
                    continue;
                };
                let peer = peers.entry(token).or_default();
                let outcome = conn.on_event(event, &mut parsed);
                let driven = drive(conn, peer, outcome, &mut parsed);
                settle(
                    &mut conns,
                    &mut peers,
                    self.poll.registry(),
                    token,
                    driven,
                    &mut again,
                );
            }
            for token in std::mem::take(&mut again) {
                let Some(conn) = conns.get_mut(token) else {
                    continue;
                };
                let peer = peers.entry(token).or_default();
                let outcome = conn.on_readable(&mut parsed);
                let driven = drive(conn, peer, outcome, &mut parsed);
                settle(
                    &mut conns,
                    &mut peers,
                    self.poll.registry(),
                    token,
                    driven,
                    &mut again,
                );
            }
            if accept {
                accept_at = None;
                let accepted =
                    conns.accept(&self.listener, self.poll.registry(), |socket, _peer| {
                        socket.set_nodelay(true).ok()?;
                        Some(MioConn::with_config(socket, server(), conn_config()))
                    });
                // Out of descriptors, say: connections may wait, and no
                // event will say so; try again after a pause.
                if let Err(e) = accepted {
                    eprintln!(
                        "http1_mio_server: accept: {e}; again in {:?}",
                        crate::accept::PAUSE
                    );
                    accept_at = Some(Instant::now() + crate::accept::PAUSE);
                }
            }
            self.sweep(&mut conns, &mut peers, &mut parsed, &mut again);
        }
        Ok(())
    }

    /// Ends the connections whose timeout ran out.
    fn sweep(
        &self,
        conns: &mut Conns<mio::net::TcpStream, Server>,
        peers: &mut HashMap<mio::Token, Peer>,
        parsed: &mut Vec<ServerEvent>,
        again: &mut Vec<mio::Token>,
    ) {
        let now = Instant::now();
        let due: Vec<mio::Token> = conns
            .iter()
            .filter(|(_, conn)| conn.deadline().is_some_and(|d| d <= now))
            .map(|(token, _)| token)
            .collect();
        for token in due {
            let Some(conn) = conns.get_mut(token) else {
                continue;
            };
            let peer = peers.entry(token).or_default();
            let outcome = conn.on_timeout(parsed).map(|()| ReadOutcome::default());
            let driven = drive(conn, peer, outcome, parsed);
            settle(conns, peers, self.poll.registry(), token, driven, again);
        }
    }
}

/// After a connection was driven: its registration brought up to date
/// (and, if it is to read again, its turn taken in `again`), or, finished
/// or failed, it is dropped (the socket closes).
fn settle(
    conns: &mut Conns<mio::net::TcpStream, Server>,
    peers: &mut HashMap<mio::Token, Peer>,
    registry: &mio::Registry,
    token: mio::Token,
    driven: Result<bool, ConnError>,
    again: &mut Vec<mio::Token>,
) {
    let (finished, read_again) = match driven {
        Ok(read_again) => (
            !matches!(conns.settle(registry, token), Ok(None)),
            read_again,
        ),
        Err(_) => (true, false),
    };
    if finished {
        conns.take(token);
        peers.remove(&token);
    } else if read_again && !again.contains(&token) {
        again.push(token);
    }
}

/// Hands what one event (or timeout) brought to the application, queues
/// its answers and writes them. Returns whether to read again, once the
/// other connections had their turn: the read budget ran out, reading
/// resumed, or the codec parses again after a declined switch.
fn drive(
    conn: &mut MioConn,
    peer: &mut Peer,
    outcome: Result<ReadOutcome, ConnError>,
    parsed: &mut Vec<ServerEvent>,
) -> Result<bool, ConnError> {
    let mut out = Vec::new();
    let mut declined = false;
    for event in parsed.drain(..) {
        if !peer.app.wants_close() {
            peer.app.on_event(event, &mut out)?;
            if peer.app.take_declined() {
                conn.conn_mut().protocol_mut().resume();
                declined = true;
            }
        }
    }
    let more = match outcome {
        Ok(read) => {
            peer.ended |= read.eof;
            read.more
        }
        Err(ConnError::Protocol(e)) => {
            peer.app.on_error(&e, &mut out);
            false
        }
        Err(e) => return Err(e),
    };
    peer.backlog.extend(out.drain(..));
    let resumed = pump(conn, peer)?;
    Ok(!peer.paused && (more || resumed || declined))
}

/// Moves the backlog into the write queue and writes, while the socket
/// takes it; pauses reading while frames wait, and closes once everything
/// is queued and the connection is over. Returns whether reading resumed
/// (bytes may wait in the socket, and no event will say so).
fn pump(conn: &mut MioConn, peer: &mut Peer) -> Result<bool, ConnError> {
    let waiting = crate::backlog::pump(conn, &mut peer.backlog)?;
    let resumed = peer.paused && !waiting;
    peer.paused = waiting;
    if !waiting && (peer.ended || peer.app.wants_close()) {
        conn.close();
        conn.on_writable()?;
    }
    Ok(resumed)
}
