"""Stand-in vLLM, SGLang and TensorRT-LLM servers answering in each engine's own wire format (fixtures/vllm.json,
sglang.json, trtllm.json name the engine files and commits the formats come from).

Each "generates" ``max_tokens`` (SGLang: ``sampling_params.max_new_tokens``) copies of a letter. With a draft
length K > 0 every verification step after the prompt's token drafts K tokens and keeps a seeded 0..K of them
(capped by what is left), so requests differ; the engine's counters on its metrics page add up every
request's figures, as the real engines' do. Knobs: ``status`` (answer every generation with the engine's error
body), ``stream_error`` (end streams with the engine's error event).
"""

from __future__ import annotations

import copy
import json
import random
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

FIXTURES = {name: json.loads((Path(__file__).parent / "fixtures" / f"{name}.json").read_text())
            for name in ("vllm", "sglang", "trtllm")}


def sse(event: dict) -> bytes:
    return b"data: " + json.dumps(event, separators=(",", ":")).encode() + b"\n\n"


class StandIn:
    """What the three stand-ins share: the seeded steps and the counters they add up to."""

    def __init__(self, lookahead: int, seed: int = 0):
        self.lookahead = lookahead
        self.random = random.Random(seed)
        self.status: int | None = None
        self.stream_error = False
        self.drafts = self.draft_tokens = self.accepted = self.generated = 0
        self.per_position = [0] * lookahead
        self.requests: list[dict] = []

    def steps(self, n: int) -> list[int]:
        """Accepted drafted tokens per verification step of a request emitting ``n`` tokens; counted."""
        out, left = [], n - 1  # the prompt's pass emits the first token
        while left > 0:
            if self.lookahead:
                a = min(self.random.randint(0, self.lookahead), left - 1)
                out.append(a)
                self.drafts += 1
                self.draft_tokens += self.lookahead
                self.accepted += a
                for i in range(a):
                    self.per_position[i] += 1
                left -= a + 1
            else:
                left -= 1
        self.generated += n
        return out

    def refuse(self, body: dict) -> Response | None:
        """Note the request; the engine's error answer when ``status`` is set."""
        self.requests.append(body)
        return None if self.status is None else JSONResponse(self.fx["error"], status_code=self.status)

    def histogram(self, steps: list[int]) -> list[int]:
        return [steps.count(j) for j in range(self.lookahead + 1)]


class VllmStandIn(StandIn):
    """vLLM with ``--per-request-spec-decode-metrics summary`` (``per_request``), optionally
    ``--enable-per-request-metrics`` (``timing``), ``--enable-force-include-usage`` (``force_usage``) and
    ``VLLM_SERVER_DEV_MODE=1`` (``dev_mode``: ``/server_info`` shows its configuration)."""

    def __init__(self, lookahead: int, per_request: bool = True, timing: bool = False, force_usage: bool = False,
                 dev_mode: bool = False, seed: int = 0):
        super().__init__(lookahead, seed)
        self.per_request, self.timing, self.force_usage = per_request, timing, force_usage
        self.fx = FIXTURES["vllm"]
        routes = [Route("/server_info", self.server_info)] if dev_mode else []
        self.app = Starlette(routes=[
            Route("/health", lambda _: Response(b"", 200)), Route("/version", lambda _: JSONResponse(self.fx["version"])),
            Route("/v1/models", lambda _: JSONResponse(self.fx["models"])), Route("/metrics", self.metrics),
            Route("/v1/completions", self.complete, methods=["POST"]),
            Route("/v1/chat/completions", self.complete, methods=["POST"]), *routes])

    def server_info(self, request: Request) -> Response:
        """``/server_info?config_format=json``: the configuration as vLLM dumps it (the text form otherwise)."""
        self.requests.append({"path": "/server_info", **request.query_params})
        config = copy.deepcopy(self.fx["server_info"]["vllm_config"])
        config["observability_config"]["per_request_spec_decode_metrics"] = "summary" if self.per_request else "none"
        config["speculative_config"] = (None if not self.lookahead else
                                        {**config["speculative_config"], "num_speculative_tokens": self.lookahead})
        if request.query_params.get("config_format") != "json":
            return JSONResponse({"vllm_config": str(config)})
        return JSONResponse({"vllm_config": config})

    def metrics(self, _: Request) -> Response:
        labels = 'engine="0",model_name="meta-llama/Llama-3.1-8B-Instruct"'
        lines = [f"vllm:generation_tokens_total{{{labels}}} {self.generated}.0"]
        if self.lookahead:
            lines += [f"vllm:spec_decode_num_drafts_total{{{labels}}} {self.drafts}.0",
                      f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {self.draft_tokens}.0",
                      f"vllm:spec_decode_num_accepted_tokens_total{{{labels}}} {self.accepted}.0"]
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {c}.0'
                      for i, c in enumerate(self.per_position)]
        return PlainTextResponse("\n".join(lines) + "\n")

    def spec(self, steps: list[int]) -> dict | None:
        if not self.lookahead or not self.per_request:
            return None
        accepted, drafted = sum(steps), self.lookahead * len(steps)
        return {"mean_acceptance_length": 1 + accepted / len(steps) if steps else 1.0,
                "draft_acceptance_rate": accepted / drafted if drafted else 0.0,
                "acceptance_histogram": self.histogram(steps),
                "acceptance_histogram_by_draft_length": {str(self.lookahead): self.histogram(steps)},
                "num_spec_steps": len(steps), "num_accepted_draft_tokens": accepted, "num_draft_tokens": drafted,
                "num_spec_tokens": self.lookahead}

    def answer_metrics(self, steps: list[int]) -> dict | None:
        out = copy.deepcopy(self.fx["timing_metrics"]) if self.timing else {}
        spec = self.spec(steps)
        if spec is not None:
            out["speculative_decoding"] = spec
        return out or None

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        if (refused := self.refuse(body)) is not None:
            return refused
        n = int(body.get("max_tokens", 16))
        chat = request.url.path.endswith("chat/completions")
        steps = self.steps(n)
        usage = {"prompt_tokens": 5, "total_tokens": 5 + n, "completion_tokens": n}
        if body.get("stream"):
            include = self.force_usage or bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(self._stream(chat, n, steps, usage if include else None),
                                     media_type="text/event-stream")
        answer = copy.deepcopy(self.fx["chat_answer" if chat else "completion_answer"])
        choice = answer["choices"][0]
        if chat:
            choice["message"]["content"] = "x" * n
        else:
            choice["text"] = "x" * n
        answer["usage"].update(usage)
        answer["metrics"] = self.answer_metrics(steps)
        return JSONResponse(answer)

    async def _stream(self, chat: bool, n: int, steps: list[int], usage: dict | None):
        for i in range(n):
            chunk = copy.deepcopy(self.fx["chat_chunk" if chat else "completion_chunk"])
            choice = chunk["choices"][0]
            if chat:
                choice["delta"]["content"] = "x"
            else:
                choice["text"] = "x"
            choice["finish_reason"] = "length" if i == n - 1 else None
            yield sse(chunk)
            if self.stream_error and i == n // 2:
                yield sse(self.fx["stream_error"])
                yield b"data: [DONE]\n\n"
                return
        if usage is not None:
            last = copy.deepcopy(self.fx["usage_chunk"])
            last["object"] = "chat.completion.chunk" if chat else "text_completion"
            last["usage"].update(usage)
            last["metrics"] = self.answer_metrics(steps)
            yield sse(last)
        yield b"data: [DONE]\n\n"


class SglangStandIn(StandIn):
    """SGLang's server; ``legacy``: an older release, with the counts named spec_accept_token_num and
    spec_draft_token_num and only the pages /get_model_info and /get_server_info (no /model_info,
    /server_info)."""

    def __init__(self, lookahead: int, legacy: bool = False, seed: int = 0):
        super().__init__(lookahead, seed)
        self.legacy = legacy
        self.fx = FIXTURES["sglang"]
        info = self.fx["server_info"] if lookahead else self.fx["server_info_plain"]
        if lookahead:
            info = {**info, "speculative_num_steps": lookahead, "speculative_num_draft_tokens": lookahead + 1}
        self.server_info = info
        pages = [Route("/get_model_info", lambda _: JSONResponse(self.fx["model_info"])),
                 Route("/get_server_info", lambda _: JSONResponse(self.server_info))]
        if not legacy:
            pages += [Route("/model_info", lambda _: JSONResponse(self.fx["model_info"])),
                      Route("/server_info", lambda _: JSONResponse(self.server_info))]
        self.app = Starlette(routes=[
            Route("/health", lambda _: Response(b"", 200)), *pages,
            Route("/generate", self.generate, methods=["POST"]),
            Route("/v1/chat/completions", self.chat, methods=["POST"])])

    def meta(self, n: int, steps: list[int], done: int | None = None) -> dict:
        """meta_info after ``done`` tokens (None: all ``n``), as SGLang fills it for each streamed event."""
        done = n if done is None else done
        shown, emitted = [], 1
        for a in steps:  # the steps that produced the first ``done`` tokens
            if emitted >= done:
                break
            shown.append(a)
            emitted += a + 1
        meta = copy.deepcopy(self.fx["generate_answer"]["meta_info"])
        meta.update(completion_tokens=done, e2e_latency=0.002 * (len(shown) + 1),
                    finish_reason={"type": "length", "length": n} if done == n else None)
        if shown:
            accepted, proposed = sum(shown), len(shown) * self.lookahead
            meta.update(spec_accept_rate=accepted / proposed, spec_accept_length=done / len(shown),
                        spec_verify_ct=len(shown))
            if self.legacy:
                meta.update(spec_accept_token_num=accepted, spec_draft_token_num=proposed)
            else:
                meta.update(spec_num_correct_drafts=accepted, spec_num_proposed_drafts=proposed,
                            spec_accepted_drafts=accepted, spec_proposed_drafts=proposed,
                            spec_correct_drafts_histogram=[shown.count(j) for j in range(self.lookahead + 1)],
                            spec_accept_histogram=[shown.count(j) for j in range(self.lookahead + 1)])
        elif self.lookahead and self.legacy:
            meta.update(spec_verify_ct=0)  # older releases wrote it always; current ones only once > 0
        return meta

    async def generate(self, request: Request) -> Response:
        body = await request.json()
        if (refused := self.refuse(body)) is not None:
            return refused
        n = int((body.get("sampling_params") or {}).get("max_new_tokens", 16))
        steps = self.steps(n)
        if body.get("stream"):
            return StreamingResponse(self._stream(n, steps), media_type="text/event-stream")
        answer = copy.deepcopy(self.fx["generate_answer"])
        answer.update(text="x" * n, output_ids=[87] * n, meta_info=self.meta(n, steps))
        return JSONResponse(answer)

    async def _stream(self, n: int, steps: list[int]):
        for done in range(1, n + 1):
            yield sse({"text": "x" * done, "output_ids": [87] * done, "meta_info": self.meta(n, steps, done),
                       "index": 0})
            if self.stream_error and done == n // 2:
                yield sse(self.fx["error"])
                break
        yield b"data: [DONE]\n\n"

    async def chat(self, request: Request) -> Response:
        body = await request.json()
        if (refused := self.refuse(body)) is not None:
            return refused
        n = int(body.get("max_tokens", 16))
        steps = self.steps(n)
        answer = copy.deepcopy(self.fx["chat_answer"])
        answer["choices"][0]["message"]["content"] = "x" * n
        answer["usage"].update(total_tokens=5 + n, completion_tokens=n)
        answer["choices"][0]["meta_info"] = self.meta(n, steps) if body.get("return_meta_info") else None
        if not body.get("return_meta_info"):
            del answer["choices"][0]["meta_info"]
        return JSONResponse(answer)


class TrtllmStandIn(StandIn):
    """trtllm-serve with ``return_perf_metrics: true``: per-position counters on /prometheus/metrics."""

    def __init__(self, lookahead: int, seed: int = 0):
        super().__init__(lookahead, seed)
        self.fx = FIXTURES["trtllm"]
        self.drafted_per_position = [0] * lookahead
        self.app = Starlette(routes=[
            Route("/health", lambda _: Response(b"", 200)), Route("/v1/models", lambda _: JSONResponse(self.fx["models"])),
            Route("/metrics", lambda _: JSONResponse([])), Route("/prometheus/metrics", self.prometheus),
            Route("/v1/completions", self.complete, methods=["POST"])])

    def prometheus(self, _: Request) -> Response:
        labels = 'engine_type="trtllm",model_name="meta-llama/Llama-3.1-8B-Instruct"'
        lines = [f"trtllm_request_success_total{{{labels}}} {len(self.requests)}.0"]
        for name, counts in (("drafted", [self.drafts] * self.lookahead), ("accepted", self.per_position)):
            lines += [f'trtllm_spec_decode_{name}_tokens_total{{{labels},token_position="{i}"}} {c}.0'
                      for i, c in enumerate(counts) if c]
        return PlainTextResponse("\n".join(lines) + "\n")

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        if (refused := self.refuse(body)) is not None:
            return refused
        n = int(body.get("max_tokens", 16))
        steps = self.steps(n)
        mean = n / (len(steps) + 1)  # avg_decoded_tokens_per_iter: a mean, no counts
        usage = {"prompt_tokens": 5, "total_tokens": 5 + n, "completion_tokens": n}
        if body.get("stream"):
            include = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(self._stream(n, mean, usage if include else None),
                                     media_type="text/event-stream")
        answer = copy.deepcopy(self.fx["completion_answer"])
        answer["choices"][0].update(text="x" * n, avg_decoded_tokens_per_iter=mean)
        answer["usage"].update(usage)
        return JSONResponse(answer)

    async def _stream(self, n: int, mean: float, usage: dict | None):
        """As postprocess_handlers.completion_stream_post_processor writes it: a chunk per output, then with
        include_usage a last chunk with no choices and the usage (built as a chat chunk there)."""
        for i in range(n):
            chunk = copy.deepcopy(self.fx["completion_chunk"])
            chunk["choices"][0].update(text="x", finish_reason="length" if i == n - 1 else None,
                                       avg_decoded_tokens_per_iter=mean)
            yield sse(chunk)
        if usage is not None:
            yield sse({**self.fx["usage_chunk"], "usage": usage})
        yield b"data: [DONE]\n\n"
