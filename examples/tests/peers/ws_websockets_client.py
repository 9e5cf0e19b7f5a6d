"""Python's `websockets` (its sync API) as a client of a WebSocket echo
server at the URL given: prints what came back, one line per exchange.

    python3 ws_websockets_client.py ws://127.0.0.1:9001/
"""

import random
import sys

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

URL = sys.argv[1]
# Bounds on a hang, not measures: the server answers at once.
WAIT = 30


def client():
    return connect(URL, max_size=None, ping_interval=None, open_timeout=WAIT, close_timeout=WAIT)


def payload(n):
    return random.Random(n).randbytes(n)


with client() as ws:
    text = "héllo wörld ✓ 🦀"
    ws.send(text)
    got = ws.recv(timeout=WAIT)
    print("text", got == text, got)
    # Up to the 7-bit length, the 16-bit length, the 64-bit length, a
    # 1 MiB frame, and one larger than the server takes whole (streamed).
    for n in [0, 1, 125, 126, 65535, 65536, 1 << 20, (3 << 20) + 5]:
        data = payload(n)
        ws.send(data)
        got = ws.recv(timeout=WAIT)
        print("binary", n, type(got).__name__, got == data)
    # An iterable goes out as the fragments of one message.
    ws.send(["frag", "men", "ted ✓"])
    print("fragmented text", ws.recv(timeout=WAIT))
    ws.send([b"\x00\x01", b"", b"\xff"])
    print("fragmented binary", ws.recv(timeout=WAIT))
    # Set when the pong with this payload comes.
    print("pong", ws.ping(b"are you there?").wait(WAIT))
    ws.send("after the ping")
    print("text", ws.recv(timeout=WAIT))
    ws.close(1000, "done ✓")
    print("closed", ws.close_code, repr(ws.close_reason))

# Text that is not UTF-8, sent as is (`text=True` skips the encoding):
# the server fails the connection with 1007.
INVALID = [
    ("invalid byte", b"\xff\xfe"),
    ("surrogate", b"ok \xed\xa0\x80"),
    ("cut code point", b"ok \xe2\x82"),
]
for name, data in INVALID:
    with client() as ws:
        ws.send(data, text=True)
        try:
            got = ws.recv(timeout=WAIT)
            print(name, "answered", repr(got))
        except ConnectionClosed as e:
            print(name, "closed", e.rcvd.code if e.rcvd else None)

# Across fragments: the first is valid so far (the server echoes it), the
# second breaks it. The second goes out once the echo of the first came.
# Uncompressed: a compressed message is echoed only once it is whole.
with connect(URL, compression=None, ping_interval=None, open_timeout=WAIT) as ws:
    echoed = ws.recv_streaming(decode=False)

    def fragments():
        yield b"ok \xe2\x82"
        print("first fragment echoed", next(echoed))
        yield b"\x28"

    try:
        # The close may come before the last fragment is out: then
        # `send` says so.
        ws.send(fragments(), text=True)
        for piece in echoed:
            print("answered", piece)
    except ConnectionClosed as e:
        print("invalid across fragments closed", e.rcvd.code if e.rcvd else None)
