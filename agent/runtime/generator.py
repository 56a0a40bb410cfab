"""In-process generation for POST /v1/generate: the wrapped SpeculativeDecoder, steered by the sidecar.

Before every step the sidecar decides K for the domain; every step's record goes through
``Sidecar.record`` as soon as the next step starts (so the policy learns within a request, as
``agent.decoding.steer`` does). One generation at a time: on CPU two would only halve each other's speed.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from agent.hub.sidecar import Sidecar
from agent.runtime.config import SidecarConfig


class ModelsUnavailable(RuntimeError):
    """No models configured, or still loading, or failed to load; the message says which."""


@dataclass
class Models:
    target: Any
    draft: Any
    target_version: str
    draft_version: str
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    eos_token_id: int | None


def check(config: SidecarConfig) -> None:
    """Cheap start-up checks of the configured models (files only); ModelsUnavailable says what is missing."""
    if config.kit is not None:
        from agent.kit import layout

        root = layout.kit_dir(config.kit)
        manifest = layout.read_manifest(root)
        if manifest is None or not manifest.get("complete"):
            raise ModelsUnavailable(f"kit: no complete {config.kit!r} model kit in {root}; build it with: "
                                    f"specwatch models build --size {config.kit}")
    for name in ("target_dir", "draft_dir"):
        path = getattr(config, name)
        if path is not None and not (Path(path) / "config.json").is_file():
            raise ModelsUnavailable(f"{name}: {path} is not a model folder (no config.json)")


def load(config: SidecarConfig) -> Models:
    """Load the kit's (or the folders') target and draft with their tokenizer."""
    from agent.decoding.versions import weights_version

    if config.kit is not None:
        from agent.kit import tokenizer
        from agent.kit.load import load_kit

        kit = load_kit(config.kit, device=config.device)
        return Models(kit.target_v1 if config.kit_target == "v1" else kit.target_v2, kit.draft,
                      kit.versions[f"target-{config.kit_target}"], kit.versions["draft"],
                      tokenizer.encode, tokenizer.decode, tokenizer.EOS_ID)
    if config.target_dir is None:
        raise ModelsUnavailable("no models configured (set kit, or target_dir and draft_dir)")
    from transformers import AutoTokenizer

    from agent.kit.load import load_model

    target = load_model(config.target_dir, config.device)
    draft = load_model(config.draft_dir, config.device)
    tok = AutoTokenizer.from_pretrained(config.target_dir)
    return Models(target, draft, weights_version(target), weights_version(draft),
                  lambda text: tok.encode(text, add_special_tokens=False),
                  lambda ids: tok.decode(ids, skip_special_tokens=True), tok.eos_token_id)


class Generator:
    """Holds the models (loaded by ``load_in_background`` or given) and runs one generation at a time."""

    def __init__(self, sidecar: Sidecar, models: Models | None = None):
        self.sidecar = sidecar
        self.models = models
        self.error: str | None = None
        self.loading = False
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.models is not None

    def load_in_background(self, loader: Callable[[], Models]) -> threading.Thread:
        """Load with ``loader`` on a daemon thread (the server answers /healthz meanwhile)."""
        self.loading = True

        def run() -> None:
            try:
                self.models = loader()
            except Exception as exc:
                self.error = f"loading models failed: {exc}"
            finally:
                self.loading = False

        thread = threading.Thread(target=run, name="specwatch-models", daemon=True)
        thread.start()
        return thread

    def generate(self, prompt: str, domain: str = "default", max_tokens: int = 64, *, temperature: float = 0.0,
                 top_k: int = 0, top_p: float = 1.0, seed: int | None = None,
                 request_id: str | None = None) -> dict[str, Any]:
        """Text of up to ``max_tokens`` new tokens after ``prompt`` and a summary of the steps.

        ValueError names a bad argument; ModelsUnavailable when there are no models (yet)."""
        m = self.models
        if m is None:
            raise ModelsUnavailable(self.error or ("models are still loading" if self.loading
                                                   else "no models configured (set kit, or target_dir and "
                                                        "draft_dir)"))
        from agent.decoding.decoder import SpeculativeDecoder  # torch: only where models are configured

        ids = m.encode(prompt)
        if not ids:
            raise ValueError("prompt: encodes to no tokens")
        from agent.decoding.steer import generate_with

        with self._lock:
            decoder = SpeculativeDecoder(m.target, m.draft, temperature=temperature, top_k=top_k, top_p=top_p,
                                         seed=seed, target_version=m.target_version,
                                         draft_version=m.draft_version)
            started = time.perf_counter()
            gen = generate_with(self.sidecar, decoder, ids, max_tokens, domain, eos_token_id=m.eos_token_id,
                                request_id=request_id)
            seconds = time.perf_counter() - started
        return summary(gen, m.decode(gen.tokens), domain, seconds, m)


def summary(gen, text: str, domain: str, seconds: float, m: Models) -> dict[str, Any]:
    steps = gen.steps
    drafted = sum(s.lookahead for s in steps)
    accepted = sum(s.accepted for s in steps)
    return {
        "text": text, "domain": domain, "tokens": len(gen.tokens), "steps": len(steps),
        "drafted": drafted, "accepted": accepted,
        "acceptance_rate": accepted / drafted if drafted else None,
        "tokens_per_step": len(gen.tokens) / len(steps) if steps else 0.0,
        "lookaheads": {str(k): n for k, n in sorted(Counter(s.lookahead for s in steps).items())},
        "seconds": seconds, "tokens_per_second": len(gen.tokens) / seconds if seconds > 0 else None,
        "target_version": m.target_version, "draft_version": m.draft_version,
    }
