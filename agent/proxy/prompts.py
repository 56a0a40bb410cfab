"""The prompt text of an OpenAI-compatible or llama.cpp request, for the live prompt sample.

``/v1/completions``, ``/completions`` and llama.cpp's ``/completion`` carry ``prompt`` (text, or a list whose
first text is taken); ``/v1/chat/completions`` carries ``messages``: their text contents (a string, or
parts of type ``text``) joined by newlines, as the guard's new target then continues them. Anything else
(token-id prompts, images only, a body that is not JSON) gives None: nothing is sampled.
"""

from __future__ import annotations

from typing import Any


def prompt_text(path: str, body: dict[str, Any] | None) -> str | None:
    if not isinstance(body, dict):
        return None
    if path == "/v1/chat/completions":
        messages = body.get("messages")
        if not isinstance(messages, list):
            return None
        texts = [t for m in messages if isinstance(m, dict) for t in _texts(m.get("content"))]
        return "\n".join(texts) or None
    prompt = body.get("prompt")
    if isinstance(prompt, list):
        prompt = next((p for p in prompt if isinstance(p, str)), None)
    return prompt if isinstance(prompt, str) and prompt else None


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content] if content else []
    if isinstance(content, list):
        return [p["text"] for p in content
                if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) and p["text"]]
    return []
