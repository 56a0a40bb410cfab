"""An exact speculative decoder over any pair of transformers causal LMs that share a vocabulary.

One step: the draft proposes up to K tokens one at a time (its KV cache grows by one token per
forward), the target scores all of them in ONE forward pass, the longest acceptable prefix is kept
and the target adds one token (the replacement at the first rejection, or the bonus token when all K
were accepted). Both KV caches are then cropped back to the kept prefix, never recomputed.

Sampling mode follows Leviathan et al. (arXiv 2211.17192) and Chen et al. (arXiv 2302.01318): a
drafted x is accepted with probability min(1, p(x)/q(x)); the replacement is drawn from
normalize(max(0, p - q)); the bonus token from p. The output is then distributed exactly as the
target's alone. Greedy mode (temperature 0) accepts while the drafted token equals the target's
argmax, so the output is identical to greedy decoding with the target alone.
"""

from __future__ import annotations

import functools
import inspect
import time
from dataclasses import dataclass, field
from typing import Callable

import torch

from agent.decoding import sampling
from agent.decoding.devices import resolve_device, resolve_dtype, synchronize
from agent.decoding.versions import weights_version
from specwatch_core.records import StepRecord


@dataclass(frozen=True, slots=True)
class StepContext:
    """What a lookahead callable sees before each step."""

    domain: str
    step: int  # index of the step about to run, from 0
    generated: int  # tokens emitted so far in this generation
    remaining: int  # tokens still allowed by max_new_tokens
    previous: StepRecord | None  # the last step's record, None before the first step


@dataclass(slots=True)
class Generation:
    tokens: list[int] = field(default_factory=list)  # new tokens only
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def acceptance_rate(self) -> float:
        """accepted / drafted over all steps (drafted counts every proposed token, as vLLM does)."""
        drafted = sum(s.lookahead for s in self.steps)
        return sum(s.accepted for s in self.steps) / drafted if drafted else 0.0


Lookahead = int | Callable[[StepContext], int]
StopDrafting = Callable[[float, int], bool]


class SpeculativeDecoder:
    """Wraps a target and a draft model; ``generate`` yields tokens and one StepRecord per step.

    ``device`` None keeps the models where they are; "auto" moves them to CUDA when present, else
    CPU. ``dtype`` None keeps their dtype. Versions default to a content hash of the weights.
    """

    def __init__(self, target, draft, *, temperature: float = 0.0, top_k: int = 0,
                 top_p: float = 1.0, seed: int | None = None, target_version: str | None = None,
                 draft_version: str | None = None, device: str | torch.device | None = None,
                 dtype: str | torch.dtype | None = None):
        self.params = sampling.SamplingParams(temperature, top_k, top_p)
        t_vocab, d_vocab = _vocab_size(target), _vocab_size(draft)
        if t_vocab != d_vocab:
            raise ValueError(f"draft: vocabulary size {d_vocab} differs from the target's {t_vocab}")
        self.device = resolve_device(device) if device is not None else model_device(target)
        if device is not None or dtype is not None:
            to = {"device": self.device}
            if dtype is not None:
                to["dtype"] = resolve_dtype(dtype, self.device)
            target, draft = target.to(**to), draft.to(**to)
        self.target, self.draft = target.eval(), draft.eval()
        self.target_version = target_version or weights_version(target)
        self.draft_version = draft_version or weights_version(draft)
        self.max_positions = min(max_positions(target), max_positions(draft))
        self._generator = torch.Generator(device=self.device)
        if seed is not None:
            self._generator.manual_seed(seed)
        else:
            self._generator.seed()

    # -- public ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def generate(self, input_ids, max_new_tokens: int, lookahead: Lookahead = 4,
                 domain: str = "default", *, stop_drafting: StopDrafting | None = None,
                 eos_token_id: int | None = None, pod: str | None = None,
                 request_id: str | None = None) -> Generation:
        """Generate up to ``max_new_tokens`` tokens after ``input_ids`` (list, 1-D or [1, n]).

        ``lookahead`` is an int or a callable asked before every step; 0 is a plain target step.
        ``stop_drafting(confidence, position)`` may end drafting early: it is asked after each
        drafted token (position from 1) with the draft's probability of that token; the token is
        kept and verified, and no further tokens are drafted in that step.
        """
        ids = _as_list(input_ids)
        if not ids:
            raise ValueError("input_ids: at least one prompt token is required")
        if max_new_tokens < 1:
            raise ValueError(f"max_new_tokens: must be >= 1, got {max_new_tokens}")
        if len(ids) + max_new_tokens > self.max_positions:
            raise ValueError(f"max_new_tokens: prompt ({len(ids)}) + {max_new_tokens} exceeds the "
                             f"models' {self.max_positions} positions")
        state = _State(ids)
        out = Generation()
        while len(out.tokens) < max_new_tokens:
            remaining = max_new_tokens - len(out.tokens)
            k = lookahead if isinstance(lookahead, int) else lookahead(StepContext(
                domain, len(out.steps), len(out.tokens), remaining, out.steps[-1] if out.steps else None))
            if not isinstance(k, int) or k < 0:
                raise ValueError(f"lookahead: must be an integer >= 0, got {k!r}")
            # Drafting past the budget is wasted work: K accepted tokens plus one always fit.
            k = min(k, remaining - 1)
            record, new = self._step(state, k, domain, stop_drafting)
            record.pod, record.request_id = pod, request_id
            out.steps.append(record)
            if eos_token_id is not None and eos_token_id in new:
                out.tokens.extend(new[: new.index(eos_token_id) + 1])
                break
            out.tokens.extend(new)
        return out

    # -- one step -------------------------------------------------------------------------------
    def _step(self, state: "_State", k: int, domain: str,
              stop: StopDrafting | None) -> tuple[StepRecord, list[int]]:
        synchronize(self.device)
        t0 = time.perf_counter()
        drafted, q_rows, confidence = self._draft(state, k, stop)
        synchronize(self.device)
        t1 = time.perf_counter()
        p_rows = self._verify_logits(state, drafted)
        accepted, token, expected = self._accept(drafted, p_rows, q_rows)
        new = drafted[:accepted] + [token]
        state.ids.extend(new)
        # Keep only the KV entries of tokens that stay; the new token is fed at the next step.
        keep = len(state.ids) - 1
        state.target_len = crop(state.target_cache, min(state.target_len, keep))
        state.draft_len = crop(state.draft_cache, min(state.draft_len, keep))
        synchronize(self.device)
        t2 = time.perf_counter()
        n = len(drafted)
        record = StepRecord(
            domain=domain, lookahead=n, accepted=accepted, emitted=accepted + 1,
            draft_seconds=t1 - t0, verify_seconds=t2 - t1,
            target_version=self.target_version, draft_version=self.draft_version,
            accepted_mask=[1] * accepted + [0] * (n - accepted),
            expected_acceptance=expected, draft_confidence=confidence, timestamp=time.time())
        return record, new

    def _draft(self, state: "_State", k: int, stop: StopDrafting | None):
        drafted: list[int] = []
        q_rows: list[torch.Tensor] = []
        confidence: list[float] = []
        if k == 0:
            return drafted, q_rows, confidence
        feed = state.ids[state.draft_len:]
        for position in range(1, k + 1):
            logits, state.draft_cache = forward(self.draft, feed, state.draft_cache, 1)
            state.draft_len += len(feed)
            q = sampling.probabilities(logits[0, -1], self.params)
            if self.params.greedy:
                token = int(torch.argmax(logits[0, -1]))
            else:
                token = int(torch.multinomial(q, 1, generator=self._generator))
            drafted.append(token)
            q_rows.append(q)
            conf = float(q[token])
            confidence.append(min(max(conf, 0.0), 1.0))
            if position < k and stop is not None and stop(conf, position):
                break
            feed = [token]
        return drafted, q_rows, confidence

    def _verify_logits(self, state: "_State", drafted: list[int]) -> torch.Tensor:
        """Target logits for positions 1..K+1 of the step, from one forward pass."""
        feed = state.ids[state.target_len:] + drafted
        logits, state.target_cache = forward(self.target, feed, state.target_cache, len(drafted) + 1)
        state.target_len += len(feed)
        return logits[0, -(len(drafted) + 1):]

    def _accept(self, drafted: list[int], p_logits: torch.Tensor, q_rows: list[torch.Tensor]):
        """Length of the accepted prefix, the token the target adds, and per-position sum min(p, q)."""
        p = sampling.probabilities(p_logits, self.params)
        n = len(drafted)
        expected: list[float] = []
        if n:
            q = torch.stack(q_rows)
            expected = [min(max(v, 0.0), 1.0) for v in sampling.overlap(p[:n], q).tolist()]
        if self.params.greedy:
            target_choice = torch.argmax(p_logits, dim=-1).tolist()
            accepted = 0
            while accepted < n and drafted[accepted] == target_choice[accepted]:
                accepted += 1
            return accepted, target_choice[accepted], expected
        accepted = n
        if n:
            index = torch.tensor(drafted, device=p.device).unsqueeze(1)
            p_x, q_x = p[:n].gather(1, index).squeeze(1), q.gather(1, index).squeeze(1)
            u = torch.rand(n, generator=self._generator, device=p.device, dtype=p.dtype)
            rejected = (u * q_x >= p_x).nonzero()  # u < p/q accepts; written without a division
            if len(rejected):
                accepted = int(rejected[0, 0])
                dist = self._residual(p[accepted], q[accepted])
                return accepted, int(torch.multinomial(dist, 1, generator=self._generator)), expected
        return accepted, int(torch.multinomial(p[n], 1, generator=self._generator)), expected

    def _residual(self, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return sampling.residual(p, q)


class _State:
    """One generation's token ids and how many of them each model's KV cache holds."""

    __slots__ = ("ids", "target_cache", "draft_cache", "target_len", "draft_len")

    def __init__(self, ids: list[int]):
        self.ids = list(ids)
        self.target_cache = self.draft_cache = None
        self.target_len = self.draft_len = 0


def forward(model, feed: list[int], cache, keep: int):
    """Run ``feed`` on top of ``cache``; return logits of the last ``keep`` positions and the cache."""
    input_ids = torch.tensor([feed], dtype=torch.long, device=model.device)
    name = cache_argument(model)
    kwargs = {name: cache, "use_cache": True}
    if _has_parameter(type(model), "forward", "logits_to_keep"):
        kwargs["logits_to_keep"] = keep
    out = model(input_ids=input_ids, **kwargs)
    return out.logits, getattr(out, name)


def cache_argument(model) -> str:
    """The name the model's forward takes (and its output returns) the KV cache by: ``cache`` in current
    transformers, where the older ``past_key_values`` still works but warns on every call; that one elsewhere
    (transformers 4.x, a wrapper with the old signature)."""
    return "cache" if _has_parameter(type(model), "forward", "cache") else "past_key_values"


@functools.cache
def _has_parameter(kind: type, method: str, name: str) -> bool:
    return name in inspect.signature(getattr(kind, method)).parameters


def crop(cache, length: int) -> int:
    """Drop cache entries beyond ``length`` tokens; returns the new length."""
    if cache is None:
        return 0
    current = cache.get_seq_length()
    if current > length:
        # A negative argument removes that many tokens in both transformers 4.x and 5.
        cache.crop(length - current)
    return min(current, length)


def _as_list(input_ids) -> list[int]:
    if isinstance(input_ids, torch.Tensor):
        if input_ids.dim() == 2:
            if input_ids.shape[0] != 1:
                raise ValueError("input_ids: one sequence at a time (batch size 1)")
            input_ids = input_ids[0]
        return [int(t) for t in input_ids.tolist()]
    return [int(t) for t in input_ids]


def _vocab_size(model) -> int:
    return model.get_output_embeddings().weight.shape[0]


def model_device(model) -> torch.device:
    """The device of the model's weights."""
    return next(model.parameters()).device


def max_positions(model) -> int:
    """Positions the model can attend over (from its config; unbounded when the config names none)."""
    config = model.config
    for name in ("max_position_embeddings", "n_positions"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            return value
    return 1 << 30
