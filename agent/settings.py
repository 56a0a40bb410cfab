"""The SPECWATCH_* environment, re-exported from common/settings.py where it is read (storage/ needs it too), so
that ``from agent import settings`` keeps working. Code in this repository imports ``common.settings``."""

from common.settings import config_file, db_url, device, home, host, option, pod, port, token  # noqa: F401

__all__ = ["home", "db_url", "device", "pod", "host", "port", "token", "config_file", "option"]
