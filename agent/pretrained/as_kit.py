"""A prepared pretrained model as a model kit (agent/kit/load.py's ``Kit``), so that the benchmarks written for
the kit (bench/guard.py, bench/decoder.py: ``--model smollm2-135m``) run on the real model unchanged.

- target v1: the transformers checkpoint (float32); target v2: the same with target v2's LoRA adapter merged
  (agent/pretrained/target_v2.py ``load_v2``: whichever adapter is installed); the draft: the distilled one;
- versions: the weights versions of the three (agent/decoding/versions.py), as a kit's manifest has them;
- prompts: the workload's held-out prompts per domain (agent/workload/), ``logs`` among them (agent/pretrained/logs.py,
  the domain target v2 changes), each as text in the model's chat template. ``encode`` tokenizes that text
  without adding special tokens, which gives exactly the ids of agent/pretrained/teacher.py's ``chat_ids``;
- manifest: the prepared model's, with the installed adapter's training.json under ``target_v2.training``.
"""

from __future__ import annotations

import json
from pathlib import Path

from agent.decoding.versions import weights_version
from agent.kit.load import Kit, load_model
from agent.pretrained import catalog, layout, logs
from agent.pretrained.prepare import Prepared
from agent.pretrained.target_v2 import load_v2
from agent.workload import prompts as workload

DOMAINS = ("code", "edit", "extract", "chat", "json", "copy", logs.DOMAIN)


def heldout(domain: str) -> list[workload.Prompt]:
    """The held-out prompts of ``domain`` (a workload domain; ``logs`` among them), in a fixed order."""
    return workload.load(domain, "heldout")


def from_prepared(prepared: Prepared, domains: tuple[str, ...] = DOMAINS) -> Kit:
    """The kit-shaped view of ``prepared`` (on the CPU, float32, as ``load_v2`` loads target v2)."""
    from transformers import AutoTokenizer

    if prepared.hf is None or prepared.draft is None:
        raise FileNotFoundError(f"{prepared.name}: the transformers checkpoint and the draft are needed; run: "
                                f"specwatch models pretrained --name {prepared.name}")
    tokenizer = AutoTokenizer.from_pretrained(prepared.hf)
    target_v1 = load_model(prepared.hf, device="cpu", dtype="float32")
    target_v2 = load_v2(prepared)
    draft = load_model(prepared.draft, device="cpu", dtype="float32")

    def encode(text: str) -> list[int]:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])

    prompts = {d: [tokenizer.apply_chat_template(p.messages, tokenize=False, add_generation_prompt=True)
                   for p in heldout(d)] for d in domains}
    manifest = layout.read_manifest(prepared.root)
    training = Path(prepared.lora) / "training.json"
    if manifest.get("target_v2") and training.is_file():
        manifest["target_v2"] = {**manifest["target_v2"], "training": json.loads(training.read_text())}
    versions = {name: weights_version(model) for name, model in
                (("target-v1", target_v1), ("draft", draft), ("target-v2", target_v2))}
    return Kit(root=prepared.root, target_v1=target_v1, target_v2=target_v2, draft=draft, versions=versions,
               prompts=prompts, manifest=manifest, encode=encode)


def load(name: str = catalog.DEFAULT, home: str | Path | None = None) -> Kit:
    """The prepared model ``name`` as a kit; ModelMissingError (how to prepare it) or FileNotFoundError (no
    target v2 or draft yet) when it cannot be."""
    return from_prepared(Prepared.read(catalog.get(name).name, home))
