"""A real `specwatch serve` process on a free loopback port, for end-to-end tests."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from specwatch_core.records import StepRecord

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from agent.cli import main; main()"]
START_TIMEOUT = 120.0  # imports on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """``with Served(tmp_path, env={...}) as s:`` starts the sidecar and waits for /healthz; ``s.stop()``
    sends a signal and returns (exit code, seconds until exit)."""

    def __init__(self, tmp_path: Path, env: dict[str, str] | None = None, args: tuple[str, ...] = ()):
        self.db = f"sqlite:///{tmp_path / 'served.db'}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp_path / "serve.log"
        self.env = {**os.environ, "SPECWATCH_DB": self.db, "SPECWATCH_PORT": str(self.port),
                    "SPECWATCH_POD": "e2e", "SPECWATCH_HOME": str(tmp_path / "home"), **(env or {})}
        self.args = args
        self.proc: subprocess.Popen | None = None
        self.client = httpx.Client(base_url=self.url, timeout=30.0)

    def __enter__(self) -> "Served":
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([*CLI, "serve", *self.args], cwd=REPO, env=self.env, stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"specwatch serve exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if self.client.get("/healthz").status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.proc.kill()
        raise RuntimeError(f"specwatch serve did not answer /healthz in {START_TIMEOUT} s:\n{self.output()}")

    def __exit__(self, *exc) -> None:
        self.client.close()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30.0) -> tuple[int, float]:
        started = time.monotonic()
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        return code, time.monotonic() - started

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def cli(self, *args: str) -> list[dict]:
        """Run a query command of the CLI on this sidecar's database; its JSON output."""
        done = subprocess.run([*CLI, *args, "--db", self.db, "--format", "json"], cwd=REPO, env=self.env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


def tiny_model_dirs(root: Path) -> tuple[Path, Path]:
    """A random-weight byte-level target and a slightly perturbed draft, saved with the kit's tokenizer."""
    from agent.kit.tokenizer import VOCAB_SIZE, save_tokenizer
    from tiny_models import llama, perturbed

    target = llama(vocab=VOCAB_SIZE, seed=3)
    for name, model in (("target", target), ("draft", perturbed(target, 0.05))):
        model.save_pretrained(root / name)
        save_tokenizer(root / name)
    return root / "target", root / "draft"


def random_records(n: int, seed: int, domains=("code", "chat", "prose"), now: float | None = None) -> list[dict]:
    """Valid records as JSON objects: K in 0..8, consistent masks, some optional fields left out."""
    rng = random.Random(seed)
    now = time.time() if now is None else now
    out = []
    for _ in range(n):
        k = rng.choice((0, 1, 2, 4, 4, 6, 8))
        a = 0
        while a < k and rng.random() < 0.7:
            a += 1
        r = StepRecord(domain=rng.choice(domains), lookahead=k, accepted=a, emitted=a + 1,
                       draft_seconds=round(0.001 * k * rng.random(), 6), verify_seconds=round(0.01 * rng.random(), 6),
                       target_version="t1", draft_version="d1", accepted_mask=[1] * a + [0] * (k - a),
                       expected_acceptance=[round(rng.random(), 3) for _ in range(k)] if rng.random() < 0.5 else None,
                       timestamp=now - rng.random() * 5 if rng.random() < 0.8 else None,
                       request_id=f"r{rng.randrange(1000)}" if rng.random() < 0.3 else None)
        out.append(r.to_dict())
    return out
