"""What the proxy rows of bench/faults.py run against: ``specwatch proxy`` as a process of its own (from this
checkout or another one, for before/after figures), stand-in llama.cpp engines (bench/slow_upstream.py) as
processes that can be killed, clients that count what they got, and the steps a run left in the database and
in the dead-letter file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from fault_server import CLI, REPO, free_port

BENCH = Path(__file__).resolve().parent


class Engine:
    """bench/slow_upstream.py on a free port: ``gap`` seconds per token."""

    def __init__(self, gap: float, log: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen([sys.executable, str(BENCH / "slow_upstream.py"), str(self.port), str(gap)],
                                     stdout=open(log, "ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"stand-in engine on {self.port} did not start")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Proxy:
    """``specwatch proxy`` from ``repo`` in front of ``pools`` (name: URL) with ``db``; options as flags."""

    def __init__(self, repo: Path, pools: dict[str, str], db: str, tmp: Path, args: tuple[str, ...] = (),
                 env: dict[str, str] | None = None):
        self.port, self.admin_port = free_port(), free_port()
        self.url, self.admin = f"http://127.0.0.1:{self.port}", f"http://127.0.0.1:{self.admin_port}"
        self.home = tmp / f"home-{self.port}"  # the dead-letter file of a server database: one per process
        self.log = tmp / f"proxy-{self.port}.log"
        ups = [a for name, url in pools.items() for a in ("--upstream", f"{name}={url}")]
        self.argv = [*CLI, "proxy", *ups, "--db", db, "--port", str(self.port), "--admin-port",
                     str(self.admin_port), *args]
        self.env = {**os.environ, "SPECWATCH_POD": "fault", "SPECWATCH_HOME": str(self.home),
                    "PYTHONPATH": str(repo), **(env or {})}
        self.repo = repo
        self.proc: subprocess.Popen | None = None
        self.launched = 0.0

    def launch(self) -> "Proxy":
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv, cwd=self.repo, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.launched = time.monotonic()
        return self

    def start(self, timeout: float = 120.0) -> "Proxy":
        """Launch and wait for /health 200."""
        self.launch()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if httpx.get(self.url + "/health", timeout=1.0).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"specwatch proxy did not start: {self.output()[-1500:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 90.0) -> tuple[int | None, float]:
        """Send ``sig``; (exit code, seconds until exit), code None if it did not exit in ``timeout``."""
        t0 = time.monotonic()
        if self.proc.poll() is not None:
            return self.proc.returncode, 0.0
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout), time.monotonic() - t0
        except subprocess.TimeoutExpired:
            self.kill()
            return None, timeout

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def metric(self, name: str) -> float | None:
        """A metric of the admin listener's /metrics (summed over its series); None if absent."""
        try:
            text = httpx.get(self.admin + "/metrics", timeout=5.0).text
        except httpx.HTTPError:
            return None
        found = [float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                 if line.startswith(name) and line[len(name):len(name) + 1] in (" ", "{")]
        return sum(found) if found else None

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def dead_letter(self, db: str) -> Path:
        """The dead-letter file the store writes for ``db`` (docs/durability.md)."""
        return Path(db.removeprefix("sqlite:///") + ".dead-letter.jsonl") if db.startswith("sqlite") \
            else self.home / "dead-letter.jsonl"

    def dead_lettered_steps(self, db: str) -> int:
        path = self.dead_letter(db)
        if not path.exists():
            return 0
        return sum(int(json.loads(line).get("steps", 0)) for line in path.read_text().splitlines() if line.strip())

    def replay(self, db: str, into: str | None = None) -> str:
        """`specwatch db replay` (this checkout's) of the dead-letter file into ``into`` (default ``db``), as an
        operator would once the database answers; its output line ("" when there is no file)."""
        path = self.dead_letter(db)
        if not path.exists():
            return ""
        out = subprocess.run([*CLI, "db", "replay", str(path), "--db", into or db], cwd=REPO, capture_output=True,
                             text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
        return (out.stdout or out.stderr).strip()


@dataclass
class Outcome:
    """What one client request got."""

    status: int | str  # HTTP status, or the transport error's name
    started: float
    seconds: float
    complete: bool = False  # the whole answer arrived (a stream: its [DONE])
    pool: str = ""


@dataclass
class Clients:
    """Requests run on threads, every outcome kept."""

    url: str
    outcomes: list[Outcome] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def one(self, tokens: int, stream: bool = False, domain: str | bytes | None = None,
            timeout: float = 120.0) -> Outcome:
        body = {"prompt": "hello", "max_tokens": tokens, "stream": stream}
        headers = {"X-Specwatch-Domain": domain} if domain is not None else {}
        t0 = time.monotonic()
        try:
            with httpx.stream("POST", self.url + "/v1/completions", json=body, headers=headers,
                              timeout=timeout) as answer:
                text = b"".join(answer.iter_bytes())
                done = answer.status_code == 200 and (not stream or b"[DONE]" in text)
                out = Outcome(answer.status_code, t0, time.monotonic() - t0, done,
                              answer.headers.get("x-specwatch-pool", ""))
        except httpx.HTTPError as exc:
            out = Outcome(type(exc).__name__, t0, time.monotonic() - t0)
        with self._lock:
            self.outcomes.append(out)
        return out

    def background(self, n: int, tokens: int, stream: bool = False) -> list[threading.Thread]:
        threads = [threading.Thread(target=self.one, args=(tokens, stream), daemon=True) for _ in range(n)]
        for t in threads:
            t.start()
        return threads

    def loop(self, seconds: float, every: float, tokens: int = 4, workers: int = 1) -> None:
        """``workers`` threads each sending a request, then waiting ``every`` seconds, for ``seconds``."""
        end = time.monotonic() + seconds

        def work() -> None:
            while time.monotonic() < end:
                self.one(tokens, timeout=30.0)
                time.sleep(every)

        threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 60)

    def statuses(self, since: float = 0.0) -> dict[str, int]:
        out: dict[str, int] = {}
        for o in self.outcomes:
            if o.started >= since:
                out[str(o.status)] = out.get(str(o.status), 0) + 1
        return out

    @property
    def completed(self) -> int:
        return sum(1 for o in self.outcomes if o.complete)


def stop_message(log: str) -> str:
    """The proxy's last log lines about its shutdown (what it told the operator)."""
    keys = ("shut down", "drain", "cut", "dead-letter", "lost", "cancel ")
    lines = [line.split(": ", 1)[-1].strip() for line in log.splitlines()
             if any(k in line.lower() for k in keys) and "during shutdown" not in line]
    return " | ".join(lines[-3:])[:400]

