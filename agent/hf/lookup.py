"""Prompt lookup (n-gram self-speculation, no draft model) in transformers' generate(), its cap chosen by a
specwatch Sidecar step by step.

transformers' prompt lookup (``generate(prompt_lookup_num_tokens=N)``, its ``PromptLookupCandidateGenerator``,
after github.com/apoorvumang/prompt-lookup-decoding) finds the sequence's last n-gram (longest first, up to
``max_matching_ngram_size``, default 2) earlier in the sequence and drafts up to N of the tokens that followed
it; nothing when no n-gram matches. ``SpecwatchLookupGenerator`` is that generator with N asked from
``Sidecar.decide(domain)`` before every step (K = 0: no lookup, a plain target step), and one StepRecord per
step (timed as agent/hf/steps.py says):

- ``lookahead``: the K the sidecar gave, cut where the length budget ends (as the draft model's generator cuts
  its drafts: tokens past it could never be emitted, and the lookup is not asked for them);
- ``drafted``: what the lookup proposed, 0..K. A step that drafted fewer than K says so and leaves out its
  per-position lists (its positions are unknown: it feeds sums only, specwatch_core/records.py); a step that drafted
  all K carries the accepted mask and the expected acceptance;
- expected acceptance: the lookup drafts with certainty (q a point mass on its token), so sum_x min(p, q) is
  p(token), the target's probability of it (its processed distribution). No draft confidence: there is no
  draft distribution, and a confidence of 1 would teach a confidence-stop policy nothing true. The policy's
  in-step stop rule does not apply for the same reason;
- ``draft_version``: ``LOOKUP_VERSION`` unless the caller gives one.

Verification is transformers' own for candidates without logits. Greedy: drafted tokens are kept while they
equal the target's argmax, so output is identical to plain greedy ``generate()``. ``do_sample=True`` (allowed
for prompt lookup in transformers 5.24): the target samples at every position and drafted tokens are kept while
they equal its samples. That is speculative sampling with a point-mass draft: token x is kept with probability
p(x), and on rejection the sample is one conditioned on differing from x, a draw from normalize(max(0, p - q))
(arXiv:2211.17192); output is distributed as the target's alone. transformers refuses
``assistant_ensemble_weight`` with prompt lookup (it needs a draft's logits); so does this generator.
"""

from __future__ import annotations

from typing import Callable

import torch
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from agent.hf.steps import StepLog, accepted_prefix, probabilities
from specwatch_core.records import StepRecord

LOOKUP_VERSION = "prompt-lookup"  # draft_version of prompt lookup's records: no weights to hash


class SpecwatchLookupGenerator(PromptLookupCandidateGenerator):
    """See the module docstring. ``generation_config`` and ``logits_processor`` are the ones transformers hands
    the candidate generator (its lookup skips tokens the processors forbid); ``vocab_size`` the target's;
    ``device`` the target's (steps are timed after its queued work); ``sidecar`` needs ``decide``, ``record``
    and ``pod``; ``on_step`` gets every record as it is made."""

    def __init__(self, generation_config, logits_processor=None, *, vocab_size: int, device: torch.device,
                 sidecar, domain: str, target_version: str, draft_version: str = LOOKUP_VERSION,
                 request_id: str | None = None, on_step: Callable[[StepRecord], None] | None = None):
        if generation_config.assistant_ensemble_weight is not None:
            raise ValueError("assistant_ensemble_weight needs a draft model's logits; prompt lookup has none")
        super().__init__(eos_token_id=generation_config._eos_token_tensor,
                         num_output_tokens=1,  # a placeholder: each step's comes from the sidecar
                         max_matching_ngram_size=generation_config.max_matching_ngram_size or 2,
                         max_length=generation_config.max_length, logits_processor=logits_processor,
                         vocab_size=vocab_size)
        self.sidecar, self.domain = sidecar, domain
        self.log = StepLog(sidecar, device, domain=domain, target_version=target_version,
                           draft_version=draft_version, request_id=request_id, on_step=on_step)
        self._tokens: torch.Tensor | None = None  # the pending step's drafted tokens

    def get_candidates(self, input_ids: torch.LongTensor, **kwargs):
        """Record the previous step, ask the sidecar for K, look up at most K tokens (none for K = 0)."""
        self.log.begin()
        room = self.max_length - input_ids.shape[-1] - 1  # drafted tokens the loop can still emit
        k = max(min(self.sidecar.decide(self.domain).lookahead, room), 0)
        candidate_ids = input_ids
        if k > 0:
            self.num_output_tokens = k
            candidate_ids, _ = super().get_candidates(input_ids)
        self._tokens = candidate_ids[0, input_ids.shape[-1]:]
        self.log.drafted(k, self._tokens.numel())
        return candidate_ids, None

    def update_candidate_strategy(self, input_ids: torch.LongTensor, scores: torch.Tensor, num_matches: int):
        """Note what the target accepted (``scores``: its processed logits over the drafted positions and
        one more)."""
        record = self.log.pending
        if record is None:
            return
        accepted_prefix(record, num_matches)
        if record.drafted is None:  # all K drafted: the positions are known
            p = torch.softmax(scores[0, :record.lookahead].float(), dim=-1)
            tokens = self._tokens.to(p.device)[:, None]
            record.expected_acceptance = probabilities(p.gather(1, tokens).squeeze(1))

    def finish(self) -> None:
        """Record the last step (generate has returned)."""
        self.log.finish()
