"""ASGI apps under uvicorn on a free loopback port, in a background thread (fake engines, the proxy), and raw
upstreams that misbehave at the HTTP level."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import uvicorn


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Running:
    """``with Running(app) as r:`` serves ``app`` at ``r.url`` (lifespan on) until the block ends; with
    ``sockets`` (bound loopback sockets), on those, ``r.url`` the first one's."""

    def __init__(self, app, port: int | None = None, lifespan: str = "on", sockets: list | None = None, **options):
        self.port = sockets[0].getsockname()[1] if sockets else port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        options = {"access_log": False, **options}
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, lifespan=lifespan,
                                                    log_level="warning", **options))
        self.server.install_signal_handlers = lambda: None  # not the main thread
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": sockets}, daemon=True)

    def __enter__(self) -> "Running":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class RawUpstream:
    """``with RawUpstream(handle) as up:`` serves ``async handle(reader, writer)`` (asyncio streams, no HTTP
    library) at ``up.url`` on a loop in a background thread: an upstream that misbehaves on purpose."""

    def __init__(self, handle):
        self.handle = handle
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> "RawUpstream":
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        asyncio.run_coroutine_threadsafe(self._shut(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    async def _serve(self, reader, writer) -> None:
        try:
            await self.handle(reader, writer)
        except asyncio.CancelledError:  # shutting down (a cancelled task here would be logged as an error)
            writer.close()

    async def _shut(self) -> None:
        self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head, body) of the next request on the connection (Content-Length bodies only)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return head, await reader.readexactly(length)


def answer_json(writer: asyncio.StreamWriter, body: bytes, status: bytes = b"200 OK") -> None:
    writer.write(b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                 % (status, len(body), body))
