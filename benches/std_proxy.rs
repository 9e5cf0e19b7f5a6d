//! The stream harness's cleave-std proxy: a thread per connection. The
//! client's side is a `Stream` with a routing session; the sink's side a
//! `Stream` used only to write. Events that arrived together are queued,
//! then written with one vectored write.

use std::io;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;

use cleave_proto::{Encoder, Event, Lines, Session};
use cleave_std::Stream;

type Sink = Stream<TcpStream, ()>;

/// Runs the proxy until `connections` connections have come and finished.
pub(crate) fn run(
    listener: TcpListener,
    connections: usize,
    session: impl Fn() -> Session<SocketAddr, Lines>,
) -> io::Result<()> {
    let mut threads = Vec::with_capacity(connections);
    for _ in 0..connections {
        let (socket, _) = listener.accept()?;
        socket.set_nodelay(true)?;
        let session = session();
        threads.push(thread::spawn(move || proxy(socket, session)));
    }
    for thread in threads {
        thread
            .join()
            .map_err(|_| io::Error::other("a proxy thread panicked"))??;
    }
    Ok(())
}

fn proxy(socket: TcpStream, session: Session<SocketAddr, Lines>) -> io::Result<()> {
    let mut client = Stream::new(socket, session);
    let mut sink: Option<Sink> = None;
    let mut lines = Lines::new();
    while let Some(event) = client.recv().map_err(io::Error::other)? {
        forward(event, &mut sink, &mut lines)?;
        while let Some(event) = client.recv_buffered().map_err(io::Error::other)? {
            forward(event, &mut sink, &mut lines)?;
        }
        if let Some(sink) = sink.as_mut() {
            sink.drain()?;
        }
    }
    if let Some(mut sink) = sink {
        sink.close()?;
        sink.get_ref().shutdown(Shutdown::Write)?;
    }
    Ok(())
}

fn forward(
    event: Event<SocketAddr, cleave_proto::Bytes>,
    sink: &mut Option<Sink>,
    lines: &mut Lines,
) -> io::Result<()> {
    match event {
        Event::Routed(decision) => {
            let socket = TcpStream::connect(decision.target)?;
            socket.set_nodelay(true)?;
            *sink = Some(Stream::new(socket, ()));
        }
        Event::Frame(line) => {
            let frame = lines.encode(line).map_err(io::Error::other)?;
            sink_of(sink)?.send_frame(frame)?;
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
