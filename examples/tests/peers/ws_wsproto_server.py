"""Python's `wsproto` over plain sockets as an echo server on a free port
of 127.0.0.1, which it prints first; one connection at a time. Two texts
are orders: "ping me" (it pings, and answers the pong with a text) and
"close me" (it closes with 4000).
"""

import socket

from wsproto import ConnectionType, WSConnection
from wsproto.connection import ConnectionState
from wsproto.events import (
    BytesMessage,
    CloseConnection,
    Ping,
    Pong,
    Request,
    AcceptConnection,
    TextMessage,
)

# A bound on a hang, not a measure.
WAIT = 30


def serve(sock):
    ws = WSConnection(ConnectionType.SERVER)
    pieces = []

    def send(event):
        sock.sendall(ws.send(event))

    while True:
        data = sock.recv(65536)
        ws.receive_data(data or None)
        for event in ws.events():
            if isinstance(event, Request):
                send(AcceptConnection())
            elif isinstance(event, (TextMessage, BytesMessage)):
                pieces.append(event.data)
                if not event.message_finished:
                    continue
                message = pieces[0][:0].join(pieces)
                pieces = []
                if message == "ping me":
                    send(Ping(payload=b"from the server"))
                elif message == "close me":
                    send(CloseConnection(code=4000, reason="server bye"))
                elif isinstance(event, TextMessage):
                    send(TextMessage(data=message))
                else:
                    send(BytesMessage(data=message))
            elif isinstance(event, Ping):
                send(event.response())
            elif isinstance(event, Pong):
                send(TextMessage(data="pong: " + event.payload.decode()))
            elif isinstance(event, CloseConnection):
                if ws.state == ConnectionState.REMOTE_CLOSING:
                    send(event.response())
                return
        if not data:
            return


listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(4)
print(listener.getsockname()[1], flush=True)
while True:
    conn, _ = listener.accept()
    conn.settimeout(WAIT)
    try:
        serve(conn)
    except OSError:
        pass
    finally:
        conn.close()
