"""Which domain and pod the records of an engine series go to (``specwatch scrape``).

Domain: a template; ``{label}`` placeholders take the series' label values (``{model_name}``, ``{engine}``,
``{tp_rank}`` ...), ``{model}`` its target model and ``{engine_kind}`` the engine (vllm, llamacpp, sglang,
trtllm). A template without placeholders on a page showing several models gets ``/<model>`` appended, so
each model has a domain of its own: one domain mixing two targets would read as a target change at every
record. Pod: the given pod, with ``/<host:port>`` of the URL when several URLs are watched and ``/<model>``
when a page shows several models, so that each pod's target version stays one.
"""

from __future__ import annotations

import hashlib
import string
from urllib.parse import urlsplit

from agent.scrape.pages import PageError, Series

MAX_DOMAIN = 64  # StepRecord.validate's default max_domain_length
MAX_POD = 128


class _Labels(dict):
    def __missing__(self, name: str) -> str:
        raise PageError(f"--domain uses {{{name}}}, which the series {dict(self)} does not have")


def placeholders(template: str) -> list[str]:
    """The ``{name}`` fields of a domain template (ValueError when it is not a valid template)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def fit(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, a stable hash of the whole in place of the tail when cut."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha1(text.encode()).hexdigest()[:8]
    return f"{text[:limit - 9]}~{digest}"


def domain_of(template: str, series: Series, model: str, several_models: bool) -> str:
    """The domain of ``series`` (see the module docstring); ``model`` is its target version."""
    values = _Labels(series.labels)
    values.setdefault("model", model)
    values.setdefault("engine_kind", series.engine)
    domain = template.format_map(values)
    if several_models and not placeholders(template):
        domain = f"{domain}/{model}"
    return fit(domain, MAX_DOMAIN)


def pod_of(pod: str | None, url: str, model: str, several_urls: bool, several_models: bool) -> str | None:
    """The pod of a series' records (see the module docstring)."""
    parts = [pod] if pod else []
    if several_urls:
        parts.append(urlsplit(url).netloc or url)
    if several_models:
        parts.append(model)
    return fit("/".join(parts), MAX_POD) if parts else None
