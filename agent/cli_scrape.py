"""``specwatch scrape``: record steps of a vLLM engine that cannot call the sidecar, from its /metrics."""

from __future__ import annotations

import logging
import signal
import threading
from contextlib import contextmanager
from typing import Annotated, Optional

import typer

from agent import settings
from agent.cli import errors, fail

EXAMPLE = ("Example: specwatch scrape --url http://localhost:8000/metrics --domain chat --interval 15 "
           "--draft-version eagle-llama3-8b --db sqlite:///specwatch.db")


def scrape(
    url: Annotated[str, typer.Option(help="The engine's Prometheus page, e.g. http://engine:8000/metrics.")],
    domain: Annotated[str, typer.Option(help="Domain to record the engine's steps under.")],
    interval: Annotated[float, typer.Option(help="Seconds between scrapes.", min=0.0)] = 15.0,
    once: Annotated[bool, typer.Option(
        "--once", help="Scrape a baseline, wait --interval, record that interval's steps and exit.")] = False,
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL; default SPECWATCH_DB or sqlite:///specwatch.db.", show_default=False)] = None,
    sidecar: Annotated[Optional[str], typer.Option(
        help="POST the steps to a running sidecar (e.g. http://127.0.0.1:8790) instead of writing --db.",
        show_default=False)] = None,
    target_version: Annotated[Optional[str], typer.Option(
        help="Target version to record; default the page's model_name label.", show_default=False)] = None,
    draft_version: Annotated[Optional[str], typer.Option(
        help="Draft version to record; default 'unknown'.", show_default=False)] = None,
    pod: Annotated[Optional[str], typer.Option(
        help="Pod name to record; default SPECWATCH_POD or the host name.", show_default=False)] = None,
    timeout: Annotated[float, typer.Option(help="HTTP timeout in seconds.", min=0.1)] = 10.0,
) -> None:
    """Read vLLM's speculative-decoding counters (vllm:spec_decode_num_drafts, _num_draft_tokens,
    _num_accepted_tokens, _num_accepted_tokens_per_pos) every --interval seconds and record their deltas as
    steps: one per draft, with accepted counts that reproduce every per-position count exactly.

    The first scrape is a baseline; an engine restart counts from the restart. Draft and verify seconds are
    unknown and recorded as 0. Do not write the same --db and --pod as a running sidecar: use --sidecar.
    SIGTERM or Ctrl-C: stop after the current scrape, flush, exit 0.
    """
    import httpx

    from agent.cli_stats import open_store
    from agent.records import RecordError
    from agent.scrape import PageError, Rejected, Scraper, SidecarSink, StoreSink, fetch, run
    from storage import StoreError

    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    for noisy in ("httpx", "alembic"):  # a line per request / per migration check
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if not domain.strip() or not domain.isprintable():
        raise fail("--domain must be printable, non-empty text")
    store = None
    with _stop_on_signals() as stop, httpx.Client(timeout=timeout, follow_redirects=True) as client:
        if sidecar:
            sink = SidecarSink(client, sidecar, settings.token())
        else:
            store = open_store(db, migrate_schema=True)
            sink = StoreSink(store)
        scraper = Scraper(sink, domain=domain, target_version=target_version, draft_version=draft_version,
                          pod=pod or settings.pod())
        try:
            written = run(scraper, lambda: fetch(client, url), interval=interval, once=once, stop=stop,
                          report=_report)
        except PageError as exc:
            raise fail(f"{url}: {exc}")
        except (RecordError, Rejected, StoreError) as exc:
            raise fail(str(exc))
        except httpx.HTTPError as exc:  # --once
            raise fail(f"{_where(exc, url)}: {exc}")
        finally:
            if store is not None:
                store.close()
    errors.print(f"recorded {written} steps of domain {domain!r}", highlight=False)


def _report(result) -> None:
    if result.records or result.notes:
        errors.print(f"{result.records} steps" + "".join(f"; {note}" for note in result.notes),
                     highlight=False)


def _where(exc, default: str) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:  # httpx raises when the error carries no request
        return default


@contextmanager
def _stop_on_signals():
    """An Event set by SIGTERM or SIGINT while inside; the previous handlers come back after."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
