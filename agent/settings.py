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
