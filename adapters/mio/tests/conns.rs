//! `Conns`, the listener-and-slab helper: a server built on it over
//! loopback, token bookkeeping, refusals, and the earliest deadline.

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use cleave_mio::{Accepted, Conn, Conns};
use cleave_proto::route::{Match, Router, RouterConfig};
use cleave_proto::{Bytes, Encoder, Framed, Lines, Session, SessionConfig};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

const LISTENER: Token = Token(0);
const FIRST: Token = Token(1);
/// A poll that found nothing for this long means the test is stuck.
const STALLED: Duration = Duration::from_secs(20);

fn listener(poll: &Poll) -> TcpListener {
    let mut listener = TcpListener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)
        .unwrap();
    listener
}

/// One accepted connection and its client.
fn pair() -> (TcpStream, std::net::TcpStream) {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(std_listener.local_addr().unwrap()).unwrap();
    let (server, _) = std_listener.accept().unwrap();
    server.set_nonblocking(true).unwrap();
    (TcpStream::from_std(server), client)
}

fn lines_conn(socket: TcpStream) -> Conn<TcpStream, Framed<Lines>> {
    Conn::new(socket, Framed::new(Lines::new()))
}

#[test]
fn a_server_on_conns_holds_every_connection_at_once_then_removes_each() {
    const CLIENTS: usize = 200;
    const THREADS: usize = 4;
    let mut poll = Poll::new().unwrap();
    let listener = listener(&poll);
    let addr = listener.local_addr().unwrap();
    let all_open = Arc::new(AtomicBool::new(false));

    let clients: Vec<_> = (0..THREADS)
        .map(|t| {
            let all_open = all_open.clone();
            thread::spawn(move || {
                let ids: Vec<usize> = (t..CLIENTS).step_by(THREADS).collect();
                let mut sockets: Vec<_> = ids
                    .iter()
                    .map(|_| std::net::TcpStream::connect(addr).unwrap())
                    .collect();
                // Nobody sends before the server holds every connection.
                let waiting = Instant::now();
                while !all_open.load(Ordering::Acquire) {
                    assert!(
                        waiting.elapsed() < STALLED,
                        "the server never held them all"
                    );
                    thread::sleep(Duration::from_millis(1));
                }
                for (id, socket) in ids.iter().zip(&mut sockets) {
                    let text = format!("hello {id}\nbye {id}\n");
                    let (a, b) = text.as_bytes().split_at(4);
                    socket.write_all(a).unwrap();
                    socket.write_all(b).unwrap();
                    socket.shutdown(Shutdown::Write).unwrap();
                }
                for (id, socket) in ids.iter().zip(&mut sockets) {
                    let mut answer = String::new();
                    socket.read_to_string(&mut answer).unwrap();
                    assert_eq!(answer, format!("hello {id}!\nbye {id}!\n"));
                }
            })
        })
        .collect();

    let mut conns = Conns::starting_at(FIRST);
    let (mut events, mut lines, mut encoder) =
        (Events::with_capacity(256), Vec::new(), Lines::new());
    let (mut total, mut removed, mut peak) = (Accepted::default(), 0, 0);
    while removed < CLIENTS {
        poll.poll(&mut events, Some(STALLED)).unwrap();
        assert!(!events.is_empty(), "the loop stalled");
        for event in &events {
            if event.token() == LISTENER {
                let accepted = conns
                    .accept(&listener, poll.registry(), |socket, peer| {
                        assert!(peer.ip().is_loopback());
                        Some(lines_conn(socket))
                    })
                    .unwrap();
                total.added += accepted.added;
                total.refused += accepted.refused;
                total.failed += accepted.failed;
                peak = peak.max(conns.len());
                if conns.len() == CLIENTS {
                    // Every token is a connection's, at or above the first.
                    assert!(conns.iter().all(|(token, _)| token >= FIRST));
                    assert!(conns.iter().all(|(token, _)| conns.contains(token)));
                    all_open.store(true, Ordering::Release);
                }
                continue;
            }
            let token = event.token();
            let conn = conns
                .get_mut(token)
                .expect("an event for a kept connection");
            let outcome = conn.on_event(event, &mut lines).unwrap();
            assert!(!outcome.more);
            for line in lines.drain(..) {
                let mut answer = line.to_vec();
                answer.push(b'!');
                conn.conn_mut()
                    .push(encoder.encode(Bytes::from(answer)).unwrap())
                    .unwrap();
            }
            if outcome.eof {
                conn.close();
            }
            conn.on_writable().unwrap();
            if let Some(done) = conns.settle(poll.registry(), token).unwrap() {
                assert!(done.is_finished());
                assert!(!conns.contains(token));
                removed += 1;
            }
        }
    }
    for client in clients {
        client.join().unwrap();
    }
    assert_eq!(
        total,
        Accepted {
            added: CLIENTS,
            refused: 0,
            failed: 0
        }
    );
    assert_eq!(peak, CLIENTS);
    assert!(conns.is_empty());
}

#[test]
fn a_connection_make_refuses_is_closed_and_counted() {
    let mut poll = Poll::new().unwrap();
    let listener = listener(&poll);
    let addr = listener.local_addr().unwrap();
    let mut refused_client = std::net::TcpStream::connect(addr).unwrap();
    let refused_port = refused_client.local_addr().unwrap().port();
    let _kept_client = std::net::TcpStream::connect(addr).unwrap();

    let mut conns = Conns::starting_at(FIRST);
    let mut events = Events::with_capacity(8);
    let mut total = Accepted::default();
    while total.added + total.refused < 2 {
        poll.poll(&mut events, Some(STALLED)).unwrap();
        assert!(!events.is_empty(), "the loop stalled");
        let accepted = conns
            .accept(&listener, poll.registry(), |socket, peer| {
                (peer.port() != refused_port).then(|| lines_conn(socket))
            })
            .unwrap();
        total.added += accepted.added;
        total.refused += accepted.refused;
    }
    assert_eq!((total.added, total.refused), (1, 1));
    assert_eq!(conns.len(), 1);
    refused_client.set_read_timeout(Some(STALLED)).unwrap();
    let mut buf = [0; 8];
    assert_eq!(
        refused_client.read(&mut buf).unwrap(),
        0,
        "closed by the server"
    );
}

#[test]
fn tokens_start_at_the_first_and_a_removed_connections_token_is_reused() {
    let poll = Poll::new().unwrap();
    let registry = poll.registry();
    let mut conns = Conns::starting_at(Token(10));
    let (a, _ca) = pair();
    let (b, _cb) = pair();
    let (c, _cc) = pair();
    let ta = conns
        .insert(registry, lines_conn(a))
        .map_err(|(e, _)| e)
        .unwrap();
    let tb = conns
        .insert(registry, lines_conn(b))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!((ta, tb), (Token(10), Token(11)));
    assert!(conns.get(Token(9)).is_none() && !conns.contains(Token(9)));
    assert!(conns.get(Token(12)).is_none());
    assert_eq!(conns.len(), 2);

    // Nothing to say for a token that is not one of these.
    assert!(conns.settle(registry, Token(3)).unwrap().is_none());
    assert!(conns.remove(registry, Token(3)).unwrap().is_none());
    // A live connection stays after settle.
    assert!(conns.settle(registry, ta).unwrap().is_none());
    assert!(conns.contains(ta));

    let taken = conns.remove(registry, ta).unwrap().expect("removed");
    assert!(!taken.is_finished());
    assert!(!conns.contains(ta));
    let tc = conns
        .insert(registry, lines_conn(c))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(tc, ta, "the free token is reused");
    assert!(conns.take(tb).is_some());
    assert_eq!(conns.iter().map(|(t, _)| t).collect::<Vec<_>>(), [tc]);
}

#[test]
fn with_no_token_left_the_connection_comes_back() {
    let poll = Poll::new().unwrap();
    let mut conns = Conns::starting_at(Token(usize::MAX));
    let (a, _ca) = pair();
    let (b, _cb) = pair();
    let last = conns
        .insert(poll.registry(), lines_conn(a))
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(last, Token(usize::MAX));
    let (error, back) = conns
        .insert(poll.registry(), lines_conn(b))
        .expect_err("no token left");
    assert_eq!(error.kind(), ErrorKind::InvalidInput);
    assert!(
        back.get_ref().peer_addr().is_ok(),
        "the socket is still open"
    );
    assert_eq!(conns.len(), 1);
}

#[test]
fn next_deadline_is_the_earliest_inspect_delay() {
    let poll = Poll::new().unwrap();
    let session = |delay| {
        let router = Router::with_config("fallback", RouterConfig::default().inspect_delay(delay))
            .rule(Match::Http, "web");
        Session::tunnel(router, SessionConfig::default())
    };
    let mut conns = Conns::new();
    assert_eq!(conns.next_deadline(), None);
    let (a, _ca) = pair();
    let (b, _cb) = pair();
    let (mut slow, mut quick) = (
        Conn::new(a, session(Duration::from_secs(30))),
        Conn::new(b, session(Duration::from_secs(5))),
    );
    // Known from the start, before any byte or poll.
    let quick_deadline = quick.deadline().expect("a session sniffing has a deadline");
    assert_eq!(quick_deadline, quick.started() + Duration::from_secs(5));
    assert_eq!(
        slow.deadline(),
        Some(slow.started() + Duration::from_secs(30))
    );
    // Woken early: nothing to decide on yet, and the deadline stays.
    let mut out = Vec::new();
    slow.on_timeout(&mut out).unwrap();
    quick.on_timeout(&mut out).unwrap();
    assert!(out.is_empty(), "nothing to decide on yet");
    assert_eq!(quick.deadline(), Some(quick_deadline));
    assert!(slow.deadline().unwrap() > quick_deadline);
    conns
        .insert(poll.registry(), slow)
        .map_err(|(e, _)| e)
        .unwrap();
    let quick_token = conns
        .insert(poll.registry(), quick)
        .map_err(|(e, _)| e)
        .unwrap();
    assert_eq!(conns.next_deadline(), Some(quick_deadline));
    conns.take(quick_token);
    assert!(conns.next_deadline().unwrap() > quick_deadline);
}

/// Lines with a deadline of its own, 20 ms in, that it never moves.
#[derive(Debug)]
struct Stubborn(Framed<Lines>);

impl cleave_proto::conn::Protocol for Stubborn {
    type Event = Bytes;

    fn poll_event(
        &mut self,
        wire: &mut cleave_proto::conn::Wire<'_>,
    ) -> Result<Option<Bytes>, cleave_proto::Error> {
        self.0.poll_event(wire)
    }

    fn phase(&self) -> cleave_proto::conn::Phase {
        self.0.phase()
    }

    fn poll_timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(20))
    }
}

#[test]
fn a_deadline_the_protocol_leaves_in_place_is_not_due_again() {
    let (socket, _client) = pair();
    let mut conn = Conn::new(socket, Stubborn(Framed::new(Lines::new())));
    let due = conn.deadline().expect("the protocol's deadline");
    assert_eq!(due, conn.started() + Duration::from_millis(20));
    thread::sleep(due.saturating_duration_since(Instant::now()));
    let mut out = Vec::new();
    conn.on_timeout(&mut out).unwrap();
    assert!(out.is_empty());
    // A loop that polls until `deadline()` would otherwise wake at once,
    // again and again.
    assert_eq!(conn.deadline(), None);
}
