"""A fake llama.cpp server speaking the answer formats of llama.cpp's server build b11434 (fixtures in
fixtures/llamacpp_b11434.json, captured from the real server): /health, /props, /v1/models, /metrics, /slots,
/lora-adapters,
/v1/completions, /v1/chat/completions and /completion, streamed or not.

It "generates" ``max_tokens`` copies of a letter; with ``lookahead`` K > 0 every verification step drafts K
tokens of which ``accepted`` (capped by what is left) are kept, as llama.cpp's timings count them. Knobs for
failures: ``status`` (answer every completion with that error), ``delay`` (seconds before answering),
``chunk_delay`` (seconds between streamed chunks), ``healthy``.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

FIXTURES = json.loads((Path(__file__).parent / "fixtures" / "llamacpp_b11434.json").read_text())


class FakeEngine:
    def __init__(self, lookahead: int = 0, accepted: int = 0, model_path: str = "/models/target.gguf",
                 ms_per_step: float = 2.0):
        self.lookahead, self.accepted = lookahead, accepted
        self.model_path, self.ms_per_step = model_path, ms_per_step
        self.status: int | None = None
        self.delay = 0.0
        self.chunk_delay = 0.0
        self.healthy = True
        self.props_extra: dict = {}  # merged into /props (e.g. a draft length the engine reports)
        self.speculative: bool | None = None  # what /slots says (None: whether lookahead > 0)
        self.adapters: list[dict] | None = None  # what /lora-adapters lists (None: 404, as an engine without it)
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.disconnected = 0
        self.finished = 0
        self.drafted_total = self.accepted_total = 0
        self.app = Starlette(routes=[
            Route("/health", self.health), Route("/props", self.props), Route("/v1/models", self.models),
            Route("/metrics", self.metrics), Route("/slots", self.slots), Route("/lora-adapters", self.lora),
            Route("/echo", self.echo, methods=["GET", "PUT", "DELETE"]),
            Route("/v1/completions", self.complete, methods=["POST"]),
            Route("/v1/chat/completions", self.complete, methods=["POST"]),
            Route("/completion", self.complete, methods=["POST"]),
        ])

    # -- figures ---------------------------------------------------------------------------------------
    def timings(self, n: int) -> dict:
        """llama.cpp's timings for ``n`` generated tokens at this engine's K and acceptance."""
        drafted = accepted = steps = 0
        left = n - 1  # the first token comes from the prompt pass
        while left > 0:
            steps += 1
            if self.lookahead:
                a = min(self.accepted, left - 1)
                drafted += self.lookahead
                accepted += a
                left -= a + 1
            else:
                left -= 1
        t = copy.deepcopy(FIXTURES["timings_template"])
        t.update(predicted_n=n, predicted_ms=self.ms_per_step * (steps + 1),
                 predicted_per_second=n / (self.ms_per_step * (steps + 1)) * 1000)
        if self.lookahead:
            t.update(draft_n=drafted, draft_n_accepted=accepted)
        else:
            t.pop("draft_n", None)
            t.pop("draft_n_accepted", None)
        self.drafted_total += drafted
        self.accepted_total += accepted
        return t

    # -- routes ----------------------------------------------------------------------------------------
    async def health(self, _: Request) -> Response:
        if not self.healthy:
            return JSONResponse(FIXTURES["health_loading"], status_code=503)
        return JSONResponse(FIXTURES["health_ok"])

    async def props(self, _: Request) -> Response:
        props = copy.deepcopy(FIXTURES["props"])
        props["model_path"] = self.model_path
        props.update(self.props_extra)
        return JSONResponse(props)

    async def slots(self, _: Request) -> Response:
        speculative = self.lookahead > 0 if self.speculative is None else self.speculative
        return JSONResponse([{"id": 0, "n_ctx": 160, "speculative": speculative, "is_processing": False}])

    async def lora(self, _: Request) -> Response:
        if self.adapters is None:
            return PlainTextResponse("Not Found", status_code=404)
        return JSONResponse(self.adapters)

    async def models(self, _: Request) -> Response:
        return JSONResponse(FIXTURES["models"])

    async def metrics(self, _: Request) -> Response:
        return PlainTextResponse(
            f"llamacpp:spec_decode_num_draft_tokens_total {self.drafted_total}\n"
            f"llamacpp:spec_decode_num_accepted_tokens_total {self.accepted_total}\n")

    async def echo(self, request: Request) -> Response:
        body = await request.body()
        return Response(json.dumps({"method": request.method, "path": request.url.path,
                                    "query": request.url.query, "body": body.decode(),
                                    "headers": dict(request.headers)}).encode(),
                        media_type="application/json", headers={"x-engine": "fake"})

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append({"path": request.url.path, **body})
        self.headers.append(dict(request.headers))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.status is not None:
            return JSONResponse(FIXTURES["error"], status_code=self.status)
        n = int(body.get("max_tokens", body.get("n_predict", 8)))
        kind = {"/v1/completions": "completion", "/v1/chat/completions": "chat", "/completion": "native"}[
            request.url.path]
        if body.get("stream"):
            return StreamingResponse(self._stream(kind, n), media_type="text/event-stream")
        answer = copy.deepcopy(FIXTURES[f"{kind}_answer"])
        _fill(answer, kind, "x" * n, "length")
        answer["timings"] = self.timings(n)
        self.finished += 1
        return JSONResponse(answer)

    async def _stream(self, kind: str, n: int):
        try:
            for i in range(n):
                chunk = copy.deepcopy(FIXTURES[f"{kind}_chunk"])
                last = i == n - 1
                _fill(chunk, kind, "x", "length" if last else None)
                if last:
                    chunk["timings"] = self.timings(n)
                yield b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
            if kind != "native":
                yield b"data: [DONE]\n\n"
            self.finished += 1
        except asyncio.CancelledError:
            self.disconnected += 1
            raise


def _fill(answer: dict, kind: str, text: str, finish: str | None) -> None:
    if kind == "native":
        answer["content"] = text
        answer["stop"] = finish is not None
        return
    choice = answer["choices"][0]
    if kind == "chat":
        target = choice.get("delta", choice.get("message"))
        target["content"] = text
    else:
        choice["text"] = text
    choice["finish_reason"] = finish
