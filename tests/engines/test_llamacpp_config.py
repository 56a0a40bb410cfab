"""LlamaServerConfig validation and the command line it builds (no llama.cpp needed)."""

import pytest

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig, LlamaServerError, find_binary, free_port


@pytest.fixture
def files(tmp_path):
    target, draft = tmp_path / "t.gguf", tmp_path / "d.gguf"
    target.write_bytes(b"GGUF")
    draft.write_bytes(b"GGUF")
    return target, draft


def _flag(args, name):
    return args[args.index(name) + 1]


def test_speculation_flags(files):
    target, draft = files
    args = LlamaServerConfig(model=target, draft=draft, lookahead=6, threads=2).args(8123)
    assert _flag(args, "-m") == str(target) and _flag(args, "--port") == "8123"
    assert _flag(args, "--host") == "127.0.0.1"
    assert _flag(args, "-md") == str(draft) and _flag(args, "--spec-type") == "draft-simple"
    assert _flag(args, "--spec-draft-n-max") == "6" and _flag(args, "--spec-draft-p-min") == "0.0"
    assert _flag(args, "-t") == "2" and "--metrics" in args


def test_no_speculation_without_lookahead(files):
    target, draft = files
    args = LlamaServerConfig(model=target, draft=draft, lookahead=0, metrics=False).args(1)
    assert "-md" not in args and "--spec-type" not in args and "--metrics" not in args


@pytest.mark.parametrize("scale, flags", [
    (1.0, ["--lora", "{a}"]),
    (0.5, ["--lora-scaled", "{a}:0.5"]),
    (0.0, ["--lora-scaled", "{a}:0"]),
])
def test_a_lora_adapter_is_loaded_at_its_scale(files, tmp_path, scale, flags):
    adapter = tmp_path / "lora-v2.gguf"
    adapter.write_bytes(b"GGUF")
    config = LlamaServerConfig(model=files[0], lora=adapter, lora_scale=scale)
    args = config.args(1)
    assert config.lora_args() == [f.format(a=adapter) for f in flags]
    assert args[args.index(flags[0]):args.index(flags[0]) + len(flags)] == config.lora_args()
    assert LlamaServerConfig(model=files[0]).lora_args() == []


@pytest.mark.parametrize("kwargs, field", [
    ({"lora": "/absent/lora.gguf"}, "lora"),
    ({"lora_scale": -1.0}, "lora_scale"),
    ({"lookahead": 2}, "draft"),
    ({"lookahead": -1}, "lookahead"),
    ({"parallel": 0}, "parallel"),
    ({"ctx_size": -5}, "ctx_size"),
    ({"port": 70000}, "port"),
    ({"draft_p_min": 1.5}, "draft_p_min"),
    ({"threads": 0}, "threads"),
])
def test_bad_config_names_the_field(files, kwargs, field):
    with pytest.raises(ValueError, match=f"LlamaServerConfig.{field}"):
        LlamaServerConfig(model=files[0], **kwargs)


def test_missing_model_file(tmp_path):
    with pytest.raises(ValueError, match="LlamaServerConfig.model"):
        LlamaServerConfig(model=tmp_path / "absent.gguf")


def test_binary_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECWATCH_LLAMA_SERVER", str(tmp_path / "nope"))
    with pytest.raises(LlamaServerError, match="not a file"):
        find_binary()
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SPECWATCH_LLAMA_SERVER", str(fake))
    assert find_binary() == fake


def test_a_server_that_dies_at_start_reports_its_log(files, tmp_path):
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho 'error: model is broken'\nexit 3\n")
    fake.chmod(0o755)
    server = LlamaServer(LlamaServerConfig(model=files[0]), binary=fake, log_path=tmp_path / "log")
    with pytest.raises(LlamaServerError, match="(?s)exited with 3.*model is broken"):
        server.start(timeout=10)
    assert not server.running() and server.stop() is None


def test_free_port_is_bindable():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", free_port()))


def test_ngram_self_speculation_needs_no_draft(files):
    target, _ = files
    args = LlamaServerConfig(model=target, speculation="ngram-mod", lookahead=24).args(1)
    assert _flag(args, "--spec-type") == "ngram-mod" and "-md" not in args
    assert _flag(args, "--spec-ngram-mod-n-max") == "24"
    assert _flag(args, "--spec-ngram-mod-n-min") == "18"  # llama.cpp's own 48 of 64: three quarters of K
    args = LlamaServerConfig(model=target, speculation="ngram-mod", lookahead=8, draft_min=2).args(1)
    assert _flag(args, "--spec-ngram-mod-n-min") == "2"
    args = LlamaServerConfig(model=target, speculation="ngram-simple", lookahead=8).args(1)
    assert _flag(args, "--spec-ngram-simple-size-m") == "8"


def test_spec_default_drafts_up_to_64(files):
    config = LlamaServerConfig(model=files[0], speculation="default")
    assert config.lookahead == 64 and config.speculation_args() == ["--spec-default"]
    with pytest.raises(ValueError, match="LlamaServerConfig.lookahead: --spec-default drafts up to 64"):
        LlamaServerConfig(model=files[0], speculation="default", lookahead=8)


@pytest.mark.parametrize("kwargs, field", [
    ({"speculation": "eagle"}, "speculation"),
    ({"speculation": "ngram-mod", "lookahead": 8, "draft": "d"}, "draft"),
])
def test_bad_speculation_names_the_field(files, kwargs, field):
    if "draft" in kwargs:
        kwargs["draft"] = files[1]
    with pytest.raises(ValueError, match=f"LlamaServerConfig.{field}"):
        LlamaServerConfig(model=files[0], **kwargs)
