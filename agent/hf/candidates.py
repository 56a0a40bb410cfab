"""A transformers candidate generator whose lookahead comes from a specwatch Sidecar, step by step.

transformers' assisted generation (``generate(assistant_model=draft)``) asks its candidate generator for
candidates before every verification pass and tells it afterwards how many the target accepted
(``get_candidates`` / ``update_candidate_strategy``). ``SpecwatchCandidateGenerator`` is transformers'
``AssistedCandidateGenerator`` with those two turned to specwatch: before each step it asks
``Sidecar.decide(domain)`` for K (K = 0: the step runs without the draft, a plain target step) and drafts
with the policy's in-step stop rule; after each step it builds the StepRecord (per-position accepted mask,
expected acceptance, draft confidence, draft and verify seconds, model versions) and records it as the next
step starts, so the policy learns within a request. transformers' own +2/-1 schedule and confidence
threshold are off: the sidecar owns the lookahead. Drafting, verification and acceptance stay transformers'.

Steps are timed and recorded as agent/hf/steps.py says.
"""

from __future__ import annotations

from typing import Callable

import torch
from transformers.generation import candidate_generator as hf
from transformers.generation.candidate_generator import AssistedCandidateGenerator
from transformers.generation.stopping_criteria import StoppingCriteria, StoppingCriteriaList

from agent.decoding import sampling
from agent.hf.steps import StepLog, accepted_prefix, probabilities
from policies.base import StopDrafting
from specwatch_core.records import StepRecord


class SpecwatchCandidateGenerator(AssistedCandidateGenerator):
    """See the module docstring. The first six arguments are transformers' (``_get_candidate_generator``
    passes them); ``sidecar`` needs ``decide``, ``record``, ``stop_drafting`` and ``pod``. ``on_step`` gets
    every record as it is made (also the last, which ``finish`` records)."""

    def __init__(self, input_ids, assistant_model, generation_config, model_kwargs, inputs_tensor=None,
                 logits_processor=None, *, sidecar, domain: str, target_version: str, draft_version: str,
                 request_id: str | None = None, on_step: Callable[[StepRecord], None] | None = None):
        super().__init__(input_ids, assistant_model, generation_config, model_kwargs, inputs_tensor,
                         logits_processor)
        # transformers' confidence stop would end drafts the policy sized; its own rule replaces it.
        self.generation_config.assistant_confidence_threshold = 0.0  # None would be filled with 0.4
        self.sidecar, self.domain = sidecar, domain
        self.log = StepLog(sidecar, assistant_model.device, domain=domain, target_version=target_version,
                           draft_version=draft_version, request_id=request_id, on_step=on_step)
        self._stop: StopDrafting | None = sidecar.stop_drafting(domain)
        # The pending step's drafted tokens (n,) and the draft's processed scores (n, V).
        self._drafted: tuple[torch.Tensor, torch.Tensor] | None = None

    # -- transformers' hooks --------------------------------------------------------------------------------
    def get_candidates(self, input_ids: torch.LongTensor, **kwargs):
        """Record the previous step, ask the sidecar for K, draft up to K tokens (none for K = 0)."""
        self.log.begin()
        self.num_assistant_tokens = self.sidecar.decide(self.domain).lookahead
        if self.num_assistant_tokens > 0:
            candidate_ids, candidate_logits = super().get_candidates(input_ids, **kwargs)
        else:
            candidate_ids, candidate_logits = input_ids, None
        n = candidate_ids.shape[-1] - input_ids.shape[-1]
        self._drafted = (candidate_ids[0, -n:], candidate_logits[0]) if n else None
        self.log.drafted(n)
        return candidate_ids, candidate_logits

    def update_candidate_strategy(self, input_ids: torch.LongTensor, scores: torch.Tensor, num_matches: int):
        """Note what the target accepted (``scores``: its processed logits over the K + 1 positions). No
        schedule to update: the next K comes from the sidecar."""
        record = self.log.pending
        if record is None:
            return
        n = record.lookahead
        accepted_prefix(record, num_matches)
        if n:
            tokens, logits = self._drafted
            q = torch.softmax(logits.float(), dim=-1)
            p = torch.softmax(scores[0, :n].to(q.device, torch.float32), dim=-1)
            record.expected_acceptance = probabilities(sampling.overlap(p, q))
            record.draft_confidence = probabilities(q.gather(1, tokens.to(q.device)[:, None]).squeeze(1))
        else:
            record.expected_acceptance = record.draft_confidence = []

    def finish(self) -> None:
        """Record the last step (generate has returned)."""
        self.log.finish()

    def _update_past_and_masks(self, input_ids, remove_from_pkv: int = 0, num_added_tokens: int = 1) -> bool:
        has_cache = super()._update_past_and_masks(input_ids, remove_from_pkv, num_added_tokens)
        if not has_cache:
            # transformers extends the draft's mask and positions only once it has a cache; after K = 0 steps
            # before its first draft they must cover the tokens those steps added.
            length, encoder_decoder = input_ids.shape[-1], self.assistant_model.config.is_encoder_decoder
            kwargs = hf._prepare_attention_mask(self.assistant_kwargs, length, encoder_decoder)
            kwargs = hf._prepare_position_ids(kwargs, length, encoder_decoder)
            self.assistant_kwargs = hf._prepare_token_type_ids(kwargs, length)
        return has_cache

    # -- drafting with the policy's stop rule ----------------------------------------------------------------
    def _prepare_generation_args(self, input_ids, min_new_tokens: int, max_new_tokens: int) -> dict:
        args = super()._prepare_generation_args(input_ids, min_new_tokens, max_new_tokens)
        if self._stop is not None:
            args["stopping_criteria"] = StoppingCriteriaList([_StopRule(self._stop, input_ids.shape[-1])])
        return args


class _StopRule(StoppingCriteria):
    """Ends the draft's generate once the policy's rule says so, after a drafted token: ``stop(confidence,
    position)`` with the draft's probability of that token (its processed distribution, as the decoder's)
    and its position in the step from 1. The token itself is kept and verified."""

    def __init__(self, stop: StopDrafting, start: int):
        self.stop, self.start = stop, start

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        confidence = float(torch.softmax(scores[-1][0].float(), dim=-1)[input_ids[0, -1]])
        done = bool(self.stop(min(max(confidence, 0.0), 1.0), input_ids.shape[-1] - self.start))
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)
