"""Helpers of the transformers generate() tests: a real Sidecar with scripted decisions, a streamer that
counts what transformers' loop emits, a forward counter."""

from __future__ import annotations

import itertools

from transformers.generation.streamers import BaseStreamer

from agent.sidecar import Sidecar
from policies.base import Decision
from policies.registry import make


class Scripted(Sidecar):
    """A real Sidecar whose decisions follow a script (cycled) and whose in-step stop rule is ``stop``;
    ``asked`` keeps every K it handed out."""

    def __init__(self, store, script, stop=None):
        super().__init__(store, make("fixed:0"))
        self._script = itertools.cycle(script)
        self._stop = stop
        self.asked: list[int] = []

    def stop_drafting(self, domain: str):
        return self._stop

    def decide(self, domain: str) -> Decision:
        k = next(self._script)
        self.asked.append(k)
        return Decision(k, k > 0, "scripted", "scripted")


class Emitted(BaseStreamer):
    """Token counts of transformers' ``put`` calls: the prompt first, then each step's."""

    def __init__(self):
        self.puts: list[int] = []

    def put(self, value) -> None:
        self.puts.append(int(value.numel()))

    def end(self) -> None:
        pass


class Forwards:
    """Counts forward passes of a model until closed."""

    def __init__(self, model):
        self.count = 0
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.count += 1

    def close(self):
        self._handle.remove()
