//! Connections kept by token: the listener-and-slab bookkeeping every mio
//! server writes, over [`Conn`].

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use cleave_proto::Protocol;
use mio::event::Source;
use mio::net::{TcpListener, TcpStream};
use mio::{Registry, Token};
use slab::Slab;

use crate::conn::Conn;
use crate::socket::Socket;

/// The connections of one poll loop, each under its own [`Token`].
///
/// A [`slab::Slab`] of [`Conn`]s whose keys are the tokens (from a first
/// token you choose, so that the tokens of your listeners and wakers stay
/// apart): [`insert`](Self::insert) registers a connection and gives its
/// token, [`accept`](Self::accept) does it for everything a listener has
/// waiting, [`get_mut`](Self::get_mut) finds the connection an event is
/// for, and [`settle`](Self::settle), called after handling the event,
/// brings the registration up to date and removes the connection once it
/// is finished.
///
/// It is a convenience, not a requirement: [`Conn`] works in any loop with
/// any bookkeeping.
///
/// ```text
///   poll.poll(&mut events, conns.next_deadline() - now)
///   for event in &events:
///       LISTENER ─> conns.accept(&listener, registry, |socket, peer| Some(Conn::new(..)))
///       token    ─> let conn = conns.get_mut(token)?; conn.on_event(event, &mut out); ...
///                   conns.settle(registry, token)      reregisters, or removes when finished
///   for each token whose connection's deadline() passed (from conns.iter()):
///                   conns.get_mut(token)?.on_timeout(&mut out); ...; conns.settle(registry, token)
/// ```
///
/// A token is reused once its connection is removed. An event still queued
/// for the old connection then reaches the new one; with edge-triggered
/// readiness that is harmless (the new connection reads, finds nothing and
/// waits, and a socket still connecting is asked whether its connect is
/// over rather than told: see [`Socket::is_connecting`]), but a loop that
/// must tell them apart can use a first token per generation or its own
/// map.
pub struct Conns<S, P> {
    slab: Slab<Conn<S, P>>,
    first: usize,
}

impl<S, P> fmt::Debug for Conns<S, P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conns")
            .field("len", &self.slab.len())
            .field("first", &Token(self.first))
            .finish_non_exhaustive()
    }
}

impl<S, P> Default for Conns<S, P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S, P> Conns<S, P> {
    /// No connections; tokens from `Token(0)`.
    #[must_use]
    pub fn new() -> Self {
        Self::starting_at(Token(0))
    }

    /// No connections; tokens from `first` on (keep your listeners' and
    /// wakers' tokens below it).
    #[must_use]
    pub fn starting_at(first: Token) -> Self {
        Self {
            slab: Slab::new(),
            first: first.0,
        }
    }

    fn key(&self, token: Token) -> Option<usize> {
        token.0.checked_sub(self.first)
    }

    /// How many connections there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    /// Whether `token` is one of these connections'.
    #[must_use]
    pub fn contains(&self, token: Token) -> bool {
        self.key(token).is_some_and(|key| self.slab.contains(key))
    }

    /// The connection under `token`.
    #[must_use]
    pub fn get(&self, token: Token) -> Option<&Conn<S, P>> {
        self.key(token).and_then(|key| self.slab.get(key))
    }

    /// The connection under `token`, to drive it.
    pub fn get_mut(&mut self, token: Token) -> Option<&mut Conn<S, P>> {
        self.key(token).and_then(|key| self.slab.get_mut(key))
    }

    /// Every connection with its token.
    pub fn iter(&self) -> impl Iterator<Item = (Token, &Conn<S, P>)> + '_ {
        let first = self.first;
        self.slab
            .iter()
            .map(move |(key, conn)| (Token(first + key), conn))
    }

    /// Every connection with its token, to drive them (on a deadline, say).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Token, &mut Conn<S, P>)> + '_ {
        let first = self.first;
        self.slab
            .iter_mut()
            .map(move |(key, conn)| (Token(first + key), conn))
    }

    /// Removes the connection under `token` without touching the registry,
    /// for a connection about to be dropped (closing a socket ends its
    /// registration). To keep the socket, use [`remove`](Self::remove).
    pub fn take(&mut self, token: Token) -> Option<Conn<S, P>> {
        self.key(token).and_then(|key| self.slab.try_remove(key))
    }
}

impl<S: Socket + Source, P: Protocol> Conns<S, P> {
    /// Registers `conn` under a free token and keeps it.
    ///
    /// # Errors
    ///
    /// What mio says when it registers the socket, or
    /// [`io::ErrorKind::InvalidInput`] when no token is left above the first
    /// one; the connection comes back with the error.
    #[allow(clippy::result_large_err)] // the connection is handed back, not lost
    pub fn insert(
        &mut self,
        registry: &Registry,
        mut conn: Conn<S, P>,
    ) -> Result<Token, (io::Error, Conn<S, P>)> {
        let entry = self.slab.vacant_entry();
        let Some(token) = self.first.checked_add(entry.key()).map(Token) else {
            let error = io::Error::new(io::ErrorKind::InvalidInput, "no token left");
            return Err((error, conn));
        };
        if let Err(error) = conn.register(registry, token) {
            return Err((error, conn));
        }
        entry.insert(conn);
        Ok(token)
    }

    /// After an event was handled: brings the connection's registration up
    /// to date, or, once it [is finished](Conn::is_finished), deregisters
    /// and removes it and hands it back (drop it to close the socket).
    /// `Ok(None)` when it lives on, or when `token` is not one of these.
    ///
    /// # Errors
    ///
    /// What mio says; the connection stays (drop it with
    /// [`take`](Self::take)).
    pub fn settle(&mut self, registry: &Registry, token: Token) -> io::Result<Option<Conn<S, P>>> {
        let Some(conn) = self.get_mut(token) else {
            return Ok(None);
        };
        if conn.is_finished() {
            return self.remove(registry, token);
        }
        conn.update_registration(registry, token)?;
        Ok(None)
    }

    /// Deregisters the connection under `token` and removes it.
    ///
    /// # Errors
    ///
    /// What mio says; the connection then stays.
    pub fn remove(&mut self, registry: &Registry, token: Token) -> io::Result<Option<Conn<S, P>>> {
        let Some(conn) = self.get_mut(token) else {
            return Ok(None);
        };
        conn.deregister(registry)?;
        Ok(self.take(token))
    }

    /// The earliest [deadline](Conn::deadline) of all connections (their
    /// timeouts, a session's inspect delay): the poll's timeout. It looks at every
    /// connection; a loop with very many keeps its own timer wheel instead.
    #[must_use]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.slab
            .iter()
            .filter_map(|(_, conn)| conn.deadline())
            .min()
    }
}

/// What [`Conns::accept`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Accepted {
    /// Connections accepted and registered.
    pub added: usize,
    /// Connections accepted and refused by the `make` function.
    pub refused: usize,
    /// Connections that failed before they were kept: aborted by the peer
    /// while they waited, or refused by the registry. Their sockets are
    /// closed.
    pub failed: usize,
}

impl<P: Protocol> Conns<TcpStream, P> {
    /// Accepts every connection `listener` has waiting (call it on each of
    /// the listener's readable events), makes each a [`Conn`] with `make`
    /// (`None` refuses it: the socket is closed) and [inserts](Self::insert)
    /// it.
    ///
    /// A connection aborted while it waited, or that the registry refuses,
    /// is counted and closed; accepting goes on.
    ///
    /// # Errors
    ///
    /// An accept error that is about the listener, not one connection (out
    /// of file descriptors, say): what was accepted before it is kept.
    /// Connections may still wait, and mio will not report the listener
    /// again until another one arrives: call `accept` again after a pause
    /// (a timer in your loop), once descriptors are free.
    pub fn accept(
        &mut self,
        listener: &TcpListener,
        registry: &Registry,
        mut make: impl FnMut(TcpStream, SocketAddr) -> Option<Conn<TcpStream, P>>,
    ) -> io::Result<Accepted> {
        let mut accepted = Accepted::default();
        loop {
            let (socket, peer) = match listener.accept() {
                Ok(pair) => pair,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(accepted),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_per_connection(&e) => {
                    accepted.failed += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let Some(conn) = make(socket, peer) else {
                accepted.refused += 1;
                continue;
            };
            match self.insert(registry, conn) {
                Ok(_) => accepted.added += 1,
                Err(_) => accepted.failed += 1,
            }
        }
    }
}

/// Accept errors that end one waiting connection, not the listener: the
/// peer gave up while it waited, or (Linux passes pending network errors
/// of the new socket on through `accept`) its network failed.
fn is_per_connection(error: &io::Error) -> bool {
    use io::ErrorKind::{
        ConnectionAborted, ConnectionReset, HostUnreachable, NetworkDown, NetworkUnreachable,
        PermissionDenied,
    };
    if matches!(
        error.kind(),
        ConnectionAborted
            | ConnectionReset
            | NetworkDown
            | NetworkUnreachable
            | HostUnreachable
            // A firewall rule refused this connection.
            | PermissionDenied
    ) {
        return true;
    }
    #[cfg(unix)]
    if let Some(code) = error.raw_os_error() {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if code == libc::ENONET {
            return true;
        }
        return [
            libc::EPROTO,
            libc::ENOPROTOOPT,
            libc::EHOSTDOWN,
            libc::EOPNOTSUPP,
        ]
        .contains(&code);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::is_per_connection;
    use std::io;

    #[test]
    fn accept_errors_of_one_connection_are_told_from_the_listeners() {
        for kind in [
            io::ErrorKind::ConnectionAborted,
            io::ErrorKind::ConnectionReset,
            io::ErrorKind::PermissionDenied,
        ] {
            assert!(is_per_connection(&kind.into()), "{kind:?}");
        }
        #[cfg(unix)]
        {
            for code in [
                libc::EPROTO,
                libc::ENETDOWN,
                libc::EHOSTUNREACH,
                libc::ENETUNREACH,
            ] {
                assert!(
                    is_per_connection(&io::Error::from_raw_os_error(code)),
                    "{code}"
                );
            }
            // Out of descriptors or memory: the listener's trouble, reported.
            for code in [
                libc::EMFILE,
                libc::ENFILE,
                libc::ENOBUFS,
                libc::ENOMEM,
                libc::EBADF,
            ] {
                assert!(
                    !is_per_connection(&io::Error::from_raw_os_error(code)),
                    "{code}"
                );
            }
        }
        assert!(!is_per_connection(&io::ErrorKind::OutOfMemory.into()));
    }
}
