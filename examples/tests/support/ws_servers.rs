//! The WebSocket echo servers of the examples (`ws_echo_server` on
//! tokio, `ws_echo_mio_server` on mio) started on 127.0.0.1:0 for a
//! test, and stopped when their handle drops.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use cleave_examples::websocket::{serve_mio, serve_tokio};

pub enum Running {
    Tokio(Option<tokio::runtime::Runtime>),
    Mio {
        stop: Arc<AtomicBool>,
        waker: Arc<mio::Waker>,
        thread: Option<JoinHandle<io::Result<()>>>,
    },
}

impl Drop for Running {
    fn drop(&mut self) {
        match self {
            Self::Tokio(runtime) => {
                if let Some(runtime) = runtime.take() {
                    runtime.shutdown_background();
                }
            }
            Self::Mio {
                stop,
                waker,
                thread,
            } => {
                stop.store(true, Ordering::SeqCst);
                let _ = waker.wake();
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

pub fn tokio_server() -> (SocketAddr, Running) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(serve_tokio(listener));
    (addr, Running::Tokio(Some(runtime)))
}

pub fn mio_server() -> (SocketAddr, Running) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let thread = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            serve_mio(listener, &stop, |waker| {
                let _ = tx.send(waker);
            })
        })
    };
    let waker = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    (
        addr,
        Running::Mio {
            stop,
            waker,
            thread: Some(thread),
        },
    )
}
