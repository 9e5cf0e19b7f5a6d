//! A connection shared between tasks: a spawned driver owns the socket,
//! an [`Events`] stream hands out the protocol's events, and cloneable
//! [`ConnHandle`]s push into the same queue the protocol replies on.
//!
//! ```text
//!   Events::poll_next ──┐ poll_event                ┌──────────────────────────┐
//!   task A ─┐           ├──────── lock ───────────> │ core's Shared<P>         │ <──> driver task <──> socket
//!   task B ─┼───────────┘ try_send / send /         └──────────────────────────┘  (read, drain, flush,
//!   task C ─┘ written / flush / close                                              timers, shutdown)
//! ```

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use cleave_proto::conn::{Shared, WriteOnly};
use cleave_proto::{Conn, ConnConfig, Protocol, WriteQueueConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::task::JoinHandle;

use crate::drive::Clock;
use crate::error::ConnError;
use crate::reset::Reset;
use crate::writer::WriteHalf;

mod driver;
mod handles;

use driver::Driver;
pub use handles::{ConnHandle, Events};

/// Spawns a task that drives `protocol` over `io` (with `config`'s
/// buffer, queue and timeouts, starting now), and returns the stream of
/// the protocol's events, a handle for any task to write with, and the
/// driver task.
///
/// The protocol's own replies (a pong, say) and the handles' pushes share
/// the connection's one queue and go out through one socket: urgent items
/// between bulk items, never inside one. Events come out as the [`Events`]
/// stream polls them, and the protocol answers what it reads then: poll
/// it, or drop it (the driver then reads and drops the events itself, and
/// the protocol still answers).
///
/// The driver ends once no event will come, the write side is shut (after
/// [`ConnHandle::close`], a timeout's or the protocol's close) or reset,
/// with `Ok(())`, or with the connection's error (a timeout, the
/// protocol's error) or the socket's. When the [`Events`] and every handle
/// are dropped, the write side closes cleanly; if the connection failed
/// by then, the driver does not wait for a peer that does not read: what
/// is queued is dropped and the close is a reset.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cleave_proto::conn::Framed;
/// use cleave_proto::{Bytes, ConnConfig, Lines};
/// use futures_util::StreamExt;
/// use tokio::io::{AsyncReadExt, AsyncWriteExt};
///
/// let (mut client, server) = tokio::io::duplex(1024);
/// let protocol = Framed::new(Lines::new());
/// let (mut events, handle, driver) =
///     cleave_tokio::spawn_connection(server, protocol, ConnConfig::default());
/// client.write_all(b"hello\n").await?;
/// assert_eq!(events.next().await.unwrap()?, "hello");
/// let other = handle.clone(); // another task may write too
/// tokio::spawn(async move { other.send(Bytes::from_static(b"hi\n")).await }).await??;
/// handle.close().await?; // written, then a FIN
/// let mut answer = String::new();
/// client.read_to_string(&mut answer).await?;
/// assert_eq!(answer, "hi\n");
/// client.shutdown().await?;
/// assert!(events.next().await.is_none());
/// driver.await??;
/// # Ok(())
/// # }
/// ```
pub fn spawn_connection<S, P>(
    io: S,
    protocol: P,
    config: ConnConfig,
) -> (Events<P>, ConnHandle<P>, JoinHandle<Result<(), ConnError>>)
where
    S: AsyncRead + AsyncWrite + Reset + Unpin + Send + 'static,
    P: Protocol + Send + 'static,
{
    let (events, handle, driver) = start(io, protocol, config);
    (events, handle, tokio::spawn(driver))
}

/// The shared state of a connection, its driver (not spawned yet), and
/// the first events stream and handle.
fn start<S, P: Protocol>(
    io: S,
    protocol: P,
    config: ConnConfig,
) -> (Events<P>, ConnHandle<P>, Driver<S, P>) {
    let conn = Conn::with_config(protocol, config, Duration::ZERO);
    let shared = Arc::new(Locked(Mutex::new(Shared::new(conn))));
    let driver = Driver {
        shared: shared.clone(),
        io,
        clock: Clock::starting_at(Duration::ZERO),
    };
    let events = Events {
        shared: shared.clone(),
        ended: false,
    };
    (events, ConnHandle::new(shared), driver)
}

/// A cloneable handle to a spawned writer's queue (see [`spawn_writer`]):
/// a [`ConnHandle`] of a connection that reads nothing.
///
/// - [`try_send`](ConnHandle::try_send): queue now or get the item back;
/// - [`send`](ConnHandle::send): wait for room (the queue's byte and item
///   limits are the backpressure);
/// - [`written`](ConnHandle::written): wait for a ticket (no allocation);
///   a ticket nobody waits for costs nothing (fire and forget);
/// - [`flush`](ConnHandle::flush), [`close`](ConnHandle::close);
/// - a `Sink<Bytes>`.
///
/// When the last handle is dropped the queue is closed: the writer writes
/// what was queued, shuts the socket down and ends, as after
/// [`close`](ConnHandle::close).
pub type WriteHandle = ConnHandle<WriteOnly>;

/// Spawns a task that writes into `io` what the returned handle (and its
/// clones) push, and returns the handle and the task: the driver of
/// [`spawn_connection`] over a connection that reads nothing.
///
/// The task ends when the queue is closed ([`ConnHandle::close`], or the
/// last handle dropped) and everything is written and the writer shut
/// down, or when the writer fails; its result says which.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use cleave_proto::{Bytes, WriteQueueConfig};
///
/// let (reader, writer) = tokio::io::duplex(64 * 1024);
/// let (handle, task) = cleave_tokio::spawn_writer(writer, WriteQueueConfig::default());
/// let ticket = handle.try_send(Bytes::from_static(b"ping\n"))?; // fire and forget...
/// handle.written(ticket).await?; // ...or wait for it: no allocation either way
/// handle.close().await?;
/// task.await??;
/// # drop(reader);
/// # Ok(())
/// # }
/// ```
pub fn spawn_writer<W>(io: W, config: WriteQueueConfig) -> (WriteHandle, JoinHandle<io::Result<()>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let config = ConnConfig::default().write_queue(config);
    // Nobody takes events: the driver closes once the handles are gone.
    let (_, handle, driver) = start(WriteHalf(io), WriteOnly, config);
    let task = tokio::spawn(async move { driver.await.map_err(io::Error::from) });
    (handle, task)
}

/// The core's [`Shared`] connection behind one lock: the driver, the
/// events and the handles each lock it for one step.
struct Locked<P>(Mutex<Shared<P>>);

impl<P> Locked<P> {
    fn lock(&self) -> MutexGuard<'_, Shared<P>> {
        // A panic while the lock was held leaves the connection as it was
        // between two operations; carry on.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Reads in one poll of the driver before it lets others in.
const READ_BUDGET: usize = 32;
