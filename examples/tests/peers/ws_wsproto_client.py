"""Python's `wsproto` over a plain socket as a client of a WebSocket echo
server on 127.0.0.1 at the port given: prints what came back, one line
per exchange.

    python3 ws_wsproto_client.py 9001
"""

import random
import socket
import sys

from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    Request,
    TextMessage,
)

PORT = int(sys.argv[1])
# A bound on a hang, not a measure: the server answers at once.
WAIT = 30


class Peer:
    """One connection: wsproto's state and the socket it speaks over."""

    def __init__(self):
        self.sock = socket.create_connection(("127.0.0.1", PORT), timeout=WAIT)
        self.ws = WSConnection(ConnectionType.CLIENT)
        self.pending = []
        self.send(Request(host=f"127.0.0.1:{PORT}", target="/"))
        accepted = self.next()
        assert isinstance(accepted, AcceptConnection), accepted

    def send(self, *events):
        for event in events:
            self.sock.sendall(self.ws.send(event))

    def next(self):
        """The next event, or None once the server closed."""
        while not self.pending:
            data = self.sock.recv(65536)
            self.ws.receive_data(data or None)
            self.pending.extend(self.ws.events())
            if not data and not self.pending:
                return None
        return self.pending.pop(0)

    def message(self):
        """The next whole message as (kind, data), and the control events
        that came before its end."""
        pieces, controls = [], []
        while True:
            event = self.next()
            if isinstance(event, (TextMessage, BytesMessage)):
                pieces.append(event.data)
                if event.message_finished:
                    kind = "text" if isinstance(event, TextMessage) else "binary"
                    return kind, pieces[0][:0].join(pieces), controls
            else:
                controls.append(event)
                if event is None or isinstance(event, CloseConnection):
                    return None, None, controls

    def raw(self, data):
        """Bytes written as they are, past wsproto."""
        self.sock.sendall(data)


def masked(first, payload, key=b"\x37\xfa\x21\x3d"):
    """A client's frame with a short payload: first byte (FIN, opcode)."""
    assert len(payload) < 126
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return bytes([first, 0x80 | len(payload)]) + key + body


def payload(n):
    return random.Random(n).randbytes(n)


def show(controls):
    return [type(c).__name__ + " " + repr(getattr(c, "payload", None)) for c in controls]


peer = Peer()
text = "héllo wörld ✓ 🦀"
peer.send(TextMessage(data=text))
kind, got, _ = peer.message()
print(kind, got == text, got)
for n in [0, 1, 125, 126, 65535, 65536, 1 << 20]:
    data = payload(n)
    peer.send(BytesMessage(data=data))
    kind, got, _ = peer.message()
    print(kind, n, got == data)
peer.send(
    TextMessage(data="frag", message_finished=False),
    TextMessage(data="men", message_finished=False),
    TextMessage(data="ted ✓", message_finished=True),
)
kind, got, _ = peer.message()
print("fragmented", kind, got)
# A ping between the fragments: its pong comes before the message ends.
peer.send(
    BytesMessage(data=b"ab", message_finished=False),
    Ping(payload=b"mid"),
    BytesMessage(data=b"cd", message_finished=True),
)
kind, got, controls = peer.message()
print("fragmented", kind, got, show(controls))
peer.send(Ping(payload=b"are you there?"))
event = peer.next()
print(type(event).__name__, event.payload)
peer.send(CloseConnection(code=1000, reason="done ✓"))
event = peer.next()
print(type(event).__name__, event.code, repr(event.reason))
print("then", peer.sock.recv(1) or "EOF")

# Text that is not UTF-8, written past wsproto: the server fails the
# connection with 1007.
INVALID = [
    ("invalid byte", masked(0x81, b"\xff\xfe")),
    ("cut code point", masked(0x81, b"ok \xe2\x82")),
]
for name, frame in INVALID:
    peer = Peer()
    peer.raw(frame)
    _, _, controls = peer.message()
    close = controls[-1]
    print(name, type(close).__name__, getattr(close, "code", None))

# Across fragments: the first is valid so far (the server echoes it), the
# second, sent once the echo came, breaks it.
peer = Peer()
peer.raw(masked(0x01, b"ok \xe2\x82"))
piece = peer.next()
print("first fragment echoed", type(piece).__name__, repr(piece.data), piece.message_finished)
peer.raw(masked(0x80, b"\x28"))
_, _, controls = peer.message()
close = controls[-1]
print("invalid across fragments", type(close).__name__, getattr(close, "code", None))
