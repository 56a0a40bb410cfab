"""What the real-model story reads off its replayed requests (pure functions over agent/workload/replay.py's
results, as dicts): the end table's rows per phase and domain, and when a domain's traffic left the pool it was
on before the update."""

from __future__ import annotations

from collections import Counter


def phase_rows(phases: dict[str, list[dict]]) -> list[dict]:
    """Per phase (in order) and domain (in order of first request): requests, the pools that served them (most
    used first), acceptance (accepted / drafted, the engine's own counts; None where nothing was drafted) and
    tokens per second (generated tokens over the requests' wall time at the client). Failed requests are
    counted apart and left out of the rates."""
    rows = []
    for label, results in phases.items():
        by: dict[str, list[dict]] = {}
        for r in results:
            by.setdefault(r["domain"], []).append(r)
        for domain, rs in by.items():
            ok = [r for r in rs if r.get("error") is None]
            drafted = sum(r.get("drafted", 0) for r in ok)
            seconds = sum(r["seconds"] for r in ok)
            pools = Counter(r.get("pool") or "?" for r in ok)
            rows.append({"phase": label, "domain": domain, "requests": len(ok), "failed": len(rs) - len(ok),
                         "pools": ", ".join(f"{p} {n}" for p, n in pools.most_common()),
                         "pool_counts": dict(pools),
                         "acceptance": sum(r.get("accepted", 0) for r in ok) / drafted if drafted else None,
                         "tps": sum(r["tokens"] for r in ok) / seconds if seconds > 0 else 0.0})
    return rows


def moved_at(before: list[dict], after: list[dict], domain: str, recent: int = 6) -> dict | None:
    """When ``domain``'s requests after the update left the pool most of its last ``recent`` requests before it
    used: the start (seconds into ``after``) of the first request from which none went back to that pool, and
    the pool most used from then on. None when it never left (or no request of the domain on either side)."""
    old = [r.get("pool") for r in sorted(before, key=lambda r: r["started"]) if r["domain"] == domain
           and r.get("error") is None][-recent:]
    new = [r for r in sorted(after, key=lambda r: r["started"]) if r["domain"] == domain and r.get("error") is None]
    if not old or not new:
        return None
    pool = Counter(old).most_common(1)[0][0]
    if new[-1].get("pool") == pool:
        return None
    last_on = max((i for i, r in enumerate(new) if r.get("pool") == pool), default=-1)
    rest = new[last_on + 1:]
    return {"from": pool, "to": Counter(r.get("pool") for r in rest).most_common(1)[0][0],
            "seconds": rest[0]["started"], "requests_before": last_on + 1}
