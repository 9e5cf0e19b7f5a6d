//! The HTTP/1.1 example servers (`cleave_examples::http1`), tokio's and
//! mio's, each running in the test's process until dropped. Shared by the
//! examples' tests (`#[path]`).

#![allow(dead_code)]

use std::io;
use std::net::SocketAddr;
use std::thread::{self, JoinHandle};

use cleave_examples::http1::{serve_tokio, MioServer, MioStop};

/// One of the example servers, running in this process until dropped.
pub struct Running {
    pub name: &'static str,
    pub addr: SocketAddr,
    _driver: Driver,
}

/// What keeps a server running; dropping it stops the server.
enum Driver {
    Tokio(Option<tokio::runtime::Runtime>),
    Mio {
        stop: MioStop,
        thread: Option<JoinHandle<io::Result<()>>>,
    },
}

impl Drop for Driver {
    fn drop(&mut self) {
        match self {
            // The tasks (listener and connections) end with the runtime.
            Self::Tokio(runtime) => {
                if let Some(runtime) = runtime.take() {
                    runtime.shutdown_background();
                }
            }
            Self::Mio { stop, thread } => {
                stop.stop();
                if let Some(thread) = thread.take() {
                    let _ = thread.join();
                }
            }
        }
    }
}

pub fn tokio_server() -> Running {
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
    Running {
        name: "tokio",
        addr,
        _driver: Driver::Tokio(Some(runtime)),
    }
}

pub fn mio_server() -> Running {
    let (server, stop) = MioServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.local_addr().unwrap();
    let thread = thread::spawn(move || server.run());
    Running {
        name: "mio",
        addr,
        _driver: Driver::Mio {
            stop,
            thread: Some(thread),
        },
    }
}

/// Both example servers.
pub fn servers() -> [Running; 2] {
    [tokio_server(), mio_server()]
}
