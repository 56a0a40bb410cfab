"""One prompt as the request of each API the driver speaks, and the generated token count of its answer.

- ``chat``: OpenAI's ``POST /v1/chat/completions`` (llama.cpp's server, vLLM, SGLang, `specwatch proxy`):
  the messages as they are; the engine applies the model's chat template.
- ``generate``: `specwatch serve`'s ``POST /v1/generate``, which takes text: the messages are put in the
  ChatML template SmolLM2-Instruct uses (its default system message when the prompt has none), or, with
  ``template="plain"``, the turns' text one after the other (the model kit has no template).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.workload.prompts import Prompt

APIS = {"chat": "/v1/chat/completions", "generate": "/v1/generate"}
TEMPLATES = ("chatml", "plain")
# SmolLM2-Instruct's chat template puts this system message first when the conversation has none.
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


@dataclass(frozen=True)
class Sampling:
    """What every request asks for: at most ``max_tokens`` new tokens at ``temperature`` (0: greedy)."""

    max_tokens: int = 64
    temperature: float = 0.0
    model: str | None = None  # the body's "model" (chat), for engines that route or check on it
    template: str = "chatml"  # how ``generate`` renders messages as text

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens: must be >= 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise ValueError(f"temperature: must be >= 0, got {self.temperature}")
        if self.template not in TEMPLATES:
            raise ValueError(f"template: expected one of {', '.join(TEMPLATES)}, got {self.template!r}")


def chatml(messages: list[dict[str, str]]) -> str:
    """The conversation in ChatML, ready for the assistant's answer (SmolLM2-Instruct's template)."""
    turns = messages if messages[0]["role"] == "system" else [{"role": "system", "content": SMOLLM2_SYSTEM},
                                                              *messages]
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in turns) + "<|im_start|>assistant\n"


def body(api: str, prompt: Prompt, sampling: Sampling, request_id: str) -> dict[str, Any]:
    """The JSON body of one request."""
    if api == "chat":
        out = {"messages": prompt.messages, "max_tokens": sampling.max_tokens, "temperature": sampling.temperature}
        return out | ({"model": sampling.model} if sampling.model else {})
    if api == "generate":
        text = chatml(prompt.messages) if sampling.template == "chatml" else "\n\n".join(c for _, c in prompt.turns)
        return {"prompt": text, "domain": prompt.domain, "max_tokens": sampling.max_tokens,
                "temperature": sampling.temperature, "request_id": request_id}
    raise ValueError(f"api: expected one of {', '.join(APIS)}, got {api!r}")


def generated_tokens(api: str, answer: dict) -> int:
    """New tokens in an answer: OpenAI's ``usage.completion_tokens`` (else llama.cpp's ``timings.predicted_n``);
    /v1/generate's ``tokens``. 0 when the answer says nothing."""
    if api == "generate":
        return int(answer.get("tokens") or 0)
    usage = answer.get("usage") or {}
    if usage.get("completion_tokens") is not None:
        return int(usage["completion_tokens"])
    return int((answer.get("timings") or {}).get("predicted_n") or 0)


def prompt_tokens(api: str, answer: dict) -> int:
    """Prompt tokens the engine read (OpenAI's ``usage.prompt_tokens``); 0 when it does not say."""
    return int((answer.get("usage") or {}).get("prompt_tokens") or 0) if api == "chat" else 0


def draft_counts(answer: dict) -> dict[str, int]:
    """Drafted and accepted tokens the engine reports in its answer (llama.cpp's ``timings.draft_n`` and
    ``draft_n_accepted``, which pass through `specwatch proxy`); zeros when it reports none."""
    timings = answer.get("timings")
    if not isinstance(timings, dict):
        return {"drafted": 0, "accepted": 0}
    return {key: int(timings.get(name) or 0) for key, name in (("drafted", "draft_n"),
                                                               ("accepted", "draft_n_accepted"))}
