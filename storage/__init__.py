"""Acceptance history: schema, migrations, window aggregation, writes, rollups, retention, queries.

SQL never leaves this package; the rest of specwatch uses ``Store``.
"""

from storage.config import StoreConfig
from storage.errors import SchemaError, StoreError
from storage.events import StoredAlert, VersionSeen
from storage.query import DIMENSIONS, StatsQuery, StatsResult
from storage.store import Store
from storage.timeline import History

__all__ = ["Store", "StoreConfig", "StatsQuery", "StatsResult", "StoredAlert", "VersionSeen", "History",
           "StoreError", "SchemaError", "DIMENSIONS"]
