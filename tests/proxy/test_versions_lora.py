"""Reading a llama.cpp /lora-adapters answer into the served target's version (pure functions; the proxy's pool
checks use them, tests/proxy/test_routing.py runs them behind a fake engine)."""

import pytest

from agent.proxy.engines.llamacpp import lora_adapters
from agent.proxy.versions import FileVersions, with_adapters


@pytest.mark.parametrize("answer, expected", [
    ([{"id": 0, "path": "/m/a.gguf", "scale": 1.0}, {"id": 1, "path": "/m/b.gguf", "scale": 0.0}],
     [("/m/a.gguf", 1.0)]),  # an adapter loaded at scale 0 is not applied
    ([{"id": 0, "path": "/m/a.gguf", "scale": 0.25}], [("/m/a.gguf", 0.25)]),
    ([{"id": 0, "path": "/m/a.gguf"}], [("/m/a.gguf", 1.0)]),
    ([], []), (None, []), ({"error": "not found"}, []), ([{"id": 0, "path": 3, "scale": 1}, "x"], []),
])
def test_applied_adapters(answer, expected):
    assert lora_adapters(answer) == tuple(expected)


def test_the_version_names_base_and_each_adapter(tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"adapter a")
    b.write_bytes(b"adapter b")
    files = FileVersions()
    one = with_adapters("base.gguf@123", [(str(a), 1.0)], files)
    assert one.startswith("base.gguf@123+a.gguf@") and len(one) == len("base.gguf@123+a.gguf@") + 12
    assert with_adapters("base.gguf@123", [(str(a), 0.5)], files) == one + "*0.5"
    assert with_adapters("base.gguf@123", [], files) == "base.gguf@123"
    assert with_adapters("base.gguf@123", [(str(b), 1.0)], files) != one
    long = with_adapters("x" * 200, [(str(a), 1.0)], files)
    assert len(long) == 128 and long.endswith(one[len("base.gguf@123"):])
