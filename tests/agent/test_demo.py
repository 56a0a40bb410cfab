"""The demo end to end on the tiny kit: every step lands in the store, versions change per phase, the
re-distilled draft is a new version, and the summary and plot command describe the run."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import typer
from sqlalchemy.engine import make_url
from typer.testing import CliRunner

from agent.cli.demo import demo as demo_command
from agent.demo.plan import DemoPlan
from agent.demo.run import Demo
from agent.demo.view import live, summary_rows
from agent.runtime.prompt_sampler import PromptSampler, SamplerConfig
from storage import StatsQuery, Store

app = typer.Typer()
app.command()(demo_command)


pytestmark = pytest.mark.usefixtures("one_thread")


def test_demo_records_every_step_and_registers_the_new_draft(kit_home, tiny_kit, tmp_path):
    home, kit = kit_home, tiny_kit
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    plan = DemoPlan(size="tiny", requests=(6, 6, 6), new_tokens=16, reference_every=3, sample_cap=4,
                    distill_steps=4, distill_batch=2, distill_seq=64)
    frames = []
    demo = Demo(plan, kit, db, home=home, redraw=lambda: frames.append(1))
    result = demo.run()
    assert len(frames) >= 18 + 4  # a redraw per request and per distillation step
    live(demo)  # renders without a live terminal
    rows = summary_rows(result.tally, plan.domains)
    assert {r["phase"] for r in rows} == {1, 2, 3}
    assert sum(r["requests"] for r in rows) == 18
    assert result.distill["version"] == result.versions["draft-redistilled"] != kit.versions["draft"]
    with Store.open(db, migrate_schema=False) as store:
        by_version = store.stats(StatsQuery(result.started - 60, result.ended + 60,
                                            ("target_version", "domain"))).rows
        pairs = {(v.role, v.version) for v in store.versions() if v.pod == result.pod}
    # Stored sums equal what the demo decoded: every step went through Sidecar.record and was flushed.
    assert sum(r["steps"] for r in by_version) == sum(c.steps for c in result.tally.cells.values())
    assert sum(r["accepted"] for r in by_version) == sum(c.accepted for c in result.tally.cells.values())
    assert {r["target_version"] for r in by_version} == {kit.versions["target-v1"], kit.versions["target-v2"]}
    assert ("draft", result.versions["draft-redistilled"]) in pairs and ("draft", kit.versions["draft"]) in pairs
    assert f"--db {db}" in result.plot_command()
    assert result.plot_command().endswith(f"--plot {Path(make_url(db).database).parent / 'specwatch-demo.png'}")
    # The hot path is timed once per decoded step, in the demo's own decoding loop; by default the sidecar's
    # record work runs on its ingest worker, whose CPU time is reported beside it.
    hot = result.hot_path
    assert hot["steps"] == sum(c.steps for c in result.tally.cells.values())
    assert 0 < hot["median_us"] <= hot["p99_us"] and hot["worker_cpu_us_per_step"] > 0


def test_without_redistill_there_are_two_phases_and_no_sampling(kit_home, tiny_kit, tmp_path):
    home, kit = kit_home, tiny_kit
    db = f"sqlite:///{tmp_path / 'demo.db'}"
    plan = DemoPlan(size="tiny", requests=(3, 3, 3), new_tokens=8, redistill=False, background=False)
    demo = Demo(plan, kit, db, home=home)
    result = demo.run()
    assert demo.sampler is None and result.distill is None
    assert {r["phase"] for r in summary_rows(result.tally, plan.domains)} == {1, 2}
    # Inline: the sidecar has no ingest worker and every step is stored all the same.
    assert demo.sidecar.ingest is None and result.hot_path["worker_cpu_us_per_step"] is None
    with Store.open(db, migrate_schema=False) as store:
        stored = store.stats(StatsQuery(result.started - 60, result.ended + 60, ("domain",))).rows
    assert sum(r["steps"] for r in stored) == sum(c.steps for c in result.tally.cells.values())


def test_cli_json_and_csv_keep_stdout_for_the_summary(kit_home, tmp_path, monkeypatch):
    """`specwatch demo --format json|csv > file`: the live view and notes go to stderr, stdout parses."""
    monkeypatch.setenv("SPECWATCH_HOME", str(kit_home))
    monkeypatch.setenv("SPECWATCH_DEVICE", "cpu")
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    out = CliRunner().invoke(app, ["--size", "tiny", "--quick", "--no-redistill", "--db", db,
                                   "--format", "json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert {r["phase"] for r in data["rows"]} == {1, 2} and data["hot_path"]["worker_cpu_us_per_step"] > 0
    assert "speculation" in out.stderr  # the live view was drawn, on stderr
    out = CliRunner().invoke(app, ["--size", "tiny", "--quick", "--no-redistill", "--db", db,
                                   "--format", "csv", "--ingest", "inline"])
    assert out.exit_code == 0, out.output
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert len(rows) == 6 and {r["phase"] for r in rows} == {"1", "2"}


def test_prompt_sampler_is_a_capped_uniform_reservoir():
    # 2000 offers into a reservoir of 100: each item kept with probability 1/20. The mean kept index is
    # ~1000 for a uniform sample; keeping the first 100 (no replacement) gives ~50, the last 100 ~1950.
    sampler = PromptSampler(SamplerConfig(cap=100), seed=1)
    for i in range(2000):
        sampler.offer("d", [i])
    kept = [x[0] for x in sampler.sample("d")]
    assert len(kept) == 100 and len(set(kept)) == 100
    assert 850 < sum(kept) / len(kept) < 1150
    assert sampler.counts() == {"d": (100, 2000)}
    sampler.reset()
    assert sampler.sample() == []


@pytest.mark.parametrize("kwargs, field", [({"requests": (1, 0, 1)}, "requests"), ({"replay": 1.0}, "replay"),
                                          ({"new_tokens": 0}, "new_tokens"), ({"mix": ()}, "mix")])
def test_plan_rejects_bad_values_naming_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        DemoPlan(**kwargs)


def test_sampler_rejects_bad_values():
    with pytest.raises(ValueError, match="cap"):
        SamplerConfig(cap=0)
    with pytest.raises(ValueError, match="rate"):
        SamplerConfig(rate=0.0)


def test_text_prompts_keep_their_tail_and_come_out_as_guard_lines():
    import json as _json

    sampler = PromptSampler(SamplerConfig(cap=2, max_chars=5), seed=0)
    sampler.offer("prose", "abcdefgh")
    sampler.offer("code", [1, 2, 3], [4])
    lines = [_json.loads(line) for line in sampler.lines().splitlines()]
    assert lines == [{"domain": "code", "ids": [1, 2, 3, 4]}, {"domain": "prose", "text": "defgh"}]


def test_a_prompt_given_as_a_function_is_made_only_for_the_requests_kept():
    sampler, made = PromptSampler(SamplerConfig(cap=2), seed=0), []

    def prompt(i):
        made.append(i)
        return f"p{i}"

    assert not sampler.offer("code", lambda: None)  # nothing to keep: no place taken
    for i in range(1000):
        sampler.offer("code", lambda i=i: prompt(i))
    assert len(sampler.sample("code")) == 2 and set(sampler.sample("code")) <= {f"p{i}" for i in made}
    assert len(made) < 50  # about 2 + 2 ln(500): the reservoir's replacements, not the 1000 offers
