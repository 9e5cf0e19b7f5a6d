//! What the memory benches share: the server child they measure (spawned
//! from the same binary, asked for its figures over stdin and stdout,
//! every wait bounded); and the machine's facts that every report prints.

use std::io::{self, BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The benches' error: any, with its message.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The longest any wait for the child may take before the run fails.
pub const WAIT: Duration = Duration::from_secs(60);

/// The server child, run as `this-binary --role server --server NAME`;
/// killed on drop if it is still there.
///
/// It speaks in lines: `READY addr` once listening; `STATS n n ...` when
/// asked `STATS`; `SIZE bytes name` lines then `END` when asked `SIZES`;
/// it exits when asked `QUIT`.
#[derive(Debug)]
pub struct ServerProcess {
    name: String,
    child: Child,
    stdin: ChildStdin,
    /// Its stdout, a line at a time, from a reader thread: every wait for
    /// an answer has a deadline.
    lines: mpsc::Receiver<String>,
}

impl ServerProcess {
    /// Starts the server named `name` and waits for its address.
    pub fn spawn(name: &str) -> Result<(Self, SocketAddr), BoxError> {
        let mut child = Command::new(std::env::current_exe()?)
            .args(["--role", "server", "--server", name])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut process = Self {
            name: name.to_string(),
            child,
            stdin,
            lines,
        };
        let addr = process.line("READY")?.parse()?;
        Ok((process, addr))
    }

    /// The next line, which must start with `tag`; without the tag.
    pub fn line(&mut self, tag: &str) -> Result<String, BoxError> {
        let line = self.lines.recv_timeout(WAIT).map_err(|_| {
            format!(
                "the {} server gave no {tag} line within {} s",
                self.name,
                WAIT.as_secs()
            )
        })?;
        match line.strip_prefix(tag) {
            Some(rest) => Ok(rest.trim().to_string()),
            None => Err(format!("the {} server said {line:?}, not {tag}", self.name).into()),
        }
    }

    /// Sends the child a command line.
    pub fn ask(&mut self, command: &str) -> Result<(), BoxError> {
        writeln!(self.stdin, "{command}")?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Asks `STATS` and returns the numbers of the answer, in order.
    pub fn stats(&mut self) -> Result<Vec<u64>, BoxError> {
        self.ask("STATS")?;
        let line = self.line("STATS")?;
        let numbers = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|_| format!("bad STATS line {line:?}"))?;
        Ok(numbers)
    }

    /// Asks `SIZES`: the child's (type name, `size_of`) pairs.
    pub fn sizes(&mut self) -> Result<Vec<(String, usize)>, BoxError> {
        self.ask("SIZES")?;
        let mut sizes = Vec::new();
        loop {
            let line = self
                .lines
                .recv_timeout(WAIT)
                .map_err(|_| "no SIZES answer")?;
            if line == "END" {
                return Ok(sizes);
            }
            let (size, name) = line
                .strip_prefix("SIZE ")
                .and_then(|l| l.split_once(' '))
                .ok_or_else(|| format!("bad SIZE line {line:?}"))?;
            sizes.push((name.to_string(), size.parse()?));
        }
    }

    /// Asks the child to quit; kills it if it has not within a few seconds.
    pub fn stop(&mut self) -> Result<(), BoxError> {
        let _ = self.ask("QUIT");
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return if status.success() {
                    Ok(())
                } else {
                    Err(format!("the {} server ended with {status}", self.name).into())
                };
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        self.child.kill()?;
        self.child.wait()?;
        Err(format!("the {} server did not quit; killed", self.name).into())
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// This process's resident set, from `VmRSS` in `/proc/self/status`.
pub fn vm_rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib * 1024)
}

/// Raises the soft descriptor limit to the hard one; returns it.
pub fn raise_nofile() -> io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    if limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max;
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

/// The processor, its cores and the kernel, for a report's first line.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cpu}, {cores} cores, Linux {}", kernel.trim())
}
