"""llama.cpp's server (``llama-server``, build b11434) behind the proxy.

Detected by its ``/props`` (``default_generation_settings``, ``build_info``). Every completion answer (in
streaming: the last chunk carrying it) ends with ``timings``: ``predicted_n`` tokens generated in
``predicted_ms``, and when something was drafted ``draft_n`` tokens drafted of which ``draft_n_accepted`` were
accepted. Each verification pass emits its accepted tokens plus one bonus token, so the request took
``predicted_n - draft_n_accepted`` target passes (steps). Time is not split between draft and verify: it goes
in ``seconds``; the prompt's evaluation before the first step (``prompt_ms``) in ``prompt_seconds``. No
per-position counts.

Versions: ``/props`` ``model_path`` (the proxy hashes the GGUF when it can read it), else the ``model`` id of
``/v1/models``, with the LoRA adapters ``/lora-adapters`` lists as applied; the draft's path where a build
reports it. b11434 reports neither the draft nor its length
(``speculative.types`` reads "none" even with a draft); ``/slots`` says whether a slot speculates.
"""

from __future__ import annotations

from typing import Any

from agent.proxy.engines.base import Figures, Found, Served, count, number, record
from agent.proxy.versions import find, models_id
from specwatch_core.records import StepRecord

NAME = "llamacpp"
TITLE = "llama.cpp"
MARKER = b'"timings"'
PROBES = ("/props",)
PAGES = ("/props", "/v1/models", "/lora-adapters", "/slots")
# Where engines put the draft model's path and the draft length in /props (the names vary by build).
DRAFT_PATH_KEYS = ("model_draft_path", "draft_model_path", "speculative.model_path", "model_draft")
LOOKAHEAD_KEYS = ("speculative.n_max", "spec_draft_n_max", "draft_n_max", "n_draft", "speculative_n_max")
COUNTERS = None  # every answer carries timings: no pool-level records
MISSING = None


def detect(probes: dict[str, Any]) -> bool:
    props = probes.get("/props")
    return isinstance(props, dict) and ("default_generation_settings" in props or "build_info" in props)


def versions(pages: dict[str, Any]) -> Found:
    props = pages.get("/props")
    target, draft = props_paths(props)
    adapters = lora_adapters(pages.get("/lora-adapters"))
    if target is not None:
        return Found(target, draft, props_lookahead(props), slots_speculate(pages.get("/slots")), True, adapters)
    return Found(models_id(pages.get("/v1/models")), draft, props_lookahead(props),
                 slots_speculate(pages.get("/slots")), adapters=adapters)


def startup(pages: dict[str, Any], lookahead: int) -> tuple[tuple[str, dict | None], ...]:
    return ()


def started(answers: dict[str, Any], lookahead: int) -> bool:
    return True  # every answer ends with its timings: nothing to turn on


def figures(answer: dict, lookahead: int = 0) -> Figures | None:
    """The request's figures from its ``timings`` (None when missing, malformed, or no token generated; the
    pool's ``lookahead`` changes nothing: llama.cpp always reports)."""
    timings = answer.get("timings")
    if not isinstance(timings, dict):
        return None
    emitted, ms = timings.get("predicted_n"), timings.get("predicted_ms")
    if not count(emitted) or emitted < 1 or not number(ms) or ms < 0:
        return None
    drafted = timings.get("draft_n", 0)
    accepted = timings.get("draft_n_accepted", 0)
    if not (count(drafted) and count(accepted)):
        return None
    prompt_ms = timings.get("prompt_ms")
    prompt = prompt_ms / 1000.0 if number(prompt_ms) and prompt_ms >= 0 else None  # a bad one: left out
    return Figures(emitted, drafted, accepted, seconds=ms / 1000.0, prompt_seconds=prompt)


def aggregate(timings: Any, served: Served, timestamp: float) -> StepRecord | None:
    """The request's record from llama.cpp's ``timings``, or None when they give nothing to record. A record
    the contract refuses (e.g. more drafted than the pool's K allows) raises RecordError naming the field."""
    found = figures({"timings": timings})
    return None if found is None else record(found, served, timestamp)


def props_paths(props: Any) -> tuple[str | None, str | None]:
    """(target model path, draft model path) named by a /props answer (None where absent)."""
    if not isinstance(props, dict):
        return None, None
    target = props.get("model_path")
    draft = find(props, DRAFT_PATH_KEYS)
    return (target if isinstance(target, str) and target else None,
            draft if isinstance(draft, str) and draft else None)


def lora_adapters(answer: Any) -> tuple[tuple[str, float], ...]:
    """(path, scale) of every adapter a ``/lora-adapters`` answer lists with a non-zero scale, in its order (a
    build without the page answers 404: no adapters)."""
    if not isinstance(answer, list):
        return ()
    found = []
    for item in answer:
        if not isinstance(item, dict):
            continue
        path, scale = item.get("path"), item.get("scale", 1.0)
        if isinstance(path, str) and path and type(scale) in (int, float) and scale != 0:
            found.append((path, float(scale)))
    return tuple(found)


def props_lookahead(props: Any) -> int | None:
    """The draft length a /props answer reports, or None when it reports none."""
    found = find(props, LOOKAHEAD_KEYS)
    return found if type(found) is int and found >= 0 else None


def slots_speculate(slots: Any) -> bool | None:
    """Whether a /slots answer says the engine speculates (llama.cpp b11434: ``speculative`` per slot; its
    /props ``speculative.types`` shows request defaults, "none" even with a draft loaded); None when unsaid."""
    if not isinstance(slots, list) or not slots or not all(isinstance(s, dict) for s in slots):
        return None
    found = [s.get("speculative") for s in slots]
    return any(found) if all(isinstance(v, bool) for v in found) else None
