"""Proof harness of issue 17 (durability and hostile input): every row of the issue's table run against a
real ``specwatch serve`` subprocess on SQLite and on the local PostgreSQL (a fresh schema per row, created
and dropped here), printed as the same table with what happens now and the figures (records posted, acked,
stored, lost; RSS; latency during the fault). Rows l-q do the same for ``specwatch proxy`` in the request
path (bench/fault_rows_proxy.py): goal, no request failed or cut by specwatch and no record of a completed
request lost. Not a test: it asserts nothing and reports whatever it measures (a row whose feature is
missing says what it saw). Writes bench/results/faults.json (rows l-q: faults_proxy.json).

    python bench/faults.py                  # full run (about 45 min on 2 cores; the fuzz row ~25 of them)
    python bench/faults.py --quick          # smaller sizes and shorter faults (about 10 min)
    python bench/faults.py --only b         # one row (or several: --only a,c,e)
    python bench/faults.py --backends sqlite
    python bench/faults.py --only l,m,n,o,p,q --checkout /tmp/base --out bench/results/faults_proxy_before.json
                                            # the proxy rows against another checkout's proxy (figures before)

Rows: a bad timestamp then SIGTERM; b kill -9 under 2k records/s (and 1.5 s after start); c SIGTERM then
stats; d PostgreSQL black-holed; e 32 made-up GET /v1/decision; f 100k domains (RSS, series, eviction);
g 60 concurrent /v1/generate (needs the tiny kit: ``specwatch models build --size tiny``); h secrets in
logs; i slow headers; j invalid values; k schemathesis fuzz of /openapi.json. Proxy: l SIGTERM with 16
streams of ~5 s in flight; m the database unreachable at start (closed port, black hole); n the database
hung (a table lock) then SIGTERM; o a pool's engine killed under load; p the domain header in UTF-8 and
10,003 distinct domains; q half a request line, and an engine that never answers.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

# The repository first: bench/storage.py (a benchmark) must not shadow the storage package.
sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

import fault_rows as ra  # noqa: E402
import fault_rows_more as rb  # noqa: E402
import fault_rows_proxy as rp  # noqa: E402
from fault_server import REPO  # noqa: E402

# row -> (what was done, what the issue measured before, function, backends it runs on)
ROWS = {
    "a": ("timestamp 1e12 in a good batch, then SIGTERM",
          "202; flush fails at shutdown, every acked record in memory lost, exit 1", ra.row_a, None),
    "b": ("kill -9 under 2k records/s", "19-28% of acked lost (~10 s window); 100% in the first 10-20 s",
          ra.row_b, None),
    "c": ("records posted, SIGTERM at once, then stats", "[]: rows stored but not rolled up, planner blind",
          ra.row_c, None),
    "d": ("PostgreSQL black-holed", "/readyz hangs; POST stalls ~20 s; timed-out requests stored anyway",
          ra.row_d, ("postgresql",)),
    "e": ("32 made-up GET /v1/decision, then a real domain", "slots squatted, real domain falls into other",
          ra.row_e, None),
    "f": ("100k distinct domains posted", "RSS 177 -> 469 MB never released, 200k series rows, flushes > 10 s",
          rb.row_f, None),
    "g": ("60 concurrent POST /v1/generate", "no cap or queue: /v1/steps stalls 3 s", rb.row_g, ("sqlite",)),
    "h": ("secret-bearing database and webhook URLs", "password logged at INFO; webhook URL logged on 5xx",
          rb.row_h, None),
    "i": ("half a request line, then silence", "no header timeout", rb.row_i, ("sqlite",)),
    "j": ("timestamp 0 / 1e12 / 1e300, draft_seconds 1e308, lookahead > max, duplicate keys",
          "all accepted", rb.row_j, None),
    "k": ("schemathesis fuzz of /openapi.json (10k+ cases)", "21k cases, zero 500s", rb.row_k, ("sqlite",)),
    "l": ("proxy: SIGTERM with 16 streams of ~5 s in flight", "16 streams cut, none stored; the log said "
          "every record flushed", rp.row_l, None),
    "m": ("proxy: database unreachable at start (closed port; black hole healing after 20 s)",
          "exit 1 after 13.5 s, nothing served", rp.row_m, ("postgresql",)),
    "n": ("proxy: database hung (table lock) under traffic, then SIGTERM",
          "flush failures 0 while hung, a scheduler warning a second; exit 1 after 8 s, unflushed records dropped "
          "uncounted (480)", rp.row_n, ("postgresql",)),
    "o": ("proxy: the engine of the busiest of 2 pools killed under load",
          "502 for up to --health-seconds (2 s): 7 requests", rp.row_o, ("sqlite",)),
    "p": ("proxy: X-Specwatch-Domain café (UTF-8, RFC 8187, Latin-1), then 10,003 distinct domains",
          "café stored as cafÃ©; 10,003 domains stored", rp.row_p, ("sqlite",)),
    "q": ("proxy: half a request line then silence; an engine that never answers",
          "no header-read timeout; a client held 600 s", rp.row_q, ("sqlite",)),
}
PROXY_ROWS = "lmnopq"


def run(rows: list[str], backends: list[str], quick: bool, console: Console, repo: Path = REPO) -> list[dict]:
    out = []
    for row in rows:
        what, before, fn, only = ROWS[row]
        for kind in backends:
            if only is not None and kind not in only:
                continue
            console.print(f"[bold]({row})[/bold] {what} on {kind} ...")
            t0 = time.monotonic()
            with tempfile.TemporaryDirectory(prefix=f"faults-{row}-") as tmp:
                try:
                    outcome, figures = fn(ra.Ctx(kind, Path(tmp), quick, repo))
                except Exception as exc:  # a row that cannot run says why; the others go on
                    outcome, figures = f"could not run: {type(exc).__name__}: {str(exc)[:300]}", {
                        "error": traceback.format_exc()[-2000:]}
            seconds = time.monotonic() - t0
            console.print(f"    {outcome}  [dim]({seconds:.0f} s)[/dim]")
            out.append({"row": row, "backend": kind, "what": what, "before": before, "now": outcome,
                        "figures": figures, "seconds": round(seconds, 1)})
    return out


def table(results: list[dict]) -> Table:
    t = Table(title="faults against a real specwatch serve and specwatch proxy", show_lines=True)
    for name in ("row", "what was done", "db", "before (as the issue measured it)", "now"):
        t.add_column(name, overflow="fold")
    for r in results:
        t.add_row(r["row"], r["what"], r["backend"], r["before"], r["now"])
    return t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smaller sizes and shorter faults")
    ap.add_argument("--only", default=",".join(ROWS), help="rows to run, e.g. b or a,c,e (default: all)")
    ap.add_argument("--backends", default="sqlite,postgresql", help="sqlite, postgresql or both")
    ap.add_argument("--out", type=Path, default=None,
                    help="default bench/results/faults.json, faults_proxy.json for proxy rows only")
    ap.add_argument("--checkout", type=Path, default=REPO,
                    help="the checkout whose specwatch proxy the proxy rows run (default this one)")
    args = ap.parse_args(argv)
    rows = [r.strip() for r in args.only.split(",") if r.strip()]
    unknown = [r for r in rows if r not in ROWS]
    if unknown:
        ap.error(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
    if args.out is None:
        proxy_only = all(r in PROXY_ROWS for r in rows)
        args.out = REPO / "bench" / "results" / ("faults_proxy.json" if proxy_only else "faults.json")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if any(b not in ("sqlite", "postgresql") for b in backends):
        ap.error("backends: sqlite, postgresql")
    console = Console(width=160)
    started = time.monotonic()
    results = run(rows, backends, args.quick, console, args.checkout.resolve())
    console.print(table(results))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                            text=True).stdout.strip()
    if args.checkout.resolve() != REPO:
        commit = f"bench {commit}, proxy of {args.checkout}"
    previous = json.loads(args.out.read_text()) if args.out.exists() else {}
    merged = {(r["row"], r["backend"]): r for r in previous.get("rows", [])}
    merged.update({(r["row"], r["backend"]): r for r in results})  # a partial run (--only) keeps the others
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": commit,
        "quick": args.quick, "machine": f"{platform.machine()}, {platform.python_version()}",
        "seconds": round(time.monotonic() - started), "rows": sorted(merged.values(), key=lambda r: (
            r["row"], r["backend"]))}, indent=2) + "\n")
    console.print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
