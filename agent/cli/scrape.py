"""``specwatch scrape``: record steps of engines that cannot call the sidecar, from their /metrics pages."""

from __future__ import annotations

import logging
from typing import Annotated, Optional

import typer

from agent.cli.output import errors, fail

EXAMPLE = (
    "Example: specwatch scrape --url http://localhost:8000/metrics --domain chat --interval 15 "
    "--draft-version eagle-llama3-8b --db sqlite:///specwatch.db\n\n"
    "vLLM, one domain per served model: specwatch scrape --url http://vllm:8000/metrics --domain '{model_name}'\n\n"
    "llama.cpp (llama-server --metrics -md draft.gguf --spec-type draft-simple): specwatch scrape "
    "--url http://127.0.0.1:8080/metrics --domain code --sidecar http://127.0.0.1:8790\n\n"
    "SGLang (--enable-metrics): specwatch scrape --url http://sglang:30000/metrics --domain chat\n\n"
    "TensorRT-LLM (trtllm-serve, return_perf_metrics: true): specwatch scrape --url http://trt:8000/prometheus/metrics "
    "--domain chat\n\n"
    "Two engines in one process, each its own domain: specwatch scrape --url code=http://10.0.0.5:8080/metrics "
    "--url chat=http://10.0.0.6:8000/metrics")


def scrape(
    url: Annotated[list[str], typer.Option(
        help="An engine's Prometheus page, e.g. http://engine:8000/metrics; DOMAIN=URL records that engine "
             "under DOMAIN. Repeat for several engines, each scraped with its own state.")],
    domain: Annotated[Optional[str], typer.Option(
        help="Domain to record under: text, or a template with {label} placeholders ({model_name}, {model}, "
             "{engine}, ...). Required unless every --url names its domain.", show_default=False)] = None,
    interval: Annotated[float, typer.Option(help="Seconds between scrapes.", min=0.0)] = 15.0,
    once: Annotated[bool, typer.Option(
        "--once", help="Scrape a baseline, wait --interval, record that interval's steps and exit.")] = False,
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL; default SPECWATCH_DB or sqlite:///specwatch.db.", show_default=False)] = None,
    sidecar: Annotated[Optional[str], typer.Option(
        help="POST the steps to a running sidecar (e.g. http://127.0.0.1:8790) instead of writing --db.",
        show_default=False)] = None,
    target_version: Annotated[Optional[str], typer.Option(
        help="Target version to record; default the page's model label (llama.cpp: its /v1/models id).",
        show_default=False)] = None,
    draft_version: Annotated[Optional[str], typer.Option(
        help="Draft version to record; default 'unknown'.", show_default=False)] = None,
    pod: Annotated[Optional[str], typer.Option(
        help="Pod name to record; default SPECWATCH_POD or the host name.", show_default=False)] = None,
    timeout: Annotated[float, typer.Option(help="HTTP timeout in seconds.", min=0.1)] = 10.0,
) -> None:
    """Read speculative-decoding metrics every --interval seconds and record their deltas as steps. The
    engine is recognised from the page: vLLM (`vllm:spec_decode_num_*`), llama.cpp
    (`llamacpp:spec_decode_num_*`), SGLang (`sglang:spec_accept_length` / `_rate` gauges with its token
    counter), TensorRT-LLM (`trtllm_spec_decode_{drafted,accepted}_tokens_total` per `token_position`).

    Per-position counts become one step per draft, reproducing every count exactly; SGLang's gauges become
    one aggregate record per scrape (estimated: see docs/engines.md). The first scrape is a baseline; an engine
    restart counts from the restart. A page with several models records each under its own domain and pod.
    Step time: the engine's own where its page has it, else the scrape interval. Do not write the same --db
    and --pod as a running sidecar: use --sidecar. SIGTERM or Ctrl-C: stop after the current scrape, flush,
    exit 0.
    """
    from agent.scrape.run import ScrapeError, ScrapeOptions, scrape as run

    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    for noisy in ("httpx", "alembic"):  # a line per request / per migration check
        logging.getLogger(noisy).setLevel(logging.WARNING)
    options = ScrapeOptions(tuple(url), domain=domain, interval=interval, once=once, db=db, sidecar=sidecar,
                            target_version=target_version, draft_version=draft_version, pod=pod, timeout=timeout)
    try:
        written = run(options, report=_report)
    except ScrapeError as exc:
        raise fail(str(exc))
    errors.print(f"recorded {written} steps of {options.what}", highlight=False)


def _report(result) -> None:
    if result.records or result.notes:
        where = f"{result.url}: " if result.url else ""
        errors.print(where + f"{result.records} steps" + "".join(f"; {note}" for note in result.notes),
                     highlight=False)
