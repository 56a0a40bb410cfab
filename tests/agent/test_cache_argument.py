"""The decoder and the guard pass the KV cache by the installed transformers' own name: no deprecation.

transformers 5 renamed ``past_key_values`` to ``cache``: the old keyword argument still works but raises a
FutureWarning per call, and reading ``output.past_key_values`` logs "`past_key_values`/`cache_params` are
deprecated" (once per process, through transformers' own logger, which does not propagate to caplog).
"""

from __future__ import annotations

import logging
import warnings

import pytest
import torch
from transformers.utils import logging as hf_logging

from agent.decoding.decoder import SpeculativeDecoder, cache_argument
from agent.guard import estimate as est
from agent.decoding.sampling import SamplingParams
from tiny_models import gpt2, llama, perturbed


DEPRECATIONS = (FutureWarning, DeprecationWarning)


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def deprecations():
    """A function listing the deprecation warnings, and transformers' log messages about deprecations, raised
    since the test began."""
    logger = logging.getLogger("transformers")
    handler, level = _Collect(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    hf_logging.warning_once.cache_clear()  # else a message logged earlier in this process is not logged again
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield lambda: ([str(w.message) for w in caught if issubclass(w.category, DEPRECATIONS)]
                           + [m for m in handler.messages if "deprecated" in m])
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.parametrize("make", [llama, gpt2])
def test_decoding_warns_of_no_deprecated_cache_argument(make, deprecations):
    target = make(seed=0)
    tokens = SpeculativeDecoder(target, perturbed(target, 0.05)).generate([1, 2, 3], 12, 3).tokens
    ids = [1, 2, 3]
    with torch.inference_mode():
        for _ in range(12):
            ids.append(int(torch.argmax(target(torch.tensor([ids])).logits[0, -1])))
    assert tokens == ids[3:]
    assert deprecations() == []


def test_the_guards_continuation_warns_of_no_deprecated_cache_argument(deprecations):
    target = llama(seed=0)
    ids = torch.tensor([[1, 2, 3, 4]])
    _, tokens = est._continue(target, ids, torch.ones_like(ids), 8, SamplingParams(), None)
    assert tokens[0].tolist() == SpeculativeDecoder(target, target).generate([1, 2, 3, 4], 8, 0).tokens
    assert deprecations() == []


def test_a_model_with_the_old_signature_gets_the_old_name():
    class Old:
        def forward(self, input_ids, past_key_values=None, **kwargs):
            pass

    assert cache_argument(llama(seed=0)) == "cache" and cache_argument(Old()) == "past_key_values"
