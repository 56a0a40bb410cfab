"""The real model's pools for the drift story: llama-server processes on the prepared model (SmolLM2-135M, as
``make real`` installs it), each loading target v2's LoRA adapter switched off, so the target update is one
``POST /lora-adapters`` per server at an instant the caller records (the proxy reads the new target version off
``/props`` + ``/lora-adapters`` at its next health check, agent/proxy/versions.py).

Pools (the proxy's names): ``off`` (no speculation), ``k3`` (the distilled draft, draft-simple, K = 3: llama.cpp's
default draft length) and ``k8`` (n-gram self-speculation, ngram-mod capped at 8). One thread each: the machine
has 2 shared cores. The draft pool serves the draft from a fixed path in the work folder (``draft.gguf``), which
the proxy is told is its draft version (``--draft-version k3=PATH``: it hashes the file), so a re-distilled draft
copied there and its server restarted on the same port is a new draft version the proxy sees by itself.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import httpx

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, free_port

# name: (speculation, lookahead); names are the proxy's pool names (kN: at most N drafted per step)
POOLS = {"off": ("draft", 0), "k3": ("draft", 3), "k8": ("ngram-mod", 8)}
DRAFT_POOL = "k3"
DRAFT_FILE = "draft.gguf"


class RealPools:
    """The pools of one run on ``model`` (a Prepared with a draft and target v2's adapter), logs and the draft
    copy under ``work``. ``pools``: names of POOLS to start (default all)."""

    def __init__(self, model, work: Path, pools: tuple[str, ...] = tuple(POOLS), threads: int = 1,
                 ctx_size: int = 2048):
        if model.draft_gguf is None:
            raise FileNotFoundError("the distilled draft is not installed: run specwatch models pretrained")
        if model.lora_gguf is None or not Path(model.lora_gguf).is_file():
            raise FileNotFoundError("target v2's adapter is not installed: run specwatch models pretrained "
                                    "--lora-v2 (make real)")
        unknown = [p for p in pools if p not in POOLS]
        if unknown:
            raise ValueError(f"pools: expected some of {', '.join(POOLS)}, got {unknown[0]!r}")
        self.model, self.work = model, Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.draft_path = self.work / DRAFT_FILE
        shutil.copyfile(model.draft_gguf, self.draft_path)
        # the adapter copied too: a retrained one written over the installed file mid-run is not this run's v2
        self.lora_path = self.work / Path(model.lora_gguf).name
        shutil.copyfile(model.lora_gguf, self.lora_path)
        self.configs = {name: self._config(name, threads, ctx_size) for name in pools}
        self.servers: dict[str, LlamaServer] = {}
        self.scale = 0.0

    def _config(self, name: str, threads: int, ctx_size: int) -> LlamaServerConfig:
        kind, k = POOLS[name]
        return LlamaServerConfig(model=self.model.target_gguf, draft=self.draft_path if kind == "draft" and k else None,
                                 speculation=kind, lookahead=k, threads=threads, ctx_size=ctx_size, metrics=True,
                                 lora=self.lora_path, lora_scale=0.0, port=free_port())

    def start(self) -> "RealPools":
        try:
            for name, config in self.configs.items():
                self.servers[name] = LlamaServer(config, log_path=self.work / f"{name}.log").start()
        except BaseException:
            self.stop()  # the ones already up
            raise
        return self

    def urls(self) -> dict[str, str]:
        return {name: s.base_url for name, s in self.servers.items()}

    def proxy_options(self) -> tuple[str, ...]:
        """`specwatch proxy` options these pools need besides their URLs: the draft pool's draft version."""
        return ("--draft-version", f"{DRAFT_POOL}={self.draft_path}") if DRAFT_POOL in self.configs else ()

    def set_adapter(self, scale: float) -> float:
        """Switch every server's adapter to ``scale`` (1: target v2, 0: v1); returns the unix time when the
        last server took it (the update's instant). llama.cpp applies it from the next batch on."""
        with httpx.Client(timeout=10.0) as client:
            for s in self.servers.values():
                client.post(s.base_url + "/lora-adapters", json=[{"id": 0, "scale": scale}]).raise_for_status()
        self.scale = scale
        return time.time()

    def replace_draft(self, gguf: Path) -> float:
        """Serve ``gguf`` as the draft: copied over the draft path, the draft pool's server restarted on its port
        with the adapter at the current scale. Returns seconds taken (the pool is out of rotation meanwhile;
        the proxy sends its requests to the others)."""
        began = time.perf_counter()
        tmp = self.draft_path.with_suffix(".tmp")
        shutil.copyfile(gguf, tmp)
        old = self.servers.pop(DRAFT_POOL)
        old.stop()
        tmp.replace(self.draft_path)
        # started at the scale now in force: never a moment of the old target behind the proxy
        config = replace(self.configs[DRAFT_POOL], lora_scale=self.scale)
        self.servers[DRAFT_POOL] = LlamaServer(config, log_path=self.work / f"{DRAFT_POOL}.log").start()
        return time.perf_counter() - began

    def stop(self) -> None:
        for s in self.servers.values():
            s.stop()
        self.servers.clear()

    def __enter__(self) -> "RealPools":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
