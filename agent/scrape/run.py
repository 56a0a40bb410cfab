"""``specwatch scrape``'s run, from its options to the steps written: the engines (``DOMAIN=URL`` or a URL
under ``domain``), one Scraper each over one HTTP client, the sink (a running sidecar or the store), and
the loop until SIGTERM or SIGINT (or one interval with ``once``)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from agent.scrape.io import Rejected, SidecarSink, StoreSink, fetch, fetch_model
from agent.scrape.names import placeholders
from agent.scrape.pages import PageError, identity
from agent.scrape.scraper import ScrapeResult, Scraper, run_all
from specwatch_core import settings
from specwatch_core.records import RecordError
from storage import Store, StoreError


class ScrapeError(Exception):
    """The scrape cannot go on (a bad option, a page without speculation metrics, records refused, a store
    error, or with ``once`` an engine that cannot be read); the message is one line."""


@dataclass(frozen=True)
class ScrapeOptions:
    """``urls``: engine pages, each a URL or ``DOMAIN=URL``; ``domain``: the domain template of the plain
    URLs. ``sidecar``: the base URL of a running sidecar to POST to instead of writing ``db`` (None: the
    default database). ``pod``: None is SPECWATCH_POD or the host name. Seconds for ``interval`` and
    ``timeout``."""

    urls: tuple[str, ...]
    domain: str | None = None
    interval: float = 15.0
    once: bool = False
    db: str | None = None
    sidecar: str | None = None
    target_version: str | None = None
    draft_version: str | None = None
    pod: str | None = None
    timeout: float = 10.0

    @property
    def engines(self) -> list[tuple[str | None, str]]:
        """(domain, url) of each engine; the domain None where the URL names none."""
        return [split_url(u) for u in self.urls]

    @property
    def what(self) -> str:
        """What was scraped, for the closing line: the domain, or the number of engines."""
        engines = self.engines
        if self.domain and all(name is None for name, _ in engines):
            return f"domain {self.domain!r}"
        return f"{len(engines)} engine(s)"


def scrape(options: ScrapeOptions, report: Callable[[ScrapeResult], None] = lambda result: None) -> int:
    """Scrape until SIGTERM or SIGINT (the current scrape finishes, then the store flushes); returns the
    steps written. ``report`` is called with each scrape's result. ScrapeError when it cannot go on."""
    engines = options.engines
    for name, _ in engines:
        _check_domain(name or options.domain)
    store = None
    with _stop_on_signals() as stop, httpx.Client(timeout=options.timeout, follow_redirects=True) as client:
        try:
            if options.sidecar:
                sink = SidecarSink(client, options.sidecar, settings.token())
            else:
                store = Store.open(options.db or settings.db_url(), migrate_schema=True)
                sink = StoreSink(store)
            targets = [(Scraper(sink, domain=name or options.domain, target_version=options.target_version,
                                draft_version=options.draft_version, pod=options.pod or settings.pod(), url=url,
                                several_urls=len(engines) > 1, identify=_identify_at(client, url)),
                        lambda url=url: fetch(client, url)) for name, url in engines]
            return run_all(targets, interval=options.interval, once=options.once, stop=stop, report=report)
        except (PageError, RecordError, Rejected, StoreError) as exc:
            raise ScrapeError(str(exc)) from exc
        except httpx.HTTPError as exc:  # once
            raise ScrapeError(f"{_where(exc, options.urls[0])}: {exc}") from exc
        finally:
            if store is not None:
                store.close()


def split_url(value: str) -> tuple[str | None, str]:
    """(domain, url) of ``DOMAIN=URL``; (None, url) of a plain URL."""
    name, sep, rest = value.partition("=")
    if sep and "://" in rest and "/" not in name and ":" not in name:
        return name, rest
    return None, value


def _check_domain(template: str | None) -> None:
    if template is None:
        raise ScrapeError("--domain is required unless every --url is DOMAIN=URL")
    try:
        placeholders(template)
    except ValueError as exc:
        raise ScrapeError(f"--domain {template!r}: {exc}") from None
    if not template.strip() or not template.isprintable():
        raise ScrapeError("--domain must be printable, non-empty text")


def _identify_at(client: httpx.Client, page_url: str) -> Callable[[str], str | None]:
    """The served model of an engine whose page names none, from its host (llama.cpp's /v1/models)."""
    def identify(engine: str) -> str | None:
        source = identity(engine)
        return fetch_model(client, page_url, *source) if source else None
    return identify


def _where(exc: httpx.HTTPError, default: str) -> str:
    try:
        return str(exc.request.url)
    except (AttributeError, RuntimeError):  # httpx raises when the error carries no request
        return default


@contextmanager
def _stop_on_signals() -> Iterator[threading.Event]:
    """An Event set by SIGTERM or SIGINT while inside; the previous handlers come back after."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
