"""The tables of bench/load_aware.py: per level and configuration, throughput and each domain's rate, the
proxy against the best fixed pool and the engine-style schedule, how evenly each configuration's two servers
were loaded, and each process's CPU. Pure functions of the run's log (``--show`` prints a saved run again)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

PROXY = "proxy"
MIX = "mix"  # --mix: servers like the proxy's behind the client's balancer (a control, not a fixed pool)
DOMAINS = ("chat", "copy")
console = Console(stderr=True)


def imbalance(rows: list[dict]) -> float | None:
    """Time mean of |in flight on one server - on the other| over the time any of ``rows`` ran (two
    servers: a configuration's replicas, or the proxy's pools); None without two servers or timestamps.
    At 8 in flight a balanced pair runs 4 and 4 (0); 6 and 2 for half the time and 4 and 4 the rest, 2."""
    servers = sorted({r.get("server") for r in rows})
    if len(servers) != 2 or any("start" not in r for r in rows):
        return None
    events = sorted([(r["start"], servers.index(r["server"]), 1) for r in rows]
                    + [(r["end"], servers.index(r["server"]), -1) for r in rows])
    count, weighted, running, last = [0, 0], 0.0, 0.0, events[0][0]
    for t, server, step in events:
        if count[0] or count[1]:
            weighted += abs(count[0] - count[1]) * (t - last)
            running += t - last
        last = t
        count[server] += step
    return weighted / running if running else None


def rate(rows: list[dict]) -> float:
    """Tokens over wall seconds of ``rows`` (a request's rate, summed over them)."""
    return sum(r["n"] for r in rows) / sum(r["wall"] for r in rows)


def summary(log: dict) -> dict:
    out = {}
    for level, by in log.items():
        row = {}
        for name, got in by.items():
            rows = got["rows"]
            per = {d: rate([r for r in rows if r["domain"] == d]) for d in DOMAINS}
            pools: dict[str, int] = {}
            for r in rows:
                pools[r["pool"] or name] = pools.get(r["pool"] or name, 0) + 1
            drafted, accepted = sum(r["drafted"] for r in rows), sum(r["accepted"] for r in rows)
            row[name] = {"throughput": sum(r["n"] for r in rows) / got["wall"], **per, "pools": pools,
                         "acceptance": accepted / drafted if drafted else None}
            apart = imbalance(rows)
            if apart is not None:  # time mean of |in flight on one server - on the other|
                row[name]["imbalance"] = apart
            if got.get("cpu"):  # each process's CPU over the blocks, as a share of one core
                row[name]["cpu_share"] = {label: seconds / got["wall"] for label, seconds in got["cpu"].items()}
            # servers trading cores: the rate of a request on each core, per configuration
            by_core = {core: rate([r for r in rows if r.get("core") == core])
                       for core in sorted({r["core"] for r in rows if "core" in r})}
            if by_core:
                row[name]["by_core"] = by_core
            if PROXY in got.get("cpu", {}):
                row[name]["proxy_cpu_share"] = got["cpu"][PROXY] / got["wall"]
        fixed = [n for n in row if n not in (PROXY, MIX)]
        best = {d: max(fixed, key=lambda n: row[n][d]) for d in DOMAINS}
        schedule = max(fixed, key=lambda n: row[n]["throughput"])
        out[level] = {"by": row, "best": best, "schedule": schedule}
        if PROXY in row:
            p = row[PROXY]
            out[level].update(proxy_vs_best={d: p[d] / row[best[d]][d] for d in DOMAINS},
                              proxy_vs_schedule=p["throughput"] / row[schedule]["throughput"])
    return out


def proxy_mix(by: dict) -> str:
    """The proxy's requests per pool, and its own CPU as a share of a core where measured."""
    if PROXY not in by:
        return ""
    p = by[PROXY]
    cpu = f"; proxy CPU {p['proxy_cpu_share']:.0%} of a core" if "proxy_cpu_share" in p else ""
    servers = ", ".join(f"{label} {share:.0%}" for label, share in p.get("cpu_share", {}).items() if label != PROXY)
    cpu += f"; its servers' CPU: {servers}" if servers else ""
    apart = ", ".join(f"{n} {c['imbalance']:.1f}" for n, c in by.items() if "imbalance" in c)
    apart = f"; in flight apart: {apart}" if apart else ""
    return ", ".join(f"{k} {v}" for k, v in sorted(p["pools"].items())) + cpu + apart


def controls(out: dict) -> list[str]:
    """The control configuration's column where the run has one (``--mix``)."""
    return [MIX] if any(MIX in s["by"] for s in out["summary"].values()) else []


def report(out: dict) -> None:
    pools = [n for n in out["pools"]] + controls(out)
    t = Table(title=f"{out['model']} F16, {out.get('layout', 'shared')}, tokens/s ({out['requests']} requests a "
                    f"domain and level, {out['tokens']} tokens, {out['slots']} slots x {out['threads']} threads a "
                    f"server)")
    for col in ["in flight", "domain", *pools, PROXY, "best fixed", "proxy/best", "proxy pools"]:
        t.add_column(col)
    for level, s in out["summary"].items():
        by = s["by"]
        for d in (*DOMAINS, "throughput"):
            cells = [f"{by[n][d]:.1f}" if n in by else "-" for n in (*pools, PROXY)]
            share = s.get("proxy_vs_schedule" if d == "throughput" else "proxy_vs_best")
            share = share if share is None or d == "throughput" else share[d]
            best = s["schedule"] if d == "throughput" else s["best"][d]
            mix = proxy_mix(by) if d == "throughput" else ""
            t.add_row(level, "all (throughput)" if d == "throughput" else d, *cells, best,
                      "-" if share is None else f"{share:.1%}", mix)
    console.print(t)


def core_table(out: dict) -> str:
    """Where servers traded cores every block: per level and configuration, the rate of a request on each core
    (tokens over wall seconds, both domains), and the second's against the first's."""
    levels = [(level, s["by"]) for level, s in out["summary"].items()
              if any("by_core" in c for c in s["by"].values())]
    if not levels:
        return ""
    lines = ["| in flight | configuration | core | tokens/s | against the first |", "|---|---|---|---|---|"]
    for level, by in levels:
        for name, c in by.items():
            rates = list(c.get("by_core", {}).items())
            for core, rate in rates:
                lines.append(f"| {level} | {name} | {core} | {rate:.1f} | {rate / rates[0][1]:.1%} |")
    return "\n".join(lines)


def decoding_ms(rows: list[dict]) -> float:
    """The engine's decoding time a token over ``rows``, in ms: its prompt_ms + predicted_ms less the prompt's,
    over the tokens."""
    return 1000 * sum(r["engine"] - r["prompt"] for r in rows) / sum(r["n"] for r in rows)


def server_table(out: dict) -> str:
    """Per level, configuration and server: its requests and the engine's decoding time per token (its
    figures: prompt_ms + predicted_ms less the prompt's, over the tokens), which tells a slow server from a
    slow path or routing."""
    lines = ["| in flight | configuration | server | requests | decoding ms a token |", "|---|---|---|---|---|"]
    for level, by in out["log"].items():
        for name, got in by.items():
            for server in sorted({r["server"] for r in got["rows"]}):
                on = [r for r in got["rows"] if r["server"] == server]
                lines.append(f"| {level} | {name} | {server} | {len(on)} | {decoding_ms(on):.1f} |")
    return "\n".join(lines)


def markdown(out: dict) -> str:
    pools = list(out["pools"]) + controls(out)
    lines = ["| in flight | domain | " + " | ".join(pools) + " | proxy | best fixed | proxy/best | proxy's pools |",
             "|" + "---|" * (len(pools) + 6)]
    for level, s in out["summary"].items():
        by = s["by"]
        for d in (*DOMAINS, "throughput"):
            cells = " | ".join(f"{by[n][d]:.1f}" if n in by else "-" for n in (*pools, PROXY))
            share = s.get("proxy_vs_schedule" if d == "throughput" else "proxy_vs_best")
            share = "-" if share is None else f"**{(share if d == 'throughput' else share[d]):.1%}**"
            mix = proxy_mix(by) if d == "throughput" else ""
            best = s["schedule"] if d == "throughput" else s["best"][d]
            lines.append(f"| {level} | {'all (throughput)' if d == 'throughput' else d} | {cells} | {best} | "
                         f"{share} | {mix} |")
    return "\n".join(lines)
