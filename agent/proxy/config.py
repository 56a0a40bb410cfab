"""ProxyConfig: the upstream pools, domain rules and timings of `specwatch proxy` (the sidecar parts it runs
in-process are a SidecarConfig of their own)."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.runtime.config import SidecarConfig, load as load_sidecar_config
from agent.proxy.domains import DomainRule
from storage.counts import MAX_LOOKAHEAD

POOL_NAME = re.compile(r"^(off|k([1-9][0-9]?))$")


class ProxyConfigError(ValueError):
    """A bad proxy option; ``field`` names it."""

    def __init__(self, field_name: str, message: str):
        self.field, self.message = field_name, message
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class Upstream:
    """One pool: ``kN`` serves with draft length N, ``off`` without a draft. ``draft_version``: the draft's
    version when the engine does not report its draft model (else the draft GGUF's own version is read)."""

    name: str
    url: str
    draft_version: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not POOL_NAME.match(self.name):
            raise ProxyConfigError("upstream", f"pool name must be off or kN (N in 1..{MAX_LOOKAHEAD}), "
                                               f"got {self.name!r}")
        if self.lookahead > MAX_LOOKAHEAD:
            raise ProxyConfigError("upstream", f"pool {self.name}: lookahead over {MAX_LOOKAHEAD}")
        if not isinstance(self.url, str) or not re.match(r"^https?://[^/\s]+/?$", self.url):
            raise ProxyConfigError("upstream", f"pool {self.name}: URL must be http(s)://HOST[:PORT] without "
                                               f"a path, got {self.url!r}")
        if self.draft_version is not None and not (0 < len(self.draft_version) <= 128
                                                   and self.draft_version.isprintable()):
            raise ProxyConfigError("draft_version", f"pool {self.name}: must be printable text of 1..128 "
                                                    f"characters, got {self.draft_version!r}")

    @property
    def lookahead(self) -> int:
        """The K the name declares (0 for off)."""
        return 0 if self.name == "off" else int(self.name[1:])

    @property
    def base(self) -> str:
        return self.url.rstrip("/")

    @classmethod
    def parse(cls, text: str, draft_version: str | None = None) -> "Upstream":
        """``NAME=URL`` as given to --upstream."""
        name, sep, url = text.partition("=")
        if not sep:
            raise ProxyConfigError("upstream", f"write NAME=URL (e.g. k4=http://127.0.0.1:8081), got {text!r}")
        return cls(name.strip(), url.strip(), draft_version)


@dataclass(frozen=True)
class ProxyConfig:
    """Options of the proxy process. Seconds for every interval and timeout.

    - ``health_seconds``: between health checks of each pool (and re-reads of its versions: /props is cheap,
      the GGUF hash is cached by path, size and modification time).
    - ``connect_seconds`` / ``read_seconds``: upstream connect timeout (then the next healthy pool, else
      502) and the longest wait for the engine's answer or its next streamed chunk (then 504, or the stream is
      closed). 600 s, llama-server's own ``--timeout``: a non-streamed completion sends nothing until its
      last token, so the proxy must not give up before the engine does (docs/durability.md).
    - ``header_seconds``: a client has this long, from connecting (or from its previous answer), to send a
      request's headers; then the connection is closed.
    - ``drain_seconds``: after SIGTERM, how long requests in flight may run on (streams too) before they are
      cut; ``shutdown_seconds``: after that, the final flush and the alert state, then what the database
      has not taken goes to the dead-letter file. deploy/proxy's terminationGracePeriodSeconds covers both.
    - ``max_body``: largest request body the proxy reads to find the domain (bigger: 413).
    - ``max_record_body``: largest non-streamed answer whose copy is kept to read its timings.
    - ``sidecar``: store, alerts, metrics and policy options, as for `specwatch serve`.
    - ``admin_host`` / ``admin_port``: the admin listener, specwatch's own routes (agent/proxy/admin.py), off
      the inference port; loopback by default. Port 0 (either listener): any free port.
    - ``default_pool``: the pool a domain without evidence starts on (the engine's own default, e.g. the
      pool run with llama.cpp's --spec-default); None: the policy's own start.
    - ``shared_load``: the pools share one machine (servers of one node or GPU): the load a request meets on
      any of them is the proxy's requests in flight on all of them; False (default): each pool's own.
    """

    upstreams: tuple[Upstream, ...]
    rules: tuple[DomainRule, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8788
    admin_host: str = "127.0.0.1"
    admin_port: int = 8789
    sidecar: SidecarConfig = field(default_factory=lambda: SidecarConfig(policy="pool-cap"))
    health_seconds: float = 2.0
    connect_seconds: float = 5.0
    read_seconds: float = 600.0
    header_seconds: float = 15.0
    drain_seconds: float = 30.0
    shutdown_seconds: float = 8.0
    max_body: int = 16 * 1024 * 1024
    max_record_body: int = 8 * 1024 * 1024
    hash_models: bool = True
    default_pool: str | None = None
    shared_load: bool = False

    def __post_init__(self) -> None:
        if not self.upstreams:
            raise ProxyConfigError("upstream", "give at least one --upstream NAME=URL")
        names = [u.name for u in self.upstreams]
        for name in names:
            if names.count(name) > 1:
                raise ProxyConfigError("upstream", f"pool {name} given twice")
        if not isinstance(self.host, str) or not self.host.strip():
            raise ProxyConfigError("host", f"must be non-empty text, got {self.host!r}")
        if type(self.port) is not int or not 0 <= self.port <= 65535:
            raise ProxyConfigError("port", f"must be an integer in 0..65535, got {self.port!r}")
        if not isinstance(self.admin_host, str) or not self.admin_host.strip():
            raise ProxyConfigError("admin_host", f"must be non-empty text, got {self.admin_host!r}")
        if type(self.admin_port) is not int or not 0 <= self.admin_port <= 65535:
            raise ProxyConfigError("admin_port", f"must be an integer in 0..65535, got {self.admin_port!r}")
        for name in ("health_seconds", "connect_seconds", "read_seconds", "header_seconds", "drain_seconds",
                     "shutdown_seconds"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
                raise ProxyConfigError(name, f"must be a positive number of seconds, got {value!r}")
        for name in ("max_body", "max_record_body"):
            value = getattr(self, name)
            if type(value) is not int or value < 1024:
                raise ProxyConfigError(name, f"must be an integer of at least 1024 bytes, got {value!r}")
        if self.default_pool is not None and self.default_pool not in names:
            raise ProxyConfigError("default_pool", f"no pool named {self.default_pool!r} (pools: "
                                                   f"{', '.join(names)})")
        if any(u.lookahead > self.sidecar.kmax for u in self.upstreams):
            raise ProxyConfigError("upstream", f"a pool's K is over kmax={self.sidecar.kmax}; raise kmax")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def proxy_config(upstream: Sequence[str], domain_rule: Sequence[str] = (), draft_version: Sequence[str] = (), *,
                 db: str | None = None, pod: str | None = None, policy: str | None = None,
                 sample_prompts: int | None = None, **options: Any) -> ProxyConfig:
    """The ProxyConfig of `specwatch proxy`'s flags: pools from ``NAME=URL`` texts, each pool's draft version
    from ``NAME=VERSION`` ones, domain rules from theirs; the in-process sidecar's options from SPECWATCH_*
    (agent/runtime/config.py) under ``db``, ``pod``, ``policy`` (default pool-cap+switch with an off pool
    among others, else pool-cap) and ``sample_prompts``; ``options``: ProxyConfig's own fields.
    ProxyConfigError, DomainError or ConfigError naming the bad option."""
    drafts = dict(_pair(text, "draft_version") for text in draft_version)
    upstreams = tuple(Upstream.parse(text) for text in upstream)
    unknown = sorted(set(drafts) - {u.name for u in upstreams})
    if unknown:
        raise ProxyConfigError("draft_version", f"no pool named {unknown[0]}")
    upstreams = tuple(Upstream(u.name, u.url, drafts.get(u.name)) for u in upstreams)
    rules = tuple(DomainRule.parse(text) for text in domain_rule)
    names = {u.name for u in upstreams}
    chosen = policy or ("pool-cap+switch" if "off" in names and len(names) > 1 else "pool-cap")
    # Every K a pool may run, named or reported by its engine (/props): the policy must know each arm.
    sidecar = load_sidecar_config(None, {"db": db, "pod": pod, "policy": chosen, "kmax": MAX_LOOKAHEAD,
                                         "sample_prompts": sample_prompts})
    return ProxyConfig(upstreams, rules, sidecar=sidecar, **options)


def _pair(text: str, option: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise ProxyConfigError(option, f"write NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()
