"""Rows (l)-(q) of bench/faults.py: `specwatch proxy` in the request path of inference traffic, in front of
stand-in llama.cpp engines (bench/slow_upstream.py). The goal of each: no request failed or cut by specwatch,
no record of a completed request lost. Each row measures whatever the proxy does (``ctx.repo`` may be another
checkout, for the figures before a change) and returns (outcome, figures)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import sqlalchemy as sa

from fault_proxy import Clients, Engine, Proxy, stop_message
from fault_rows import Ctx
from fault_server import CLI, PG, REPO, BlackHole, count, free_port, in_db

STREAMS, STREAM_TOKENS, STREAM_GAP = 16, 50, 0.1  # 16 streams of ~5 s
TOKENS = 4  # steps per record of a short request (the stand-in drafts nothing)


def _records(steps: int, tokens: int = TOKENS) -> int:
    return steps // tokens


def row_l(ctx: Ctx) -> tuple[str, dict]:
    """SIGTERM while 16 streams of ~5 s are in flight: streams completed or cut, records stored, exit code,
    and what the log said."""
    db, engine = ctx.backend(), Engine(STREAM_GAP, ctx.tmp / "engine.log")
    try:
        proxy = Proxy(ctx.repo, {"off": engine.url}, db.url(), ctx.tmp).start()
        clients = Clients(proxy.url)
        threads = clients.background(STREAMS, STREAM_TOKENS, stream=True)
        time.sleep(1.0)
        code, seconds = proxy.stop()
        for t in threads:
            t.join(60.0)
        stored = _records(count(db.url())[0], STREAM_TOKENS)
        spilled = _records(proxy.dead_lettered_steps(db.url()), STREAM_TOKENS)
    finally:
        engine.kill()
        db.drop()
    done = clients.completed
    said = stop_message(proxy.output())
    figures = {"streams": STREAMS, "stream_seconds": STREAM_TOKENS * STREAM_GAP, "completed": done,
               "cut": STREAMS - done, "stored": stored, "dead_lettered": spilled, "lost": done - stored - spilled,
               "exit_code": code, "exit_seconds": round(seconds, 1), "log": said}
    return (f"{done} of {STREAMS} streams completed, {STREAMS - done} cut; {stored} of {done} completed stored"
            f"{f', {spilled} dead-lettered' if spilled else ''}; exit {code} after {seconds:.1f} s; log: "
            f"{said[:160]!r}"), figures


def _without_database(ctx: Ctx, db_url: str, run_for: float, heal=None, heal_after: float = 0.0) -> dict:
    """The proxy started with the database away, asked every 0.25 s from its launch for ``run_for`` s;
    ``heal()`` after ``heal_after`` s; then SIGTERM."""
    engine = Engine(0.005, ctx.tmp / "engine.log")
    try:
        proxy = Proxy(ctx.repo, {"off": engine.url}, db_url, ctx.tmp).launch()
        clients = Clients(proxy.url)
        asking = threading.Thread(target=clients.loop, args=(run_for, 0.25), daemon=True)
        asking.start()
        if heal is not None:
            time.sleep(heal_after)
            heal()
        asking.join(run_for + 60)
        exited = proxy.proc.poll()
        code, seconds = proxy.stop()
    finally:
        engine.kill()
    ok = [o for o in clients.outcomes if o.status == 200]
    first = round(min(o.started for o in ok) - proxy.launched, 1) if ok else None
    after = [o for o in clients.outcomes if ok and o.started >= min(x.started for x in ok)]
    return {"exited_by_itself": exited is not None, "exit_code": code if exited is None else exited,
            "first_answer_after_launch_s": first, "answered": len(ok),
            "failed_after_first_answer": sum(1 for o in after if o.status != 200),
            "statuses": clients.statuses(), "stop_seconds": round(seconds, 1), "proxy": proxy,
            "log": stop_message(proxy.output())}


def row_m(ctx: Ctx) -> tuple[str, dict]:
    """The database unreachable at start: a closed port (it never comes), then a black hole (accepts, never
    answers) that heals after 20 s. Requests answered, records stored or dead-lettered."""
    if ctx.kind != "postgresql":
        return "n/a (PostgreSQL only)", {}
    run_for = 15.0 if ctx.quick else 30.0
    db = ctx.backend()
    hole = BlackHole(5432)
    try:
        # The same start with the database up, for what the machine takes to start a proxy at all.
        up = _without_database(ctx, db.url(), 8.0)
        up.pop("proxy")
        closed_url = db.url(free_port())
        closed = _without_database(ctx, closed_url, run_for)
        closed["dead_lettered"] = _records(closed.pop("proxy").dead_lettered_steps(closed_url))  # never reached
        closed["lost"] = closed["answered"] - closed["dead_lettered"]
        already = _records(in_db(db.url()))  # the run with the database up stored these
        hole.hole.set()
        held = _without_database(ctx, db.url(hole.port), run_for, hole.hole.clear, run_for * 2 / 3)
        held_proxy = held.pop("proxy")
        held["dead_lettered"] = _records(held_proxy.dead_lettered_steps(db.url(hole.port)))
        held["replay"] = held_proxy.replay(db.url(hole.port), db.url())
        held["stored"] = _records(in_db(db.url())) - already  # after the replay
        held["lost"] = held["answered"] - held["stored"]
    finally:
        hole.close()
        db.drop()

    def said(r: dict) -> str:
        if not r["answered"]:
            return f"nothing answered, exit {r['exit_code']}{' by itself' if r['exited_by_itself'] else ''}"
        return (f"first answer {r['first_answer_after_launch_s']} s after launch, {r['answered']} answered, "
                f"{r['failed_after_first_answer']} failed after that; {r['dead_lettered']} records in the "
                f"dead-letter file, {r.get('stored', 0)} stored, lost {r['lost']}")
    return (f"database up: first answer {up['first_answer_after_launch_s']} s after launch; closed port: "
            f"{said(closed)}; black hole 20 s: {said(held)}"), {"database_up": up, "closed_port": closed,
                                                               "black_hole": held}


def row_n(ctx: Ctx) -> tuple[str, dict]:
    """The database hung (a table lock held by another connection) while traffic flows, then SIGTERM: what the
    metrics showed while it hung, exit code and time, records stored, dead-lettered or lost."""
    if ctx.kind != "postgresql":
        return "n/a (PostgreSQL only)", {}
    db, engine = ctx.backend(), Engine(0.005, ctx.tmp / "engine.log")
    locker = sa.create_engine(PG.format(port=5432)).connect()
    try:
        proxy = Proxy(ctx.repo, {"off": engine.url}, db.url(), ctx.tmp).start()
        clients = Clients(proxy.url)
        clients.loop(2.0, 0.05)
        time.sleep(2.0)
        txn = locker.begin()
        locker.exec_driver_sql(f"LOCK TABLE {db.schema}.windows IN ACCESS EXCLUSIVE MODE")
        clients.loop(3.0, 0.05)
        time.sleep(4.0)
        seen = {name: proxy.metric(f"specwatch_store_{name}") for name in (
            "flush_failures_total", "flush_timeouts_total", "unwritten_rows", "flush_running_seconds")}
        code, seconds = proxy.stop()
        txn.rollback()
        at_exit = _records(count(db.url())[0])
        spilled = _records(proxy.dead_lettered_steps(db.url()))
        replayed = proxy.replay(db.url())  # a spilled window's row holds its whole total: stored part and rest
        stored = _records(count(db.url())[0])
    finally:
        locker.close()
        engine.kill()
        db.drop()
    log = proxy.output()
    warnings = log.count("maximum number of running instances reached")
    done = clients.completed
    figures = {"completed": done, "stored_at_exit": at_exit, "dead_lettered": spilled, "replay": replayed,
               "stored_after_replay": stored, "lost": done - stored, "exit_code": code,
               "exit_seconds": round(seconds, 1), "while_hung": seen, "scheduler_warnings": warnings,
               "log": stop_message(log)}
    return (f"while hung: flush failures {seen['flush_failures_total']}, timeouts {seen['flush_timeouts_total']}, "
            f"{warnings} scheduler warnings; exit {code} after {seconds:.1f} s; of {done} records {at_exit} in "
            f"the database, {spilled} in dead-lettered rows; after `db replay` {stored} stored, {done - stored} "
            f"lost"), figures


def row_o(ctx: Ctx) -> tuple[str, dict]:
    """Two pools, 4 clients; the pool that served most is killed: answers other than 200 after the kill."""
    db = ctx.backend()
    engines = {"k4": Engine(0.002, ctx.tmp / "k4.log"), "off": Engine(0.002, ctx.tmp / "off.log")}
    try:
        proxy = Proxy(ctx.repo, {name: e.url for name, e in engines.items()}, db.url(), ctx.tmp).start()
        clients = Clients(proxy.url)
        asking = threading.Thread(target=clients.loop, args=(9.0, 0.0, TOKENS, 4), daemon=True)
        asking.start()
        time.sleep(4.0)
        served = {name: sum(1 for o in list(clients.outcomes) if o.pool == name) for name in engines}
        victim = max(served, key=served.get)
        killed = time.monotonic()
        engines[victim].kill()
        asking.join(70.0)
        proxy.stop()
    finally:
        for e in engines.values():
            e.kill()
        db.drop()
    # Every request that ended after the kill (the kill is seen from another process: in flight counts too).
    ended = [o for o in clients.outcomes if o.started + o.seconds >= killed]
    after: dict[str, int] = {}
    for o in ended:
        after[str(o.status)] = after.get(str(o.status), 0) + 1
    failed = sum(n for status, n in after.items() if status != "200")
    in_flight = sum(1 for o in ended if o.started < killed and o.status != 200)
    served_after = {name: sum(1 for o in ended if o.pool == name) for name in engines}
    figures = {"served_before_kill": served, "killed": victim, "after_kill": after, "failed_after_kill": failed,
               "failed_in_flight_at_kill": in_flight, "served_after_kill": served_after, "health_seconds": 2.0}
    return (f"pool {victim} killed: {failed} of {len(ended)} requests ending after it failed ({after}; "
            f"{in_flight} of the failed were in flight at the kill)"), figures


def _stored_domains(db: str) -> list[str]:
    out = subprocess.run([*CLI, "stats", "--db", db, "--by", "domain", "--format", "json"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    return [r["domain"] for r in json.loads(out.stdout or "[]")]


def row_p(ctx: Ctx) -> tuple[str, dict]:
    """The domain header as UTF-8, as RFC 8187's UTF-8\'\'... and as Latin-1 (not UTF-8), then 10,003 distinct
    domains: what each header gets and what is stored."""
    n = 1_003 if ctx.quick else 10_003
    db, engine = ctx.backend(), Engine(0.0, ctx.tmp / "engine.log")
    forms = {"utf-8": ("café-u", "café-u".encode()), "rfc8187": ("café-r", b"UTF-8''caf%C3%A9-r"),
             "latin-1": ("café-l", "café-l".encode("latin-1"))}
    try:
        proxy = Proxy(ctx.repo, {"off": engine.url}, db.url(), ctx.tmp).start()
        clients = Clients(proxy.url)
        answers = {form: clients.one(TOKENS, domain=raw).status for form, (_, raw) in forms.items()}
        with httpx.Client(base_url=proxy.url, timeout=30.0) as client, ThreadPoolExecutor(4) as pool:
            body = {"prompt": "x", "max_tokens": TOKENS}
            codes = list(pool.map(lambda i: client.post("/v1/completions", json=body, headers={
                "X-Specwatch-Domain": f"d{i:05d}"}).status_code, range(n)))
        time.sleep(1.5)
        overflow = proxy.metric("specwatch_proxy_domain_overflow_total")
        proxy.stop()
        names = _stored_domains(db.url())
    finally:
        engine.kill()
        db.drop()
    stored = {form: ("intact" if name in names else "garbled" if any(d.startswith("caf\u00c3") and d[-2:] ==
                                                                        name[-2:] for d in names) else "not stored")
              for form, (name, _) in forms.items()}
    figures = {"header_answers": answers, "stored_as": stored, "distinct_sent": n, "answered": codes.count(200),
               "distinct_stored": len(names), "garbled_stored": [d for d in names if "\u00c3" in d],
               "overflow_metric": overflow}
    said = ", ".join(f"{form} {answers[form]} {stored[form]}" for form in forms)
    return (f"café as {said}; {n} distinct domains sent, {len(names)} stored (overflow counted: {overflow})"), figures


def row_q(ctx: Ctx) -> tuple[str, dict]:
    """Half a request line then silence; a completion from an engine that never answers: how long each
    connection is held."""
    limit = 20.0 if ctx.quick else 40.0
    db, engine = ctx.backend(), Engine(1000.0, ctx.tmp / "engine.log")
    try:
        proxy = Proxy(ctx.repo, {"off": engine.url}, db.url(), ctx.tmp).start()
        sock = socket.create_connection(("127.0.0.1", proxy.port))
        sock.sendall(b"POST /v1/compl")
        sock.settimeout(limit)
        t0 = time.monotonic()
        try:
            closed, waited = sock.recv(4096) == b"", time.monotonic() - t0
        except (socket.timeout, OSError):
            closed, waited = False, limit
        sock.close()
        stalled = Clients(proxy.url).one(1, timeout=limit)
        proxy.stop(signal.SIGKILL)
    finally:
        engine.kill()
        db.drop()
    figures = {"slow_headers_closed": closed, "slow_headers_seconds": round(waited, 1),
               "stalled_engine_status": stalled.status, "stalled_engine_seconds": round(stalled.seconds, 1),
               "limit_s": limit}
    held = (f"answered {stalled.status} after {stalled.seconds:.1f} s" if isinstance(stalled.status, int)
            else f"still held after {limit:.0f} s")
    return (f"half a request line: {'closed after %.1f s' % waited if closed else f'still open after {limit:.0f} s'}"
            f"; stalled engine: {held}"), figures
