"""Write a trained kit's weights into the repository as shipped weights (``specwatch models ship``), with
the draft's acceptance measured on the trained and on the shipped weights, so a test can hold the shipped
files to the trained kit's figures."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from agent.kit import layout
from agent.kit.build import build_kit
from agent.kit.evaluate import evaluate_pair
from agent.kit.load import KitNotBuiltError, load_kit
from agent.kit.shipped import environment, folder, write_model
from agent.kit.specs import get_spec

PROMPTS_PER_DOMAIN = 4
LOOKAHEAD = 4
TOLERANCE = 0.03  # absolute acceptance: the shipped weights must give the trained kit's within this


def acceptance(kit, prompts_per_domain: int = PROMPTS_PER_DOMAIN, lookahead: int = LOOKAHEAD) -> dict:
    """{"v1"|"v2": {domain: acceptance}}: greedy speculative decoding of the first prompts of each domain."""
    spec = kit.manifest["spec"]
    prompts = {d: texts[:prompts_per_domain] for d, texts in kit.prompts.items()}
    out = {}
    for name, target, version in (("v1", kit.target_v1, kit.versions["target-v1"]),
                                  ("v2", kit.target_v2, kit.versions["target-v2"])):
        results = evaluate_pair(target, kit.draft, name, prompts, None, lookahead, spec["eval_new_tokens"],
                                spec["seq_len"], (version, kit.versions["draft"]))
        out[name] = {r.domain: round(r.acceptance, 4) for r in results}
    return out


def ship(size: str, home: str | Path | None = None, into: Path | None = None) -> dict:
    """Write the trained ``size`` kit under ``home`` as shipped weights into ``into`` (the repository's
    folder by default); returns the manifest written."""
    spec = get_spec(size)
    root = layout.kit_dir(size, home)
    trained = layout.read_manifest(root)
    if trained is None or not trained.get("complete"):
        raise KitNotBuiltError(f"no complete {size!r} kit in {root}; build it with: specwatch models build --size {size}")
    if trained.get("spec_hash") != spec.fingerprint():
        raise KitNotBuiltError(f"{root} holds a kit of another {size!r} spec; rebuild it with --force")
    if any("source" in trained["stages"][m] for m in layout.MODELS):
        raise KitNotBuiltError(f"{root} was itself installed from shipped weights; ship a trained kit "
                               f"(specwatch models build --size {size} --force)")
    kit = load_kit(size, device="cpu", home=home)
    out = into or folder(size)
    out.mkdir(parents=True, exist_ok=True)
    models = {}
    for name, model in (("target-v1", kit.target_v1), ("draft", kit.draft), ("target-v2", kit.target_v2)):
        models[name] = {**write_model(model, out / f"{name}.safetensors"),
                        "trained_version": kit.versions[name], "parameters": sum(p.numel() for p in model.parameters()),
                        "trained_precision": trained["stages"][name].get("precision")}
    manifest = {"kit": size, "spec_hash": spec.fingerprint(), "models": models,
                "trained_with": trained.get("environment", {}), "shipped_with": environment(),
                "command": f"specwatch models build --size {size} --force && specwatch models ship --size {size}"}
    layout.write_json(out / layout.MANIFEST, manifest)
    with tempfile.TemporaryDirectory(prefix="specwatch-ship-") as tmp:
        # Install what was just written, as a user's first run would, and measure it beside the trained kit.
        build_kit(spec, home=tmp, shipped=out)
        installed = load_kit(size, device="cpu", home=tmp)
        for name in layout.MODELS:
            models[name]["version"] = installed.versions[name]
        manifest["acceptance"] = {"prompts_per_domain": PROMPTS_PER_DOMAIN, "lookahead": LOOKAHEAD,
                                  "new_tokens": spec.eval_new_tokens, "tolerance": TOLERANCE,
                                  "trained": acceptance(kit), "shipped": acceptance(installed)}
        shutil.rmtree(Path(tmp) / "kit", ignore_errors=True)
    layout.write_json(out / layout.MANIFEST, manifest)
    return manifest


def differences(measured: dict, manifest: dict) -> list[str]:
    """Where ``measured`` acceptance ({"v1"|"v2": {domain: a}}) is off the trained kit's figures in the
    shipped ``manifest`` by more than its tolerance; empty when the shipped weights reproduce them."""
    acc = manifest["acceptance"]
    return [f"{target}/{domain}: {measured[target][domain]:.3f} vs trained {a:.3f}"
            for target, domains in acc["trained"].items() for domain, a in domains.items()
            if abs(measured[target][domain] - a) > acc["tolerance"]]
