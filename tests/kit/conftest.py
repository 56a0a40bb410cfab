import pytest
from kit_micro import MICRO

from agent.kit.build import build_kit


@pytest.fixture(scope="module", autouse=True)
def _one_thread(one_thread):
    """Every kit test on one thread (tests/conftest.py)."""


@pytest.fixture(scope="session")
def micro_root(tmp_path_factory):
    """An uninterrupted build of the micro kit, the reference for determinism and resume tests."""
    return build_kit(MICRO, home=tmp_path_factory.mktemp("micro"))
