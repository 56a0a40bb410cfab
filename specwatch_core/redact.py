"""Secrets out of logs and error messages: the one redaction helper every log line and error passes through.

``redact(text)`` hides, wherever they appear in free text:
- the password of a URL's userinfo (``postgresql://user:***@host/db``, as SQLAlchemy's
  ``URL.render_as_string(hide_password=True)`` shows it);
- query values whose name looks like a credential (token, key, secret, password, sig, auth, ...);
- path segments that look like generated tokens (Slack-style ``/services/T0/B0/XXXXXXXX``);
- ``Bearer <token>`` and ``Basic <credentials>``;
- every string registered with ``remember`` (the configured token, database password, ...).

``RedactingFormatter`` applies it to whole formatted records, tracebacks included, so a library that
logs a URL (httpx, SQLAlchemy, uvicorn) cannot leak what was registered.
"""

from __future__ import annotations

import logging
import re
import threading

MASK = "***"
_SECRET_NAMES = re.compile(r"(token|key|secret|passw|pwd|sig|auth|credential|session|code)", re.I)
_URL = re.compile(r"\b([a-z][a-z0-9+.\-]*://)([^\s'\"<>]+)", re.I)
_USERINFO = re.compile(r"^([^/@:\s]*)(:[^/@\s]*)?@")
_QUERY_PAIR = re.compile(r"([?&;])([^=&;#\s]+)=([^&;#\s'\"]*)")
_SCHEME_TOKEN = re.compile(r"\b(Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=\-]{4,}", re.I)
# A path segment of 16+ characters mixing letters and digits: a generated credential, not a name.
_TOKENISH = re.compile(r"(?=[A-Za-z0-9_\-]*\d)(?=[A-Za-z0-9_\-]*[A-Za-z])[A-Za-z0-9_\-]{16,}")

_known: set[str] = set()
_lock = threading.Lock()


def remember(*secrets: str | None) -> None:
    """Hide these exact strings from now on (values under 4 characters are ignored: too common)."""
    with _lock:
        _known.update(s for s in secrets if s and len(s) >= 4)


def remember_url(url: str | None) -> None:
    """Remember a URL's password and credential-like query values."""
    if not url:
        return
    match = _URL.search(url)
    rest = match.group(2) if match else url
    user = _USERINFO.match(rest)
    if user and user.group(2):
        remember(user.group(2)[1:])
    remember(*(value for _, name, value in _QUERY_PAIR.findall(rest) if _SECRET_NAMES.search(name)))


def redact(text: object) -> str:
    """``text`` (anything; str() of it) with every secret it shows replaced by ``***``."""
    out = _URL.sub(_url_part, str(text))
    out = _SCHEME_TOKEN.sub(lambda m: f"{m.group(1)} {MASK}", out)
    with _lock:
        known = sorted(_known, key=len, reverse=True)
    for secret in known:
        if secret in out:
            out = out.replace(secret, MASK)
    return out


def redact_url(url: str) -> str:
    """A URL fit for a log line: no password, no credential-like query values or path tokens."""
    return redact(url)


def _url_part(match: re.Match) -> str:
    scheme, rest = match.group(1), match.group(2)
    rest = _USERINFO.sub(lambda m: f"{m.group(1)}:{MASK}@" if m.group(2) else m.group(0), rest, count=1)
    head, sep, query = rest.partition("?")
    path_start = head.find("/")
    if path_start >= 0:
        head = head[:path_start] + _TOKENISH.sub(MASK, head[path_start:])
    if sep:
        query = _QUERY_PAIR.sub(_query_value, "?" + query)[1:]
    return scheme + head + sep + query


def _query_value(match: re.Match) -> str:
    sep, name, value = match.groups()
    hide = _SECRET_NAMES.search(name) or _TOKENISH.fullmatch(value)
    return f"{sep}{name}={MASK if hide and value else value}"


class RedactingFormatter(logging.Formatter):
    """A Formatter whose output (message, arguments, traceback) passed through ``redact``."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def install(level: int = logging.INFO, fmt: str = "%(levelname)s:     %(name)s: %(message)s") -> None:
    """Log to stderr through a RedactingFormatter (replaces the root logger's handlers' formatters, and
    adds a handler when there is none)."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler())
    for handler in root.handlers:
        handler.setFormatter(RedactingFormatter(fmt))
    root.setLevel(level)
