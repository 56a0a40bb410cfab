"""The stats, versions and db commands through typer's CliRunner, on a small real SQLite database."""

import csv
import io
import json
import time

import pytest
import sqlalchemy as sa
import typer
from typer.testing import CliRunner

from agent.cli import db as cli_db, stats as cli_stats
from history import T0, day_of_history
from storage import Store

runner = CliRunner()
app = typer.Typer()
app.command(epilog=cli_stats.EXAMPLE)(cli_stats.stats)
app.command(epilog=cli_db.VERSIONS_EXAMPLE)(cli_db.versions)
app.add_typer(cli_db.db_app, name="db")


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'h.db'}"
    store = Store.open(url, clock=lambda: T0 + 86400, backfill=True)
    day_of_history(store)
    store.close()
    return url


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def test_json_by_domain(url):
    result = run("stats", "--db", url, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {r["domain"]: r for r in json.loads(result.stdout)}
    assert set(rows) == {"chat", "code", "prose"}
    assert rows["chat"]["steps"] == 3 * 1440 and rows["code"]["speedup"] > 0
    # per-token 0.45, K = 4, counting every drafted position: sum(0.45 ** i for i in 1..4) / 4 = 0.196
    assert rows["prose"]["acceptance_rate"] == pytest.approx(0.196, abs=0.015)
    assert {"draft_ms", "verify_ms"} <= set(rows["chat"]) and "draft_seconds_per_step" not in rows["chat"]


def test_csv_by_hour_has_iso_times(url):
    result = run("stats", "--db", url, "--by", "hour", "--domain", "code", "--since", "2023-11-14T10:00:00Z",
                 "--until", "2023-11-14T12:00Z", "--format", "csv")
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["hour"] for r in rows] == ["2023-11-14T10:00:00Z", "2023-11-14T11:00:00Z"]
    assert all(int(r["steps"]) == 180 for r in rows)


def test_table_by_position(url):
    result = run("stats", "--db", url, "--by", "position", "--domain", "chat")
    assert result.exit_code == 0, result.output
    assert "conditional_acceptance" in result.stdout and "by position" in result.stdout


def test_plot(url, tmp_path):
    path = tmp_path / "a.png"
    result = run("stats", "--db", url, "--since", "2023-11-14T00:00Z", "--until", "2023-11-15T00:00Z",
                 "--plot", path)
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("args,message", [
    (("--since", "yesterday"), "error: --since: expected a span back from now"),
    (("--until", "1999-01-01", "--since", "2000-01-01"), "error: since must be before until"),
])
def test_bad_arguments_are_one_line_errors(url, args, message):
    result = run("stats", "--db", url, *args)
    assert result.exit_code == 1 and result.output.strip().startswith(message)
    assert "Traceback" not in result.output  # one message (rich may wrap it at the terminal width)


def test_missing_database(tmp_path):
    result = run("stats", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert result.exit_code == 1 and "no database at" in result.output


def test_versions(url):
    rows = json.loads(run("versions", "--db", url, "--format", "json").stdout)
    assert {(r["role"], r["version"]) for r in rows} == {("target", "t1"), ("target", "t2"), ("draft", "d1")}
    assert all(r["first_seen"].endswith("Z") for r in rows)


def test_db_migrate_and_prune(tmp_path):
    url = f"sqlite:///{tmp_path / 'new.db'}"
    assert "migrated from empty to revision 0009" in run("db", "migrate", "--db", url).stdout
    assert "already at revision 0009" in run("db", "migrate", "--db", url).stdout
    result = run("db", "prune", "--db", url, "--format", "json")
    assert result.exit_code == 0 and {r["table"] for r in json.loads(result.stdout)} >= {"transitions"}


def test_db_prune_applies_the_sidecars_retention(tmp_path, monkeypatch):
    # A window three hours old: kept by the default retention (7 days), pruned with SPECWATCH_RETAIN_WINDOWS=7200
    # once the rollup built its minute.
    url = f"sqlite:///{tmp_path / 'h.db'}"
    run("db", "migrate", "--db", url)
    old = (int(time.time()) - 3 * 3600) // 60 * 60
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO series (id, domain, lookahead, target_version, draft_version, pod) "
                             "VALUES (1, 'code', 0, 't', 'd', 'p')"))
        conn.execute(sa.text("INSERT INTO windows (bucket_start, series_id, steps, drafted, accepted, emitted, "
                             "expected_n, expected_sum, draft_seconds, verify_seconds) "
                             "VALUES (:b, 1, 5, 0, 0, 5, 0, 0, 0, 0.05)"), {"b": old})
        conn.execute(sa.text("INSERT INTO dirty (tier, bucket_start, shard, changes) VALUES ('minute', :b, 0, 1)"),
                     {"b": old})

    def windows() -> int:  # as a row, or packed into its hour's block once the hour is rolled up
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT (SELECT count(*) FROM windows) + "
                                        "(SELECT count(*) FROM window_blocks)")).scalar()

    assert run("db", "prune", "--db", url).exit_code == 0 and windows() == 1
    monkeypatch.setenv("SPECWATCH_RETAIN_WINDOWS", "7200")
    assert run("db", "prune", "--db", url).exit_code == 0 and windows() == 0
    monkeypatch.setenv("SPECWATCH_RETAIN_WINDOWS", "60")
    result = run("db", "prune", "--db", url)
    assert result.exit_code != 0 and "retain_windows: must be over 3900 s" in result.output
    engine.dispose()


def test_help_ends_with_an_example():
    for command in (["stats"], ["versions"], ["db", "migrate"], ["db", "prune"]):
        lines = [l.strip() for l in run(*command, "--help").stdout.splitlines() if l.strip()]
        assert any(line.startswith(("Example: specwatch", "Examples: specwatch")) for line in lines[-2:])
