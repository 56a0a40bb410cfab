"""Domain texts for the kit, a held-out split by file, and held-out prompts.

Domains, from most to least predictable: ``logs`` (JSON-lines service logs, see :mod:`agent.workload.sources.service_logs`),
``code`` (the Python standard library's .py sources) and ``prose`` (its docstrings and comments, pulled
out with ``ast`` and ``tokenize``). ``logs-v2`` is the schema-2 log source that only target v2 trains on.

A stdlib file is held out when a hash of its relative path says so, so the split does not depend on
which files a budget reads; log streams are held out by index. Prompts come only from held-out text, and
a prompt that happens to occur verbatim in any training text (licence headers, copied docstrings) is
skipped, so prompts are disjoint from training text by construction.
"""

from __future__ import annotations

import ast
import hashlib
import io
import random
import sysconfig
import tokenize
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from agent.kit import tokenizer
from agent.workload.sources import service_logs as logs

DOMAINS = ("code", "prose", "logs")
SOURCES = DOMAINS + ("logs-v2",)
HELDOUT_EVERY = 8  # one file (or log stream) in eight is held out
LOG_STREAM_BYTES = 16_000
# Generated tables, test suites and giant data modules are not representative source code.
_SKIP_PARTS = {"site-packages", "dist-packages", "test", "tests", "idlelib", "turtledemo", "encodings",
               "pydoc_data", "__pycache__", "lib2to3", "ensurepip"}
_MAX_FILE_BYTES = 250_000


@dataclass(frozen=True)
class Corpus:
    """Training token streams per source, held-out text and prompts per domain."""

    train: dict[str, np.ndarray]  # source -> uint16 token ids, documents joined by EOS
    heldout: dict[str, str]  # domain -> held-out text (for loss)
    prompts: dict[str, list[str]]  # domain -> held-out prompts


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def stdlib_files(root: Path | None = None) -> list[str]:
    """Relative paths of the stdlib's .py files worth training on, sorted."""
    root = root or stdlib_root()
    paths = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root)
        if _SKIP_PARTS.isdisjoint(rel.parts[:-1]) and not rel.name.startswith("_sysconfigdata"):
            paths.append(rel.as_posix())
    return sorted(paths)


def is_heldout(name: str) -> bool:
    return hashlib.sha256(name.encode()).digest()[0] % HELDOUT_EVERY == 0


def prose_of(source: str) -> str:
    """Docstrings and comment blocks of a Python source, in source order, one paragraph each."""
    found: list[tuple[int, str]] = []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc and len(doc.split()) >= 4:
                found.append((getattr(node, "lineno", 0), doc))
    block: list[str] = []
    last = start = -2
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.COMMENT:
                continue
            text = tok.string.lstrip("#").strip()
            row = tok.start[0]
            if row != last + 1 and block:
                found.append((start, " ".join(block)))
                block = []
            if not block:
                start = row
            # Shebangs, coding cookies, pragmas and separators are not prose.
            if text and not text.startswith(("!", "-*-", "noqa", "type:", "pragma", "XXX", "=", "-")):
                block.append(text)
            last = row
    except (tokenize.TokenError, SyntaxError):
        pass
    if block:
        found.append((start, " ".join(block)))
    paragraphs = [text for _, text in sorted(found, key=lambda item: item[0]) if len(text.split()) >= 4]
    return "\n\n".join(paragraphs)


def _read(root: Path, name: str) -> str | None:
    path = root / name
    if path.stat().st_size > _MAX_FILE_BYTES:
        return None
    try:
        return path.read_text("utf-8")
    except (UnicodeDecodeError, OSError):
        return None


def stdlib_documents(budget: dict[str, int], heldout_budget: int, seed: int,
                     root: Path | None = None) -> dict[tuple[str, bool], list[str]]:
    """Code and prose documents, keyed (domain, held_out), until each byte budget is filled.

    Files are read in a seeded order so a small budget still samples the whole library.
    """
    root = root or stdlib_root()
    names = stdlib_files(root)
    random.Random(seed).shuffle(names)
    docs: dict[tuple[str, bool], list[str]] = {(d, h): [] for d in ("code", "prose") for h in (False, True)}
    filled = {key: 0 for key in docs}
    limit = {("code", False): budget["code"], ("prose", False): budget["prose"],
             ("code", True): heldout_budget, ("prose", True): heldout_budget}
    for name in names:
        if all(filled[key] >= limit[key] for key in docs):
            break
        held = is_heldout(name)
        wanted = [d for d in ("code", "prose") if filled[(d, held)] < limit[(d, held)]]
        source = _read(root, name) if wanted else None
        if not source:
            continue
        for domain in wanted:
            text = source if domain == "code" else prose_of(source)
            if text:
                docs[(domain, held)].append(text)
                filled[(domain, held)] += len(text.encode())
    return docs


def log_documents(budget: int, heldout_budget: int, seed: int, schema: int = 1) -> dict[bool, list[str]]:
    """Log streams keyed by held_out; stream i is held out when i % HELDOUT_EVERY == 0."""
    docs: dict[bool, list[str]] = {False: [], True: []}
    filled = {False: 0, True: 0}
    limit = {False: budget, True: heldout_budget}
    i = 0
    while filled[False] < limit[False] or filled[True] < limit[True]:
        held = i % HELDOUT_EVERY == 0
        if filled[held] < limit[held]:
            text = logs.stream(hash_seed(seed, f"logs/{schema}/{i}"), LOG_STREAM_BYTES, schema)
            docs[held].append(text)
            filled[held] += len(text)
        i += 1
    return docs


def hash_seed(seed: int, label: str) -> int:
    """A 63-bit seed derived from ``seed`` and a label (stable across processes, unlike hash())."""
    return int.from_bytes(hashlib.sha256(f"{seed}/{label}".encode()).digest()[:8], "little") >> 1


def join_tokens(documents: list[str]) -> np.ndarray:
    """Token ids of the documents, each followed by EOS."""
    parts = []
    for doc in documents:
        parts.append(tokenizer.encode_array(doc))
        parts.append(np.array([tokenizer.EOS_ID], dtype=np.uint16))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint16)


def pick_prompts(documents: list[str], n: int, min_bytes: int, max_bytes: int, seed: int,
                 forbidden: list[bytes]) -> list[str]:
    """``n`` prompts of whole lines (min_bytes..max_bytes) from ``documents``, none inside ``forbidden``."""
    rng = random.Random(seed)
    candidates = [doc for doc in documents if len(doc.encode()) > max_bytes]
    prompts: list[str] = []
    seen: set[str] = set()
    for _ in range(200 * n):
        if len(prompts) == n or not candidates:
            break
        lines = rng.choice(candidates).splitlines(keepends=True)
        start = rng.randrange(len(lines))
        text = ""
        for line in lines[start:]:
            if len((text + line).encode()) > max_bytes:
                break
            text += line
        size = len(text.encode())
        if size < min_bytes or not text.strip() or text in seen:
            continue
        encoded = text.encode()
        if any(encoded in other for other in forbidden):
            continue
        seen.add(text)
        prompts.append(text)
    if len(prompts) < n:
        raise ValueError(f"prompts: found only {len(prompts)} of {n}; raise the held-out budget")
    return prompts


def build_corpus(spec) -> Corpus:
    """Every text the kit trains and evaluates on, for a KitSpec (deterministic)."""
    data = spec.data
    budget = {"code": data.code_bytes, "prose": data.prose_bytes}
    std = stdlib_documents(budget, data.heldout_bytes, spec.seed)
    logs1 = log_documents(data.logs_bytes, data.heldout_bytes, spec.seed, schema=1)
    logs2 = log_documents(data.logs_bytes, 0, spec.seed, schema=2)
    train_docs = {"code": std[("code", False)], "prose": std[("prose", False)], "logs": logs1[False],
                  "logs-v2": logs2[False]}
    held_docs = {"code": std[("code", True)], "prose": std[("prose", True)], "logs": logs1[True]}
    train_text = [("\n".join(docs)).encode() for docs in train_docs.values()]
    prompts = {domain: pick_prompts(held_docs[domain], data.prompts_per_domain, data.prompt_min_bytes,
                                    data.prompt_max_bytes, hash_seed(spec.seed, f"prompts/{domain}"),
                                    train_text)
               for domain in DOMAINS}
    return Corpus(train={source: join_tokens(docs) for source, docs in train_docs.items()},
                  heldout={domain: "\n".join(docs) for domain, docs in held_docs.items()},
                  prompts=prompts)
