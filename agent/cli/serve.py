"""``specwatch serve``: run the sidecar's HTTP API, scheduler and (optionally) in-process decoder."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated, Optional

import typer

from agent.cli.output import fail

EXAMPLE = ("Examples: SPECWATCH_TOKEN=$(cat token) specwatch serve --db sqlite:///specwatch.db --port 8790 "
           "--kit tiny  |  specwatch serve --ring specwatch (a decoder in this pod writes steps to the ring)")


def serve(
    config: Annotated[Optional[Path], typer.Option(
        "--config", help="TOML file of options (see agent/runtime/config.py); default SPECWATCH_CONFIG.",
        dir_okay=False, show_default=False)] = None,
    host: Annotated[Optional[str], typer.Option(help="Address to bind; default 127.0.0.1.")] = None,
    port: Annotated[Optional[int], typer.Option(help="Port; default 8790.")] = None,
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL; default SPECWATCH_DB or sqlite:///specwatch.db.", show_default=False)] = None,
    policy: Annotated[Optional[str], typer.Option(
        help="Lookahead policy (policies.registry); default confidence-stop+switch.")] = None,
    pod: Annotated[Optional[str], typer.Option(help="This pod's name; default SPECWATCH_POD or host name.")] = None,
    kit: Annotated[Optional[str], typer.Option(
        help="Model kit size whose target and draft serve POST /v1/generate (optional).")] = None,
    target_dir: Annotated[Optional[str], typer.Option(help="Target model folder (with --draft-dir).")] = None,
    draft_dir: Annotated[Optional[str], typer.Option(help="Draft model folder (with --target-dir).")] = None,
    ring: Annotated[Optional[str], typer.Option(
        help="Shared-memory step ring a decoding process in this pod writes (agent/ring/client.py); "
             "default SPECWATCH_RING, none.")] = None,
    auth: Annotated[Optional[str], typer.Option(
        help="Which routes need the token: ingest (POST routes; the default) or all (every route but "
             "/healthz and /readyz; needs a token).")] = None,
    sample_prompts: Annotated[Optional[int], typer.Option(
        help="Keep this many prompts per domain of POST /v1/generate (a uniform sample, in memory) for GET "
             "/v1/sample, the file `specwatch guard --prompts` reads; default 0: none.")] = None,
) -> None:
    """Serve POST /v1/steps, GET /v1/decision, POST /v1/generate, GET /v1/alerts, /metrics, /healthz and
    /readyz (OpenAPI at /openapi.json).

    Options come from the TOML file, then SPECWATCH_* variables (SPECWATCH_PORT, SPECWATCH_TOKEN, ...), then
    these flags. SIGTERM or Ctrl-C: stop taking requests, flush everything, persist alerts, exit 0.
    """
    from agent.http.serve import build, serve as run
    from agent.runtime import config as cfg
    from agent.runtime.generator import ModelsUnavailable
    from specwatch_core import redact
    from storage import StoreError

    redact.install(logging.INFO)  # every line, tracebacks too, without passwords, tokens or URL secrets
    for noisy in ("apscheduler", "alembic"):  # a line per job run / per migration check
        logging.getLogger(noisy).setLevel(logging.WARNING)
    flags = {"host": host, "port": port, "db": db, "policy": policy, "pod": pod, "kit": kit,
             "target_dir": target_dir, "draft_dir": draft_dir, "ring": ring,
             "auth": auth, "sample_prompts": sample_prompts}
    try:
        options = cfg.load(config, flags)
        runtime = build(options)
    except cfg.ConfigError as exc:
        raise fail(redact.redact(f"config: {exc}"))
    except (StoreError, ModelsUnavailable) as exc:
        raise fail(redact.redact(exc))
    raise typer.Exit(run(options, runtime))
