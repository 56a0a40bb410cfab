"""A uvicorn HTTP/1.1 protocol with a read timeout: a client has ``read_timeout`` seconds, from connecting
(or from the answer to its previous request), to send a whole request, headers and body. uvicorn closes
idle keep-alive connections (``timeout_keep_alive``) but waits forever for a request that trickles in
(slowloris), holding a connection slot; this closes such a connection."""

from __future__ import annotations

import asyncio
import logging

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

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
