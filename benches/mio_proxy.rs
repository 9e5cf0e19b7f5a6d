//! The stream harness's cleave-mio proxy: every connection on one thread's
//! poll loop. Each client connection is a `Conn` with a routing session;
//! the route's decision opens a `Conn` to the sink, and frames and tunnel
//! bytes are queued on it. When that queue is full, the client's side stops
//! reading until the sink's side has written. Both sides take the same
//! `ConnConfig` (receive buffer, write queue; the harness sets no
//! timeouts). With `splice`, the first tunnel bytes stop the client's
//! reads; once everything before them is written, both sockets leave their
//! `Conn`s for a `Tunnel` that splices the rest.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;

use cleave_mio::{Conn, Pipes, Side, Tunnel};
use cleave_proto::{Bytes, ConnConfig, Encoder, Event, Frame, Framed, Lines, Session};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(usize::MAX);

/// The client's side: routed, then lines until `TUNNEL`, then raw bytes.
type Inbound = Conn<TcpStream, Session<SocketAddr, Lines>>;
/// The sink never sends; its read side only sees the end of the stream.
type Outbound = Conn<TcpStream, Framed<Lines>>;

/// What waits for room in the sink's queue.
enum Out {
    Frame(Frame),
    Bytes(Bytes),
}

struct Pair {
    inbound: Inbound,
    outbound: Option<Outbound>,
    waiting: VecDeque<Out>,
    /// The client's side stopped reading: the sink's queue is full.
    paused: bool,
    inbound_done: bool,
    /// Tunnel bytes came (with `splice`): the client's side reads no more,
    /// and the sockets go to a `Tunnel` once the queue is written.
    switching: bool,
}

/// Tokens: 2 * i for connection i's client side, 2 * i + 1 for its sink
/// side.
fn client(i: usize) -> Token {
    Token(2 * i)
}

fn sink(i: usize) -> Token {
    Token(2 * i + 1)
}

/// Runs the proxy until `connections` connections have come and finished.
pub(crate) fn run(
    listener: std::net::TcpListener,
    connections: usize,
    session: impl Fn() -> Session<SocketAddr, Lines>,
    config: ConnConfig,
    splice: bool,
) -> io::Result<()> {
    listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(listener);
    let mut poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let mut pairs: Vec<Option<Pair>> = Vec::with_capacity(connections);
    let mut tunnels: Vec<Option<Tunnel<TcpStream, TcpStream>>> = Vec::with_capacity(connections);
    let mut events = Events::with_capacity(1024);
    let mut out = Vec::new();
    let mut discard = Vec::new();
    let mut lines = Lines::new();
    let mut finished = 0;
    while finished < connections {
        poll.poll(&mut events, None)?;
        for event in &events {
            if event.token() == LISTENER {
                loop {
                    match listener.accept() {
                        Ok((socket, _)) => {
                            socket.set_nodelay(true)?;
                            let i = pairs.len();
                            let mut inbound = Conn::with_config(socket, session(), config);
                            inbound.register(poll.registry(), client(i))?;
                            pairs.push(Some(Pair {
                                inbound,
                                outbound: None,
                                waiting: VecDeque::new(),
                                paused: false,
                                inbound_done: false,
                                switching: false,
                            }));
                            tunnels.push(None);
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(e),
                    }
                }
                continue;
            }
            let i = event.token().0 / 2;
            if let Some(tunnel) = tunnels.get_mut(i).and_then(Option::as_mut) {
                let side = if event.token() == client(i) {
                    Side::Client
                } else {
                    Side::Backend
                };
                let mut more = tunnel.on_event(side, event);
                while more {
                    more = tunnel.on_ready();
                }
                if let Some(result) = tunnel.result() {
                    if let Err(e) = result {
                        return Err(io::Error::new(e.kind(), e.to_string()));
                    }
                    tunnel.deregister(poll.registry())?;
                    tunnels[i] = None;
                    finished += 1;
                }
                continue;
            }
            let Some(pair) = pairs.get_mut(i).and_then(Option::as_mut) else {
                continue;
            };
            if event.token() == sink(i) {
                // Writable, or the sink's end of the stream (it sends
                // nothing else).
                if let Some(outbound) = pair.outbound.as_mut() {
                    outbound
                        .on_event(event, &mut discard)
                        .map_err(io::Error::other)?;
                    discard.clear();
                }
            }
            let mut from_event = event.token() == client(i);
            let mut read = from_event;
            let mut more = false;
            let done = loop {
                if read {
                    let outcome = if from_event {
                        pair.inbound.on_event(event, &mut out)
                    } else {
                        pair.inbound.on_readable(&mut out)
                    }
                    .map_err(io::Error::other)?;
                    from_event = false;
                    more = outcome.more;
                    pair.inbound_done |= outcome.eof;
                    for event in out.drain(..) {
                        match event {
                            Event::Routed(decision) => {
                                // A connecting socket: writes wait
                                // (WouldBlock) until it is connected.
                                let socket = TcpStream::connect(decision.target)?;
                                socket.set_nodelay(true)?;
                                let mut outbound =
                                    Conn::with_config(socket, Framed::new(Lines::new()), config);
                                outbound.register(poll.registry(), sink(i))?;
                                pair.outbound = Some(outbound);
                            }
                            Event::Frame(line) => pair.waiting.push_back(Out::Frame(
                                lines.encode(line).map_err(io::Error::other)?,
                            )),
                            Event::Tunnel(bytes) => {
                                if splice && !pair.switching {
                                    pair.switching = true;
                                    pair.inbound.pause_reading(true);
                                }
                                if !bytes.is_empty() {
                                    pair.waiting.push_back(Out::Bytes(bytes));
                                }
                            }
                            Event::Closed(_) => pair.inbound_done = true,
                            _ => {}
                        }
                    }
                }
                let was_paused = pair.paused;
                let done = pump(pair)?;
                // Resumed, or the read budget ran out: read now, no
                // readiness event will say bytes wait.
                read = (was_paused || more) && !pair.paused && !pair.inbound_done;
                if !read {
                    break done;
                }
            };
            let flushed = pair
                .outbound
                .as_ref()
                .is_some_and(|o| o.conn().queue().is_empty());
            if pair.switching && pair.waiting.is_empty() && flushed {
                let Some(pair) = pairs[i].take() else {
                    unreachable!("the pair was there")
                };
                let (Some(mut outbound), mut inbound) = (pair.outbound, pair.inbound) else {
                    unreachable!("a tunnel has its sink")
                };
                inbound.deregister(poll.registry())?;
                outbound.deregister(poll.registry())?;
                let (client_socket, conn) = inbound.into_parts();
                assert!(
                    conn.recv_buf().is_empty(),
                    "every byte before the switch went out"
                );
                let (sink_socket, _) = outbound.into_parts();
                let mut tunnel =
                    Tunnel::new(client_socket, sink_socket, Bytes::new(), Pipes::global());
                tunnel.register(poll.registry(), client(i), sink(i))?;
                let mut more = tunnel.on_ready();
                while more {
                    more = tunnel.on_ready();
                }
                tunnels[i] = Some(tunnel);
                continue;
            }
            if done {
                if let Some(outbound) = pair.outbound.as_mut() {
                    outbound.deregister(poll.registry())?;
                }
                pair.inbound.deregister(poll.registry())?;
                pairs[i] = None;
                finished += 1;
                continue;
            }
            pair.inbound
                .update_registration(poll.registry(), client(i))?;
            if let Some(outbound) = pair.outbound.as_mut() {
                outbound.update_registration(poll.registry(), sink(i))?;
            }
        }
    }
    Ok(())
}

/// Moves what waits into the sink's queue, writes, and pauses or resumes
/// the client's side. Returns whether the connection is over.
fn pump(pair: &mut Pair) -> io::Result<bool> {
    let Some(outbound) = pair.outbound.as_mut() else {
        return Ok(false);
    };
    loop {
        while let Some(item) = pair.waiting.pop_front() {
            let refused = match item {
                Out::Frame(frame) => outbound
                    .conn_mut()
                    .push(frame)
                    .err()
                    .map(|r| Out::Frame(r.into_value())),
                Out::Bytes(bytes) => outbound
                    .conn_mut()
                    .push(bytes)
                    .err()
                    .map(|r| Out::Bytes(r.into_value())),
            };
            if let Some(item) = refused {
                pair.waiting.push_front(item);
                break;
            }
        }
        let before = outbound.conn().queue().len();
        outbound.on_writable().map_err(io::Error::other)?;
        let moved = outbound.conn().queue().len() < before;
        if pair.waiting.is_empty() || !moved {
            break;
        }
    }
    // Stop reading the client while the sink's queue is full.
    pair.paused = !pair.waiting.is_empty();
    pair.inbound.pause_reading(pair.paused);
    // A connection switching to a tunnel keeps its sink open: the tunnel
    // passes the client's end on (reading it again) once its bytes are out.
    let ending = pair.inbound_done && !pair.switching;
    if ending && pair.waiting.is_empty() && !outbound.conn().queue().is_closed() {
        outbound.close();
        outbound.on_writable().map_err(io::Error::other)?;
    }
    Ok(ending && pair.waiting.is_empty() && outbound.is_finished())
}
