"""Python's `websockets` (its sync API) as an echo server on a free port
of 127.0.0.1, which it prints first. Two texts are orders: "ping me" (it
pings, then says whether the pong came) and "close me" (it closes with
4000).
"""

from websockets.sync.server import serve

# A bound on a hang, not a measure.
WAIT = 30


def echo(ws):
    for message in ws:
        if message == "ping me":
            ponged = ws.ping(b"from the server").wait(WAIT)
            ws.send("pong: from the server" if ponged else "no pong")
        elif message == "close me":
            ws.close(4000, "server bye")
            return
        else:
            ws.send(message)


with serve(echo, "127.0.0.1", 0, max_size=None, ping_interval=None) as server:
    print(server.socket.getsockname()[1], flush=True)
    server.serve_forever()
