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
