"""Helpers of the transformers generate() tests: a real Sidecar with scripted decisions, a streamer that
counts what transformers' loop emits, a forward counter, a recorder of the tokens each forward is given."""

from __future__ import annotations

import itertools

from transformers.generation.streamers import BaseStreamer

from agent.hub.sidecar import Sidecar
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


def assert_streamed(steps, streamer: "Emitted", prompt_tokens: int, new_tokens: int) -> None:
    """The loop put the prompt, then each step's accepted tokens plus the target's token: the records'
    emitted and accepted counts are what it streamed, and add up to the new tokens."""
    assert streamer.puts[0] == prompt_tokens
    assert [s.emitted for s in steps] == streamer.puts[1:]
    assert [s.accepted for s in steps] == [n - 1 for n in streamer.puts[1:]]
    assert sum(s.emitted for s in steps) == new_tokens


def assert_capped(asked: list[int], steps, new_tokens: int) -> None:
    """One decision per step, and each step's lookahead is the K it was given, cut where the length budget
    ends (the last token is always the target's own)."""
    assert len(asked) == len(steps)
    done = 0
    for k, s in zip(asked, steps):
        assert s.lookahead == min(k, new_tokens - done - 1)
        done += s.emitted


class Forwards:
    """Counts forward passes of a model until closed."""

    def __init__(self, model):
        self.count = 0
        self._handle = model.register_forward_hook(self._hook)

    def _hook(self, *_):
        self.count += 1

    def close(self):
        self._handle.remove()


class Inputs:
    """The number of tokens each forward pass of a model is given, until closed."""

    def __init__(self, model):
        self.lengths: list[int] = []
        self._handle = model.register_forward_pre_hook(self._hook, with_kwargs=True)

    def _hook(self, module, args, kwargs):
        ids = kwargs["input_ids"] if kwargs.get("input_ids") is not None else args[0]
        self.lengths.append(int(ids.shape[-1]))

    def close(self):
        self._handle.remove()
