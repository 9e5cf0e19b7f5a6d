//! The stream harness: many connections over loopback TCP, each sending a
//! stream through a proxy to a sink that checks every byte, in two
//! families of scenarios.
//!
//! - **Routed** (`fragmented`, `coalesced`; `--scenario all`, the default):
//!   64 route frames of 63 bytes and `\n` in fragments, a `TUNNEL` line,
//!   then a raw tunnel; the proxy routes the frames, hands the tail off and
//!   tunnels the rest.
//! - **Checked** (`checked64`, `checked16k`; `--scenario checked` runs
//!   both): 65536 frames of 64-byte payloads, or 1024 of 16 KiB, in the
//!   `Checked` layout (u32 LE length, checksum, payload), written in 16 KiB
//!   writes (a connection's first frame names it; the frames after it name
//!   their index); the proxy decodes each frame, verifies its checksum and
//!   forwards it re-encoded (the same bytes). Before the measured runs,
//!   every variant that verifies checksums is fed a stream with one flipped
//!   payload bit and must refuse it without forwarding the bad frame. The
//!   table shows the proxy's CPU per frame and per byte, beside
//!   `checked_none` (the same proxy without a checksum).
//!
//! The proxy runs in a child process (this binary with `--role proxy`), so
//! its CPU time and peak RSS come from its own `getrusage`, apart from the
//! clients' and sinks'. Variants run interleaved, `--runs` times; the table
//! shows each figure's median. A wrong byte at a sink, a refused stream or
//! a run past its time fails the run.
//!
//! Run: `cargo run --release -p cleave-benches --bin stream_harness`
//! (routed), `... --bin stream_harness -- --scenario checked` (checked);
//! `-- --help` for the options.

use std::io::{self, BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::ops::Range;
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use bytes_handoff::{HandoffBuffer, HandoffBufferConfig, WriteHandoff, WriteHandoffConfig};
use cleave_benches::process::machine;
use cleave_proto::route::{Match, Router};
use cleave_proto::{
    Checked, CheckedConfig, Checksum, ConnConfig, Decoder, Encoder, Event, Frame, LengthConfig,
    LengthPrefixed, Lines, RecvBufConfig, Session, SessionConfig, WriteQueueConfig,
    DEFAULT_MAX_FRAME_LENGTH,
};
use cleave_tokio::{
    spawn_writer, splice_tunnel, tunnel, FrameReader, Pipes, SessionReader, TunnelConfig, Writer,
};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::{Builder, Runtime};

mod mio_proxy;
mod std_proxy;

const ROUTE_FRAMES: usize = 64;
const FRAME_LEN: usize = 63;
/// Read size of every variant that reads into its own buffer.
const READ_RESERVE: usize = 16 * 1024;
/// Write queue bytes of the queued variants: bytes-handoff's default
/// (eight read reserves) and cleave's default `WriteQueue` limit.
const WRITE_PENDING: usize = 8 * READ_RESERVE;
/// No run may take longer: a stuck variant fails the run.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    CleaveSameTask,
    /// The same, with buffers kept when a connection goes idle.
    CleaveSameTaskKeep,
    /// The same, the tunnel spliced by the kernel.
    CleaveSplice,
    CleaveCrossTask,
    CleaveMio,
    /// The same, with buffers kept when a connection goes idle.
    CleaveMioKeep,
    /// The same, the tunnel spliced by the kernel.
    CleaveMioSplice,
    CleaveStd,
    BytesHandoff,
    ManualVec,
    /// Both families: no parsing.
    RawCopy,
    /// A hand-written splice(2) loop, one pipe, no parsing.
    RawSplice,
    /// `FrameReader<Checked>` and a `Writer`, with no checksum.
    CheckedNone,
    CheckedCrc16,
    CheckedCrc32,
    CheckedXxh3,
    /// `FrameReader<Checked>` with headers kept: verified frames forwarded
    /// as they came, the checksum computed once.
    ForwardCrc32,
    ForwardXxh3,
    /// `FrameReader<LengthPrefixed>` over flatstream's layout.
    LengthPrefixed,
    /// A hand-written CRC-32 loop.
    ManualCrc32,
}

impl Variant {
    /// The variants of the routed scenarios.
    const ROUTED: [Variant; 12] = [
        Variant::CleaveSameTask,
        Variant::CleaveSameTaskKeep,
        Variant::CleaveSplice,
        Variant::CleaveCrossTask,
        Variant::CleaveMio,
        Variant::CleaveMioKeep,
        Variant::CleaveMioSplice,
        Variant::CleaveStd,
        Variant::BytesHandoff,
        Variant::ManualVec,
        Variant::RawCopy,
        Variant::RawSplice,
    ];

    /// The variants of the checked scenarios; the first is the baseline
    /// of the table's ratio.
    const CHECKED: [Variant; 9] = [
        Variant::CheckedNone,
        Variant::CheckedCrc16,
        Variant::CheckedCrc32,
        Variant::CheckedXxh3,
        Variant::ForwardCrc32,
        Variant::ForwardXxh3,
        Variant::LengthPrefixed,
        Variant::ManualCrc32,
        Variant::RawCopy,
    ];

    fn name(self) -> &'static str {
        match self {
            Variant::CleaveSameTask => "cleave_same_task",
            Variant::CleaveSameTaskKeep => "cleave_same_task_keep",
            Variant::CleaveSplice => "cleave_splice",
            Variant::CleaveCrossTask => "cleave_cross_task",
            Variant::CleaveMio => "cleave_mio",
            Variant::CleaveMioKeep => "cleave_mio_keep",
            Variant::CleaveMioSplice => "cleave_mio_splice",
            Variant::CleaveStd => "cleave_std",
            Variant::BytesHandoff => "bytes_handoff",
            Variant::ManualVec => "manual_vec",
            Variant::RawCopy => "raw_copy",
            Variant::RawSplice => "raw_splice",
            Variant::CheckedNone => "checked_none",
            Variant::CheckedCrc16 => "checked_crc16",
            Variant::CheckedCrc32 => "checked_crc32",
            Variant::CheckedXxh3 => "checked_xxh3",
            Variant::ForwardCrc32 => "forward_crc32",
            Variant::ForwardXxh3 => "forward_xxh3",
            Variant::LengthPrefixed => "length_prefixed",
            Variant::ManualCrc32 => "manual_crc32",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Variant::CleaveSameTask => {
                "cleave-tokio `SessionReader` + `Writer` (same task), then `tunnel`"
            }
            Variant::CleaveSameTaskKeep => {
                "the same, buffers kept when idle (`release_when_idle(false)`)"
            }
            Variant::CleaveSplice => "the same, then `splice_tunnel` (splice(2) through pipes)",
            Variant::CleaveCrossTask => {
                "cleave-tokio `SessionReader` + `spawn_writer` handle (everything through it)"
            }
            Variant::CleaveMio => "cleave-mio `Conn`s, all on one thread's poll loop",
            Variant::CleaveMioKeep => {
                "cleave-mio, buffers kept when idle (`release_when_idle(false)`)"
            }
            Variant::CleaveMioSplice => "cleave-mio, then a `Tunnel` (splice(2) through pipes)",
            Variant::CleaveStd => "cleave-std `Stream`s, a thread per connection",
            Variant::BytesHandoff => "bytes-handoff `HandoffBuffer` + `WriteHandoff`",
            Variant::ManualVec => "hand-written `Vec<u8>` parser, direct writes",
            Variant::RawCopy => "`tokio::io::copy` (no parsing; its 8 KiB buffer)",
            Variant::RawSplice => {
                "hand-written splice(2) loop (lower bound of the splices: no parsing)"
            }
            Variant::CheckedNone => {
                "cleave-tokio `FrameReader<Checked>` + `Writer` (same task), no checksum"
            }
            Variant::CheckedCrc16 => "the same, CRC-16 verified and computed again to re-encode",
            Variant::CheckedCrc32 => "the same, CRC-32 verified and computed again to re-encode",
            Variant::CheckedXxh3 => "the same, XXH3 verified and computed again to re-encode",
            Variant::ForwardCrc32 => {
                "`Checked` with `keep_header()`: CRC-32 verified, each frame forwarded as it came"
            }
            Variant::ForwardXxh3 => "the same, XXH3",
            Variant::LengthPrefixed => {
                "`FrameReader<LengthPrefixed>` (`LengthConfig::flatstream()`) + `Writer`"
            }
            Variant::ManualCrc32 => {
                "hand-written `BytesMut` loop, CRC-32 verified by `Checksum::compute` \
                 (crc32fast), each read's verified frames written as they came"
            }
        }
    }

    /// Whether the proxy runs on a tokio runtime.
    fn on_tokio(self) -> bool {
        !matches!(
            self,
            Variant::CleaveMio
                | Variant::CleaveMioKeep
                | Variant::CleaveMioSplice
                | Variant::CleaveStd
        )
    }

    /// Whether it takes part in scenarios of this workload.
    fn fits(self, workload: Workload) -> bool {
        match workload {
            Workload::Routed => Variant::ROUTED.contains(&self),
            Workload::Checked { .. } => Variant::CHECKED.contains(&self),
        }
    }

    /// The checksum of the stream its clients send in a checked scenario.
    fn stream_checksum(self) -> Checksum {
        match self {
            Variant::CheckedCrc16 => Checksum::Crc16,
            Variant::CheckedXxh3 | Variant::ForwardXxh3 => Checksum::Xxh3,
            Variant::CheckedCrc32
            | Variant::ForwardCrc32
            | Variant::ManualCrc32
            | Variant::RawCopy => Checksum::Crc32,
            _ => Checksum::None,
        }
    }

    /// Whether its proxy verifies the checksums it reads.
    fn verifies(self) -> bool {
        matches!(
            self,
            Variant::CheckedCrc16
                | Variant::CheckedCrc32
                | Variant::CheckedXxh3
                | Variant::ForwardCrc32
                | Variant::ForwardXxh3
                | Variant::ManualCrc32
        )
    }

    fn parse(name: &str) -> Option<Variant> {
        Variant::ROUTED
            .into_iter()
            .chain(Variant::CHECKED)
            .find(|v| v.name() == name)
    }
}

/// What each connection sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Workload {
    /// Route frames, `TUNNEL`, then the tunnel.
    Routed,
    /// `frames` checked frames of `payload`-byte payloads, in the checksum
    /// of the variant ([`Variant::stream_checksum`]).
    Checked { payload: usize, frames: usize },
}

/// One workload: how the clients write and what.
#[derive(Clone, Copy, Debug)]
struct Shape {
    name: &'static str,
    connections: usize,
    fragment: usize,
    /// The routed scenarios' tunnel length (0 in the checked ones).
    tunnel: usize,
    workload: Workload,
}

impl Shape {
    /// A routed stream's length.
    fn bytes_per_connection(self) -> usize {
        frames_len() + self.tunnel
    }

    /// Frames each connection sends.
    fn frames_per_connection(self) -> usize {
        match self.workload {
            Workload::Routed => ROUTE_FRAMES,
            Workload::Checked { frames, .. } => frames,
        }
    }

    /// Bytes the sink reads before it knows which connection it serves.
    fn ident_len(self, variant: Variant) -> usize {
        match self.workload {
            // "GET /tenant/NNNN"
            Workload::Routed => 16,
            // The header and the payload's first four bytes: the id.
            Workload::Checked { .. } => checked_header(variant.stream_checksum()) + 4,
        }
    }

    /// Every connection's stream for `variant`. A checked stream's first
    /// frame names its connection; the frames after it (each naming its
    /// index) are one buffer all the connections share, as the routed
    /// tunnels share their pattern.
    fn streams(self, variant: Variant, pattern: &Bytes) -> Vec<Arc<Stream>> {
        let checksum = variant.stream_checksum();
        let shared = match self.workload {
            Workload::Routed => Bytes::new(),
            Workload::Checked { payload, frames } => {
                Bytes::from(checked_frames(checksum, payload, SHARED_TAG, 1..frames))
            }
        };
        (0..self.connections)
            .map(|id| {
                Arc::new(match self.workload {
                    Workload::Routed => Stream::new(id, pattern, self.tunnel),
                    Workload::Checked { payload, .. } => Stream {
                        frames: checked_frames(checksum, payload, id as u32, 0..1),
                        tunnel: shared.clone(),
                    },
                })
            })
            .collect()
    }
}

/// Length of the route frames and the `TUNNEL` line.
fn frames_len() -> usize {
    ROUTE_FRAMES * (FRAME_LEN + 1) + b"TUNNEL\n".len()
}

/// Connection `id`'s route frames and `TUNNEL` line: the same text as
/// bytes-handoff's harness.
fn frames(id: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames_len());
    for frame in 0..ROUTE_FRAMES {
        let start = out.len();
        out.extend_from_slice(format!("GET /tenant/{id:04}/object/{frame:08}").as_bytes());
        out.resize(start + FRAME_LEN, b'x');
        out.push(b'\n');
    }
    out.extend_from_slice(b"TUNNEL\n");
    out
}

/// The tunnel's bytes repeat every 251; connection `id`'s start at
/// `id % 251` (byte `j` is `(id + j) % 251`).
fn pattern(tunnel: usize) -> Bytes {
    (0..tunnel + 251).map(|i| (i % 251) as u8).collect()
}

/// Connection `id`'s stream: frames, then its tunnel slice (a checked
/// stream: its first frame, then the frames all connections share).
struct Stream {
    frames: Vec<u8>,
    tunnel: Bytes,
}

impl Stream {
    fn new(id: usize, pattern: &Bytes, tunnel: usize) -> Self {
        let start = id % 251;
        Self {
            frames: frames(id),
            tunnel: pattern.slice(start..start + tunnel),
        }
    }

    fn len(&self) -> usize {
        self.frames.len() + self.tunnel.len()
    }

    /// The bytes at `pos..`, at most `max` of them, without copying.
    fn at(&self, pos: usize, max: usize) -> &[u8] {
        let (part, pos) = match pos.checked_sub(self.frames.len()) {
            None => (&self.frames[..], pos),
            Some(pos) => (&self.tunnel[..], pos),
        };
        &part[pos..part.len().min(pos + max)]
    }
}

/// Bytes of a checked frame's header: the length and the checksum.
fn checked_header(checksum: Checksum) -> usize {
    4 + checksum.width()
}

/// The tag of the frames every connection shares (past its first).
const SHARED_TAG: u32 = u32::MAX;

/// Frames `ks` of a checked stream framed with `checksum`, each payload
/// `payload` bytes (at least 8): `tag` and the frame's index `k` as u32
/// LE, then byte `j` is `(7 tag + 13 k + j) % 251`.
fn checked_frames(checksum: Checksum, payload: usize, tag: u32, ks: Range<usize>) -> Vec<u8> {
    assert!(payload >= 8, "a payload carries its tag and index");
    let mut codec = Checked::new(checksum).expect("this build has every checksum");
    let mut out = Vec::with_capacity(ks.len() * (checked_header(checksum) + payload));
    for k in ks {
        let mut body = Vec::with_capacity(payload);
        body.extend_from_slice(&tag.to_le_bytes());
        body.extend_from_slice(&(k as u32).to_le_bytes());
        body.extend((8..payload).map(|j| ((7 * tag as usize + 13 * k + j) % 251) as u8));
        let frame = codec.encode(Bytes::from(body)).expect("under the limit");
        out.extend_from_slice(frame.head());
        out.extend_from_slice(frame.body());
    }
    out
}

// ---------------------------------------------------------------------------
// The proxy process
// ---------------------------------------------------------------------------

/// CPU time (user, system) of this process, and its peak RSS.
///
/// The peak comes from `VmHWM` in `/proc/self/status`: `ru_maxrss` is
/// carried across `execve` and would report the parent's peak.
fn usage() -> (Duration, Duration, u64) {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is valid.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage: {}", io::Error::last_os_error());
    // SAFETY: filled by the successful call above (and zeroed before).
    let usage = unsafe { usage.assume_init() };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let peak_kib = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .unwrap_or(0);
    (time(usage.ru_utime), time(usage.ru_stime), peak_kib * 1024)
}

fn runtime(threads: usize) -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime")
}

fn proxy_main(variant: Variant, sink: SocketAddr, shape: Shape, threads: usize) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    println!("READY {}", listener.local_addr().expect("proxy address"));
    io::stdout().flush().expect("stdout");
    // The runtime's threads start before the measurement does.
    let rt = variant.on_tokio().then(|| runtime(threads));
    KEEP_IDLE_BLOCKS.store(
        matches!(
            variant,
            Variant::CleaveSameTaskKeep | Variant::CleaveMioKeep
        ),
        Ordering::Relaxed,
    );
    let (user, system, _) = usage();
    match (variant, rt) {
        (Variant::CleaveMio | Variant::CleaveMioKeep | Variant::CleaveMioSplice, _) => {
            let splice = variant == Variant::CleaveMioSplice;
            let session = || session(sink);
            mio_proxy::run(listener, shape.connections, session, conn_config(), splice)
                .expect("mio proxy");
        }
        (Variant::CleaveStd, _) => {
            std_proxy::run(listener, shape.connections, || session(sink), conn_config())
                .expect("std proxy");
        }
        (_, Some(rt)) => rt.block_on(async {
            listener.set_nonblocking(true).expect("non-blocking");
            let listener = TcpListener::from_std(listener).expect("tokio listener");
            let mut proxies = Vec::with_capacity(shape.connections);
            for _ in 0..shape.connections {
                let (inbound, _) = listener.accept().await.expect("accept");
                inbound.set_nodelay(true).expect("nodelay");
                proxies.push(tokio::spawn(proxy(variant, inbound, sink, shape)));
            }
            for proxy in proxies {
                proxy.await.expect("proxy task").expect("proxy");
            }
        }),
        (_, None) => unreachable!("every other variant runs on tokio"),
    }
    let (user_end, system_end, rss) = usage();
    println!(
        "USAGE {} {} {}",
        (user_end - user).as_nanos(),
        (system_end - system).as_nanos(),
        rss
    );
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

async fn proxy(
    variant: Variant,
    inbound: TcpStream,
    sink: SocketAddr,
    shape: Shape,
) -> io::Result<()> {
    match variant {
        Variant::CleaveSameTask | Variant::CleaveSameTaskKeep => {
            cleave_same_task(inbound, sink, false).await
        }
        Variant::CleaveSplice => cleave_same_task(inbound, sink, true).await,
        Variant::CleaveCrossTask => cleave_cross_task(inbound, sink).await,
        Variant::CleaveMio
        | Variant::CleaveMioKeep
        | Variant::CleaveMioSplice
        | Variant::CleaveStd => {
            unreachable!("runs without tokio")
        }
        Variant::BytesHandoff => bytes_handoff(inbound, connect(sink).await?, shape).await,
        Variant::ManualVec => manual_vec(inbound, connect(sink).await?).await,
        Variant::RawCopy => raw_copy(inbound, connect(sink).await?).await,
        Variant::RawSplice => raw_splice(inbound, connect(sink).await?).await,
        Variant::CheckedNone
        | Variant::CheckedCrc16
        | Variant::CheckedCrc32
        | Variant::CheckedXxh3
        | Variant::ForwardCrc32
        | Variant::ForwardXxh3
        | Variant::LengthPrefixed
        | Variant::ManualCrc32 => checked_proxy(variant, inbound, connect(sink).await?).await,
    }
}

/// Whether this proxy process keeps its buffers when a connection goes
/// idle (the `_keep` variants), set once before it starts.
static KEEP_IDLE_BLOCKS: AtomicBool = AtomicBool::new(false);

/// The session every cleave variant runs: route on the first bytes, then
/// lines until `TUNNEL`, then raw bytes.
fn session(sink: SocketAddr) -> Session<SocketAddr, Lines> {
    let router = Router::new(sink).rule(Match::Prefix(Bytes::from_static(b"GET ")), sink);
    Session::framed(
        router,
        Lines::new(),
        |line: &Bytes| &line[..] == b"TUNNEL",
        SessionConfig::default(),
    )
}

/// The client connection's buffer and queue (the queue stays empty: the
/// proxy writes to the sink).
fn conn_config() -> ConnConfig {
    let recv = RecvBufConfig::default()
        .read_reserve(READ_RESERVE)
        .expect("valid reserve")
        .idle_capacity(READ_RESERVE)
        .release_when_idle(!KEEP_IDLE_BLOCKS.load(Ordering::Relaxed));
    ConnConfig::default()
        .recv_buf(recv)
        .write_queue(queue_config())
}

fn queue_config() -> WriteQueueConfig {
    WriteQueueConfig::default()
        .max_bytes(WRITE_PENDING)
        .expect("valid limit")
        .release_when_idle(!KEEP_IDLE_BLOCKS.load(Ordering::Relaxed))
}

fn other<E: std::error::Error + Send + Sync + 'static>(e: E) -> io::Error {
    io::Error::other(e)
}

/// Waits for the routing decision and connects to its target.
async fn routed(
    events: &mut SessionReader<TcpStream, SocketAddr, Lines>,
) -> io::Result<Option<TcpStream>> {
    while let Some(event) = events.next().await {
        match event.map_err(other)? {
            Event::Routed(decision) => return connect(decision.target).await.map(Some),
            Event::Closed(_) => return Ok(None),
            _ => {}
        }
    }
    Ok(None)
}

/// Same task: the connection's task reads events and drains the writer
/// whenever the reader would wait; after the hand-off, `tunnel` copies
/// (or `splice_tunnel` splices).
async fn cleave_same_task(inbound: TcpStream, sink: SocketAddr, splice: bool) -> io::Result<()> {
    let mut events = SessionReader::with_config(inbound, session(sink), conn_config());
    let Some(outbound) = routed(&mut events).await? else {
        return Ok(());
    };
    let mut writer = Writer::with_config(outbound, queue_config());
    let mut lines = Lines::new();
    loop {
        tokio::select! {
            biased;
            event = events.next() => match event {
                Some(Ok(Event::Frame(line))) => {
                    writer.send(lines.encode(line).map_err(other)?).await?;
                }
                Some(Ok(Event::Tunnel(tail))) => {
                    writer.drain().await?;
                    let (mut inbound, _) = events.into_parts();
                    let (mut outbound, _) = writer.into_parts();
                    if splice {
                        let config = TunnelConfig::default();
                        let pipes = Pipes::global();
                        splice_tunnel(&mut inbound, &mut outbound, tail, config, pipes).await?;
                    } else {
                        tunnel(&mut inbound, &mut outbound, tail).await?;
                    }
                    return Ok(());
                }
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(other(e)),
                None => return writer.close().await,
            },
            drained = writer.drain(), if !writer.queue().is_flushed() => drained?,
        }
    }
}

/// Cross task: everything goes through a `WriteHandle` to a spawned
/// writer, the tunnel's bytes as the session cuts them.
async fn cleave_cross_task(inbound: TcpStream, sink: SocketAddr) -> io::Result<()> {
    let mut events = SessionReader::with_config(inbound, session(sink), conn_config());
    let Some(outbound) = routed(&mut events).await? else {
        return Ok(());
    };
    let (handle, writer) = spawn_writer(outbound, queue_config());
    let mut lines = Lines::new();
    while let Some(event) = events.next().await {
        match event.map_err(other)? {
            Event::Frame(line) => {
                handle
                    .send(lines.encode(line).map_err(other)?)
                    .await
                    .map_err(|rejected| other(rejected.into_parts().0))?;
            }
            Event::Tunnel(bytes) if !bytes.is_empty() => {
                handle
                    .send(bytes)
                    .await
                    .map_err(|rejected| other(rejected.into_parts().0))?;
            }
            _ => {}
        }
    }
    handle.close().await.map_err(other)?;
    writer.await.map_err(other)?
}

/// bytes-handoff as its own harness drives it (its `handoff`
/// implementation, ticket completion, its default limits).
async fn bytes_handoff(
    mut inbound: TcpStream,
    outbound: TcpStream,
    shape: Shape,
) -> io::Result<()> {
    let tunnel_items = shape.tunnel.div_ceil(READ_RESERVE);
    let handoff = WriteHandoff::spawn(
        outbound,
        WriteHandoffConfig::new(ROUTE_FRAMES + tunnel_items + 16, WRITE_PENDING),
    );
    let mut buffer = HandoffBuffer::with_config(
        HandoffBufferConfig::new(shape.bytes_per_connection() + READ_RESERVE)
            .with_read_reserve(READ_RESERVE),
    );
    let mut tunnel = false;
    loop {
        let read = buffer.read_available(&mut inbound).await.map_err(other)?;
        if read == 0 {
            break;
        }
        if !tunnel {
            loop {
                let bytes = buffer.peek();
                if bytes.starts_with(b"TUNNEL\n") {
                    tunnel = true;
                    break;
                }
                if bytes.starts_with(b"TUN") {
                    break;
                }
                let Some(newline) = memchr::memchr(b'\n', bytes) else {
                    break;
                };
                let frame = buffer.split_prefix(newline + 1).map_err(other)?;
                handoff.write(frame).await.map_err(other)?;
            }
        }
        if tunnel && !buffer.is_empty() {
            handoff.write(buffer.freeze_all()).await.map_err(other)?;
        }
    }
    if !buffer.is_empty() {
        handoff.write(buffer.freeze_all()).await.map_err(other)?;
    }
    handoff.drain().await.map_err(other)?;
    handoff.close();
    Ok(())
}

/// The hand-written proxy of bytes-handoff's harness: a `Vec<u8>`, a
/// scratch read buffer, `write_all` per frame.
async fn manual_vec(mut inbound: TcpStream, mut outbound: TcpStream) -> io::Result<()> {
    let mut buf = Vec::with_capacity(READ_RESERVE * 2);
    let mut scratch = vec![0u8; READ_RESERVE];
    let mut consumed = 0;
    let mut tunnel = false;
    loop {
        let read = inbound.read(&mut scratch).await?;
        if read == 0 {
            break;
        }
        buf.extend_from_slice(&scratch[..read]);
        if !tunnel {
            loop {
                let available = &buf[consumed..];
                if available.starts_with(b"TUNNEL\n") {
                    tunnel = true;
                    break;
                }
                if available.starts_with(b"TUN") {
                    break;
                }
                let Some(newline) = memchr::memchr(b'\n', available) else {
                    break;
                };
                let end = consumed + newline + 1;
                outbound.write_all(&buf[consumed..end]).await?;
                consumed = end;
            }
            if consumed == buf.len() {
                buf.clear();
                consumed = 0;
            } else if consumed >= READ_RESERVE && consumed * 2 >= buf.len() {
                buf.drain(..consumed);
                consumed = 0;
            }
        }
        if tunnel && consumed < buf.len() {
            outbound.write_all(&buf[consumed..]).await?;
            buf.clear();
            consumed = 0;
        }
    }
    if consumed < buf.len() {
        outbound.write_all(&buf[consumed..]).await?;
    }
    outbound.shutdown().await
}

async fn raw_copy(mut inbound: TcpStream, mut outbound: TcpStream) -> io::Result<()> {
    tokio::io::copy(&mut inbound, &mut outbound).await?;
    outbound.shutdown().await
}

/// The tightest splice(2) loop: one pipe, filled only when empty, each
/// fill drained before the next (as `splice_tunnel` does), no parsing.
#[cfg(target_os = "linux")]
async fn raw_splice(inbound: TcpStream, mut outbound: TcpStream) -> io::Result<()> {
    use rustix::pipe::{pipe_with, splice, PipeFlags, SpliceFlags};
    use tokio::io::Interest;

    let (pipe_out, pipe_in) = pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
    let flags = SpliceFlags::NONBLOCK | SpliceFlags::MOVE;
    loop {
        inbound.readable().await?;
        let fill = || Ok(splice(&inbound, None, &pipe_in, None, 1 << 20, flags)?);
        let mut left = match inbound.try_io(Interest::READABLE, fill) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        };
        while left > 0 {
            outbound.writable().await?;
            let drain = || Ok(splice(&pipe_out, None, &outbound, None, left, flags)?);
            match outbound.try_io(Interest::WRITABLE, drain) {
                Ok(n) => left -= n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
    }
    outbound.shutdown().await
}

#[cfg(not(target_os = "linux"))]
async fn raw_splice(inbound: TcpStream, outbound: TcpStream) -> io::Result<()> {
    raw_copy(inbound, outbound).await
}

/// A checked scenario's proxy for `variant` (not `raw_copy`).
async fn checked_proxy(
    variant: Variant,
    inbound: TcpStream,
    outbound: TcpStream,
) -> io::Result<()> {
    match variant {
        Variant::LengthPrefixed => {
            let codec = LengthPrefixed::with_config(LengthConfig::flatstream()).map_err(other)?;
            reencode(inbound, outbound, codec).await
        }
        Variant::ManualCrc32 => manual_crc32(inbound, outbound).await,
        Variant::ForwardCrc32 | Variant::ForwardXxh3 => {
            let config = CheckedConfig::new(variant.stream_checksum()).keep_header();
            forward(
                inbound,
                outbound,
                Checked::with_config(config).map_err(other)?,
            )
            .await
        }
        _ => {
            let codec = Checked::new(variant.stream_checksum()).map_err(other)?;
            reencode(inbound, outbound, codec).await
        }
    }
}

/// Same task: the connection's task decodes each frame (checking its
/// checksum, for a checked codec), encodes its payload again (the same
/// bytes) into the sink's `Writer`, and drains the writer whenever the
/// reader would wait. A refused frame ends the proxy with its error and
/// nothing more is written.
async fn reencode<C>(inbound: TcpStream, outbound: TcpStream, codec: C) -> io::Result<()>
where
    C: Decoder<Item = Bytes> + Encoder<Item = Bytes> + Clone,
{
    let mut encoder = codec.clone();
    let mut frames = FrameReader::with_config(inbound, codec, conn_config());
    let mut writer = Writer::with_config(outbound, queue_config());
    loop {
        tokio::select! {
            biased;
            frame = frames.next() => match frame {
                Some(Ok(payload)) => {
                    writer.send(encoder.encode(payload).map_err(other)?).await?;
                }
                Some(Err(e)) => return Err(io::Error::from(e)),
                None => return writer.close().await,
            },
            drained = writer.drain(), if !writer.queue().is_flushed() => drained?,
        }
    }
}

/// Same task, as [`reencode`], but each verified frame is forwarded whole,
/// as it came (the decoder keeps its header): no checksum computed again.
async fn forward(inbound: TcpStream, outbound: TcpStream, codec: Checked) -> io::Result<()> {
    let mut frames = FrameReader::with_config(inbound, codec, conn_config());
    let mut writer = Writer::with_config(outbound, queue_config());
    loop {
        tokio::select! {
            biased;
            frame = frames.next() => match frame {
                Some(Ok(frame)) => {
                    writer.send(Frame::from(frame)).await?;
                }
                Some(Err(e)) => return Err(io::Error::from(e)),
                None => return writer.close().await,
            },
            drained = writer.drain(), if !writer.queue().is_flushed() => drained?,
        }
    }
}

/// The hand-written checked proxy: reads into a `BytesMut`, verifies the
/// CRC-32 of every whole frame there, and writes those frames' bytes
/// straight from the buffer to the sink, one `write_all` per read.
async fn manual_crc32(mut inbound: TcpStream, mut outbound: TcpStream) -> io::Result<()> {
    let head = checked_header(Checksum::Crc32);
    let mut buf = BytesMut::with_capacity(2 * READ_RESERVE);
    let mut offset = 0;
    loop {
        buf.reserve(READ_RESERVE);
        if inbound.read_buf(&mut buf).await? == 0 {
            break;
        }
        let mut end = 0;
        while let Some(&[a, b, c, d, e, f, g, h]) = buf.get(end..end + head) {
            let len = u32::from_le_bytes([a, b, c, d]);
            if u64::from(len) > DEFAULT_MAX_FRAME_LENGTH {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("a {len}-byte frame at offset {}", offset + end),
                ));
            }
            let Some(payload) = buf.get(end + head..end + head + len as usize) else {
                break;
            };
            let sent = u64::from(u32::from_le_bytes([e, f, g, h]));
            let computed = Checksum::Crc32.compute(payload);
            if sent != computed {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "CRC-32 mismatch at offset {}: {sent:#010x} sent, {computed:#010x} computed",
                        offset + end
                    ),
                ));
            }
            end += head + payload.len();
        }
        if end > 0 {
            outbound.write_all(&buf[..end]).await?;
            buf.advance(end);
            offset += end;
        }
    }
    if !buf.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the stream ends inside the frame at offset {offset}"),
        ));
    }
    outbound.shutdown().await
}

// ---------------------------------------------------------------------------
// The driver: clients and sinks
// ---------------------------------------------------------------------------

/// Writes connection `id`'s stream in `fragment`-byte writes, half-closes,
/// then waits for the proxy to close its side.
async fn client(proxy: SocketAddr, stream: Arc<Stream>, fragment: usize) -> io::Result<()> {
    let mut socket = connect(proxy).await?;
    let mut piece = vec![0u8; fragment];
    let mut pos = 0;
    while pos < stream.len() {
        // A fragment may straddle the frames and the tunnel.
        let mut filled = 0;
        while filled < fragment && pos + filled < stream.len() {
            let part = stream.at(pos + filled, fragment - filled);
            piece[filled..filled + part.len()].copy_from_slice(part);
            filled += part.len();
        }
        socket.write_all(&piece[..filled]).await?;
        pos += filled;
    }
    socket.shutdown().await?;
    let mut rest = [0u8; 64];
    while socket.read(&mut rest).await? != 0 {}
    Ok(())
}

/// Reads one proxied connection to its end, checking every byte against
/// the stream whose first `ident_len` bytes it starts with (its route
/// frame, or its first checked frame's header and connection number);
/// returns which stream and when the last byte came.
async fn sink(
    mut socket: TcpStream,
    streams: Arc<Vec<Arc<Stream>>>,
    ident_len: usize,
) -> io::Result<(usize, Instant)> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut head = Vec::new();
    while head.len() < ident_len {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "no first frame",
            ));
        }
        head.extend_from_slice(&buf[..n]);
    }
    let id = streams
        .iter()
        .position(|s| s.at(0, ident_len) == &head[..ident_len])
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unknown connection"))?;
    let stream = &streams[id];
    let mut pos = 0;
    let check = |data: &[u8], pos: &mut usize| -> io::Result<()> {
        let mut done = 0;
        while done < data.len() {
            let want = stream.at(*pos, data.len() - done);
            if want.is_empty() || want != &data[done..done + want.len()] {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("connection {id}: wrong byte near {}", *pos),
                ));
            }
            done += want.len();
            *pos += want.len();
        }
        Ok(())
    };
    check(&head, &mut pos)?;
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        check(&buf[..n], &mut pos)?;
    }
    if pos != stream.len() {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("connection {id}: {pos} of {} bytes", stream.len()),
        ));
    }
    Ok((id, Instant::now()))
}

/// Kills the proxy if the run fails half-way.
struct ProxyProcess {
    child: Child,
    stdout: BufReader<ChildStdout>,
}

impl ProxyProcess {
    fn spawn(variant: Variant, sink: SocketAddr, shape: Shape, threads: usize) -> Self {
        let mut command = Command::new(std::env::current_exe().expect("own path"));
        command.args([
            "--role",
            "proxy",
            "--variant",
            variant.name(),
            "--sink",
            &sink.to_string(),
            "--connections",
            &shape.connections.to_string(),
            "--fragment",
            &shape.fragment.to_string(),
            "--threads",
            &threads.to_string(),
        ]);
        if shape.tunnel > 0 {
            command.args(["--tunnel-bytes", &shape.tunnel.to_string()]);
        }
        let mut child = command
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the proxy");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        Self { child, stdout }
    }

    fn line(&mut self, tag: &str) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("proxy output");
        line.strip_prefix(tag)
            .unwrap_or_else(|| panic!("proxy said {line:?}, not {tag}"))
            .trim()
            .to_string()
    }
}

impl Drop for ProxyProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Clone, Copy, Debug)]
struct Measured {
    seconds: f64,
    bytes: usize,
    frames: usize,
    proxy_cpu: Duration,
    proxy_user: Duration,
    rss: u64,
    p50: Duration,
    p99: Duration,
}

fn run_once(
    rt: &Runtime,
    variant: Variant,
    shape: Shape,
    threads: usize,
    pattern: &Bytes,
) -> Measured {
    let streams: Arc<Vec<Arc<Stream>>> = Arc::new(shape.streams(variant, pattern));
    let bytes = streams.iter().map(|s| s.len()).sum();
    let ident_len = shape.ident_len(variant);
    let sinks = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind sink");
    let sink_addr = sinks.local_addr().expect("sink address");
    let mut proxy = ProxyProcess::spawn(variant, sink_addr, shape, threads);
    let proxy_addr: SocketAddr = proxy.line("READY").parse().expect("proxy address");

    let (seconds, latencies) = rt.block_on(async {
        let begun = Instant::now();
        let started: Arc<Vec<AtomicU64>> =
            Arc::new((0..shape.connections).map(|_| AtomicU64::new(0)).collect());
        let sink_task = {
            let streams = streams.clone();
            tokio::spawn(async move {
                let mut checks = Vec::with_capacity(shape.connections);
                for _ in 0..shape.connections {
                    let (socket, _) = sinks.accept().await?;
                    socket.set_nodelay(true)?;
                    checks.push(tokio::spawn(sink(socket, streams.clone(), ident_len)));
                }
                let mut done = Vec::with_capacity(checks.len());
                for check in checks {
                    done.push(check.await.map_err(other)??);
                }
                Ok::<_, io::Error>(done)
            })
        };
        let mut clients = Vec::with_capacity(shape.connections);
        for (id, stream) in streams.iter().enumerate() {
            let (stream, started) = (stream.clone(), started.clone());
            clients.push(tokio::spawn(async move {
                started[id].store(begun.elapsed().as_nanos() as u64, Ordering::Relaxed);
                client(proxy_addr, stream, shape.fragment).await
            }));
        }
        let work = async {
            for client in clients {
                client.await.map_err(other)??;
            }
            sink_task.await.map_err(other)?
        };
        let done = tokio::time::timeout(RUN_TIMEOUT, work)
            .await
            .expect("the run finished in time")
            .unwrap_or_else(|e| panic!("{}: {e}", variant.name()));
        let seconds = begun.elapsed().as_secs_f64();
        let mut ids: Vec<usize> = done.iter().map(|(id, _)| *id).collect();
        ids.sort_unstable();
        assert!(
            ids.iter().copied().eq(0..shape.connections),
            "{}: every connection's stream reached one sink",
            variant.name()
        );
        let mut latencies: Vec<Duration> = done
            .iter()
            .map(|(id, at)| {
                let start = Duration::from_nanos(started[*id].load(Ordering::Relaxed));
                at.duration_since(begun).saturating_sub(start)
            })
            .collect();
        latencies.sort();
        (seconds, latencies)
    });

    let usage = proxy.line("USAGE");
    let mut fields = usage
        .split_whitespace()
        .map(|f| f.parse::<u64>().expect("a number"));
    let proxy_user = Duration::from_nanos(fields.next().expect("user"));
    let proxy_system = Duration::from_nanos(fields.next().expect("system"));
    let rss = fields.next().expect("rss");
    let at = |q: f64| {
        latencies[((latencies.len() as f64 * q).ceil() as usize).clamp(1, latencies.len()) - 1]
    };
    Measured {
        seconds,
        bytes,
        frames: shape.connections * shape.frames_per_connection(),
        proxy_cpu: proxy_user + proxy_system,
        proxy_user,
        rss,
        p50: at(0.50),
        p99: at(0.99),
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

struct Row {
    variant: Variant,
    seconds: f64,
    mib_s: f64,
    ns_per_frame: f64,
    ns_per_frame_range: (f64, f64),
    ns_per_byte: f64,
    ns_per_byte_range: (f64, f64),
    user_share: f64,
    p50_ms: f64,
    p99_ms: f64,
    rss_mib: f64,
}

fn summarize(variant: Variant, runs: &[Measured]) -> Row {
    let med = |f: &dyn Fn(&Measured) -> f64| median(runs.iter().map(f).collect());
    let range = |f: &dyn Fn(&Measured) -> f64| {
        runs.iter()
            .map(f)
            .fold((f64::MAX, 0.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)))
    };
    let per_frame = |m: &Measured| m.proxy_cpu.as_nanos() as f64 / m.frames as f64;
    Row {
        variant,
        seconds: med(&|m| m.seconds),
        mib_s: med(&|m| m.bytes as f64 / m.seconds / (1 << 20) as f64),
        ns_per_frame: med(&per_frame),
        ns_per_frame_range: range(&per_frame),
        ns_per_byte: med(&|m| m.proxy_cpu.as_nanos() as f64 / m.bytes as f64),
        ns_per_byte_range: range(&|m| m.proxy_cpu.as_nanos() as f64 / m.bytes as f64),
        user_share: med(&|m| m.proxy_user.as_secs_f64() / m.proxy_cpu.as_secs_f64().max(1e-9)),
        p50_ms: med(&|m| m.p50.as_secs_f64() * 1e3),
        p99_ms: med(&|m| m.p99.as_secs_f64() * 1e3),
        rss_mib: med(&|m| m.rss as f64 / (1 << 20) as f64),
    }
}

fn print_table(shape: Shape, runs: usize, rows: &[Row]) {
    if let Workload::Checked { payload, frames } = shape.workload {
        print_checked_table(shape, payload, frames, runs, rows);
        return;
    }
    let base = rows
        .iter()
        .find(|r| r.variant == Variant::BytesHandoff)
        .map(|r| (r.ns_per_byte, r.mib_s));
    println!(
        "\n### {}: {} connections, {} B writes, {} MiB tunnel each (median of {runs})\n",
        shape.name,
        shape.connections,
        shape.fragment,
        shape.tunnel as f64 / (1 << 20) as f64,
    );
    println!("| variant | throughput | proxy CPU (min-max) | in user space | vs bytes-handoff | p50 | p99 | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        let ratio = base.map_or(String::from("-"), |(ns, _)| {
            format!("{:.2}x", row.ns_per_byte / ns)
        });
        println!(
            "| {} | {:.0} MiB/s | {:.2} ns/B ({:.2}-{:.2}) | {:.0}% | {} | {:.1} ms | {:.1} ms | {:.1} MiB |",
            row.variant.what(),
            row.mib_s,
            row.ns_per_byte,
            row.ns_per_byte_range.0,
            row.ns_per_byte_range.1,
            row.user_share * 100.0,
            ratio,
            row.p50_ms,
            row.p99_ms,
            row.rss_mib,
        );
    }
}

/// The checked scenarios' table: the proxy's CPU per frame first (every
/// variant forwards the same payloads; the header width differs), and its
/// ratio to `checked_none`, the same proxy without a checksum.
fn print_checked_table(shape: Shape, payload: usize, frames: usize, runs: usize, rows: &[Row]) {
    let base = rows
        .iter()
        .find(|r| r.variant == Variant::CheckedNone)
        .map(|r| r.ns_per_frame);
    println!(
        "\n### {}: {} connections, {frames} frames of {payload} B payloads each, {} B writes (median of {runs})\n",
        shape.name, shape.connections, shape.fragment,
    );
    println!("| variant | stream | proxy CPU per frame (min-max) | per byte | in user space | vs `checked_none` | wall time | peak RSS |");
    println!("|---|---|---|---|---|---|---|---|");
    for row in rows {
        let checksum = row.variant.stream_checksum();
        let ratio = base.map_or(String::from("-"), |ns| {
            format!("{:.2}x", row.ns_per_frame / ns)
        });
        println!(
            "| `{}`: {} | {}, {} B frames | {:.0} ns ({:.0}-{:.0}) | {:.2} ns/B | {:.0}% | {} | {:.1} ms | {:.1} MiB |",
            row.variant.name(),
            row.variant.what(),
            checksum,
            checked_header(checksum) + payload,
            row.ns_per_frame,
            row.ns_per_frame_range.0,
            row.ns_per_frame_range.1,
            row.ns_per_byte,
            row.user_share * 100.0,
            ratio,
            row.seconds * 1e3,
            row.rss_mib,
        );
    }
}

struct Options {
    role_proxy: bool,
    /// `None`: each scenario's own list.
    variants: Option<Vec<Variant>>,
    scenarios: Vec<&'static str>,
    connections: usize,
    runs: usize,
    threads: usize,
    fragment: Option<usize>,
    tunnel: Option<usize>,
    frames: Option<usize>,
    sink: Option<SocketAddr>,
}

const HELP: &str = "\
stream_harness: streams through a proxy over loopback TCP, every byte checked.

Options:
  --scenario NAME      default: all
      routed:  fragmented: 64 B writes, 1 MiB tunnels;
               coalesced: 16 KiB writes, 16 MiB tunnels;
               all: both
      checked: checked64: 65536 frames of 64 B payloads per connection;
               checked16k: 1024 frames of 16 KiB payloads per connection;
               both in 16 KiB writes, the proxy verifying each checksum
               and forwarding the frame re-encoded; checked: both
  --variants a,b,...   default: the scenario's own list (a scenario runs
                       those of the given ones that belong to it)
      routed:  cleave_same_task, cleave_same_task_keep, cleave_splice,
               cleave_cross_task, cleave_mio, cleave_mio_keep,
               cleave_mio_splice, cleave_std, bytes_handoff, manual_vec,
               raw_copy, raw_splice
               (_keep: buffers kept when a connection goes idle;
               _splice: the tunnel moved by splice(2))
      checked: checked_none, checked_crc16, checked_crc32, checked_xxh3,
               forward_crc32, forward_xxh3 (headers kept, forwarded as they
               came), length_prefixed (no checksum field), manual_crc32
               (hand-written), raw_copy (copies the CRC-32 stream)
  --connections N      default: 64
  --runs N             default: 3 (figures are medians)
  --threads N          proxy runtime workers, default: the number of cores
  --fragment BYTES     override the scenario's write size
  --tunnel-bytes BYTES override a routed scenario's tunnel length
  --frames N           override a checked scenario's frames per connection
";

fn options() -> Options {
    let mut o = Options {
        role_proxy: false,
        variants: None,
        scenarios: vec!["fragmented", "coalesced"],
        connections: 64,
        runs: 3,
        threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
        fragment: None,
        tunnel: None,
        frames: None,
        sink: None,
    };
    let mut variant = None;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut args = args.iter();
    let number = |v: Option<&String>, what: &str| -> usize {
        v.and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or_else(|| panic!("{what} takes a positive number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--help" | "-h" => {
                print!("{HELP}");
                std::process::exit(0);
            }
            "--role" => o.role_proxy = args.next().map(String::as_str) == Some("proxy"),
            "--variant" => variant = args.next().and_then(|v| Variant::parse(v)),
            "--sink" => o.sink = args.next().and_then(|v| v.parse().ok()),
            "--variants" => {
                o.variants = Some(
                    args.next()
                        .expect("--variants takes a list")
                        .split(',')
                        .map(|v| Variant::parse(v).unwrap_or_else(|| panic!("unknown variant {v}")))
                        .collect(),
                );
            }
            "--scenario" => {
                o.scenarios = match args.next().map(String::as_str) {
                    Some("fragmented") => vec!["fragmented"],
                    Some("coalesced") => vec!["coalesced"],
                    Some("all") => vec!["fragmented", "coalesced"],
                    Some("checked64") => vec!["checked64"],
                    Some("checked16k") => vec!["checked16k"],
                    Some("checked") => vec!["checked64", "checked16k"],
                    other => panic!("unknown scenario {other:?}"),
                };
            }
            "--connections" => o.connections = number(args.next(), "--connections"),
            "--runs" => o.runs = number(args.next(), "--runs"),
            "--threads" => o.threads = number(args.next(), "--threads"),
            "--fragment" => o.fragment = Some(number(args.next(), "--fragment")),
            "--tunnel-bytes" => o.tunnel = Some(number(args.next(), "--tunnel-bytes")),
            "--frames" => o.frames = Some(number(args.next(), "--frames")),
            other => panic!("unknown option {other} (see --help)"),
        }
    }
    if o.role_proxy {
        o.variants = Some(vec![variant.expect("--role proxy needs --variant")]);
    }
    o
}

fn shape(name: &'static str, o: &Options) -> Shape {
    let checked = |payload, frames| Shape {
        name,
        connections: o.connections,
        fragment: o.fragment.unwrap_or(16 * 1024),
        tunnel: 0,
        workload: Workload::Checked { payload, frames },
    };
    let (fragment, tunnel) = match name {
        "checked64" => return checked(64, o.frames.unwrap_or(1 << 16)),
        "checked16k" => return checked(16 * 1024, o.frames.unwrap_or(1 << 10)),
        "fragmented" => (64, 1 << 20),
        _ => (16 * 1024, 16 << 20),
    };
    Shape {
        name,
        connections: o.connections,
        fragment: o.fragment.unwrap_or(fragment),
        tunnel: o.tunnel.unwrap_or(tunnel),
        workload: Workload::Routed,
    }
}

/// Feeds `variant`'s proxy a checked stream whose fourth payload has one
/// bit flipped; it must end with a checksum error, and what reached its
/// sink must be a prefix of the stream that stops before that frame.
async fn refuses_corruption(variant: Variant) {
    const PAYLOAD: usize = 64;
    const BAD_FRAME: usize = 3;
    let checksum = variant.stream_checksum();
    let frame_len = checked_header(checksum) + PAYLOAD;
    let mut stream = checked_frames(checksum, PAYLOAD, 0, 0..8);
    let bad_start = BAD_FRAME * frame_len;
    stream[bad_start + checked_header(checksum) + 20] ^= 0x10;

    let proxies = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let sinks = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let proxy_addr = proxies.local_addr().expect("address");
    let sink_addr = sinks.local_addr().expect("address");
    let sent = stream.clone();
    // The proxy may reset either side: the client's and the sink's errors
    // end their loops, and the sink's bytes are judged below.
    let client = tokio::spawn(async move {
        let mut socket = connect(proxy_addr).await?;
        socket.write_all(&sent).await?;
        socket.shutdown().await?;
        let mut rest = [0u8; 64];
        while socket.read(&mut rest).await? != 0 {}
        Ok::<_, io::Error>(())
    });
    let sink = tokio::spawn(async move {
        let (mut socket, _) = sinks.accept().await.expect("accept");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = socket.read(&mut buf).await {
            got.extend_from_slice(&buf[..n]);
        }
        got
    });
    let (inbound, _) = proxies.accept().await.expect("accept");
    let result = tokio::time::timeout(RUN_TIMEOUT, async {
        checked_proxy(variant, inbound, connect(sink_addr).await?).await
    })
    .await
    .expect("the corrupted stream was refused in time");
    let err = result.expect_err("a flipped payload bit must fail the proxy");
    assert_eq!(
        err.kind(),
        io::ErrorKind::InvalidData,
        "{}: {err}",
        variant.name()
    );
    assert!(
        err.to_string().contains("mismatch"),
        "{}: a checksum mismatch, not {err}",
        variant.name()
    );
    let got = sink.await.expect("sink task");
    assert!(
        got.len() <= bad_start && got[..] == stream[..got.len()],
        "{}: the sink got {} bytes, past the good frames or not theirs",
        variant.name(),
        got.len()
    );
    let _ = client.await.expect("client task");
}

/// The variants `shape` runs: its own list, or those of `--variants` that
/// belong to it.
fn variants(shape: Shape, o: &Options) -> Vec<Variant> {
    match (&o.variants, shape.workload) {
        (Some(given), workload) => given.iter().copied().filter(|v| v.fits(workload)).collect(),
        (None, Workload::Routed) => Variant::ROUTED.to_vec(),
        (None, Workload::Checked { .. }) => Variant::CHECKED.to_vec(),
    }
}

fn main() {
    let o = options();
    if o.role_proxy {
        let shape = shape("proxy", &o);
        let variant = o.variants.as_ref().expect("--variant")[0];
        proxy_main(variant, o.sink.expect("--sink"), shape, o.threads);
        return;
    }
    println!("# stream harness");
    println!();
    println!("- machine: {}", machine());
    println!(
        "- proxy: its own process, {} runtime workers; clients and sinks: this process, the same number",
        o.threads
    );
    let shapes: Vec<Shape> = o.scenarios.iter().map(|name| shape(name, &o)).collect();
    if shapes.iter().any(|s| s.workload == Workload::Routed) {
        println!("- each connection: {ROUTE_FRAMES} route frames of {FRAME_LEN} B + `\\n`, `TUNNEL\\n`, then the tunnel");
    }
    let rt = runtime(o.threads);
    let verifying: Vec<Variant> = Variant::CHECKED
        .into_iter()
        .filter(|&v| {
            v.verifies()
                && shapes
                    .iter()
                    .any(|&s| s.workload != Workload::Routed && variants(s, &o).contains(&v))
        })
        .collect();
    if shapes.iter().any(|s| s.workload != Workload::Routed) {
        for &variant in &verifying {
            rt.block_on(refuses_corruption(variant));
        }
        let names: Vec<String> = verifying
            .iter()
            .map(|v| format!("`{}`", v.name()))
            .collect();
        println!(
            "- checked scenarios: each connection's frames in its variant's checksum (the `stream` column); \
             refused a stream with one flipped payload bit before the runs: {}",
            if names.is_empty() { String::from("-") } else { names.join(", ") },
        );
    }
    for shape in shapes {
        let variants = variants(shape, &o);
        if variants.is_empty() {
            eprintln!("{}: none of the given variants runs here", shape.name);
            continue;
        }
        let pattern = pattern(shape.tunnel);
        let mut measured: Vec<Vec<Measured>> = vec![Vec::new(); variants.len()];
        for run in 0..o.runs {
            for (i, &variant) in variants.iter().enumerate() {
                let m = run_once(&rt, variant, shape, o.threads, &pattern);
                eprintln!(
                    "{} run {} {}: {:.3} s, proxy CPU {:.3} s ({:.3} s user), p99 {:.1} ms, RSS {:.1} MiB",
                    shape.name,
                    run + 1,
                    variant.name(),
                    m.seconds,
                    m.proxy_cpu.as_secs_f64(),
                    m.proxy_user.as_secs_f64(),
                    m.p99.as_secs_f64() * 1e3,
                    m.rss as f64 / (1 << 20) as f64
                );
                measured[i].push(m);
            }
        }
        let rows: Vec<Row> = variants
            .iter()
            .zip(&measured)
            .map(|(&v, runs)| summarize(v, runs))
            .collect();
        print_table(shape, o.runs, &rows);
    }
}
