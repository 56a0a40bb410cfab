"""The replay driver against a real local HTTP server (tests/workload/stand_in.py, under uvicorn): every
request carries its domain in the header the proxy reads, at most ``concurrency`` are in flight and that many
are reached, the mix follows its schedule, the summary adds up, failures are results, and the CLI prints and
writes the run."""

from __future__ import annotations

import gc
import json
import signal

import pytest
from stand_in import StandIn
from typer.testing import CliRunner

from agent import cli
from agent.proxy.domains import HEADER
from agent.workload import tally
from agent.workload.mix import schedule
from agent.workload.prompts import load
from agent.workload.replay import DOMAIN_HEADER, Prompts, ReplayConfig, replay
from agent.workload.requests import Sampling, chatml
from tests.proxy.servers import Running, free_port

FIVE = "code=1,edit=1,extract=1,chat=1,json=1"


@pytest.fixture
def stand_in():
    def start(**options) -> tuple[StandIn, str]:
        server = StandIn(**options)
        stack.append(Running(server.app).__enter__())
        return server, stack[-1].url
    stack: list[Running] = []
    yield start
    for running in stack:
        running.stop()


def _domain_of_messages() -> dict[str, str]:
    return {json.dumps(p.messages): p.domain for d in ("code", "edit", "extract", "chat", "json", "copy")
            for p in load(d)}


def test_the_domain_header_is_the_one_the_proxy_reads():
    assert DOMAIN_HEADER.lower() == HEADER


def test_every_request_carries_its_prompts_domain_and_concurrency_is_reached_not_exceeded(stand_in):
    server, url = stand_in(delay=0.05)
    run = replay(ReplayConfig(url, schedule(FIVE), concurrency=4, requests=40))
    assert len(server.seen) == len(run.results) == 40
    owner = _domain_of_messages()
    for seen in server.seen:
        assert seen["path"] == "/v1/chat/completions"
        assert seen["headers"]["x-specwatch-domain"] == owner[json.dumps(seen["body"]["messages"])]
        assert seen["body"]["max_tokens"] == 64 and seen["body"]["temperature"] == 0.0
    assert len({s["headers"]["x-request-id"] for s in server.seen}) == 40
    assert server.most_in_flight == run.max_in_flight == 4
    assert {r.domain for r in run.results} == {"code", "edit", "extract", "chat", "json"}
    heldout = {p.id for d in ("code", "edit", "extract", "chat", "json") for p in load(d, "heldout")}
    assert {r.prompt_id for r in run.results} <= heldout


def test_the_engines_drafted_and_accepted_counts_are_kept_when_its_answer_carries_them(stand_in):
    _, url = stand_in()
    run = replay(ReplayConfig(url=url, schedule=schedule("code=1,chat=1"), requests=12, concurrency=2))
    code = [r for r in run.results if r.domain == "code"]
    chat = [r for r in run.results if r.domain == "chat"]
    assert code and chat
    assert all(r.drafted == 2 * r.tokens and r.accepted == r.tokens > 0 for r in code)
    assert all(r.drafted == r.accepted == 0 for r in chat)


def test_one_at_a_time_means_one_at_a_time(stand_in):
    server, url = stand_in(delay=0.02)
    run = replay(ReplayConfig(url, schedule("chat"), concurrency=1, requests=6))
    assert server.most_in_flight == run.max_in_flight == 1
    assert [r.index for r in run.results] == list(range(6))
    assert all(a.started + a.seconds <= b.started for a, b in zip(run.results, run.results[1:]))


def test_the_summary_adds_up_and_counts_failures_per_domain(stand_in):
    server, url = stand_in(failing=("json",))
    run = replay(ReplayConfig(url, schedule("code=1,json=1"), concurrency=3, requests=30,
                              sampling=Sampling(max_tokens=20)))
    rows = {r["domain"]: r for r in tally.summary(run)}
    sent = {d: [s for s in server.seen if s["headers"]["x-specwatch-domain"] == d] for d in ("code", "json")}
    assert rows["code"]["requests"] == len(sent["code"]) and rows["json"]["requests"] == len(sent["json"])
    assert len(sent["code"]) > 5 and len(sent["json"]) > 5
    assert rows["json"]["errors"] == len(sent["json"]) and rows["json"]["tokens"] == 0
    assert rows["code"]["errors"] == 0
    assert rows["code"]["tokens"] == sum(20 - len(s["body"]["messages"]) for s in sent["code"])
    assert rows["all"]["requests"] == 30 and rows["all"]["tokens"] == rows["code"]["tokens"]
    busy = sum(r.seconds for r in run.results if r.domain == "code")
    assert rows["code"]["tok/s/req"] == pytest.approx(rows["code"]["tokens"] / busy)
    assert rows["code"]["tok/s"] == pytest.approx(rows["code"]["tokens"] / run.seconds)
    assert all(r.error.startswith("HTTP 503: ") and r.status == 503 for r in run.results if r.domain == "json")
    assert tally.errors(run) == [f"{len(sent['json'])} x HTTP 503: " + '{"error":{"message":"overloaded"}}']


def test_a_traffic_shift_mid_run_changes_what_is_sent_from_its_time_on(stand_in):
    server, url = stand_in(delay=0.05)
    run = replay(ReplayConfig(url, schedule("code=1", ["0.5s:json=1"]), concurrency=2, requests=50))
    before = [r for r in run.results if r.started < 0.5]
    after = [r for r in run.results if r.started >= 0.5]
    assert before and after  # 25 rounds of >= 50 ms: the run outlasts the shift
    assert {r.domain for r in before} == {"code"} and {r.phase for r in before} == {0}
    assert {r.domain for r in after} == {"json"} and {r.phase for r in after} == {1}
    phases = tally.phases(run, schedule("code=1", ["0.5s:json=1"]))
    assert [p["by_domain"] for p in phases] == [{"code": len(before), "json": 0}, {"code": 0, "json": len(after)}]
    headers = [s["headers"]["x-specwatch-domain"] for s in server.seen]
    assert headers == sorted(headers, key=lambda d: d == "json")  # every code request was sent before any json


def test_the_mix_decides_the_shares_and_a_seed_the_sequence(stand_in):
    _, url = stand_in()

    def sequence(seed: int) -> list[tuple[str, str]]:
        run = replay(ReplayConfig(url, schedule("code=3,chat=1"), concurrency=4, requests=200, seed=seed))
        return [(r.domain, r.prompt_id) for r in run.results]

    first = sequence(7)
    assert first == sequence(7) != sequence(8)
    codes = sum(d == "code" for d, _ in first)
    assert 125 <= codes <= 175  # 150 expected; binomial sd 6.1


def test_a_domain_cycles_through_its_prompts_in_a_seeded_order():
    chat = load("chat", "heldout")[:3]
    picker = Prompts({"chat": chat}, seed=1)
    firsts = [picker.next("chat").id for _ in range(3)]
    assert sorted(firsts) == sorted(p.id for p in chat)
    assert [picker.next("chat").id for _ in range(3)] == firsts


def test_a_mix_without_prompts_for_one_of_its_domains_is_refused_before_sending(stand_in):
    server, url = stand_in()
    chat = load("chat", "heldout")
    with pytest.raises(ValueError, match="^mix: no prompt set given for 'json'"):
        replay(ReplayConfig(url, schedule("chat", ["1s:json"]), requests=2), {"chat": chat})
    with pytest.raises(ValueError, match="^mix: no prompts for 'json'"):
        replay(ReplayConfig(url, schedule("chat,json"), requests=2), {"chat": chat, "json": []})
    assert server.seen == []


def test_the_generate_route_gets_text_in_the_chat_template_and_the_token(stand_in):
    server, url = stand_in()
    run = replay(ReplayConfig(url, schedule("edit"), api="generate", requests=3, token="s3cret",
                              sampling=Sampling(max_tokens=8)))
    assert [r.tokens for r in run.results] == [7, 7, 7]
    edits = {p.id: p for p in load("edit")}
    sent = {s["body"]["request_id"]: s for s in server.seen}
    for r in run.results:
        seen = sent[f"replay-{r.index}-{r.prompt_id}"]
        body = seen["body"]
        assert seen["path"] == "/v1/generate" and body["domain"] == "edit" == seen["headers"]["x-specwatch-domain"]
        assert seen["headers"]["authorization"] == "Bearer s3cret"
        assert body["prompt"] == chatml(edits[r.prompt_id].messages)
        assert body["request_id"] == seen["headers"]["x-request-id"]


def test_chatml_is_smollm2s_template_with_its_default_system_message():
    assert chatml([{"role": "user", "content": "Hi"}]) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    assert chatml([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_ctrl_c_stops_the_run_and_keeps_what_finished(stand_in, caplog):
    """SIGINT as Ctrl-C sends it: asyncio.run cancels the run, nothing is left pending or unretrieved."""
    server, url = stand_in(delay=0.02)
    seen = []

    def progress(result):
        seen.append(result)
        if len(seen) == 5:
            signal.raise_signal(signal.SIGINT)

    run = replay(ReplayConfig(url, schedule("chat"), concurrency=2, requests=1000), progress=progress)
    assert run.interrupted and 5 <= len(run.results) < 1000 and len(server.seen) < 1000
    assert run.results == sorted(seen, key=lambda r: r.index)
    gc.collect()
    assert not [r for r in caplog.records if r.name == "asyncio"]


def test_an_endpoint_that_is_down_gives_failed_results_not_an_exception():
    url = f"http://127.0.0.1:{free_port()}"
    run = replay(ReplayConfig(url, schedule("chat"), concurrency=2, requests=4, timeout=5))
    assert len(run.results) == 4 and all(r.error.startswith("ConnectError") for r in run.results)
    assert tally.summary(run)[-1] == {**tally.summary(run)[-1], "requests": 4, "errors": 4, "tokens": 0}


@pytest.mark.parametrize("options, message", [
    ({"concurrency": 0}, "concurrency:"), ({}, "requests: give a number"), ({"requests": 0}, "requests:"),
    ({"requests": 1, "api": "completions"}, "api:"), ({"requests": 1, "url": "127.0.0.1:80"}, "url:")])
def test_a_bad_configuration_names_the_field(options, message):
    with pytest.raises(ValueError, match=message):
        ReplayConfig(**{"url": "http://127.0.0.1:1", "schedule": schedule("chat"), **options})


runner = CliRunner()


def _cli(*args):
    cli._register()
    return runner.invoke(cli.app, ["replay", *args])


def test_the_cli_prints_the_summary_and_writes_the_run(stand_in, tmp_path):
    server, url = stand_in(delay=0.01)
    out = tmp_path / "run.json"
    result = _cli(url, "--mix", "code=3,chat=1", "--shift", "0.3s:json=4,chat=1", "-n", "40", "-c", "3",
                  "--max-tokens", "16", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "tok/s/req" in result.output and "json=4,chat=1" in result.output
    saved = json.loads(out.read_text())
    sent = {r["domain"] for r in saved["results"]}
    assert [r["domain"] for r in saved["summary"]] == [d for d in ("code", "chat", "json") if d in sent] + ["all"]
    rows = {r["domain"]: r for r in saved["summary"]}
    assert rows["all"]["requests"] == 40 == len(saved["results"]) == len(server.seen)
    assert saved["concurrency"] == 3 and saved["max_in_flight"] == 3 and saved["max_tokens"] == 16
    assert [p["mix"] for p in saved["schedule"]] == ["code=3,chat=1", "json=4,chat=1"]
    assert sum(p["requests"] for p in saved["phases"]) == 40


@pytest.mark.parametrize("args, message", [
    (["--mix", "code=0", "-n", "1"], "code: weight must be > 0"),
    (["--mix", "poetry", "-n", "1"], "no prompt set for 'poetry'"),
    (["--mix", "chat"], "requests: give a number of requests, a duration, or both"),
    (["--mix", "chat", "--duration", "soon"], "expected a time"),
    (["--mix", "chat", "-n", "1", "--split", "test"], "split: expected one of")])
def test_the_cli_turns_bad_options_into_one_line(args, message):
    result = _cli("http://127.0.0.1:1", *args)
    assert result.exit_code == 1 and "error:" in result.output and message in result.output, result.output


def test_the_cli_fails_when_no_request_succeeds():
    result = _cli(f"http://127.0.0.1:{free_port()}", "--mix", "chat", "-n", "2", "--timeout", "5")
    assert result.exit_code == 1 and "ConnectError" in result.output
