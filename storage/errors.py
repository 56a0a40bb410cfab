"""Errors the store raises; the CLI turns them into one-line messages."""


class StoreError(RuntimeError):
    """The store cannot do what was asked (bad URL, unreachable database, bad query)."""


class SchemaError(StoreError):
    """The database schema is missing, older than this code expects, or newer than it knows."""
