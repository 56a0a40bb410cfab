"""A stand-in OpenAI-compatible endpoint for the replay driver's tests: POST /v1/chat/completions and POST
/v1/generate. It keeps every request (path, headers, body), counts the requests in flight, and answers after
``delay`` seconds with ``max_tokens`` minus the number of messages as the generated token count (so a test
can check the driver's sums), and for ``code`` llama.cpp's timings with twice that drafted and that accepted; requests of a domain in ``failing`` get a 503."""

from __future__ import annotations

import asyncio

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


class StandIn:
    def __init__(self, delay: float = 0.0, failing: tuple[str, ...] = ()):
        self.delay, self.failing = delay, failing
        self.seen: list[dict] = []
        self.in_flight = self.most_in_flight = 0
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.chat, methods=["POST"]),
                                     Route("/v1/generate", self.generate, methods=["POST"])])

    async def _take(self, request: Request) -> tuple[dict, str]:
        body = await request.json()
        headers = dict(request.headers)
        self.seen.append({"path": request.url.path, "headers": headers, "body": body})
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return body, headers.get("x-specwatch-domain", "")

    async def chat(self, request: Request) -> JSONResponse:
        body, domain = await self._take(request)
        if domain in self.failing:
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=503)
        n = body["max_tokens"] - len(body["messages"])
        answer = {"object": "chat.completion", "usage": {"completion_tokens": n, "prompt_tokens": 9},
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok " * n}}]}
        if domain == "code":  # llama.cpp's timings, as they pass through `specwatch proxy`
            answer["timings"] = {"predicted_n": n, "draft_n": 2 * n, "draft_n_accepted": n}
        return JSONResponse(answer)

    async def generate(self, request: Request) -> JSONResponse:
        body, domain = await self._take(request)
        if domain in self.failing:
            return JSONResponse({"message": "busy"}, status_code=429)
        return JSONResponse({"text": "ok", "domain": body["domain"], "tokens": body["max_tokens"] - 1})
