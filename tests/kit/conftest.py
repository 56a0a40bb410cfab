import pytest
import torch
from kit_micro import MICRO

from agent.kit.build import build_kit
from agent.kit.load import load_kit


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models run as fast on one thread, and one thread does not stall when the machine is busy."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def kit_home(tmp_path_factory):
    """A SPECWATCH_HOME holding the tiny kit, built once per test session."""
    home = tmp_path_factory.mktemp("home")
    build_kit("tiny", home=home)
    return home


@pytest.fixture(scope="session")
def tiny_kit(kit_home):
    return load_kit("tiny", device="cpu", home=kit_home)


@pytest.fixture(scope="session")
def micro_root(tmp_path_factory):
    """An uninterrupted build of the micro kit, the reference for determinism and resume tests."""
    return build_kit(MICRO, home=tmp_path_factory.mktemp("micro"))
