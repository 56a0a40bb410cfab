"""`specwatch scrape` end to end: recorded vLLM pages served by a real local http.server, steps written to
SQLite or POSTed to a (stand-in) sidecar's /v1/steps."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import typer
from typer.testing import CliRunner

from agent.cli import scrape as cli_scrape
from storage import StatsQuery, Store

DATA = Path(__file__).with_name("data")
runner = CliRunner()
app = typer.Typer()
app.command(epilog=cli_scrape.EXAMPLE)(cli_scrape.scrape)
app.command("noop")(lambda: None)  # two commands, so `scrape` is addressed by name as in specwatch


class Server:
    """A real HTTP server on 127.0.0.1: GET / or /metrics serves ``pages`` in turn (then the last again), other
    paths 404; POST bodies and their Authorization headers are kept and answered with ``status``."""

    def __init__(self, pages: list[str] = (), status: int = 202):
        self.pages, self.status, self.gets, self.posts, self.others = list(pages), status, 0, [], []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if self.path not in ("/", "/metrics"):  # e.g. /v1/models, asked of llama.cpp pages
                    server.others.append(self.path)
                    return self._reply(404, b"not found", "text/plain")
                body = server.pages[min(server.gets, len(server.pages) - 1)].encode()
                server.gets += 1
                self._reply(200, body, "text/plain; version=0.0.4; charset=utf-8")

            def do_POST(self):
                data = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.posts.append((self.path, self.headers.get("Authorization"), data))
                self._reply(server.status, json.dumps({"accepted": len(data["records"])}).encode(),
                            "application/json")

            def _reply(self, status, body, kind):
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> "Server":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def page(n: int) -> str:
    return (DATA / f"vllm_metrics_{n}.txt").read_text()


def scrape(*args: str):
    return runner.invoke(app, ["scrape", *args])


def test_once_writes_one_interval_to_sqlite(tmp_path):
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with Server([page(1), page(2)]) as engine:
        result = scrape("--url", engine.url + "/metrics", "--domain", "chat", "--once", "--interval", "0",
                        "--db", db, "--pod", "vllm-0", "--draft-version", "eagle-3")
    assert result.exit_code == 0, result.output
    assert engine.gets == 2 and "recorded 300 steps" in result.output
    with Store.open(db, migrate_schema=False) as store:
        [row] = store.stats(StatsQuery(until=time.time() + 3600)).rows
        versions = {(v.pod, v.role, v.version) for v in store.versions()}
    assert (row["domain"], row["steps"], row["drafted"], row["accepted"]) == ("chat", 300, 1200, 680)
    assert ("vllm-0", "draft", "eagle-3") in versions


def test_sidecar_path_posts_records_with_the_token(monkeypatch):
    monkeypatch.setenv("SPECWATCH_TOKEN", "s3cret-token-for-tests")
    with Server([page(2), page(3)]) as engine, Server() as sidecar:
        result = scrape("--url", engine.url + "/metrics", "--domain", "code", "--once", "--interval", "0",
                        "--sidecar", sidecar.url + "/")
    assert result.exit_code == 0, result.output
    [(path, auth, body)] = sidecar.posts
    assert path == "/v1/steps" and auth == "Bearer s3cret-token-for-tests"
    records = body["records"]
    assert len(records) == 40 and {r["domain"] for r in records} == {"code"}  # the engine restarted
    assert sum(r["accepted"] for r in records) == 76 and sum(r["lookahead"] for r in records) == 160
    assert all(r["verify_seconds"] == 0.0 and r["draft_seconds"] == 0.0 for r in records)


def test_a_rejecting_sidecar_is_a_clear_error():
    with Server([page(1), page(2)]) as engine, Server(status=422) as sidecar:
        result = scrape("--url", engine.url, "--domain", "code", "--once", "--interval", "0",
                        "--sidecar", sidecar.url)
    assert result.exit_code == 1
    assert "422" in result.output and "/v1/steps" in result.output


def test_a_page_without_spec_decode_metrics_is_a_clear_error(tmp_path):
    plain = "\n".join(line for line in page(1).splitlines() if "spec_decode" not in line) + "\n"
    with Server([plain]) as engine:
        result = scrape("--url", engine.url + "/metrics", "--domain", "chat", "--once", "--interval", "0",
                        "--db", f"sqlite:///{tmp_path / 'h.db'}")
    assert result.exit_code == 1
    assert "no vLLM speculative-decoding metrics" in result.output and engine.url in result.output


def test_an_unreachable_engine_fails_once_mode(tmp_path):
    with Server([page(1)]) as engine:
        url = engine.url
    result = scrape("--url", url + "/metrics", "--domain", "chat", "--once", "--interval", "0",
                    "--db", f"sqlite:///{tmp_path / 'h.db'}", "--timeout", "2")
    assert result.exit_code == 1 and url in result.output


def test_loop_retries_an_unreachable_engine_then_stops_on_request():
    import httpx

    from agent.scrape.scraper import Scraper, run

    stop, calls, written = threading.Event(), [], []

    def fetch():
        calls.append(len(calls) + 1)
        if len(calls) == 1:
            raise httpx.ConnectError("connection refused")  # the engine is still starting
        if len(calls) == 3:
            stop.set()  # SIGTERM arrives during the third scrape
        return page(len(calls) - 1)

    class Sink:
        def write(self, records):
            written.extend(records)

    assert run(Scraper(Sink(), domain="chat"), fetch, interval=0.01, stop=stop) == 300
    assert len(calls) == 3 and len(written) == 300


@pytest.mark.parametrize("bad", ["", "\x00"])
def test_a_bad_domain_is_refused(bad):
    result = scrape("--url", "http://127.0.0.1:9/metrics", "--domain", bad, "--once")
    assert result.exit_code == 1 and "--domain" in result.output


def test_help_ends_with_an_example():
    result = scrape("--help")
    assert result.exit_code == 0 and "Example: specwatch scrape --url" in result.output


ENGINES = Path(__file__).parent / "fixtures" / "engines"


def engine_page(name: str) -> str:
    return (ENGINES / f"{name}.txt").read_text()


def test_several_engines_in_one_process_each_with_its_own_state_and_domain(tmp_path):
    db = f"sqlite:///{tmp_path / 'h.db'}"
    with Server([page(1), page(2)]) as vllm, Server([engine_page("llamacpp_b11434_1"),
                                                     engine_page("llamacpp_b11434_2")]) as llama, \
            Server([engine_page("sglang_old_1"), engine_page("sglang_old_2")]) as sglang:
        result = scrape("--url", f"code={vllm.url}/metrics", "--url", f"logs={llama.url}/metrics",
                        "--url", f"{sglang.url}/metrics", "--domain", "chat", "--once", "--interval", "0",
                        "--db", db, "--pod", "node-1")
    assert result.exit_code == 0, result.output
    assert (vllm.gets, llama.gets, sglang.gets) == (2, 2, 2) and "recorded 311 steps of 3 engine(s)" in result.output
    assert llama.others == ["/v1/models"] * 2 and vllm.others == sglang.others == []  # only llama.cpp is asked
    with Store.open(db, migrate_schema=False) as store:
        rows = {r["domain"]: r for r in store.stats(StatsQuery(until=time.time() + 3600)).rows}
        pods = {(v.pod, v.version) for v in store.versions() if v.role == "target"}
    assert {d: (r["steps"], r["drafted"], r["accepted"]) for d, r in rows.items()} == {
        "code": (300, 1200, 680), "logs": (10, 36, 36), "chat": (1914, 5742, 2272)}
    hosts = {urlsplit(s.url).netloc for s in (vllm, llama, sglang)}
    assert {p.split("/")[1] for p, _ in pods} == hosts and all(p.startswith("node-1/") for p, _ in pods)


def test_a_json_page_names_the_prometheus_route():
    with Server(['[{"iter": 3}]']) as engine:
        result = scrape("--url", engine.url + "/metrics", "--domain", "chat", "--once", "--interval", "0",
                        "--sidecar", "http://127.0.0.1:9")
    assert result.exit_code == 1 and "/prometheus/metrics" in result.output and engine.url in result.output


def test_help_has_an_example_for_each_engine():
    result = scrape("--help")
    for engine in ("vLLM", "llama.cpp", "SGLang", "TensorRT-LLM", "Two engines"):
        assert engine in result.output
