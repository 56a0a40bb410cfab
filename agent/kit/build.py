"""Build a kit in stages: corpus, target v1, draft (distilled from v1), target v2 (v1 trained further).

A stage is done once the manifest lists it; a rerun skips done stages and resumes an unfinished one from
its checkpoint, and (training being deterministic) ends with the same weights as an uninterrupted build.
"""

from __future__ import annotations

import platform
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Callable

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

from agent.decoding.versions import weights_version
from agent.kit import layout, tokenizer
from agent.kit.corpora import build_corpus, hash_seed
from agent.kit.load import load_model, quiet_progress
from agent.kit.shipped import manifest_for as shipped_manifest, read_model
from agent.kit.specs import KitSpec, ModelShape, StageSpec, get_spec
from agent.kit.train import TrainResult, WindowSampler, resolve_precision, train


class KitBuildError(RuntimeError):
    """The kit folder cannot be built as asked (e.g. it holds a kit from a different spec)."""


class BuildProgress:
    """Build events; the default ignores them (the CLI draws a progress bar from them)."""

    def stage_started(self, stage: str, total: int) -> None:
        pass

    def stage_advanced(self, stage: str, done: int, total: int, loss: float) -> None:
        pass

    def stage_finished(self, stage: str, info: dict, skipped: bool) -> None:
        pass


def new_model(shape: ModelShape, max_positions: int, seed: int) -> LlamaForCausalLM:
    """A freshly initialised byte-level Llama (tied embeddings, no dropout)."""
    config = LlamaConfig(
        vocab_size=tokenizer.VOCAB_SIZE, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.heads,
        max_position_embeddings=max_positions, tie_word_embeddings=True, bos_token_id=None,
        eos_token_id=tokenizer.EOS_ID, pad_token_id=tokenizer.PAD_ID)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return LlamaForCausalLM(config)


def save_model(model: torch.nn.Module, directory: Path) -> None:
    """save_pretrained (safetensors) plus the tokenizer, swapped in atomically."""
    tmp = directory.with_name(f".{directory.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with quiet_progress():
        model.save_pretrained(tmp)
    tokenizer.save_tokenizer(tmp)
    shutil.rmtree(directory, ignore_errors=True)
    tmp.rename(directory)


def build_kit(spec: KitSpec | str, home: str | Path | None = None, progress: BuildProgress | None = None,
              force: bool = False, shipped: bool | Path = False) -> Path:
    """Build (or finish building) the kit for ``spec`` under ``home``; returns its folder.

    ``shipped``: take each model from the weights shipped in the repository for this spec (or from this
    folder of shipped weights; :mod:`agent.kit.shipped`) instead of training it, where there are any."""
    spec = get_spec(spec) if isinstance(spec, str) else spec
    progress = progress or BuildProgress()
    root = layout.kit_dir(spec.name, home)
    if force:
        shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)
    manifest = layout.read_manifest(root) or _new_manifest(spec)
    if manifest.get("spec_hash") != spec.fingerprint():
        raise KitBuildError(f"{root} holds a kit built from another {spec.name!r} spec; "
                            f"rebuild it with: specwatch models build --size {spec.name} --force")
    ship = shipped_manifest(spec, shipped if isinstance(shipped, Path) else None) if shipped else None
    stages: dict[str, Callable[[], dict]] = {
        "corpus": lambda: _corpus_stage(spec, root),
        "target-v1": lambda: _train_stage(spec, root, progress, "target-v1", spec.target_v1),
        "draft": lambda: _train_stage(spec, root, progress, "draft", spec.draft_distill),
        "target-v2": lambda: _train_stage(spec, root, progress, "target-v2", spec.target_v2),
    }
    for name in layout.MODELS if ship else ():
        stages[name] = lambda name=name: _shipped_stage(spec, root, name, ship)
    for name in layout.STAGES:
        if name in manifest["stages"]:
            progress.stage_finished(name, manifest["stages"][name], skipped=True)
            continue
        progress.stage_started(name, 1 if name == "corpus" or ship else _stage_spec(spec, name).steps)
        info = stages[name]()
        manifest["stages"][name] = info
        if "version" in info:
            manifest["versions"][name] = info["version"]
        manifest["seconds"] = round(sum(s["seconds"] for s in manifest["stages"].values()), 2)
        manifest["complete"] = all(s in manifest["stages"] for s in layout.STAGES)
        layout.write_json(root / layout.MANIFEST, manifest)
        (root / f"{name}.ckpt").unlink(missing_ok=True)
        progress.stage_finished(name, info, skipped=False)
    return root


def _stage_spec(spec: KitSpec, name: str) -> StageSpec:
    return {"target-v1": spec.target_v1, "draft": spec.draft_distill, "target-v2": spec.target_v2}[name]


def _new_manifest(spec: KitSpec) -> dict:
    return {"kit": spec.name, "format": 1, "spec_hash": spec.fingerprint(), "spec": spec.to_dict(),
            "seed": spec.seed, "complete": False, "stages": {}, "versions": {}, "seconds": 0.0,
            "environment": {"python": platform.python_version(), "torch": torch.__version__,
                            "transformers": transformers.__version__,
                            "threads": spec.threads or torch.get_num_threads()},
            "tokenizer": {"kind": "bytes (ByT5 ids)", "vocab_size": tokenizer.VOCAB_SIZE,
                          "eos_id": tokenizer.EOS_ID, "pad_id": tokenizer.PAD_ID}}


def _corpus_stage(spec: KitSpec, root: Path) -> dict:
    began = time.perf_counter()
    corpus = build_corpus(spec)
    layout.save_sources(root, corpus.train)
    layout.write_json(root / layout.DATA / layout.HELDOUT, corpus.heldout)
    layout.write_json(root / layout.PROMPTS, corpus.prompts)
    return {"seconds": round(time.perf_counter() - began, 2),
            "train_tokens": {name: int(len(tokens)) for name, tokens in corpus.train.items()},
            "heldout_bytes": {name: len(text.encode()) for name, text in corpus.heldout.items()},
            "prompts": {name: len(prompts) for name, prompts in corpus.prompts.items()}}


def _train_stage(spec: KitSpec, root: Path, progress: BuildProgress, name: str, stage: StageSpec) -> dict:
    teacher = None
    if name == "target-v1":
        model = new_model(spec.target, spec.seq_len, hash_seed(spec.seed, f"{name}/init"))
        shape = spec.target
    elif name == "draft":
        model = new_model(spec.draft, spec.seq_len, hash_seed(spec.seed, f"{name}/init"))
        teacher, shape = load_model(root / "target-v1", device="cpu"), spec.draft
    else:  # target v2 starts from v1's weights
        model, shape = load_model(root / "target-v1", device="cpu"), spec.target
    sampler = WindowSampler(layout.load_sources(root), stage.mix, stage.batch_size, spec.seq_len,
                            hash_seed(spec.seed, f"{name}/data"))
    result: TrainResult = train(
        model, sampler, steps=stage.steps, lr=stage.lr, warmup=stage.warmup, teacher=teacher,
        checkpoint=root / f"{name}.ckpt", checkpoint_every=spec.checkpoint_every,
        progress=lambda done, total, loss: progress.stage_advanced(name, done, total, loss),
        precision=spec.precision, threads=spec.threads)
    save_model(model, root / name)
    return {"seconds": round(result.seconds, 2), "steps": result.steps, "loss": round(result.loss, 4),
            "loss_kind": "cross-entropy, nats/byte" if teacher is None else "KL(target-v1 || draft), nats",
            "resumed_from": result.resumed_from, "version": weights_version(model),
            "parameters": sum(p.numel() for p in model.parameters()), "shape": asdict(shape),
            "precision": resolve_precision(spec.precision), "batch_size": stage.batch_size,
            "seq_len": spec.seq_len, "lr": stage.lr, "mix": dict(stage.mix)}


def _shipped_stage(spec: KitSpec, root: Path, name: str, ship: dict) -> dict:
    began = time.perf_counter()
    shape = spec.draft if name == "draft" else spec.target
    entry = ship["models"][name]
    model = read_model(new_model(shape, spec.seq_len, hash_seed(spec.seed, f"{name}/init")), entry,
                       Path(ship["folder"]))
    save_model(model, root / name)
    return {"seconds": round(time.perf_counter() - began, 2), "source": "shipped weights (float16)",
            "file": entry["file"], "sha256": entry["sha256"], "trained_version": entry["trained_version"],
            "version": weights_version(model), "parameters": sum(p.numel() for p in model.parameters()),
            "shape": asdict(shape)}
