"""A loopback TCP proxy that can turn into a black hole: while paused it accepts connections and takes
bytes (the kernel acknowledges them) but forwards nothing either way and answers nothing, as a database
behind a dropped route looks to its client. ``resume()`` forwards everything held, in order."""

from __future__ import annotations

import socket
import threading


class BlackHoleProxy:
    def __init__(self, upstream: tuple[str, int]):
        self.upstream = upstream
        self._flowing = threading.Event()
        self._flowing.set()
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        for s in [self._server, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            self._sockets.append(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._flowing.wait()  # a connection made during the outage hangs in its handshake
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        self._sockets.append(upstream)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                self._flowing.wait()  # held, not lost: sent on when the route heals
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
