//! HTTP/1.1 over loopback under wrk: the `http1_server` example (cleave's
//! `http1::Server` on cleave-tokio) beside a minimal hyper server doing the
//! same work, `GET /` answered with the same 64 bytes (`hello\n`, a
//! Content-Type, a Content-Length, no Date), both on a tokio runtime with
//! one worker per core.
//!
//! Each server runs in a process of its own, so that its CPU time
//! (`utime + stime` from `/proc/<pid>/stat`, before and after) is its
//! own; wrk loads it with 64 connections for the run's duration, the
//! servers taking turns run by run. The table gives the median requests
//! per second and server CPU per request (and the user part of it: the
//! server's own code, where the system part is mostly the kernel's TCP
//! work, the same for both), and the ratios. `/proc` counts CPU time in
//! ticks (10 ms), so the user figure, about a tenth of the whole, is good
//! to a few percent over a 5-second run.
//!
//! wrk shares the machine with the server. By default (with `taskset`
//! and at least two cores) each server runs on core 0 and wrk, with one
//! thread, on core 1: unpinned on two cores (`--unpinned`: `wrk -t2`,
//! anywhere), the scheduler mixes the two, and one server's figures moved
//! by up to 30% between runs of the same build. Pinned, each server's
//! runtime sizes itself to the one core it may use (tokio counts the
//! cores the affinity mask allows): one worker each.
//!
//! ```text
//! cargo build --release -p cleave-examples --example http1_server
//! cargo bench -p cleave-benches --bench http1_wrk                    # 5 runs of 5 s each
//! cargo bench -p cleave-benches --bench http1_wrk -- --runs 7 --duration 10
//! cargo bench -p cleave-benches --bench http1_wrk -- --unpinned
//! ```
//!
//! Without wrk or the example built, it says so and does nothing.

use std::convert::Infallible;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};

/// The role that makes this binary the hyper server.
const SERVE_HYPER: &str = "--serve-hyper";

/// The body both servers answer `GET /` with.
const HELLO: &[u8] = b"hello\n";

// ----- the hyper server -----

/// `GET /` answered as the example answers it; anything else a 404.
async fn hello(
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let found = request.method() == hyper::Method::GET && request.uri().path() == "/";
    let mut response = if found {
        Response::new(Full::new(Bytes::from_static(HELLO)))
    } else {
        let mut r = Response::new(Full::new(Bytes::new()));
        *r.status_mut() = StatusCode::NOT_FOUND;
        r
    };
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain"),
    );
    Ok(response)
}

/// Serves on 127.0.0.1 (any port), one task per connection, until killed;
/// says where on its first line, as the example does.
fn serve_hyper() -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("serving HTTP/1.1 on http://{}/", listener.local_addr()?);
        std::io::stdout().flush()?;
        let mut builder = hyper::server::conn::http1::Builder::new();
        builder.auto_date_header(false);
        loop {
            let (socket, _) = listener.accept().await?;
            socket.set_nodelay(true)?;
            let io = hyper_util::rt::TokioIo::new(socket);
            let connection = builder.serve_connection(io, hyper::service::service_fn(hello));
            tokio::spawn(async move {
                // A client that breaks off is its own business.
                let _ = connection.await;
            });
        }
    })
}

// ----- the comparison -----

/// A server process, killed when dropped.
struct Server {
    name: &'static str,
    child: Child,
    addr: SocketAddr,
}

impl Server {
    /// Starts `command` and reads its address from its first line
    /// (`... http://ADDR/ ...`).
    fn start(name: &'static str, mut command: Command) -> Result<Self, String> {
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{name}: {e}"))?;
        let mut line = String::new();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let read = BufReader::new(stdout).read_line(&mut line);
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .and_then(|addr| addr.parse().ok());
        match (read, addr) {
            (Ok(_), Some(addr)) => Ok(Self { name, child, addr }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("{name} said {line:?}, not its address"))
            }
        }
    }

    /// Seconds of CPU the process has used: user and system.
    fn cpu(&self) -> Result<Cpu, String> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id()))
            .map_err(|e| e.to_string())?;
        // The fields after the command's closing parenthesis: state is
        // the first, utime the 12th, stime the 13th.
        let rest = stat.rsplit_once(')').ok_or("bad stat")?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        let (user, system) = ticks(11).zip(ticks(12)).ok_or("bad stat")?;
        // SAFETY: sysconf only reads a setting of the system.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let seconds = |ticks: u64| ticks as f64 / per_second.max(1) as f64;
        Ok(Cpu {
            user: seconds(user),
            system: seconds(system),
        })
    }

    /// The whole answer to one `GET /`, on a connection of its own.
    fn get(&self) -> Result<Vec<u8>, String> {
        let fail = |e: std::io::Error| format!("{}: {e}", self.name);
        let mut socket = TcpStream::connect(self.addr).map_err(fail)?;
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .map_err(fail)?;
        socket
            .write_all(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
            .map_err(fail)?;
        let mut answer = Vec::new();
        socket.read_to_end(&mut answer).map_err(fail)?;
        Ok(answer)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// CPU time, in seconds: in the process's own code (user), and in the
/// kernel on its behalf (system: the syscalls, and much of loopback
/// TCP's work).
#[derive(Clone, Copy)]
struct Cpu {
    user: f64,
    system: f64,
}

/// What one wrk run gave.
struct Run {
    requests: u64,
    per_second: f64,
    /// The server's CPU time over the run.
    cpu: Cpu,
}

impl Run {
    /// Microseconds of CPU a request, user and system.
    fn per_request(&self) -> f64 {
        (self.cpu.user + self.cpu.system) / self.requests as f64 * 1e6
    }

    /// Microseconds of user CPU a request.
    fn user_per_request(&self) -> f64 {
        self.cpu.user / self.requests as f64 * 1e6
    }
}

/// One wrk run of `seconds` against `server`: on core 1 with one thread
/// when `pinned`, else two threads wherever the scheduler puts them.
fn run(server: &Server, seconds: u64, pinned: bool) -> Result<Run, String> {
    let before = server.cpu()?;
    let (cpus, threads) = if pinned {
        (Some("1"), "-t1")
    } else {
        (None, "-t2")
    };
    let output = on_cores(cpus, "wrk".as_ref())
        .args([threads, "-c64", &format!("-d{seconds}s")])
        .arg(format!("http://{}/", server.addr))
        .output()
        .map_err(|e| format!("wrk: {e}"))?;
    let after = server.cpu()?;
    let text = String::from_utf8_lossy(&output.stdout);
    if text.contains("Non-2xx") || text.contains("Socket errors") {
        return Err(format!("{}: wrk saw errors:\n{text}", server.name));
    }
    let per_second = text
        .lines()
        .find_map(|line| line.trim().strip_prefix("Requests/sec:"))
        .and_then(|rest| rest.trim().parse::<f64>().ok());
    let requests = text
        .lines()
        .find(|line| line.contains(" requests in "))
        .and_then(|line| line.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok());
    match (requests, per_second) {
        (Some(requests), Some(per_second)) if requests > 0 => Ok(Run {
            requests,
            per_second,
            cpu: Cpu {
                user: after.user - before.user,
                system: after.system - before.system,
            },
        }),
        _ => Err(format!(
            "{}: no figures in wrk's output:\n{text}",
            server.name
        )),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// The runs' options: `--runs N`, `--duration SECONDS`, `--unpinned`.
struct Options {
    runs: usize,
    seconds: u64,
    /// Each server on core 0 and wrk (one thread) on core 1, with
    /// `taskset`: on two cores, unpinned, the scheduler mixes the two and
    /// moves the figures of a run by up to 30% either way.
    pinned: bool,
}

fn options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        runs: 5,
        seconds: 5,
        pinned: true,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--unpinned" {
            options.pinned = false;
            continue;
        }
        let value = args.next().and_then(|v| v.parse::<u64>().ok());
        match (arg.as_str(), value) {
            ("--runs", Some(n)) => options.runs = usize::try_from(n).unwrap_or(usize::MAX),
            ("--duration", Some(n)) => options.seconds = n,
            _ => {
                return Err(format!(
                    "{arg}: expected --runs N, --duration SECONDS or --unpinned"
                ))
            }
        }
    }
    options.runs = options.runs.max(1);
    options.seconds = options.seconds.max(1);
    Ok(options)
}

/// `command` run on the cores `cpus` (a `taskset` list), or as it is.
fn on_cores(cpus: Option<&str>, program: &std::ffi::OsStr) -> Command {
    match cpus {
        Some(cpus) => {
            let mut command = Command::new("taskset");
            command.args(["-c", cpus]).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// Where cargo put the example: `target/release/examples/`, beside this
/// binary's `target/release/deps/`.
fn example_path() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    exe.parent()
        .and_then(|deps| deps.parent())
        .map(|dir| dir.join("examples").join("http1_server"))
        .ok_or_else(|| "no target directory".into())
}

fn compare(args: &[String]) -> Result<(), String> {
    let Options {
        runs,
        seconds,
        mut pinned,
    } = options(args)?;
    let example = example_path()?;
    if !example.exists() {
        println!(
            "http1_wrk: skipped, {} is not built \
             (cargo build --release -p cleave-examples --example http1_server)",
            example.display()
        );
        return Ok(());
    }
    if Command::new("wrk").arg("--version").output().is_err() {
        println!("http1_wrk: skipped, wrk is not installed");
        return Ok(());
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    // `taskset` present, and cores 0 and 1 both allowed to this process.
    let can_pin = Command::new("taskset")
        .args(["-c", "0,1", "true"])
        .output()
        .is_ok_and(|out| out.status.success());
    if pinned && (cores < 2 || !can_pin) {
        println!("http1_wrk: unpinned (no taskset, or cores 0 and 1 not both allowed)");
        pinned = false;
    }
    let server_cores = pinned.then_some("0");
    let mut cleave = on_cores(server_cores, example.as_os_str());
    cleave.args(["--listen", "127.0.0.1:0"]);
    let this = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut hyper = on_cores(server_cores, this.as_os_str());
    hyper.arg(SERVE_HYPER);
    let servers = [
        Server::start("cleave http1_server", cleave)?,
        Server::start("hyper", hyper)?,
    ];
    let answers = [servers[0].get()?, servers[1].get()?];
    // hyper writes its header names in lower case.
    if !answers[0].eq_ignore_ascii_case(&answers[1]) {
        return Err(format!(
            "the servers answer differently:\n{}\n{}",
            String::from_utf8_lossy(&answers[0]).escape_debug(),
            String::from_utf8_lossy(&answers[1]).escape_debug()
        ));
    }
    println!("both answer {:?}", String::from_utf8_lossy(&answers[0]));
    for server in &servers {
        run(server, 1, pinned)?; // warm-up
    }
    let began = Instant::now();
    let mut results: [Vec<Run>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..runs {
        for (server, results) in servers.iter().zip(&mut results) {
            results.push(run(server, seconds, pinned)?);
        }
    }
    print_table(&servers, &results, runs, seconds, pinned);
    eprintln!("total: {:.0} s", began.elapsed().as_secs_f64());
    Ok(())
}

fn print_table(
    servers: &[Server; 2],
    results: &[Vec<Run>; 2],
    runs: usize,
    seconds: u64,
    pinned: bool,
) {
    if pinned {
        println!(
            "\n`wrk -t1 -c64 -d{seconds}s` on core 1, each server on core 0, \
             GET / on 127.0.0.1, median of {runs} runs\n"
        );
    } else {
        println!("\n`wrk -t2 -c64 -d{seconds}s`, GET / on 127.0.0.1, median of {runs} runs\n");
    }
    println!(
        "| server | requests/s (min-max) | server CPU per request (min-max) | of it, user | server CPU, cores |"
    );
    println!("|---|---|---|---|---|");
    let mut figures = Vec::new();
    for (server, runs) in servers.iter().zip(results) {
        let rates: Vec<f64> = runs.iter().map(|r| r.per_second).collect();
        let lo = rates.iter().copied().fold(f64::MAX, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        let rate = median(rates);
        let costs: Vec<f64> = runs.iter().map(Run::per_request).collect();
        let cpu_lo = costs.iter().copied().fold(f64::MAX, f64::min);
        let cpu_hi = costs.iter().copied().fold(0.0, f64::max);
        let cpu = median(costs);
        let user = median(runs.iter().map(Run::user_per_request).collect());
        let cores = median(
            runs.iter()
                .map(|r| (r.cpu.user + r.cpu.system) / seconds as f64)
                .collect(),
        );
        println!(
            "| {} | {rate:.0} ({lo:.0}-{hi:.0}) | {cpu:.2} µs ({cpu_lo:.2}-{cpu_hi:.2}) | {user:.2} µs | {cores:.2} |",
            server.name
        );
        figures.push((rate, cpu, user));
    }
    let (cleave, hyper) = (figures[0], figures[1]);
    println!(
        "\ncleave / hyper: {:.2}x the requests per second, {:.2}x the CPU per request, \
         {:.2}x the user CPU per request",
        cleave.0 / hyper.0,
        cleave.1 / hyper.1,
        cleave.2 / hyper.2
    );
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench`.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let outcome = if args.first().map(String::as_str) == Some(SERVE_HYPER) {
        serve_hyper().map_err(|e| e.to_string())
    } else {
        compare(&args)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http1_wrk: {e}");
            ExitCode::FAILURE
        }
    }
}
