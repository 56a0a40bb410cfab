"""What bench/faults.py runs its rows against: a real ``specwatch serve`` subprocess on SQLite or on the
local PostgreSQL (a fresh schema per run), its RSS, records to post, the stored count read back with
``specwatch stats``, and a loopback TCP proxy that can black-hole the database (accepts, never answers)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from agent.cli import main; main()"]
PG = "postgresql+psycopg://postgres@127.0.0.1:{port}/test"
START_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Backend:
    """A database for one row: ``sqlite`` (a file in ``tmp``) or ``postgresql`` (schema ``fault_<hex>``
    created here, dropped by ``drop``). ``url(port)`` reaches PostgreSQL through another port (the proxy)."""

    def __init__(self, kind: str, tmp: Path, password: str | None = None):
        self.kind, self.schema = kind, f"fault_{uuid.uuid4().hex[:10]}"
        self.file = tmp / f"{self.schema}.db"
        self.password = password
        if kind == "postgresql":
            self._admin("CREATE SCHEMA {}")

    def url(self, port: int = 5432) -> str:
        if self.kind == "sqlite":
            return f"sqlite:///{self.file}"
        auth = f"postgres:{self.password}" if self.password else "postgres"
        return f"postgresql+psycopg://{auth}@127.0.0.1:{port}/test?options=-csearch_path%3D{self.schema}"

    def drop(self) -> None:
        if self.kind == "postgresql":
            self._admin("DROP SCHEMA IF EXISTS {} CASCADE")
        else:
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(f"{self.file}{suffix}").unlink(missing_ok=True)

    def _admin(self, sql: str) -> None:
        import sqlalchemy as sa

        engine = sa.create_engine(PG.format(port=5432))
        with engine.begin() as conn:
            conn.execute(sa.text(sql.format(self.schema)))
        engine.dispose()


class Server:
    """``specwatch serve`` on a free port with ``db``; ``env`` adds SPECWATCH_* options."""

    def __init__(self, db: str, tmp: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()):
        self.db, self.port = db, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        self.env = {**os.environ, "SPECWATCH_DB": db, "SPECWATCH_PORT": str(self.port), "SPECWATCH_POD": "fault",
                    "SPECWATCH_HOME": os.environ.get("SPECWATCH_HOME", str(Path.home() / ".cache" / "specwatch")),
                    "PYTHONPATH": str(REPO), **(env or {})}
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.client = httpx.Client(base_url=self.url, timeout=30.0)
        self.started = 0.0

    def start(self) -> "Server":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([*CLI, "serve", *self.args], cwd=REPO, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"specwatch serve exited with {self.proc.returncode}: {self.output()[-2000:]}")
            try:
                if self.client.get("/healthz", timeout=2.0).status_code == 200:
                    self.started = time.monotonic()
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"specwatch serve did not answer /healthz in {START_TIMEOUT} s")

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()
        self.client.close()

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> tuple[int | None, float]:
        """Send ``sig``; (exit code, seconds until exit), code None if it did not exit in ``timeout``."""
        t0 = time.monotonic()
        self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None, timeout
        return code, time.monotonic() - t0

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def record(domain: str = "fault", ts: float | None = None, k: int = 4, accepted: int = 2, **extra) -> dict:
    """One StepRecord as JSON (timed, so every branch takes it)."""
    out = {"domain": domain, "lookahead": k, "accepted": accepted, "emitted": accepted + 1,
           "draft_seconds": 0.002 * k, "verify_seconds": 0.02, "target_version": "t1", "draft_version": "d1",
           "timestamp": time.time() if ts is None else ts}
    out.update(extra)
    return out


def stored(db: str, env: dict[str, str] | None = None) -> int:
    """Steps the database shows for all history, read with ``specwatch stats`` (as an operator would)."""
    args = [*CLI, "stats", "--db", db, "--format", "json"]  # the defaults an operator would type
    out = subprocess.run(args, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"specwatch stats failed: {out.stderr.strip()[-500:]}")
    rows = json.loads(out.stdout or "[]")
    return int(sum(r.get("steps", 0) for r in rows))


def in_db(db: str) -> int:
    """Steps that reached the database, for counting loss apart from visibility: the largest count among
    the window tier, the minute tier and the planner's own answer (each tier alone may lag or be pruned).
    0 when there is no schema yet."""
    if sys.path[0] != str(REPO):  # bench/storage.py must not shadow the storage package
        sys.path.insert(0, str(REPO))
    from storage import StatsQuery, Store, StoreError

    try:
        store = Store.open(db, migrate_schema=False)
    except StoreError:
        return 0
    try:
        counts = [sum(r["steps"] or 0 for r in store.stats(StatsQuery(by=("domain",), tier=tier)).rows)
                  for tier in ("window", "minute", None)]
    finally:
        store.db.dispose()
    return int(max(counts))


def count(db: str) -> tuple[int, int]:
    """(stored, shown by stats): the larger of ``in_db`` and ``stored`` (read right after a process exits,
    either alone has been seen to lag on this machine; both are reported), and what ``specwatch stats``
    shows."""
    shown = stored(db)
    return max(shown, in_db(db)), shown


class Poster(threading.Thread):
    """Posts ``rate`` records/s in batches of ``batch`` until stopped; counts acked records."""

    def __init__(self, url: str, rate: float, batch: int = 100, domain: str = "fault"):
        super().__init__(daemon=True)
        self.client = httpx.Client(base_url=url, timeout=10.0)
        self.rate, self.batch, self.domain = rate, batch, domain
        self.acked = self.posted = self.failed = 0
        self.latencies: list[float] = []
        self.sent: list[tuple[float, float]] = []  # (monotonic start, latency) per POST
        self.statuses: dict[int, int] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        start = time.monotonic()
        while not self._halt.is_set():
            body = {"records": [record(self.domain) for _ in range(self.batch)]}
            self.posted += self.batch
            t0 = time.monotonic()
            try:
                r = self.client.post("/v1/steps", json=body)
                self.statuses[r.status_code] = self.statuses.get(r.status_code, 0) + 1
                if r.status_code == 202:
                    self.acked += self.batch
            except httpx.HTTPError:
                self.failed += 1
            self.latencies.append(time.monotonic() - t0)
            self.sent.append((t0, self.latencies[-1]))
            due = start + self.posted / self.rate
            self._halt.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        self._halt.set()
        self.join(15.0)


class BlackHole:
    """A loopback TCP proxy to ``upstream``. While ``hole`` is set, nothing passes either way: new
    connections are accepted and left unanswered, bytes on open ones are held (a partition, packets
    dropped and not refused; TCP delivers them once it heals, so they are delivered when ``hole`` clears)."""

    def __init__(self, upstream: int):
        self.upstream = upstream
        self.hole = threading.Event()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self._held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            self._held.append(client)
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        self._wait()
        try:
            up = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            client.close()
            return
        self._held.append(up)
        for a, b in ((client, up), (up, client)):
            threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _wait(self) -> None:
        while self.hole.is_set():
            time.sleep(0.05)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                self._wait()
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        self.hole.clear()
        self.sock.close()
        for s in self._held:
            try:
                s.close()
            except OSError:
                pass
