//! Connected loopback socket pairs for the tests.

#![allow(dead_code)]

use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// A connected pair on 127.0.0.1: (client, server).
pub async fn pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (client.unwrap(), server.unwrap().0)
}

/// A pair with 16 KiB socket buffers: a large reply cannot all sit in
/// the kernel while the client does not read.
pub async fn small_buffered_pair() -> (TcpStream, TcpStream) {
    let listener = TcpSocket::new_v4().unwrap();
    listener.set_send_buffer_size(16 * 1024).unwrap();
    listener.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = listener.listen(1).unwrap();
    let client = TcpSocket::new_v4().unwrap();
    client.set_recv_buffer_size(16 * 1024).unwrap();
    let (client, server) = tokio::join!(
        client.connect(listener.local_addr().unwrap()),
        listener.accept()
    );
    (client.unwrap(), server.unwrap().0)
}
