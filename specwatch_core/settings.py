"""The one place that reads SPECWATCH_* environment variables."""

from __future__ import annotations

import os
from pathlib import Path


def home() -> Path:
    """Where specwatch caches models and traces (SPECWATCH_HOME, default ~/.cache/specwatch)."""
    return Path(os.environ.get("SPECWATCH_HOME") or Path.home() / ".cache" / "specwatch").expanduser()


def db_url() -> str:
    """Database URL (SPECWATCH_DB, default sqlite:///specwatch.db)."""
    return os.environ.get("SPECWATCH_DB") or "sqlite:///specwatch.db"


def device() -> str:
    """Torch device for models (SPECWATCH_DEVICE, default auto: CUDA when present, else CPU)."""
    return os.environ.get("SPECWATCH_DEVICE") or "auto"


def pod() -> str:
    """This pod's name in stored history (SPECWATCH_POD, else HOSTNAME, else the host name)."""
    import socket

    return os.environ.get("SPECWATCH_POD") or os.environ.get("HOSTNAME") or socket.gethostname() or "local"


def host() -> str | None:
    """Address `specwatch serve` binds (SPECWATCH_HOST); None when unset (config file, else 127.0.0.1)."""
    return option("host")


def port() -> str | None:
    """Port of `specwatch serve` as text (SPECWATCH_PORT); agent.runtime.config validates it."""
    return option("port")


def token() -> str | None:
    """Bearer token required on the sidecar's mutating routes (SPECWATCH_TOKEN); None: no token."""
    return option("token")


def config_file() -> str | None:
    """Path of the sidecar's TOML configuration file (SPECWATCH_CONFIG); None: no file."""
    return option("config")


def option(name: str) -> str | None:
    """SPECWATCH_<NAME> for a sidecar option (``name`` as in agent.runtime.config, e.g. "body_limit"); None when
    unset or empty."""
    return os.environ.get(f"SPECWATCH_{name.upper()}") or None
