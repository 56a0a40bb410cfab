"""The proxy's two listening sockets, bound before uvicorn serves them: the inference listener (clients of the
engine) and the admin listener (specwatch's own routes, agent/proxy/admin.py). One uvicorn server serves
both on one event loop; the app tells them apart by the port a request came in on, so the two must differ."""

from __future__ import annotations

import logging
import socket
from dataclasses import dataclass

from agent.proxy.config import ProxyConfig
from agent.http.serve import LOOPBACK

log = logging.getLogger("specwatch.proxy")


class ListenError(OSError):
    """A listener could not be bound (the port is taken, the address is not this host's, ...)."""


@dataclass
class Listeners:
    inference: socket.socket
    admin: socket.socket

    @property
    def sockets(self) -> list[socket.socket]:
        return [self.inference, self.admin]

    @property
    def admin_port(self) -> int:
        return self.admin.getsockname()[1]

    def url(self, which: str) -> str:
        host, port = getattr(self, which).getsockname()[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def bind(config: ProxyConfig) -> Listeners:
    """Bind both listeners (ListenError naming the one that failed); warns when the admin listener is reachable
    beyond loopback without a token."""
    inference = _bind(config.host, config.port, "inference")
    try:
        port = inference.getsockname()[1]
        if config.admin_port == port:  # on another address too: the app could not tell the two apart
            raise ListenError(f"admin listener: port {port} is the inference listener's; give it a port of its own")
        admin = _bind(config.admin_host, config.admin_port, "admin")
    except BaseException:
        inference.close()
        raise
    listeners = Listeners(inference, admin)
    if config.admin_host not in LOOPBACK and config.sidecar.token is None:
        log.warning("admin listener on %s without a token: anyone who reaches it reads pools' URLs, model versions, "
                    "alerts and per-domain figures (set SPECWATCH_TOKEN)", listeners.url("admin"))
    return listeners


def _bind(host: str, port: int, which: str) -> socket.socket:
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: restarts reuse the port
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ListenError(f"{which} listener: cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock
