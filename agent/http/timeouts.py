"""uvicorn HTTP/1.1 protocols with a read timeout. uvicorn closes idle keep-alive connections
(``timeout_keep_alive``) but waits forever for a request that trickles in (slowloris), holding a connection
slot, and for a client that connects and sends nothing; these close such a connection.

``timed_h11`` (`specwatch serve`): a client has ``read_timeout`` seconds, from connecting (or from the answer
to its previous request), to send a whole request, headers and body. ``timed_httptools`` (`specwatch proxy`,
on uvicorn's C parser): a client has ``header_timeout`` seconds, from connecting (or from the first byte of
its next request), to send a request's headers; the body may take longer (a large prompt on a slow link)."""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

log = logging.getLogger("specwatch.serve")
_RECEIVING = (h11.IDLE, h11.SEND_BODY)  # the client's side while its request is not complete


def timed_h11(read_timeout: float) -> type[H11Protocol]:
    """The protocol class to give uvicorn.Config(http=...)."""

    class TimedH11Protocol(H11Protocol):
        _read_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._read_timer is None and self.conn.their_state is h11.IDLE:
                self._arm()  # the first bytes of a next request on a kept-alive connection
            super().data_received(data)
            if self.conn.their_state not in _RECEIVING:
                self._disarm()  # the whole request is in (or the connection is ending)

        def on_response_complete(self) -> None:
            self._disarm()
            super().on_response_complete()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._disarm()
            self._read_timer = self.loop.call_later(read_timeout, self._expired)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _expired(self) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            log.info("closing a connection from %s: no complete request within %.0f s",
                     "%s:%d" % self.client if self.client else "?", read_timeout)
            self.transport.close()

    return TimedH11Protocol


def timed_httptools(header_timeout: float) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn.Config(http=...)."""

    class TimedHttpToolsProtocol(HttpToolsProtocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_message_begin(self) -> None:
            super().on_message_begin()
            if self._head_timer is None:  # the first bytes of a next request on a kept-alive connection
                self._arm()

        def on_headers_complete(self) -> None:
            self._disarm()
            super().on_headers_complete()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self) -> None:
            self._head_timer = self.loop.call_later(header_timeout, self._expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _expired(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                log.info("closing a connection from %s: no request headers within %g s",
                         "%s:%d" % self.client if self.client else "?", header_timeout)
                self.transport.close()

    return TimedHttpToolsProtocol
