"""SidecarConfig: what `specwatch serve` runs with, from defaults, an optional TOML file and SPECWATCH_*
environment variables (in that order; later wins; command-line flags win over all). Validated at start:
every error names the option and where its value came from."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

from agent.ring.layout import check_name
from agent.runtime.options import Connections, Domains, Intervals, Limits
from specwatch_core import settings
from storage.config import StoreConfig
from storage.counts import MAX_LOOKAHEAD
from storage.engine import Timeouts

KIT_TARGETS = ("v1", "v2")
RETAIN = ("retain_windows", "retain_minutes", "retain_hours", "retain_days")
AUTH_MODES = ("ingest", "all")


class ConfigError(ValueError):
    """A bad option; ``field`` names it."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        self.message = message
        super().__init__(f"{field_name}: {message}")


@dataclass(frozen=True)
class SidecarConfig:
    """Options of the sidecar process. Intervals are seconds; ``body_limit`` is bytes. The options are flat
    here, as the configuration file, SPECWATCH_* variables and flags name them; the parts of the sidecar take
    them in groups (agent/runtime/options.py): ``intervals``, ``db_timeouts``, ``connections``, ``limits``,
    ``domains`` and ``store_config()``.

    - ``policy``: a policies.registry name; the policy benchmark's best, behind the on/off switch, by default.
    - ``kmax``: the largest lookahead K (1..64; the store counts per-position acceptance for K up to 32).
    - ``max_domains``: domains the policy, detectors and metrics keep apart; more share the state of "other".
    - ``token``: when set, POST routes need ``Authorization: Bearer <token>``.
    - ``kit`` (a model kit size) or ``target_dir`` + ``draft_dir``: models for POST /v1/generate (optional).
    - ``alertmanager_url`` / ``webhook_url``: alert sinks besides the log (optional).
    - ``ring``: the shared-memory step ring a decoding process in this pod writes (agent/ring/client.py);
      the sidecar reads it and publishes decisions into it (optional).
    - ``auth``: ``ingest`` (POST routes need the token) or ``all`` (every route but /healthz and /readyz).
    - ``db_connect_seconds`` / ``db_statement_seconds`` / ``db_pool_seconds``: how long a database connect,
      one statement (SQLite: waiting for the write lock) and a wait for a pooled connection may take.
    - ``max_unwritten``: window rows the store may hold unwritten (the database away) before POST
      /v1/steps answers 503 with Retry-After.
    - ``generate_concurrency`` / ``generate_queue``: POST /v1/generate requests decoding at once and
      waiting for a turn; more get 429 with Retry-After.
    - ``read_timeout``: seconds a client has to send a whole request (headers and body) once it connected
      or its previous request was answered; ``keepalive_seconds``: idle keep-alive connections closed after.
    - ``max_connections``: open connections at most (uvicorn's limit_concurrency; more get 503).
    - ``domain_idle_seconds``: a domain without records this long is evicted from memory (policy, switch,
      drift watch, metric series); its history stays in the database and warm-starts it when it returns.
      ``domains_seconds``: how often idle domains are looked for.
    - ``retain_windows`` / ``retain_minutes`` / ``retain_hours`` / ``retain_days``: seconds each tier of the
      step history is kept (7 days, 30 days, 400 days, 5 years). The prune job of every sidecar on a shared
      database applies its own to every pod's rows: give a fleet's sidecars the same values. A fleet keeps
      10-second windows for hours, not days (docs/fleet.md: they are most of its bytes).
    - ``sample_prompts``: prompts kept per domain, a uniform sample of the traffic (0: none, the default);
      `GET /v1/sample` (`/sample` on the proxy's admin listener) gives them as the JSON lines `specwatch guard
      --prompts` reads. They are users' prompts, held in memory only: set a token, which that route needs.
    - ``fleet_seconds``: how often this pod is compared with its peers in the shared history (FleetOutlier;
      with a database of one pod it finds nothing to compare).
    - ``idempotency_entries``: Idempotency-Key answers remembered (each for 10 minutes; least recently
      used forgotten first).
    """

    host: str = "127.0.0.1"
    port: int = 8790
    db: str = "sqlite:///specwatch.db"
    pod: str = "local"
    policy: str = "confidence-stop+switch"
    kmax: int = 8
    seed: int | None = None
    max_domains: int = Domains.max_domains
    token: str | None = None
    body_limit: int = Connections.body_limit
    kit: str | None = None
    kit_target: str = "v1"
    target_dir: str | None = None
    draft_dir: str | None = None
    device: str = "auto"
    alertmanager_url: str | None = None
    webhook_url: str | None = None
    max_new_tokens: int = 1024
    warm_lookback: float = 86_400.0
    flush_seconds: float = Intervals.flush
    rollup_seconds: float = Intervals.rollup
    prune_seconds: float = Intervals.prune
    refit_seconds: float = Intervals.refit
    alerts_seconds: float = Intervals.alerts
    shutdown_seconds: float = 8.0
    ring: str | None = None
    auth: str = "ingest"
    db_connect_seconds: float = 5.0
    db_statement_seconds: float = 30.0
    db_pool_seconds: float = 5.0
    max_unwritten: int = Limits.max_unwritten
    generate_concurrency: int = Limits.generate_concurrency
    generate_queue: int = Limits.generate_queue
    read_timeout: float = Connections.read_timeout
    keepalive_seconds: float = Connections.keepalive_seconds
    max_connections: int = Connections.max_connections
    idempotency_entries: int = Limits.idempotency_entries
    domain_idle_seconds: float = Domains.idle_seconds
    domains_seconds: float = Intervals.domains
    fleet_seconds: float = Intervals.fleet
    sample_prompts: int = 0
    retain_windows: int = StoreConfig.retain_windows
    retain_minutes: int = StoreConfig.retain_minutes
    retain_hours: int = StoreConfig.retain_hours
    retain_days: int = StoreConfig.retain_days

    def __post_init__(self) -> None:
        for name in ("host", "db", "pod", "policy", "device"):
            _text(name, getattr(self, name))
        _int("port", self.port, 0, 65535)  # 0: any free port
        _int("kmax", self.kmax, 1, MAX_LOOKAHEAD)  # positions above 32 are not counted (storage/counts.py)
        _int("max_domains", self.max_domains, 1, 10_000)
        _int("body_limit", self.body_limit, 1024, 1 << 30)
        _int("max_new_tokens", self.max_new_tokens, 1, 1 << 20)
        if self.seed is not None:
            _int("seed", self.seed, 0, 2**63 - 1)
        if not 1 <= len(self.pod) <= 128 or not self.pod.isprintable():
            raise ConfigError("pod", f"must be printable text of 1..128 characters, got {self.pod!r}")
        for name in ("warm_lookback", "flush_seconds", "rollup_seconds", "prune_seconds", "refit_seconds",
                     "alerts_seconds", "shutdown_seconds", "db_connect_seconds", "db_statement_seconds",
                     "db_pool_seconds", "read_timeout", "keepalive_seconds", "domain_idle_seconds",
                     "domains_seconds", "fleet_seconds"):
            _positive(name, getattr(self, name))
        _int("max_unwritten", self.max_unwritten, 1, 1 << 40)
        _int("generate_concurrency", self.generate_concurrency, 1, 1024)
        _int("generate_queue", self.generate_queue, 0, 1 << 20)
        _int("max_connections", self.max_connections, 1, 1 << 20)
        _int("idempotency_entries", self.idempotency_entries, 1, 1 << 24)
        _int("sample_prompts", self.sample_prompts, 0, 100_000)
        for name in RETAIN:
            _int(name, getattr(self, name), 1, 1 << 40)
        shortest = StoreConfig.late_seconds + 3600
        if self.retain_windows <= shortest:
            raise ConfigError("retain_windows", f"must be over {shortest} s: late records land in windows for "
                                                f"{StoreConfig.late_seconds} s, and the rollup needs them an hour")
        for lower, upper in zip(RETAIN, RETAIN[1:]):
            if getattr(self, upper) < getattr(self, lower):
                raise ConfigError(upper, f"must be at least {lower} ({getattr(self, lower)} s): a tier is kept "
                                         f"as long as the finer one below it, got {getattr(self, upper)}")
        if self.auth not in AUTH_MODES:
            raise ConfigError("auth", f"must be one of {', '.join(AUTH_MODES)}, got {self.auth!r}")
        if self.auth == "all" and self.token is None:
            raise ConfigError("auth", "auth = all needs a token (set token or SPECWATCH_TOKEN)")
        if self.shutdown_seconds > 9.5:
            raise ConfigError("shutdown_seconds", f"must leave the 10 s grace period room, got {self.shutdown_seconds}")
        if self.token is not None:
            _text("token", self.token)
            if len(self.token) < 16 or any(c.isspace() for c in self.token):
                raise ConfigError("token", "must be at least 16 characters without spaces (e.g. the output "
                                           "of: python -c 'import secrets; print(secrets.token_urlsafe(32))')")
        for name in ("alertmanager_url", "webhook_url"):
            url = getattr(self, name)
            if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
                raise ConfigError(name, f"must be an http:// or https:// URL, got {url!r}")
        if self.ring is not None:
            try:
                check_name(self.ring)
            except ValueError as exc:
                raise ConfigError("ring", str(exc).removeprefix("ring name: ")) from None
        if self.kit_target not in KIT_TARGETS:
            raise ConfigError("kit_target", f"must be one of {', '.join(KIT_TARGETS)}, got {self.kit_target!r}")
        if (self.target_dir is None) != (self.draft_dir is None):
            missing = "draft_dir" if self.draft_dir is None else "target_dir"
            raise ConfigError(missing, "target_dir and draft_dir go together; set both or neither")
        if self.kit is not None and self.target_dir is not None:
            raise ConfigError("kit", "set either kit or target_dir + draft_dir, not both")
        from policies.registry import make

        try:
            make(self.policy, self.kmax)
        except ValueError as exc:
            raise ConfigError("policy", str(exc).removeprefix("policy: ")) from None

    @property
    def models_configured(self) -> bool:
        return self.kit is not None or self.target_dir is not None

    @property
    def intervals(self) -> Intervals:
        """The scheduler's intervals."""
        return Intervals(self.flush_seconds, self.rollup_seconds, self.prune_seconds, self.refit_seconds,
                         self.alerts_seconds, self.domains_seconds, self.fleet_seconds)

    @property
    def db_timeouts(self) -> Timeouts:
        """How long a database connect, statement and wait for a pooled connection may take."""
        return Timeouts(self.db_connect_seconds, self.db_statement_seconds, self.db_pool_seconds)

    @property
    def connections(self) -> Connections:
        """What one client of the HTTP server may send and hold."""
        return Connections(self.body_limit, self.read_timeout, self.keepalive_seconds, self.max_connections)

    @property
    def limits(self) -> Limits:
        """What the HTTP API refuses rather than queue: ingest above ``max_unwritten``, generate requests
        beyond their concurrency and queue; and the Idempotency-Key answers it remembers."""
        return Limits(max_unwritten=self.max_unwritten, generate_concurrency=self.generate_concurrency,
                      generate_queue=self.generate_queue, idempotency_entries=self.idempotency_entries)

    @property
    def domains(self) -> Domains:
        """How many domains are kept apart, and how long an idle one stays in memory."""
        return Domains(self.max_domains, self.domain_idle_seconds)

    def store_config(self, kmax: int | None = None, bound_unwritten: bool = False) -> StoreConfig:
        """The store's limits and retention for this sidecar (``kmax``: instead of the policy's;
        ``bound_unwritten``: the store itself holds at most ``max_unwritten`` rows, the oldest beyond going
        to the dead-letter file, for a process that cannot refuse what it records)."""
        return StoreConfig(kmax=self.kmax if kmax is None else kmax, pod=self.pod,
                           retain_windows=self.retain_windows, retain_minutes=self.retain_minutes,
                           retain_hours=self.retain_hours, retain_days=self.retain_days,
                           max_unwritten=self.max_unwritten if bound_unwritten else None)

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


FIELDS = {f.name: f for f in fields(SidecarConfig)}


def load(file: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> SidecarConfig:
    """Defaults, then ``file`` (or SPECWATCH_CONFIG), then SPECWATCH_* variables, then ``overrides`` (flags,
    None values ignored). ConfigError names the option and the source of its value."""
    values: dict[str, Any] = {"db": settings.db_url(), "pod": settings.pod(), "device": settings.device()}
    source: dict[str, str] = {}
    path = file if file is not None else settings.config_file()
    if path is not None:
        for name, value in read_file(Path(path)).items():
            values[name], source[name] = value, f"config file {path}"
    for name in FIELDS:
        raw = settings.option(name)
        if raw is not None:
            where = f"SPECWATCH_{name.upper()}"
            values[name], source[name] = _parse(name, raw, where), where
    for name, value in (overrides or {}).items():
        if value is not None:
            if name not in FIELDS:
                raise ConfigError(name, "unknown option")
            values[name], source[name] = value, "the command line"
    try:
        return SidecarConfig(**values)
    except ConfigError as exc:
        where = source.get(exc.field)
        raise ConfigError(exc.field, f"{exc.message} (from {where})" if where else exc.message) from None


def read_file(path: Path) -> dict[str, Any]:
    """The options of a TOML file: flat ``name = value`` pairs named as SidecarConfig's fields."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError("config", f"no such file: {path}") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("config", f"cannot read {path}: {exc}") from None
    for name, value in data.items():
        if name not in FIELDS:
            raise ConfigError(name, f"unknown option in {path}; known: {', '.join(FIELDS)}")
        if isinstance(value, dict):
            raise ConfigError(name, f"must be a plain value in {path}, not a table")
    return data


def _parse(name: str, raw: str, where: str) -> Any:
    """An environment variable's text as the type of option ``name``."""
    kind = str(FIELDS[name].type)
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
    except ValueError:
        number = "an integer" if kind.startswith("int") else "a number"
        raise ConfigError(name, f"must be {number}, got {raw!r} (from {where})") from None
    return raw


def _text(name: str, value: Any) -> None:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(name, f"must be non-empty text, got {value!r}")


def _int(name: str, value: Any, low: int, high: int) -> None:
    if type(value) is not int or not low <= value <= high:
        raise ConfigError(name, f"must be an integer in {low}..{high}, got {value!r}")


def _positive(name: str, value: Any) -> None:
    if type(value) not in (int, float) or not math.isfinite(value) or value <= 0:
        raise ConfigError(name, f"must be a positive number of seconds, got {value!r}")
