"""Re-distill a draft against a (new) target, e.g. to refresh a stale draft from sampled live prompts.

Training text is the prompts extended by the target's own greedy continuations (data on the path the
target actually takes, as DistillSpec, arXiv 2310.08461, recommends), or without prompts the kit's
training text. The loss and loop are the kit's: KL(target || draft) per position.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch

from agent.decoding.versions import weights_version
from agent.kit import layout, tokenizer
from agent.kit.build import save_model
from agent.kit.load import load_model
from agent.kit.train import Progress, WindowSampler, train


def read_prompts(path: str | Path) -> list[str]:
    """Prompts from a JSON list, a prompts.json ({domain: [...]}) or JSON lines (strings or
    objects with "prompt" or "text")."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = json.loads(text)
        if isinstance(data, dict) and {"prompt", "text"} & data.keys():
            rows = [data]  # JSON lines of one line (a live prompt sample of one prompt)
        else:
            rows = data if isinstance(data, list) else [p for group in data.values() for p in group]
    except json.JSONDecodeError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    prompts = [row if isinstance(row, str) else row.get("prompt", row.get("text")) for row in rows]
    if not prompts or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError(f"{path}: expected non-empty prompt strings")
    return prompts


@torch.inference_mode()
def continuations(target, prompts: list[str], new_tokens: int, max_positions: int) -> np.ndarray:
    """Each prompt followed by the target's greedy continuation and EOS, as one token stream."""
    parts = []
    for prompt in prompts:
        ids = tokenizer.encode(prompt)[-(max_positions - new_tokens):]
        inputs = torch.tensor([ids], device=target.device)
        out = target.generate(inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=new_tokens,
                              do_sample=False, pad_token_id=tokenizer.PAD_ID)
        parts.append(np.asarray(out[0].tolist() + [tokenizer.EOS_ID], dtype=np.uint16))
    return np.concatenate(parts)


def distill(target_dir: str | Path, draft_dir: str | Path, out_dir: str | Path, *,
            prompts: list[str] | None = None, kit_root: Path | None = None, replay: float = 0.0,
            steps: int = 200,
            batch_size: int = 16, lr: float = 1e-3, new_tokens: int = 128, seed: int = 0,
            precision: str = "auto", progress: Progress | None = None,
            streams: list[list[int]] | None = None, seq_len: int | None = None) -> dict:
    """Distill the draft in ``draft_dir`` against ``target_dir`` and save it to ``out_dir``.

    Without ``prompts``, trains on the training text of the kit in ``kit_root`` (its v2 mix). With both,
    ``replay`` is the share of batches drawn from the kit's text: distilling on one domain's prompts
    alone makes the draft forget the others. ``streams`` instead of prompts: token ids already on the
    target's path (sampled live prompts followed by the target's own output), used as they are.
    ``seq_len`` caps the training window (shorter windows, cheaper steps). Returns what was written to
    ``out_dir/distill.json``.
    """
    if prompts and streams:
        raise ValueError("streams: give prompts or streams, not both")
    if not 0.0 <= replay < 1.0:
        raise ValueError(f"replay: must be in [0, 1), got {replay}")
    began = time.perf_counter()
    target, draft = load_model(target_dir, device="cpu"), load_model(draft_dir, device="cpu")
    if target.config.vocab_size != draft.config.vocab_size:
        raise ValueError(f"draft: vocabulary {draft.config.vocab_size} differs from the target's "
                         f"{target.config.vocab_size}")
    max_positions = min(target.config.max_position_embeddings, draft.config.max_position_embeddings)
    before = weights_version(draft)
    sources, mix, described = {}, (), []
    prompts = prompts or None
    own = bool(prompts or streams)  # text of the caller's, beside the kit's (replay)
    if not own or replay > 0:
        if kit_root is None or not (kit_root / layout.MANIFEST).exists():
            raise FileNotFoundError("distill: the kit's training text is needed (without prompts, or for "
                                    "replay); build it with: specwatch models build")
        spec = layout.read_manifest(kit_root)["spec"]
        sources.update(layout.load_sources(kit_root))
        share = replay if own else 1.0
        mix = tuple((name, weight * share) for name, weight in spec["target_v2"]["mix"])
        described.append(f"kit training text ({kit_root.name}, v2 mix, share {share:g})")
    if prompts:
        sources["prompts"] = continuations(target, prompts, new_tokens, max_positions)
        mix += (("prompts", 1.0 - replay),)
        described.append(f"{len(prompts)} prompts + {new_tokens}-token greedy continuations of the target")
    elif streams:
        sources["prompts"] = np.concatenate([np.asarray(list(s) + [tokenizer.EOS_ID], dtype=np.uint16)
                                             for s in streams])
        mix += (("prompts", 1.0 - replay),)
        described.append(f"{len(streams)} sampled live requests (prompt + the target's output)")
    # Windows must fit every mixed source (a few short prompts make a short stream).
    seq_len = min(seq_len or max_positions - 1, max_positions - 1,
                  min(len(sources[name]) for name, _ in mix) - 2)
    sampler = WindowSampler(sources, mix, batch_size, seq_len, seed)
    result = train(draft, sampler, steps=steps, lr=lr, warmup=min(10, steps // 10), teacher=target,
                   progress=progress, precision=precision)
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    save_model(draft, out)
    info = {"target": str(target_dir), "target_version": weights_version(target),
            "draft_from": str(draft_dir),
            "draft_version_before": before, "version": weights_version(draft),
            "text": "; ".join(described), "replay": replay if own else 1.0, "steps": steps,
            "batch_size": batch_size, "seq_len": seq_len, "lr": lr,
            "loss": round(result.loss, 4), "loss_kind": "KL(target || draft), nats",
            "seconds": round(time.perf_counter() - began, 2)}
    layout.write_json(out / "distill.json", info)
    return info
