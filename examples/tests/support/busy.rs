//! A client that keeps its connection busy: it writes the same bytes over
//! and over and reads (and drops) all that comes back, on two threads,
//! until stopped. Shared by the examples' tests (`#[path]`).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// The busy client's two threads.
pub struct Busy {
    stop: Arc<AtomicBool>,
    socket: TcpStream,
    threads: [JoinHandle<()>; 2],
}

/// Whether an error only says that the socket's timeout ran out.
fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

impl Busy {
    /// Starts writing `bytes`, again and again, to `socket`, and reading
    /// from it.
    pub fn start(socket: TcpStream, bytes: Vec<u8>) -> Self {
        // Short timeouts, so that both threads see the stop soon.
        let wait = Some(Duration::from_millis(200));
        socket.set_write_timeout(wait).unwrap();
        socket.set_read_timeout(wait).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (stop, mut socket) = (Arc::clone(&stop), socket.try_clone().unwrap());
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let mut rest = &bytes[..];
                    while !rest.is_empty() && !stop.load(Ordering::SeqCst) {
                        match socket.write(rest) {
                            Ok(n) => rest = &rest[n..],
                            Err(e) if timed_out(&e) => {}
                            Err(_) => return,
                        }
                    }
                }
            })
        };
        let reader = {
            let (stop, mut socket) = (Arc::clone(&stop), socket.try_clone().unwrap());
            thread::spawn(move || {
                let mut buf = [0u8; 65536];
                while !stop.load(Ordering::SeqCst) {
                    match socket.read(&mut buf) {
                        Ok(0) => return,
                        Ok(_) => {}
                        Err(e) if timed_out(&e) => {}
                        Err(_) => return,
                    }
                }
            })
        };
        Self {
            stop,
            socket,
            threads: [writer, reader],
        }
    }

    /// Stops both threads and closes the connection.
    pub fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.socket.shutdown(Shutdown::Both);
        for thread in self.threads {
            thread.join().unwrap();
        }
    }
}
