"""The workload's prompt sets: enough prompts per domain and split, held-out prompts sharing no material with
training ones, well-formed chat messages, files that match their templates, and a broken file refused with
the file, line and field named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.workload import build
from agent.workload.prompts import DATA, SPLITS, WorkloadError, domains, load, parse_file
from agent.workload.sources import registry

DOMAINS = domains()


def test_at_least_five_domains_that_differ_in_how_speculation_pays():
    assert {"code", "edit", "extract", "chat", "json"} <= set(DOMAINS)
    assert set(DOMAINS) == set(registry())  # every set has templates and every template a set


@pytest.mark.parametrize("domain", DOMAINS)
def test_every_set_has_50_prompts_in_each_split(domain):
    for split in SPLITS:
        assert len(load(domain, split)) >= 50, (domain, split)


@pytest.mark.parametrize("domain", DOMAINS)
def test_the_heldout_split_shares_no_prompt_and_no_source_with_train(domain):
    train, held = load(domain, "train"), load(domain, "heldout")
    assert not {p.group for p in train} & {p.group for p in held}
    assert not {str(p.messages) for p in train} & {str(p.messages) for p in held}
    every = load(domain)
    assert len({p.id for p in every}) == len(every) == len(train) + len(held)
    assert len({str(p.messages) for p in every}) == len(every)  # no prompt twice


@pytest.mark.parametrize("domain", DOMAINS)
def test_messages_are_well_formed_chat_requests(domain):
    """Read from the raw file, not through the loader: what an engine would be sent."""
    for line in (DATA / f"{domain}.jsonl").read_text(encoding="utf-8").splitlines():
        messages = json.loads(line)["messages"]
        roles = [m["role"] for m in messages]
        assert roles in (["user"], ["system", "user"]), roles
        assert all(set(m) == {"role", "content"} and m["content"].strip() for m in messages)


@pytest.mark.parametrize("domain", DOMAINS)
def test_each_file_is_what_its_templates_write(domain):
    if domain == "copy" and sys.version_info[:2] != (3, 11):
        pytest.skip("copy is written from Python 3.11's docstrings")
    # In a fresh interpreter: copy reads the standard library's docstrings, and modules other tests imported
    # or patched change what a module holds (the set read in the middle of a whole suite differed).
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "agent.workload.build", "--check", domain], cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_build_writes_a_set_the_loader_reads(tmp_path):
    path = build.write("code", root=tmp_path)
    assert [p.messages for p in load("code", root=tmp_path)] == [p.messages for p in load("code")]
    assert path.read_text(encoding="utf-8") == (DATA / "code.jsonl").read_text(encoding="utf-8")


def _line(**change) -> str:
    item = {"id": "x-1", "group": "g1", "split": "train",
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]}
    item.update(change)
    return json.dumps({k: v for k, v in item.items() if v is not None})


BROKEN = [
    ("not json", '{"id": "x-1",', r"x\.jsonl:2: not JSON"),
    ("a list", "[1, 2]", r"x\.jsonl:2: expected a JSON object"),
    ("no split", _line(split=None), r"x\.jsonl:2: split: missing"),
    ("bad split", _line(split="test"), r"x\.jsonl:2: split: expected one of train, heldout"),
    ("extra field", json.dumps({**json.loads(_line()), "answer": "a"}), r"x\.jsonl:2: answer: unknown field"),
    ("empty id", _line(id=" "), r"x\.jsonl:2: id: must be a non-empty string"),
    ("no messages", _line(messages=[]), r"x\.jsonl:2: messages: must be a non-empty list"),
    ("bad role", _line(messages=[{"role": "bot", "content": "Hi"}]), r"x\.jsonl:2: messages\[0\]\.role: expected"),
    ("empty content", _line(messages=[{"role": "system", "content": "x"}, {"role": "user", "content": ""}]),
     r"x\.jsonl:2: messages\[1\]\.content: must be a non-empty string"),
    ("extra key", _line(messages=[{"role": "user", "content": "Hi", "name": "a"}]),
     r"x\.jsonl:2: messages\[0\]: must be an object with exactly role and content"),
    ("late system", _line(messages=[{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]),
     r"x\.jsonl:2: messages\[1\]\.role: a system message comes first"),
    ("answer last", _line(messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]),
     r"x\.jsonl:2: messages\[1\]\.role: the last message must be the user's"),
    ("same id", _line(group="g2"), r"x\.jsonl:2: id: 'x-1' appears twice"),
    ("group in both splits", _line(id="x-2", split="heldout"), r"x\.jsonl:2: split: group 'g1' is already in"),
]


@pytest.mark.parametrize("text, message", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_file_is_refused_naming_file_line_and_field(tmp_path, text, message):
    path = tmp_path / "x.jsonl"
    path.write_text(_line() + "\n" + text + "\n", encoding="utf-8")
    with pytest.raises(WorkloadError, match="^" + message):
        parse_file(path)


def test_a_good_file_of_the_same_shape_loads(tmp_path):
    """The broken files above differ from this one only in what is broken."""
    path = tmp_path / "x.jsonl"
    path.write_text(_line() + "\n\n" + _line(id="x-2") + "\n", encoding="utf-8")
    assert [p.id for p in parse_file(path)] == ["x-1", "x-2"]
    assert parse_file(path)[0].messages[0] == {"role": "system", "content": "Be brief."}


def test_a_broken_set_in_the_data_folder_fails_load(tmp_path):
    shutil.copy(DATA / "chat.jsonl", tmp_path / "chat.jsonl")
    with (tmp_path / "chat.jsonl").open("a", encoding="utf-8") as f:
        f.write(_line(split="later") + "\n")
    with pytest.raises(WorkloadError, match=r"^chat\.jsonl:481: split:"):
        load("chat", root=tmp_path)


@pytest.mark.parametrize("kwargs, field", [({"domain": "poetry"}, "domain"), ({"domain": "chat", "split": "test"},
                                                                             "split")])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        load(**kwargs)
