import pytest
import torch

from agent.kit.build import build_kit
from agent.kit.gguf import export_kit


@pytest.fixture(scope="session")
def kit_home(tmp_path_factory):
    """A SPECWATCH_HOME with the tiny kit (built on one thread: tiny models gain nothing from more, and
    one thread does not stall beside a running llama-server)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        home = tmp_path_factory.mktemp("home")
        build_kit("tiny", home=home)
    finally:
        torch.set_num_threads(previous)
    return home


@pytest.fixture(scope="session")
def tiny_gguf(kit_home, tmp_path_factory):
    """The tiny kit's three models as f32 GGUF: {model name: Exported}."""
    out = tmp_path_factory.mktemp("gguf")
    return {item.model: item for item in export_kit("tiny", out=out, home=kit_home, progress=lambda _: None)}
