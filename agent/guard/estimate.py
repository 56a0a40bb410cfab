"""Expected acceptance of a draft against a target, per domain, without speculative decoding.

Where it is measured matters more than how. Live acceptance is counted on the path the *serving* target
takes: in greedy mode every verified position has the target's own greedy tokens before it. Teacher-forcing
on the sampled text itself (the prompt, or the prompt plus the current target's output) scores other
positions, and misses by up to 0.23 on the kit's logs domain after the v1 -> v2 update, where v2 writes a
new log schema that v1's text never shows (docs/guard.md has the table). So the new target continues each
prompt by ``new_tokens`` tokens (greedy, or sampled at the serving temperature), batched with a KV cache:
one prefill pass and one single-token pass per new token for a whole batch of prompts, no draft in the
loop. The draft then scores the prompt plus that continuation in one forward pass per batch.

At each continuation position, with p the target's and q the draft's distribution (both through
agent/decoding/sampling.py's ``probabilities``, as the decoder processes them), the expected acceptance is:
greedy, [argmax q == argmax p] (the drafted token is the draft's argmax, accepted iff it is the target's);
sampling, sum_x min(p(x), q(x)) (a token drawn from q is accepted with probability min(1, p/q)). Its mean
over positions is the per-token acceptance a live run counts over the positions it verifies (up to and
including the first rejection of each step), which is also what the store's per-position counts give.
``overlap`` is sum_x min(p, q) of the untempered distributions in either mode, the decoder's
``expected_acceptance`` signal.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from transformers import StaticCache

from agent.decoding import sampling
from agent.decoding.decoder import cache_argument, max_positions, model_device


@dataclass(frozen=True)
class Estimate:
    """Sums over a domain's scored positions (sums, so domains and runs add up without averaging averages)."""

    prompts: int
    positions: int
    accepted: float  # sum of the expected acceptance per position
    overlap: float  # sum of sum_x min(p, q) at temperature 1

    @property
    def acceptance(self) -> float:
        return self.accepted / self.positions if self.positions else 0.0


def estimate(target, draft, prompts: dict[str, list[list[int]]], *, new_tokens: int = 64,
             params: sampling.SamplingParams | None = None, batch_size: int = 64, seed: int = 0,
             pad_id: int = 0) -> dict[str, Estimate]:
    """Per domain, the draft's expected acceptance on the target's continuations of ``prompts``.

    A prompt longer than the models' positions less ``new_tokens`` keeps its tail (as the live sampler
    does). Prompts of every domain are batched together by length, so a batch pads little and few are small.
    """
    params = params or sampling.SamplingParams()
    positions = min(max_positions(target), max_positions(draft))
    if not 1 <= new_tokens < positions:
        raise ValueError(f"new_tokens: must be in 1..{positions - 1} (the models' positions), got {new_tokens}")
    if batch_size < 1:
        raise ValueError(f"batch_size: must be >= 1, got {batch_size}")
    generator = torch.Generator(device=model_device(target)).manual_seed(seed)
    rows = sorted(((domain, ids[-(positions - new_tokens):]) for domain, items in prompts.items()
                   for ids in items if ids), key=lambda row: len(row[1]))
    sums = {domain: [0, 0, 0.0, 0.0] for domain in prompts}
    for start in range(0, len(rows), batch_size):
        batch = rows[start:start + batch_size]
        accept, overlap = score_batch(target, draft, [ids for _, ids in batch], new_tokens, params, generator,
                                      pad_id)
        for (domain, _), a, o in zip(batch, accept.sum(-1).tolist(), overlap.sum(-1).tolist()):
            total = sums[domain]
            total[0] += 1
            total[1] += new_tokens
            total[2] += a
            total[3] += o
    return {domain: Estimate(*total) for domain, total in sums.items() if total[0]}


@torch.inference_mode()
def score_batch(target, draft, prompts: list[list[int]], new_tokens: int, params: sampling.SamplingParams,
                generator: torch.Generator | None = None, pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Expected acceptance and overlap at each of ``new_tokens`` continuation positions, shape
    [len(prompts), new_tokens]. Prompts are left-padded; positions count from each prompt's first token."""
    device = model_device(target)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad_id, dtype=torch.long, device=device)
    mask = torch.zeros_like(ids)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt, device=device)
        mask[row, width - len(prompt):] = 1
    p_logits, tokens = _continue(target, ids, mask, new_tokens, params, generator)
    full = torch.cat([ids, tokens], dim=1)[:, :-1]
    full_mask = torch.cat([mask, torch.ones_like(tokens)], dim=1)[:, :-1]
    q_logits = draft(input_ids=full.to(model_device(draft)), attention_mask=full_mask.to(model_device(draft)),
                     position_ids=_positions(full_mask).to(model_device(draft)),
                     use_cache=False).logits[:, width - 1:].to(device)
    p, q = sampling.probabilities(p_logits, params), sampling.probabilities(q_logits, params)
    if params.greedy:
        accept = (q_logits.argmax(-1) == tokens).to(p.dtype)
    else:
        accept = sampling.overlap(p, q)
    plain = sampling.SamplingParams()
    overlap = sampling.overlap(sampling.probabilities(p_logits, plain), sampling.probabilities(q_logits, plain))
    return accept.clamp(0.0, 1.0), overlap.clamp(0.0, 1.0)


def _continue(target, ids: torch.Tensor, mask: torch.Tensor, n: int, params: sampling.SamplingParams,
              generator: torch.Generator | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's logits at, and tokens of, ``n`` new positions after each row ([B, n, V], [B, n])."""
    positions = _positions(mask)
    width = ids.shape[1]
    cache = _static_cache(target, ids.shape[0], width + n)
    kv = cache_argument(target)
    out = target(input_ids=ids, attention_mask=mask, position_ids=positions, **{kv: cache},
                 cache_position=torch.arange(width, device=ids.device), use_cache=True)
    logits, tokens = [], []
    for step in range(n):
        last = out.logits[:, -1]
        if params.greedy:
            token = last.argmax(-1)
        else:
            token = torch.multinomial(sampling.probabilities(last, params), 1, generator=generator).squeeze(1)
        logits.append(last)
        tokens.append(token)
        if step == n - 1:
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        positions = positions[:, -1:] + 1
        out = target(input_ids=token.unsqueeze(1), attention_mask=mask, position_ids=positions,
                     **{kv: cache}, cache_position=torch.tensor([width + step], device=ids.device),
                     use_cache=True)
    return torch.stack(logits, dim=1), torch.stack(tokens, dim=1)


def _static_cache(model, batch: int, length: int):
    """A preallocated KV cache: a growing cache copies itself at every token (a third of the time here)."""
    try:
        return StaticCache(config=model.config, max_cache_len=length)
    except TypeError:  # transformers 4.x also wants the batch size, device and dtype up front
        return StaticCache(config=model.config, max_batch_size=batch, max_cache_len=length,
                           device=model_device(model), dtype=next(model.parameters()).dtype)


def _positions(mask: torch.Tensor) -> torch.Tensor:
    """Position ids that start at 0 on each row's first real token (left padding)."""
    return (mask.cumsum(-1) - 1).clamp(min=0)
