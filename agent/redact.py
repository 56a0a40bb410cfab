"""Secret redaction, re-exported from common/redact.py where it lives (alerts/ needs it too), so that
``from agent import redact`` keeps working. Code in this repository imports ``common.redact``."""

from common.redact import MASK, RedactingFormatter, install, redact, redact_url, remember, remember_url  # noqa: F401

__all__ = ["MASK", "remember", "remember_url", "redact", "redact_url", "RedactingFormatter", "install"]
