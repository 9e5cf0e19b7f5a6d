//! The stream harness's cleave-std proxy: a thread per connection. The
//! client's side is a `Stream` with a routing session; the sink's side a
//! `Stream` used only to write (its protocol, `Raw`, never reads). Events
//! that arrived together are queued, then written with one vectored write.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::thread;

use cleave_proto::{ConnConfig, Encoder, Event, Lines, Raw, Session};
use cleave_std::Stream;

type Sink = Stream<TcpStream, Raw>;

/// Runs the proxy until `connections` connections have come and finished.
/// Both sides of each connection have `config`'s buffer and queue.
pub(crate) fn run(
    listener: TcpListener,
    connections: usize,
    session: impl Fn() -> Session<SocketAddr, Lines>,
    config: ConnConfig,
) -> io::Result<()> {
    let mut threads = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (socket, _) = listener.accept()?;
        socket.set_nodelay(true)?;
        let session = session();
        threads.push(thread::spawn(move || proxy(socket, session, config)));
    }
    for thread in threads {
        thread
            .join()
            .map_err(|_| io::Error::other("a proxy thread panicked"))??;
    }
    Ok(())
}

fn proxy(
    socket: TcpStream,
    session: Session<SocketAddr, Lines>,
    config: ConnConfig,
) -> io::Result<()> {
    let mut client = Stream::with_config(socket, session, config);
    let mut sink: Option<Sink> = None;
    let mut lines = Lines::new();
    while let Some(event) = client.recv()? {
        forward(event, &mut sink, &mut lines, config)?;
        while let Some(event) = client.recv_buffered()? {
            forward(event, &mut sink, &mut lines, config)?;
        }
        if let Some(sink) = sink.as_mut() {
            sink.flush()?;
        }
    }
    if let Some(mut sink) = sink {
        sink.close()?; // what is left, then a FIN
    }
    Ok(())
}

fn forward(
    event: Event<SocketAddr, cleave_proto::Bytes>,
    sink: &mut Option<Sink>,
    lines: &mut Lines,
    config: ConnConfig,
) -> io::Result<()> {
    match event {
        Event::Routed(decision) => {
            let socket = TcpStream::connect(decision.target)?;
            socket.set_nodelay(true)?;
            *sink = Some(Stream::with_config(socket, Raw::new(), config));
        }
        Event::Frame(line) => {
            let frame = lines.encode(line).map_err(io::Error::other)?;
            sink_of(sink)?.send(frame)?;
        }
        Event::Tunnel(bytes) if !bytes.is_empty() => {
            sink_of(sink)?.send(bytes)?;
        }
        _ => {}
    }
    Ok(())
}

fn sink_of(sink: &mut Option<Sink>) -> io::Result<&mut Sink> {
    sink.as_mut()
        .ok_or_else(|| io::Error::other("bytes before the routing decision"))
}
