//! A client that opens many connections and stays silent
//! (slowloris) until the server runs out of descriptors. Every example
//! server must shed the load (refuse or drop connections) and keep
//! serving once the flood is gone; none may exit.
//!
//! The servers are the real example binaries (built by a plain
//! `cargo test -p cleave-examples --no-run` or `cargo build -p
//! cleave-examples --examples`), started with a soft descriptor limit of
//! 128 so that a flood of 200 connections reaches it quickly; the ones
//! past the limit wait in the accept queue, which holds them all, so no
//! connect waits. (The same happens at the usual limit of 1024 with ~1000
//! silent connections: the idle timeout of the HTTP servers is 60 s.)

#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A server process, killed and reaped when dropped.
struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/debug/deps/fd_exhaustion-HASH -> target/debug/examples/NAME
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.is_file(),
        "{} missing: build the examples first (cargo build -p cleave-examples --examples)",
        path.display()
    );
    path
}

/// Starts example `name` with `args`, a soft descriptor limit of 128, and
/// reads the address it prints.
fn start(name: &str, args: &[&str]) -> Server {
    let mut command = Command::new(example(name));
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; nothing else runs here.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 128,
                rlim_max: 128,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} printed no address in 10 s");
        }
    };
    let at = line.find("127.0.0.1:").expect("an address in the banner");
    let addr: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    Server {
        child,
        addr: addr.parse().unwrap(),
    }
}

/// Opens `n` connections that send nothing, holds them, closes them.
fn flood(addr: SocketAddr, n: usize) {
    let mut silent = Vec::new();
    for _ in 0..n {
        if let Ok(socket) = TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
            silent.push(socket);
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    drop(silent);
    std::thread::sleep(Duration::from_millis(500));
}

/// Whether the server is still running; its stderr if it is not.
fn still_running(server: &mut Server) -> Result<(), String> {
    match server.child.try_wait().unwrap() {
        None => Ok(()),
        Some(status) => {
            let mut stderr = String::new();
            if let Some(mut err) = server.child.stderr.take() {
                let _ = err.read_to_string(&mut stderr);
            }
            Err(format!("exited with {status}: {}", stderr.trim()))
        }
    }
}

/// A GET / on a fresh connection, within 5 s.
fn get_hello(addr: SocketAddr) -> Result<String, String> {
    let mut socket =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    socket
        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let (start, mut got, mut buf) = (Instant::now(), Vec::new(), [0u8; 1024]);
    while start.elapsed() < Duration::from_secs(5) {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(String::from_utf8_lossy(&got).into_owned())
}

fn survives_flood(name: &str, args: &[&str], http: bool) {
    let mut server = start(name, args);
    if http {
        let before = get_hello(server.addr).unwrap();
        assert!(before.ends_with("hello\n"), "{name} before: {before:?}");
    }
    flood(server.addr, 200);
    if let Err(e) = still_running(&mut server) {
        panic!("{name} died from a flood of silent connections: {e}");
    }
    if http {
        let after = get_hello(server.addr);
        assert!(
            after.as_deref().is_ok_and(|a| a.ends_with("hello\n")),
            "{name} after the flood: {after:?}"
        );
    } else {
        TcpStream::connect_timeout(&server.addr, Duration::from_secs(2))
            .unwrap_or_else(|e| panic!("{name} after the flood: {e}"));
    }
}

#[test]
fn http1_server_survives_a_flood_of_silent_connections() {
    survives_flood("http1_server", &["--listen", "127.0.0.1:0"], true);
}

#[test]
fn http1_mio_server_survives_a_flood_of_silent_connections() {
    survives_flood("http1_mio_server", &["--listen", "127.0.0.1:0"], true);
}

#[test]
fn ws_echo_server_survives_a_flood_of_silent_connections() {
    survives_flood("ws_echo_server", &["--listen", "127.0.0.1:0"], false);
}

#[test]
fn ws_echo_mio_server_survives_a_flood_of_silent_connections() {
    survives_flood("ws_echo_mio_server", &["--listen", "127.0.0.1:0"], false);
}

#[test]
fn rpc_server_survives_a_flood_of_silent_connections() {
    survives_flood("rpc_server", &["0"], false);
}
