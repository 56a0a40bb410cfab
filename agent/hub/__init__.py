"""The hub of the data path: the Sidecar (``sidecar``), where every record comes in and every decision goes
out, with what it holds in memory: the ingest worker (``ingest``), the domains that have state of their own
(``domains``), the switch's transitions as alerts (``transition_alerts``), the warm start from stored history
(``warm``) and giving memory back after a burst (``memory``). No HTTP, no scheduler: agent/runtime/ builds
a Sidecar and runs it.
"""
