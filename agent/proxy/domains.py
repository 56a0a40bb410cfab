"""The domain of a proxied request: the ``X-Specwatch-Domain`` header, else the first configured rule that
matches (the request's ``model``, a path prefix, a field of its ``metadata`` object), else ``default``.
Names are validated as StepRecord validates ``domain`` (printable, 1..64 characters).

The header's bytes are read as UTF-8 (HTTP gives field values no charset, RFC 7230 3.2.4 and RFC 9110 5.5:
bytes beyond ASCII are opaque to it, and UTF-8 is what clients send), or in RFC 8187's form ``UTF-8''caf%C3%A9`` (the
charset and an optional language, then percent-encoded UTF-8) for a client that keeps headers ASCII. Bytes
that are not UTF-8 are refused, naming the header, rather than stored garbled."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

HEADER = "x-specwatch-domain"
DEFAULT = "default"
MAX_LENGTH = 64
KINDS = ("model", "path", "metadata")
# RFC 8187 ext-value: charset "'" [ language ] "'" value-chars (attr-char or pct-encoded).
EXT_VALUE = re.compile(rb"(?i)^utf-8'[a-z0-9-]*'((?:[a-z0-9!#$&+.^_`|~-]|%[0-9a-f]{2})*)$")


class DomainError(ValueError):
    """A domain name that cannot be used; ``source`` names where it came from (the header, a rule)."""

    def __init__(self, source: str, message: str):
        self.source, self.message = source, message
        super().__init__(f"{source}: {message}")


def check(name: Any, source: str) -> str:
    """``name`` if it is a valid domain, else DomainError naming ``source``."""
    if not isinstance(name, str) or not name:
        raise DomainError(source, "domain must be a non-empty string")
    if len(name) > MAX_LENGTH:
        raise DomainError(source, f"domain longer than {MAX_LENGTH} characters")
    if not name.isprintable():
        raise DomainError(source, "domain must be printable text")
    return name


@dataclass(frozen=True)
class DomainRule:
    """``model:NAME=DOMAIN``: requests for model NAME; ``path:/PREFIX=DOMAIN``: paths starting with PREFIX;
    ``metadata:KEY``: the domain is the body's ``metadata[KEY]`` (when it is a valid name)."""

    kind: str
    key: str
    domain: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise DomainError("domain_rule", f"kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if not self.key:
            raise DomainError("domain_rule", f"{self.kind}: the key is empty")
        if self.kind == "metadata":
            if self.domain is not None:
                raise DomainError("domain_rule", "metadata:KEY takes no =DOMAIN (the field's value is the domain)")
        else:
            if self.domain is None:
                raise DomainError("domain_rule", f"write {self.kind}:{self.key}=DOMAIN")
            check(self.domain, "domain_rule")
        if self.kind == "path" and not self.key.startswith("/"):
            raise DomainError("domain_rule", f"path prefix must start with /, got {self.key!r}")

    @classmethod
    def parse(cls, text: str) -> "DomainRule":
        kind, sep, rest = text.partition(":")
        if not sep:
            raise DomainError("domain_rule", f"write model:NAME=DOMAIN, path:/PREFIX=DOMAIN or metadata:KEY, "
                                             f"got {text!r}")
        if kind == "metadata":
            key, sep, domain = rest.partition("=")
            return cls(kind, key, domain if sep else None)
        key, sep, domain = rest.rpartition("=")
        return cls(kind, key, domain) if sep else cls(kind, rest)

    def match(self, path: str, body: dict | None) -> str | None:
        """The domain this rule gives the request, or None when it does not apply."""
        if self.kind == "path":
            return self.domain if path.startswith(self.key) else None
        if body is None:
            return None
        if self.kind == "model":
            return self.domain if body.get("model") == self.key else None
        metadata = body.get("metadata")
        value = metadata.get(self.key) if isinstance(metadata, dict) else None
        try:
            return check(value, f"metadata.{self.key}") if value is not None else None
        except DomainError:
            return None  # a client's free-form field: an unusable value falls through to later rules


def from_header(raw: bytes | None) -> str | None:
    """The header's value as text (see the module docstring); DomainError when it is not UTF-8."""
    if raw is None:
        return None
    found = EXT_VALUE.match(raw)
    if found is not None:
        raw = unquote_to_bytes(found.group(1))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DomainError("X-Specwatch-Domain", f"not UTF-8 (byte 0x{raw[exc.start]:02X} at {exc.start}): send "
                                                f"the name in UTF-8, or as UTF-8''caf%C3%A9 (RFC 8187)") from None


def resolve(header: str | None, path: str, body: dict | None, rules: tuple[DomainRule, ...]) -> str:
    """The request's domain; an invalid header raises DomainError (the client asked for it by name)."""
    if header is not None:
        return check(header, "X-Specwatch-Domain")
    for rule in rules:
        found = rule.match(path, body)
        if found is not None:
            return found
    return DEFAULT
