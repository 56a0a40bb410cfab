import sys
from pathlib import Path

import pytest
import torch

# tests/ holds shared helpers (tiny_models) imported by test modules in sub-folders.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run as fast on one thread, and one thread does not stall when the machine is busy."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def kit_home(tmp_path_factory):
    """A SPECWATCH_HOME holding the tiny kit, built once per test session (tests only read it)."""
    from agent.kit.build import build_kit

    home = tmp_path_factory.mktemp("home")
    build_kit("tiny", home=home)
    return home


@pytest.fixture(scope="session")
def tiny_kit(kit_home):
    from agent.kit.load import load_kit

    return load_kit("tiny", device="cpu", home=kit_home)


@pytest.fixture(scope="session")
def real_model(tmp_path_factory):
    """SmolLM2-135M-Instruct prepared in a SPECWATCH_HOME of its own (the GGUF as its package ships it, a
    transformers checkpoint, the shipped distilled draft): ~1 minute, once per session. Skipped with the
    reason when its package is not installed (`make real`; CI installs it)."""
    from agent.pretrained import catalog, source
    from agent.pretrained.prepare import prepare

    try:
        source.locate(catalog.SMOLLM2)
    except source.ModelMissingError as exc:
        pytest.skip(str(exc))
    return prepare(home=tmp_path_factory.mktemp("real-home"), say=lambda _: None, install_missing=False)
