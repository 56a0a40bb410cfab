"""Everything specwatch exports on /metrics (the series its Prometheus rules alert on), counting apart from
export: plain counts per domain and what derives from them (``counts``), the exporter of steps, tokens,
per-position acceptance, decisions, drift and alerts (``export``: Metrics), and the store's durability
counts (``store``: StoreCollector, FlushCollector). Every exporter takes ``registry=``.
"""
