"""``specwatch proxy``: an OpenAI-compatible reverse proxy in front of engine pools (llama.cpp, vLLM, SGLang,
TensorRT-LLM)."""

from __future__ import annotations

import logging
from typing import Annotated, Optional

import typer

from agent.cli.output import fail

EXAMPLE = ("Example: SPECWATCH_TOKEN=$(cat token) specwatch proxy --upstream k4=http://127.0.0.1:8081 "
           "--upstream off=http://127.0.0.1:8082 --domain-rule model:coder=code --db sqlite:///specwatch.db "
           "--default-pool k4 --port 8788 --admin-port 8789")


def proxy(
    upstream: Annotated[list[str], typer.Option(
        help="A pool, NAME=URL: kN serves with draft length N, off without a draft (repeat).")],
    domain_rule: Annotated[Optional[list[str]], typer.Option(
        help="model:NAME=DOMAIN, path:/PREFIX=DOMAIN or metadata:KEY, tried in order after the "
             "X-Specwatch-Domain header (repeat).")] = None,
    draft_version: Annotated[Optional[list[str]], typer.Option(
        help="NAME=VERSION or NAME=DRAFT.gguf (versioned by its content hash): a pool's draft version "
             "(llama.cpp, vLLM and TensorRT-LLM do not report their draft model; repeat).")] = None,
    host: Annotated[str, typer.Option(
        help="Address of the inference listener, the one clients use.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port of the inference listener.")] = 8788,
    admin_host: Annotated[str, typer.Option(
        help="Address of the admin listener (specwatch's own routes; Prometheus scrapes its /metrics).")] = "127.0.0.1",
    admin_port: Annotated[int, typer.Option(help="Port of the admin listener.")] = 8789,
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL; default SPECWATCH_DB or sqlite:///specwatch.db.", show_default=False)] = None,
    policy: Annotated[Optional[str], typer.Option(
        help="Policy over the pools; default pool-cap+switch with an off pool, else pool-cap.")] = None,
    default_pool: Annotated[Optional[str], typer.Option(
        help="The pool a domain starts on before anything is measured in it: the engine's own default (e.g. "
             "the pool run with llama.cpp's --spec-default); default: the policy's own start.")] = None,
    shared_load: Annotated[bool, typer.Option(
        help="The pools share one machine (several servers on one node or GPU): a request meets the load of "
             "all of them (requests in flight on every pool), not its pool's alone.")] = False,
    pod: Annotated[Optional[str], typer.Option(help="This pod's name; default SPECWATCH_POD or host name.")] = None,
    health_seconds: Annotated[float, typer.Option(help="Seconds between health checks of each pool.")] = 2.0,
    read_timeout: Annotated[float, typer.Option(
        help="Seconds to wait for the engine's answer or next streamed chunk (then 504); llama-server's own "
             "--timeout, since a non-streamed completion sends nothing until its last token.")] = 600.0,
    connect_timeout: Annotated[float, typer.Option(
        help="Seconds to connect to a pool (then the next healthy pool; 502 when none is left).")] = 5.0,
    header_timeout: Annotated[float, typer.Option(
        help="Seconds a client has to send a request's headers once connected (then the connection "
             "closes).")] = 15.0,
    drain_seconds: Annotated[float, typer.Option(
        help="After SIGTERM, seconds requests in flight (streams too) may run on before they are cut; keep "
             "terminationGracePeriodSeconds above drain + shutdown seconds.")] = 30.0,
    shutdown_seconds: Annotated[float, typer.Option(
        help="After the drain, seconds for the final flush and the alert state; what the database has not "
             "taken by then goes to the dead-letter file.")] = 8.0,
    hash_models: Annotated[bool, typer.Option(
        help="Version a GGUF the proxy can read by a sha256 of its content (else name and size).")] = True,
    sample_prompts: Annotated[Optional[int], typer.Option(
        help="Keep this many prompts per domain (a uniform sample of the traffic, in memory) for GET /sample "
             "of the admin listener, the file `specwatch guard --prompts` reads; default 0: none.")] = None,
) -> None:
    """Route each request's domain to a pool, record the engine's per-request speculation figures
    (llama.cpp timings, vLLM metrics.speculative_decoding with --per-request-spec-decode-metrics, SGLang
    meta_info; the engine is found from its pages) and learn per domain which pool's draft length pays. A
    speculating pool whose answers carry no figures (TensorRT-LLM, vLLM without the flag) is recorded at pool
    level from its counters; /pools says which.

    Domain: the X-Specwatch-Domain header, else the first matching --domain-rule, else "default". On the
    inference listener the proxy answers /health; every other path goes to the engine. specwatch's own routes,
    /metrics, /alerts, /decision, /pools and /sample, answer on the admin listener only, each behind the
    token when SPECWATCH_TOKEN is set (warned at start: the admin listener beyond loopback without one).
    A pool that cannot be reached is out of rotation at once; its request goes to the next healthy pool.
    The database is not needed to start: records wait in memory (then in the dead-letter file) until it
    answers. SIGTERM or Ctrl-C: stop taking requests, let those in flight finish (--drain-seconds), flush
    every record (what the database does not take goes to the dead-letter file), persist alerts, exit 0.
    """
    from agent.proxy.config import ProxyConfigError, proxy_config
    from agent.proxy.domains import DomainError
    from agent.proxy.listeners import ListenError
    from agent.proxy.run import build, serve
    from agent.runtime.config import ConfigError
    from storage import StoreError

    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    for noisy in ("apscheduler", "alembic", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        options = proxy_config(upstream, domain_rule or (), draft_version or (), db=db, pod=pod, policy=policy,
                               sample_prompts=sample_prompts, host=host, port=port, admin_host=admin_host,
                               admin_port=admin_port, health_seconds=health_seconds, connect_seconds=connect_timeout,
                               read_seconds=read_timeout, header_seconds=header_timeout, drain_seconds=drain_seconds,
                               shutdown_seconds=shutdown_seconds, hash_models=hash_models, default_pool=default_pool,
                               shared_load=shared_load)
        runtime = build(options)
    except (ProxyConfigError, DomainError, ConfigError) as exc:
        raise fail(f"config: {exc}")
    except StoreError as exc:
        raise fail(str(exc))
    try:
        code = serve(options, runtime)
    except ListenError as exc:
        raise fail(str(exc))
    raise typer.Exit(code)
