"""bench/fleet.py at a tiny scale against the PostgreSQL server: it runs and writes the JSON it promises."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[2]
PGBOUNCER = Path("/usr/sbin/pgbouncer").exists()
SERVER = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


@pytest.fixture(scope="module")
def server():
    engine = sa.create_engine(SERVER)
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError:
        pytest.skip(f"PostgreSQL is not reachable at {SERVER}")
    finally:
        engine.dispose()
    return SERVER


def test_tiny_fleet_run_writes_its_figures(server, tmp_path):
    out = tmp_path / "fleet.json"
    subprocess.run([sys.executable, str(ROOT / "bench" / "fleet.py"), "--pods", "6", "--seconds", "3",
                    "--workers", "2", "--history-pods", "4", "--days", "2", "--domains", "5", "--repeats", "1",
                    "--size-pods", "2", "--pool-size", "2" if PGBOUNCER else "0",
                    "--server", server, "--out", str(out)], check=True, cwd=ROOT, timeout=300,
                   env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True)
    results = json.loads(out.read_text())
    write = results["write"]["6"]
    assert write["flushes"] == 6 * 3 and write["workers"] == 2
    assert write["rows"]["windows"] > 0 and write["rows_per_s"] > 0
    assert write["flush_p50_ms"] <= write["flush_p99_ms"] and write["mb_per_pod_day"] > 0
    growth = write["bytes_per_pod_day"]  # every tier table, and only those: series are a cost per pod
    # (block tables appear once a partition of theirs exists: hours are packed once over, not in 3 seconds)
    assert {"windows", "minutes", "ten_minutes", "hours", "days"} <= set(growth) <= {
        "windows", "minutes", "ten_minutes", "hours", "days", "window_blocks", "minute_blocks", "ten_minute_blocks"}
    assert growth["windows"] > 0 and "series" in write["bytes_per_pod_fixed"]
    live = write["bytes_per_pod_day_live"]  # the same tables rewritten without dead row versions
    assert set(live) == set(growth) and 0 < live["windows"] <= growth["windows"]
    history = results["history"]
    # 4 pods x 5 domains x (a K series and a K = 0 probe series), 2 days of hours
    assert history["load"]["rows"]["hours"] >= 4 * 5 * 2 * 24
    fleet, by_pod = (history["queries"][q] for q in ("stats --since 2d (fleet, by domain)",
                                                     "stats --since 2d --by pod"))
    assert fleet["rows"] == 5 and by_pod["rows"] == 4
    assert "day" in fleet["tiers"]  # a whole day of the range is read from the days tier
    jobs = history["jobs"]
    assert jobs["rollup_one_minute"]["rebuilt"]["minute"] == 1
    assert jobs["rollup_at_day_boundary"]["rebuilt"] == {"minute": 1, "ten_minute": 1, "hour": 1, "day": 1, "week": 0}
    # the packed slices at the cut-offs: a day partition of each fine tier dropped, no row deleted
    assert jobs["prune"]["deleted"]["window_blocks_days"] == 1 and jobs["prune"]["deleted"]["minute_blocks_days"] == 1
    if PGBOUNCER:  # 6 pods, each with its own connection, through 2 server connections; pg_stat_activity may
        # also show an idle connection of the bench's own (its size queries) at a sample
        assert write["pooler"]["client_connections"] == 6 and 1 <= write["pooler"]["server_connections_max"] <= 3
    size = results["size"]  # 2 pods' hour, packed: blocks and hours left, no rows waiting in the fine tiers
    assert size["rows"]["windows"] == size["rows"]["minutes"] == size["rows"]["ten_minutes"] == 0
    assert size["rows"]["window_blocks"] == size["rows"]["minute_blocks"] == size["rows"]["ten_minute_blocks"] == 2 * 40
    assert 0 < size["bytes_per_pod_day_live"]["window_blocks"] < size["bytes_before_pack_per_pod_day"]["windows"]
