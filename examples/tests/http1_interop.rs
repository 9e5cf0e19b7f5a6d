//! The HTTP/1.1 examples against real peers over loopback: the tokio and
//! the mio server (`cleave_examples::http1`) answer curl, Python's `h11`
//! and `http.client`, wrk and haproxy; the client (`http1::fetch`) talks
//! to servers written with `h11` and `http.server`.
//!
//! A peer that is not installed skips its test (it says so), unless the
//! environment variable `CI` is set: then the test fails. Every process a
//! test starts is killed when the test ends, passing or failing.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::Duration;

use cleave_examples::http1::{fetch, Answer, Ask};

// ----- the servers under test -----

#[path = "support/http1_servers.rs"]
mod http1_servers;

use http1_servers::servers;

// ----- peers: presence, processes, files -----

/// Whether `tool` is an executable file on the `PATH`.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(tool).is_file()))
}

/// Whether Python can import `h11`.
fn has_h11() -> bool {
    on_path("python3")
        && Command::new("python3")
            .args(["-c", "import h11"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
}

/// Whether every peer a test needs is there: `false` (the test returns)
/// after saying which is missing; a panic instead under CI.
fn require(tools: &[&str]) -> bool {
    for &tool in tools {
        let present = match tool {
            "h11" => has_h11(),
            _ => on_path(tool),
        };
        if !present {
            assert!(
                std::env::var_os("CI").is_none(),
                "{tool} not installed (CI is set: the interop peers must be)"
            );
            println!("skipped: {tool} not installed");
            return false;
        }
    }
    true
}

/// A process that is killed (and reaped) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    /// Starts `command` with its stdout piped.
    fn spawn(command: &mut Command) -> Self {
        Self(
            command
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    }

    /// Its first line of output: the port a Python server listens on.
    fn port(&mut self) -> (u16, BufReader<ChildStdout>) {
        let mut out = BufReader::new(self.0.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no port from the server: {line:?}"));
        (port, out)
    }
}

/// A directory for one test's files, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("cleave-http1-{name}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `command` to its end (every peer run this way bounds its own
/// time) and checks that it succeeded.
fn run(command: &mut Command) -> Output {
    let output = command.stdin(Stdio::null()).output().unwrap();
    assert!(
        output.status.success(),
        "{command:?} failed: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// curl, quiet but for errors, bounded in time, HTTP/1.1.
fn curl() -> Command {
    let mut command = Command::new("curl");
    command.args(["-sS", "--max-time", "10", "--http1.1"]);
    command
}

fn url(addr: SocketAddr, path: &str) -> String {
    format!("http://{addr}{path}")
}

// ----- curl -----

#[test]
fn curl_get() {
    if !require(&["curl"]) {
        return;
    }
    for server in servers() {
        let got = run(curl().arg("-i").arg(url(server.addr, "/")));
        assert_eq!(
            stdout(&got),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n",
            "{}",
            server.name
        );
        let got = run(curl()
            .arg("-i")
            .arg("--raw")
            .arg(url(server.addr, "/chunked")));
        assert_eq!(
            stdout(&got),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTrailer: X-Chunks\r\n\
             Transfer-Encoding: chunked\r\n\r\n\
             4\r\none\n\r\n4\r\ntwo\n\r\n6\r\nthree\n\r\n0\r\nX-Chunks: 3\r\n\r\n",
            "{}",
            server.name
        );
        let got = run(curl().arg(url(server.addr, "/chunked")));
        assert_eq!(stdout(&got), "one\ntwo\nthree\n", "{}", server.name);
        let got = run(curl().arg(url(server.addr, "/host")));
        assert_eq!(
            stdout(&got),
            format!("{}\n", server.addr),
            "{}",
            server.name
        );
        let got = run(curl().arg("-I").arg(url(server.addr, "/")));
        assert_eq!(
            stdout(&got),
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\n",
            "{}",
            server.name
        );
        let got = run(curl()
            .args(["-i", "-H", "Connection: close"])
            .arg(url(server.addr, "/nope")));
        assert_eq!(
            stdout(&got),
            "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nConnection: close\r\n\
             Content-Length: 10\r\n\r\nnot found\n",
            "{}",
            server.name
        );
    }
}

#[test]
fn curl_post_with_content_length() {
    if !require(&["curl"]) {
        return;
    }
    for server in servers() {
        let got = run(curl()
            .args(["-i", "--data-binary", "posted by curl"])
            .arg(url(server.addr, "/echo")));
        assert_eq!(
            stdout(&got),
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: 14\r\n\r\nposted by curl",
            "{}",
            server.name
        );
    }
}

#[test]
fn curl_post_chunked() {
    if !require(&["curl"]) {
        return;
    }
    for server in servers() {
        let got = run(curl()
            .args(["-v", "-H", "Transfer-Encoding: chunked"])
            .args(["--data-binary", "sent in chunks"])
            .arg(url(server.addr, "/echo")));
        let trace = String::from_utf8_lossy(&got.stderr);
        assert!(
            trace.contains("> Transfer-Encoding: chunked"),
            "{}: {trace}",
            server.name
        );
        assert_eq!(stdout(&got), "sent in chunks", "{}", server.name);
    }
}

#[test]
fn curl_expect_100_continue() {
    if !require(&["curl"]) {
        return;
    }
    let dir = TempDir::new("expect");
    let file = dir.path().join("body");
    let body: String = (b'a'..=b'z').cycle().take(2000).map(char::from).collect();
    std::fs::write(&file, &body).unwrap();
    for server in servers() {
        // Named explicitly: curl sends it by itself only above a size
        // that changed between versions.
        let got = run(curl()
            .args(["-v", "-H", "Expect: 100-continue", "--data-binary"])
            .arg(format!("@{}", file.display()))
            .arg(url(server.addr, "/echo")));
        let trace = String::from_utf8_lossy(&got.stderr);
        assert!(
            trace.contains("> Expect: 100-continue"),
            "{}: {trace}",
            server.name
        );
        assert!(
            trace.contains("< HTTP/1.1 100 Continue"),
            "{}: {trace}",
            server.name
        );
        assert_eq!(stdout(&got), body, "{}", server.name);
    }
}

#[test]
fn curl_reuses_the_connection() {
    if !require(&["curl"]) {
        return;
    }
    for server in servers() {
        let got = run(curl()
            .arg(url(server.addr, "/"))
            .args(["-w", "|%{num_connects}\n", "--next", "-sS", "--http1.1"])
            .arg(url(server.addr, "/host"))
            .args(["-w", "|%{num_connects}\n"]));
        assert_eq!(
            stdout(&got),
            format!("hello\n|1\n{}\n|0\n", server.addr),
            "{}",
            server.name
        );
    }
}

// ----- Python: h11 and http.client as clients -----

const H11_CLIENT: &str = r#"
import socket, sys, h11
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
c = h11.Connection(h11.CLIENT)
def send(*events):
    for e in events:
        data = c.send(e)
        if data:
            s.sendall(data)
def receive():
    resp, body, interim = None, b"", []
    while True:
        e = c.next_event()
        if e is h11.NEED_DATA:
            c.receive_data(s.recv(65536))
        elif isinstance(e, h11.InformationalResponse):
            interim.append(e.status_code)
            if e.status_code == 100:
                return e, b"", []
        elif isinstance(e, h11.Response):
            resp = e
        elif isinstance(e, h11.Data):
            body += e.data
        elif isinstance(e, h11.EndOfMessage):
            return resp, body, [(n.decode(), v.decode()) for n, v in e.headers]
        else:
            raise RuntimeError(repr(e))
def show(what, resp, body, trailers):
    print(what, resp.status_code, body, trailers)
host = [("Host", "h11.test")]
send(h11.Request(method="GET", target="/", headers=host), h11.EndOfMessage())
show("GET /", *receive()); c.start_next_cycle()
send(h11.Request(method="GET", target="/chunked", headers=host), h11.EndOfMessage())
show("GET /chunked", *receive()); c.start_next_cycle()
send(h11.Request(method="GET", target="/host", headers=host), h11.EndOfMessage())
show("GET /host", *receive()); c.start_next_cycle()
send(h11.Request(method="POST", target="/echo", headers=host + [("Transfer-Encoding", "chunked")]),
     h11.Data(data=b"in "), h11.Data(data=b"two chunks"), h11.EndOfMessage(headers=[("X-Note", "1")]))
show("POST /echo chunked", *receive()); c.start_next_cycle()
send(h11.Request(method="POST", target="/echo",
                 headers=host + [("Content-Length", "8"), ("Expect", "100-continue")]))
show("POST /echo expect", *receive())
send(h11.Data(data=b"after100"), h11.EndOfMessage())
show("POST /echo expect", *receive()); c.start_next_cycle()
send(h11.Request(method="HEAD", target="/", headers=host), h11.EndOfMessage())
show("HEAD /", *receive()); c.start_next_cycle()
send(h11.Request(method="GET", target="/", headers=host + [("Connection", "close")]), h11.EndOfMessage())
show("GET / close", *receive())
print("then", s.recv(1) or b"EOF")
"#;

#[test]
fn python_h11_client() {
    if !require(&["python3", "h11"]) {
        return;
    }
    for server in servers() {
        let port = server.addr.port().to_string();
        let got = run(Command::new("python3").args(["-c", H11_CLIENT, &port]));
        assert_eq!(
            stdout(&got),
            "GET / 200 b'hello\\n' []\n\
             GET /chunked 200 b'one\\ntwo\\nthree\\n' [('x-chunks', '3')]\n\
             GET /host 200 b'h11.test\\n' []\n\
             POST /echo chunked 200 b'in two chunks' []\n\
             POST /echo expect 100 b'' []\n\
             POST /echo expect 200 b'after100' []\n\
             HEAD / 200 b'' []\n\
             GET / close 200 b'hello\\n' []\n\
             then b'EOF'\n",
            "{}",
            server.name
        );
    }
}

const HTTP_CLIENT: &str = r#"
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=10)
def ask(method, path, body=None):
    c.request(method, path, body=body)
    r = c.getresponse()
    data = r.read()
    print(method, path, r.status, r.reason, r.getheader("Content-Length"),
          r.getheader("Transfer-Encoding"), data)
ask("GET", "/")
sock = c.sock
ask("GET", "/chunked")
ask("POST", "/echo", b"from http.client")
ask("POST", "/echo", iter([b"an ", b"iterable"]))
ask("HEAD", "/")
ask("GET", "/missing")
print("one connection:", c.sock is sock)
"#;

#[test]
fn python_http_client() {
    if !require(&["python3"]) {
        return;
    }
    for server in servers() {
        let port = server.addr.port().to_string();
        let got = run(Command::new("python3").args(["-c", HTTP_CLIENT, &port]));
        assert_eq!(
            stdout(&got),
            "GET / 200 OK 6 None b'hello\\n'\n\
             GET /chunked 200 OK None chunked b'one\\ntwo\\nthree\\n'\n\
             POST /echo 200 OK 16 None b'from http.client'\n\
             POST /echo 200 OK 11 None b'an iterable'\n\
             HEAD / 200 OK 6 None b''\n\
             GET /missing 404 Not Found 10 None b'not found\\n'\n\
             one connection: True\n",
            "{}",
            server.name
        );
    }
}

// ----- Python servers for the client -----

const H11_SERVER: &str = r#"
import socket, h11
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4)
print(listener.getsockname()[1], flush=True)
while True:
    s, _ = listener.accept()
    c = h11.Connection(h11.SERVER)
    def send(*events):
        for e in events:
            s.sendall(c.send(e))
    while True:
        e = c.next_event()
        if e is h11.NEED_DATA:
            c.receive_data(s.recv(65536))
        elif isinstance(e, h11.Request):
            req, body = e, b""
        elif isinstance(e, h11.Data):
            body += e.data
        elif isinstance(e, h11.EndOfMessage):
            host = dict(req.headers)[b"host"]
            text = b"h11 " + req.method + b" " + req.target + b" " + host + b" " + body
            if req.target == b"/chunked":
                send(h11.Response(status_code=200, headers=[]),
                     h11.Data(data=b"h11 "), h11.Data(data=b"in chunks"),
                     h11.EndOfMessage(headers=[("X-Trailer", "yes")]))
            elif req.method == b"HEAD":
                send(h11.Response(status_code=200, headers=[("Content-Length", "42")]),
                     h11.EndOfMessage())
            else:
                send(h11.Response(status_code=200, headers=[("Content-Length", str(len(text)))]),
                     h11.Data(data=text), h11.EndOfMessage())
            c.start_next_cycle()
        elif isinstance(e, h11.ConnectionClosed):
            break
        else:
            raise RuntimeError(repr(e))
    s.close()
"#;

const HTTP_SERVER: &str = r#"
import http.server
class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, body):
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_GET(self):
        self.reply(("http.server GET %s %s" % (self.path, self.headers["Host"])).encode())
    def do_HEAD(self):
        self.do_GET()
    def do_POST(self):
        data = self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(b"http.server POST " + data)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The client's requests, pipelined on one connection to `port`.
fn fetch_pipelined(port: u16) -> Vec<Answer> {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let host = addr.to_string();
    let asks = [
        Ask::get("/"),
        Ask::get("/chunked"),
        Ask::post("/echo", b"pipelined body"),
        Ask {
            method: "HEAD",
            target: "/head",
            body: None,
        },
        Ask::get("/last"),
    ];
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // A bound on a hang, not a measure: the peer answers at once.
    runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(30), fetch(addr, &host, &asks)).await
        })
        .expect("the server did not answer")
        .unwrap()
}

fn text(answer: &Answer) -> (u16, String) {
    (answer.status, String::from_utf8_lossy(&answer.body).into())
}

#[test]
fn client_against_h11_server() {
    if !require(&["python3", "h11"]) {
        return;
    }
    let mut server = Proc::spawn(Command::new("python3").args(["-c", H11_SERVER]));
    let (port, _out) = server.port();
    let answers = fetch_pipelined(port);
    let host = format!("127.0.0.1:{port}");
    let texts: Vec<_> = answers.iter().map(text).collect();
    assert_eq!(
        texts,
        [
            (200, format!("h11 GET / {host} ")),
            (200, "h11 in chunks".to_owned()),
            (200, format!("h11 POST /echo {host} pipelined body")),
            (200, String::new()),
            (200, format!("h11 GET /last {host} ")),
        ]
    );
    assert_eq!(
        answers[1].trailers,
        [("X-Trailer".to_owned(), b"yes".to_vec())]
    );
    // h11 sends names as given; a HEAD's answer keeps its length, no body.
    assert!(answers[3]
        .headers
        .contains(&("Content-Length".to_owned(), b"42".to_vec())));
}

#[test]
fn client_against_python_http_server() {
    if !require(&["python3"]) {
        return;
    }
    let mut server = Proc::spawn(Command::new("python3").args(["-c", HTTP_SERVER]));
    let (port, _out) = server.port();
    let answers = fetch_pipelined(port);
    let host = format!("127.0.0.1:{port}");
    let texts: Vec<_> = answers.iter().map(text).collect();
    assert_eq!(
        texts,
        [
            (200, format!("http.server GET / {host}")),
            (200, format!("http.server GET /chunked {host}")),
            (200, "http.server POST pipelined body".to_owned()),
            (200, String::new()),
            (200, format!("http.server GET /last {host}")),
        ]
    );
}

// ----- wrk -----

/// The number before `requests in` in wrk's report.
fn wrk_requests(report: &str) -> u64 {
    report
        .lines()
        .find_map(|line| {
            let (count, _) = line.trim().split_once(" requests in ")?;
            count.parse().ok()
        })
        .unwrap_or_else(|| panic!("no request count in wrk's report:\n{report}"))
}

#[test]
fn wrk_keep_alive_load() {
    if !require(&["wrk"]) {
        return;
    }
    for server in servers() {
        let got = run(Command::new("wrk")
            .args(["-t1", "-c8", "-d1s"])
            .arg(url(server.addr, "/")));
        let report = stdout(&got);
        assert!(wrk_requests(&report) > 0, "{}: {report}", server.name);
        assert!(
            !report.contains("Socket errors"),
            "{}: {report}",
            server.name
        );
        assert!(!report.contains("Non-2xx"), "{}: {report}", server.name);
    }
}

// ----- haproxy -----

/// A port free a moment ago, for a peer that must be told where to listen.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until `addr` accepts connections; fails if `proc` exits first.
fn wait_listening(proc: &mut Proc, addr: SocketAddr, log: &Path) {
    for _ in 0..200 {
        if TcpStream::connect(addr).is_ok() {
            return;
        }
        if let Some(status) = proc.0.try_wait().unwrap() {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("haproxy exited ({status}):\n{log}");
        }
        thread::sleep(Duration::from_millis(50));
    }
    panic!("nothing listens on {addr}");
}

#[test]
fn haproxy_in_front() {
    if !require(&["haproxy", "curl"]) {
        return;
    }
    for server in servers() {
        let dir = TempDir::new("haproxy");
        let front = SocketAddr::from(([127, 0, 0, 1], free_port()));
        let config = format!(
            "global\n    maxconn 64\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 10s\n    \
             timeout server 10s\n\
             frontend front\n    bind {front}\n    default_backend example\n\
             backend example\n    server example {}\n",
            server.addr
        );
        let config_path = dir.path().join("haproxy.cfg");
        std::fs::write(&config_path, config).unwrap();
        let log_path = dir.path().join("haproxy.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut haproxy = Proc(
            Command::new("haproxy")
                .arg("-db")
                .arg("-f")
                .arg(&config_path)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .unwrap(),
        );
        wait_listening(&mut haproxy, front, &log_path);

        let status_and_body = ["-w", "|%{http_code}"];
        let got = run(curl().args(status_and_body).arg(url(front, "/")));
        assert_eq!(stdout(&got), "hello\n|200", "{}", server.name);
        let got = run(curl().args(status_and_body).arg(url(front, "/chunked")));
        assert_eq!(stdout(&got), "one\ntwo\nthree\n|200", "{}", server.name);
        let got = run(curl().args(status_and_body).arg(url(front, "/host")));
        assert_eq!(stdout(&got), format!("{front}\n|200"), "{}", server.name);
        let got = run(curl()
            .args(status_and_body)
            .args(["--data-binary", "through haproxy"])
            .arg(url(front, "/echo")));
        assert_eq!(stdout(&got), "through haproxy|200", "{}", server.name);
        let got = run(curl()
            .args(status_and_body)
            .args(["-H", "Transfer-Encoding: chunked"])
            .args(["--data-binary", "chunked through haproxy"])
            .arg(url(front, "/echo")));
        assert_eq!(
            stdout(&got),
            "chunked through haproxy|200",
            "{}",
            server.name
        );
        let got = run(curl().args(status_and_body).arg(url(front, "/nope")));
        assert_eq!(stdout(&got), "not found\n|404", "{}", server.name);
    }
}

// ----- raw bytes: pipelining and refusals -----

/// Sends `request` in one write, half-closes, and reads everything the
/// server says until it closes.
fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut socket = TcpStream::connect(addr).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    socket.write_all(request).unwrap();
    socket.shutdown(Shutdown::Write).unwrap();
    let mut answer = Vec::new();
    socket.read_to_end(&mut answer).unwrap();
    String::from_utf8(answer).unwrap()
}

#[test]
fn pipelined_answers_keep_the_requests_order() {
    for server in servers() {
        let got = exchange(
            server.addr,
            b"GET /host HTTP/1.1\r\nHost: first\r\n\r\n\
              POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nfifth\
              POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n\
              3\r\nabc\r\n2\r\nde\r\n0\r\nX-T: 1\r\n\r\n\
              GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n\
              GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n\
              GET /never HTTP/1.1\r\nHost: a\r\n\r\n",
        );
        assert_eq!(
            got,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nfirst\n\
             HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: 5\r\n\r\nfifth\
             HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
             Content-Length: 5\r\n\r\nabcde\
             HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n\
             Content-Length: 14\r\n\r\none\ntwo\nthree\n\
             HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\
             Content-Length: 6\r\n\r\nhello\n",
            "{}",
            server.name
        );
    }
}

#[test]
fn refused_requests_get_their_status_then_the_close() {
    let cases: [(&[u8], &str); 4] = [
        (
            b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\
              Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "400 Bad Request",
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 2000000\r\n\r\n",
            "413 Content Too Large",
        ),
        (
            b"POST /echo HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "501 Not Implemented",
        ),
        (
            b"GET / HTTP/2.5\r\nHost: a\r\n\r\n",
            "505 HTTP Version Not Supported",
        ),
    ];
    for server in servers() {
        for (request, status) in cases {
            // A good request first: its answer still goes out, in order.
            let mut wire = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
            wire.extend_from_slice(request);
            let got = exchange(server.addr, &wire);
            let expected = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 6\r\n\r\nhello\n\
                 HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nConnection: close\r\n\
                 Content-Length: {}\r\n\r\n{status}\n",
                status.len() + 1
            );
            assert_eq!(got, expected, "{}: {status}", server.name);
        }
    }
}
