"""transformers' ``generate()`` with assisted decoding steered by a specwatch Sidecar: a draft model's
(agent/hf/candidates.py) or prompt lookup's, no draft model (agent/hf/lookup.py).

``generate(custom_generate=callable)`` is transformers' extension point for a decoding loop: generate
prepares inputs, cache, logits processors and stopping criteria, then calls the callable. ``Steering`` is
such a callable: it runs transformers' own assisted-decoding loop (``_assisted_decoding``), with
``SpecwatchCandidateGenerator`` (or, with ``prompt_lookup=True``, ``SpecwatchLookupGenerator``) as its
candidate generator, which the loop obtains from the model's ``_get_candidate_generator`` (the method
assisted-decoding variants override; here it is answered per call, through a context variable, so concurrent
calls on one model each get their own and other calls get transformers' own). Both names are transformers
5's; ``check_support`` says plainly when they are missing.

    from agent.hf import specwatch_generate
    out = specwatch_generate(model, draft, sidecar, domain="code", input_ids=ids, max_new_tokens=64)
    out = specwatch_generate(model, None, sidecar, domain="code", prompt_lookup=True, input_ids=ids,
                             max_new_tokens=64)
"""

from __future__ import annotations

import contextvars
import threading
import types
import weakref
from typing import Any, Callable

import torch

from agent.decoding.versions import weights_version
from agent.hf.candidates import SpecwatchCandidateGenerator
from agent.hf.lookup import LOOKUP_VERSION, SpecwatchLookupGenerator
from specwatch_core.records import StepRecord

_ACTIVE: contextvars.ContextVar[Callable[..., Any] | None] = contextvars.ContextVar("specwatch_candidates",
                                                                                   default=None)
_INSTALLED: dict[int, int] = {}  # id(model) -> Steering calls running on it
_LOCK = threading.Lock()
_VERSIONS: "weakref.WeakKeyDictionary[torch.nn.Module, str]" = weakref.WeakKeyDictionary()


class Steering:
    """A ``custom_generate`` callable: ``model.generate(ids, custom_generate=Steering(sidecar, draft,
    domain="code"), max_new_tokens=64)``; ``Steering(sidecar, None, "code", prompt_lookup=True)`` drafts by
    prompt lookup instead of a draft model. Greedy and sampling (``do_sample=True``), batch size 1, as
    transformers' assisted decoding. Versions default to a content hash of each model's weights, computed
    once per model object (pass them after changing weights in place); prompt lookup's draft version is
    ``LOOKUP_VERSION``. ``steps`` holds the records of the last call; one Steering per thread. generate hands
    a custom_generate callable no ``streamer``: give it here (and to generate, which puts the prompt) to
    stream the steps' tokens."""

    candidates = SpecwatchCandidateGenerator  # the generator class each call makes with a draft model
    lookup = SpecwatchLookupGenerator  # and with prompt lookup

    def __init__(self, sidecar, draft: torch.nn.Module | None, domain: str = "default", *,
                 prompt_lookup: bool = False, target_version: str | None = None, draft_version: str | None = None,
                 request_id: str | None = None, on_step: Callable[[StepRecord], None] | None = None,
                 streamer=None):
        _check_drafting(draft, prompt_lookup)
        self.sidecar, self.draft, self.domain, self.prompt_lookup = sidecar, draft, domain, prompt_lookup
        self.target_version, self.draft_version = target_version, draft_version
        self.request_id, self.on_step, self.streamer = request_id, on_step, streamer
        self.steps: list[StepRecord] = []

    def __call__(self, model, input_ids, logits_processor, stopping_criteria, generation_config,
                 synced_gpus: bool = False, streamer=None, inputs_tensor=None, **model_kwargs):
        check_support(model)
        if self.draft is not None:
            _check_vocabulary(model, self.draft)
        steps: list[StepRecord] = []
        self.steps = steps
        made: list[SpecwatchCandidateGenerator | SpecwatchLookupGenerator] = []

        def on_step(record: StepRecord) -> None:
            steps.append(record)
            if self.on_step is not None:
                self.on_step(record)

        def candidates(**kwargs) -> SpecwatchCandidateGenerator | SpecwatchLookupGenerator:
            common = dict(sidecar=self.sidecar, domain=self.domain, request_id=self.request_id, on_step=on_step,
                          target_version=self.target_version or version_of(model))
            if self.prompt_lookup:
                generator = self.lookup(
                    kwargs["generation_config"], kwargs["logits_processor"], device=model.device,
                    vocab_size=model.config.get_text_config().vocab_size,
                    draft_version=self.draft_version or LOOKUP_VERSION, **common)
            else:
                generator = self.candidates(
                    kwargs["input_ids"], self.draft, kwargs["generation_config"], kwargs["model_kwargs"],
                    kwargs.get("inputs_tensor"), kwargs["logits_processor"],
                    draft_version=self.draft_version or version_of(self.draft), **common)
            made.append(generator)
            return generator

        with _answering(model, candidates):
            out = type(model)._assisted_decoding(
                model, input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus=synced_gpus,
                streamer=streamer if streamer is not None else self.streamer, inputs_tensor=inputs_tensor,
                assistant_model=self.draft, **model_kwargs)
        for generator in made:  # a failed generation records nothing of its unfinished step
            generator.finish()
        return out


def specwatch_generate(model, draft: torch.nn.Module | None, sidecar, domain: str = "default", *,
                       prompt_lookup: bool = False, target_version: str | None = None,
                       draft_version: str | None = None, request_id: str | None = None,
                       on_step: Callable[[StepRecord], None] | None = None, **generate_kwargs):
    """``model.generate(**generate_kwargs)`` assisted by ``draft`` (or, with ``draft=None,
    prompt_lookup=True``, by prompt lookup: agent/hf/lookup.py), K chosen by ``sidecar`` before every step and
    every step recorded with it (and given to ``on_step``). Returns what generate returns."""
    steering = Steering(sidecar, draft, domain, prompt_lookup=prompt_lookup, target_version=target_version,
                        draft_version=draft_version, request_id=request_id, on_step=on_step,
                        streamer=generate_kwargs.get("streamer"))
    if prompt_lookup:
        if "prompt_lookup_num_tokens" in generate_kwargs:
            raise ValueError("prompt_lookup_num_tokens: the sidecar chooses each step's cap; leave it out")
        # Any value puts generate in transformers' assisted mode, so its checks for that mode run; the
        # lookup never reads it.
        mode = {"prompt_lookup_num_tokens": 1}
    else:
        mode = {"assistant_model": draft}
    return model.generate(custom_generate=steering, **mode, **generate_kwargs)


def version_of(model: torch.nn.Module) -> str:
    """``weights_version`` of ``model``, hashed once per model object."""
    found = _VERSIONS.get(model)
    if found is None:
        found = _VERSIONS[model] = weights_version(model)
    return found


def check_support(model) -> None:
    """Raise a clear error when this transformers has not the assisted-decoding names Steering uses."""
    for name in ("_assisted_decoding", "_get_candidate_generator"):
        if not callable(getattr(type(model), name, None)):
            import transformers

            raise RuntimeError(f"transformers {transformers.__version__}: {type(model).__name__} has no {name}; "
                               "specwatch's generate integration needs transformers 5")


def _check_drafting(draft, prompt_lookup: bool) -> None:
    if prompt_lookup and draft is not None:
        raise ValueError("prompt_lookup drafts from the sequence itself: pass draft=None")
    if not prompt_lookup and draft is None:
        raise ValueError("no draft model: pass one, or draft=None with prompt_lookup=True")


def _check_vocabulary(model, draft) -> None:
    t, d = model.get_output_embeddings().weight.shape[0], draft.get_output_embeddings().weight.shape[0]
    if t != d:
        raise ValueError(f"draft: vocabulary size {d} differs from the target's {t} (one tokenizer for both)")


class _answering:
    """While inside, ``model._get_candidate_generator`` answers ``make(**kwargs)`` in this context and
    transformers' own elsewhere; the instance attribute is removed when the last call on the model ends."""

    def __init__(self, model, make: Callable[..., Any]):
        self.model, self.make = model, make

    def __enter__(self):
        with _LOCK:
            key = id(self.model)
            if _INSTALLED.get(key, 0) == 0:
                self.model._get_candidate_generator = types.MethodType(_candidate_generator, self.model)
            _INSTALLED[key] = _INSTALLED.get(key, 0) + 1
        self.token = _ACTIVE.set(self.make)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.reset(self.token)
        with _LOCK:
            key = id(self.model)
            _INSTALLED[key] -= 1
            if _INSTALLED[key] == 0:
                del _INSTALLED[key]
                self.model.__dict__.pop("_get_candidate_generator", None)


def _candidate_generator(self, generation_config, input_ids, inputs_tensor, logits_processor, model_kwargs,
                         assistant_model=None, target_tokenizer=None, assistant_tokenizer=None):
    make = _ACTIVE.get()
    if make is None:
        return type(self)._get_candidate_generator(
            self, generation_config, input_ids, inputs_tensor, logits_processor, model_kwargs,
            assistant_model=assistant_model, target_tokenizer=target_tokenizer,
            assistant_tokenizer=assistant_tokenizer)
    return make(generation_config=generation_config, input_ids=input_ids, inputs_tensor=inputs_tensor,
                logits_processor=logits_processor, model_kwargs=model_kwargs)
