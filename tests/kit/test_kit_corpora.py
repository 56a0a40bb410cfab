import numpy as np
import pytest

from agent.kit import corpora, tokenizer
from agent.workload.sources import service_logs as logs
from agent.kit.specs import TINY


@pytest.fixture(scope="module")
def corpus():
    return corpora.build_corpus(TINY)


def test_corpus_is_deterministic(corpus):
    again = corpora.build_corpus(TINY)
    assert again.prompts == corpus.prompts
    assert again.heldout == corpus.heldout
    for source, tokens in corpus.train.items():
        assert np.array_equal(again.train[source], tokens), source


def test_sources_and_prompt_shapes(corpus):
    assert set(corpus.train) == set(corpora.SOURCES)
    assert set(corpus.prompts) == set(corpora.DOMAINS) == set(corpus.heldout)
    for domain, prompts in corpus.prompts.items():
        assert len(prompts) == TINY.data.prompts_per_domain
        assert len(set(prompts)) == len(prompts)
        for p in prompts:
            assert TINY.data.prompt_min_bytes <= len(p.encode()) <= TINY.data.prompt_max_bytes
    assert all(p.lstrip().startswith("{\"ts\":") for p in corpus.prompts["logs"])


def test_prompts_are_held_out(corpus):
    train_text = [tokenizer.decode_bytes(tokens.tolist()) for tokens in corpus.train.values()]
    for domain, prompts in corpus.prompts.items():
        for p in prompts:
            assert p in corpus.heldout[domain]
            assert not any(p.encode() in text for text in train_text), (domain, p[:60])


def test_split_is_by_file_name():
    names = corpora.stdlib_files()
    held = [n for n in names if corpora.is_heldout(n)]
    assert 0.05 < len(held) / len(names) < 0.25
    assert all(corpora.is_heldout(n) for n in held)  # a pure function of the name
    assert not any("site-packages" in n or n.startswith("test/") for n in names)


def test_prose_extraction():
    source = '''"""Module docstring with enough words."""

# A comment block that explains
# why the code below exists.
x = 1  # noqa


def f():
    """Return nothing at all, quietly."""
'''
    prose = corpora.prose_of(source)
    assert prose.split("\n\n") == ["Module docstring with enough words.",
                                   "A comment block that explains why the code below exists.",
                                   "Return nothing at all, quietly."]
    assert corpora.prose_of("def broken(:\n") == ""


def test_log_schemas():
    one, two = logs.stream(3, 2000, schema=1), logs.stream(3, 2000, schema=2)
    assert one == logs.stream(3, 2000, schema=1) and one != logs.stream(4, 2000, schema=1)
    assert all(line.startswith('{"ts":') for line in one.splitlines())
    assert all(line.startswith('{"severity":') for line in two.splitlines())
    with pytest.raises(ValueError, match="schema"):
        logs.stream(3, 100, schema=3)


def test_not_enough_prompts_is_an_error():
    with pytest.raises(ValueError, match="found only"):
        corpora.pick_prompts(["short\n" * 3], 2, 10, 40, seed=0, forbidden=[])


def test_prompts_found_in_training_text_are_skipped():
    doc = "".join(f"line number {i:03d}\n" for i in range(60))
    forbidden = [doc[: len(doc) // 2].encode()]
    prompts = corpora.pick_prompts([doc], 6, 30, 60, seed=0, forbidden=forbidden)
    assert len(prompts) == 6
    assert not any(p.encode() in forbidden[0] for p in prompts)
