"""The served process gives a burst's memory back: it allocates with the system allocator (agent/hub/memory.py)
and trims free pages after domains go. The 100k-domain figure itself is bench/faults.py's row f."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.hub import memory
from tests.agent.served import Served

REPO = Path(__file__).resolve().parents[2]
glibc = pytest.mark.skipif(memory._libc() is None, reason="malloc_trim is glibc's")


def environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


@glibc
@pytest.mark.parametrize("preset", [None, "pymalloc"])
def test_serve_restarts_itself_with_the_system_allocator_unless_the_operator_chose_one(tmp_path, monkeypatch,
                                                                                      preset):
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    env = {} if preset is None else {"PYTHONMALLOC": preset}
    with Served(tmp_path, env=env) as s:
        # The same pid answers /healthz: the restart is an exec, so supervisors and signals still reach it.
        seen = environ(s.proc.pid)
        assert seen.get("PYTHONMALLOC") == (preset or "malloc")
        # glibc's mmap threshold fixed at 128 KiB with it (the operator's own choice of allocator: untouched)
        assert seen.get("MALLOC_MMAP_THRESHOLD_") == (None if preset else "131072")
        code, _ = s.stop()
    assert code == 0


TRIMMED = """
import sys
from agent.hub import memory
def rss():
    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS')) // 1024
keep = []
burst = [bytearray(200) for _ in range(600_000)]  # ~150 MB of small blocks
keep = burst[::4096]  # a few survivors scattered through the heap, as after a burst of domains
del burst
before = rss()
if sys.argv[1] == 'release':
    memory.release()
print(before, rss())
"""


@glibc
def test_release_hands_a_bursts_free_pages_back_to_the_system():
    def run(mode: str) -> tuple[int, int]:
        out = subprocess.run([sys.executable, "-c", TRIMMED, mode], cwd=REPO, capture_output=True, text=True,
                             env={**os.environ, "PYTHONMALLOC": "malloc"}, check=True).stdout.split()
        return int(out[0]), int(out[1])

    before, after = run("release")
    assert before - after > 50, (before, after)  # MB back to the system
    before, after = run("keep")  # without release the pages stay: the measure can tell the two apart
    assert before - after < 10, (before, after)


def test_a_command_run_in_process_never_replaces_its_caller(monkeypatch, tmp_path):
    """Only the console entry point restarts; typer's app invoked in-process (tests, embedding) must not."""
    from typer.testing import CliRunner

    from agent import cli

    calls = []
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    monkeypatch.setattr(os, "execve", lambda *a: calls.append(a))
    cli._register()
    result = CliRunner().invoke(cli.app, ["serve", "--db", "not a url"])
    assert result.exit_code != 0 and calls == []
    monkeypatch.setattr(sys, "argv", ["specwatch", "serve", "--db", "not a url"])
    with pytest.raises(SystemExit):
        cli.main()
    assert calls and calls[0][2]["PYTHONMALLOC"] == "malloc"  # the console entry point does restart
