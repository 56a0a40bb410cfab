"""Build the draft for a prepared pretrained model (``specwatch models pretrained --distill``) and ship it.

The teacher streams (agent/pretrained/teacher.py) are kept under the model's ``data/`` folder, so a rerun
trains again without asking the engine. Training is the kit's loop (agent/kit/train.py: AdamW, warm-up and
cosine decay, checkpoints, Ctrl-C resumes) on windows of the streams, next-token cross-entropy.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from agent.decoding.versions import weights_version
from agent.kit.load import load_model
from agent.kit.shipped import environment, write_model
from agent.kit.train import Progress, WindowSampler, train
from agent.pretrained import shipped
from agent.pretrained.draft import DraftShape, new_draft, stream_array
from agent.pretrained.prepare import Prepared

STREAMS = "teacher-train.json"


def streams_path(prepared: Prepared) -> Path:
    return prepared.root / "data" / STREAMS


def save_streams(prepared: Prepared, streams: list[list[int]], about: dict) -> Path:
    path = streams_path(prepared)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"about": about, "streams": streams}))
    tmp.replace(path)
    return path


def load_streams(prepared: Prepared) -> tuple[list[list[int]], dict]:
    path = streams_path(prepared)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no teacher streams yet; run specwatch models pretrained --distill "
                                f"with llama-server installed (make engine)")
    data = json.loads(path.read_text())
    return data["streams"], data["about"]


def build_draft(prepared: Prepared, out: Path, *, steps: int = 600, batch_size: int = 8, seq_len: int = 128,
                lr: float = 2e-3, seed: int = 0, shape: DraftShape = DraftShape(), start: Path | None = None,
                progress: Progress | None = None, threads: int = 0, precision: str = "auto") -> dict:
    """Train a draft on the saved teacher streams and save it to ``out``; what was done. The draft is fresh
    (``shape``, initialised from the target's embeddings) or, with ``start``, that draft folder's weights
    trained further (its shape; ``lr`` halved, as a fine-tune). A step costs
    about 6 x 49,152 x 192 multiply-adds per token in the output layer alone, so batches are small (8 windows
    of 128 tokens) and bfloat16 is used where the CPU has it (``precision`` "auto")."""
    if prepared.hf is None:
        raise FileNotFoundError(f"{prepared.name}: the transformers checkpoint is needed (prepare without --no-hf)")
    streams, about = load_streams(prepared)
    began = time.perf_counter()
    if start is not None:
        draft = load_model(Path(start), device="cpu", dtype="float32")
        shape = DraftShape.of(draft.config)
        started = weights_version(draft)
        lr = lr / 2
    else:
        target = load_model(prepared.hf, device="cpu", dtype="float32")
        draft, started = new_draft(target, shape, seed), None
        del target
    tokens = stream_array(streams)
    sampler = WindowSampler({"teacher": tokens}, (("teacher", 1.0),), batch_size, seq_len, seed)
    result = train(draft, sampler, steps=steps, lr=lr, warmup=min(50, steps // 10),
                   checkpoint=out.with_suffix(".ckpt"), progress=progress, threads=threads, precision=precision)
    out.mkdir(parents=True, exist_ok=True)
    draft.save_pretrained(out)
    info = {"version": weights_version(draft), "parameters": sum(p.numel() for p in draft.parameters()),
            "shape": shape.__dict__, "started_from": started, "steps": steps, "precision": precision,
            "batch_size": batch_size, "seq_len": seq_len, "lr": lr, "loss": round(result.loss, 4),
            "loss_kind": "cross-entropy, nats", "train_seconds": round(result.seconds, 1),
            "tokens": int(tokens.size), "teacher": about, "seconds": round(time.perf_counter() - began, 1)}
    (out / "distill.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def ship(prepared: Prepared, trained: Path, info: dict, acceptance: dict | None = None) -> dict:
    """Write the trained draft into the repository (float16, tied output once) with its manifest."""
    from transformers import AutoModelForCausalLM

    where = shipped.folder(prepared.name)
    where.mkdir(parents=True, exist_ok=True)
    model = AutoModelForCausalLM.from_pretrained(trained, dtype=torch.float32)
    model.config.save_pretrained(where)
    entry = write_model(model, where / "draft.safetensors")
    # The version the shipped (float16-rounded) weights load as: what records and the proxy will carry.
    from agent.kit.shipped import read_model

    loaded = read_model(AutoModelForCausalLM.from_config(model.config), entry, where)
    manifest = {"model": prepared.name, "target_version": prepared.target_version,
                "version": weights_version(loaded), "trained_version": info["version"],
                "parameters": info["parameters"], "weights": entry, "training": info,
                "acceptance": acceptance, "environment": environment(),
                "rebuild": rebuild_command(prepared.name, info)}
    (where / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def rebuild_command(name: str, info: dict) -> str:
    """The command that trains this draft again (a fine-tune names the draft version it started from)."""
    per_domain = (info.get("teacher") or {}).get("per_domain")
    command = f"specwatch models pretrained --name {name} --distill --steps {info['steps']}"
    command += f" --per-domain {per_domain}" if per_domain else ""
    if info.get("started_from"):
        return command + f" --from-draft --ship  # with draft {info['started_from']} installed"
    return command + " --ship"


def tokens_of(streams: list[list[int]]) -> int:
    return int(np.sum([len(s) for s in streams]))
