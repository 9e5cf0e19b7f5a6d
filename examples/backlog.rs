//! Frames an application made faster than a mio connection's write queue
//! takes them: kept in order, moved into the queue as it drains.

use std::collections::VecDeque;

use cleave_mio::{Conn, ConnError, Socket};
use cleave_proto::{Frame, Protocol};

/// Moves `backlog` into `conn`'s write queue and writes, while the socket
/// takes it; pauses reading while frames wait (a closed queue drops them).
/// Returns whether frames still wait.
///
/// # Errors
///
/// What writing to the socket said.
pub fn pump<S: Socket, P: Protocol>(
    conn: &mut Conn<S, P>,
    backlog: &mut VecDeque<Frame>,
) -> Result<bool, ConnError> {
    loop {
        while let Some(frame) = backlog.pop_front() {
            if let Err(rejected) = conn.conn_mut().push(frame) {
                match rejected.when_full() {
                    Some(frame) => backlog.push_front(frame),
                    // Closed: nothing more goes out.
                    None => backlog.clear(),
                }
                break;
            }
        }
        let emptied = conn.on_writable()?;
        if backlog.is_empty() || !emptied {
            break;
        }
    }
    let waiting = !backlog.is_empty();
    conn.pause_reading(waiting);
    Ok(waiting)
}
