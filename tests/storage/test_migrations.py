"""Migrations build exactly the schema in storage/schema.py; an unknown newer schema is refused."""

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from storage import SchemaError, StatsQuery, Store, StoreConfig, StoreError
from storage import migrate
from storage.engine import Database
from storage.schema import metadata


@pytest.fixture
def db(db_url):
    database = Database.open(db_url)
    yield database
    database.dispose()


def test_up_from_empty_builds_the_schema_module(db):
    assert migrate.current_revision(db) is None
    assert migrate.upgrade(db) == (None, migrate.head_revision())
    with db.read() as conn:
        assert compare_metadata(MigrationContext.configure(conn), metadata) == []
    assert migrate.upgrade(db) == (migrate.head_revision(),) * 2  # again: nothing to do


def test_down_and_up_again(db):
    migrate.upgrade(db)
    migrate.downgrade(db, "base")
    assert set(sa.inspect(db.engine).get_table_names()) == {"alembic_version"}
    migrate.upgrade(db)
    assert set(metadata.tables) <= set(sa.inspect(db.engine).get_table_names())


def _stamp(db, revision):
    with db.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


def test_an_unknown_newer_schema_is_refused(db, db_url):
    migrate.upgrade(db)
    _stamp(db, "0099")
    for migrate_schema in (True, False):
        with pytest.raises(SchemaError, match="revision 0099, which this specwatch does not know.*newer"):
            Store.open(db_url, migrate_schema=migrate_schema)
    with pytest.raises(SchemaError, match="newer"):
        migrate.upgrade(db)


def test_a_store_that_must_not_migrate_asks_for_it(db, db_url):
    assert migrate.current_revision(db) is None  # connected: an empty database exists
    with pytest.raises(SchemaError, match="no specwatch schema.*specwatch db migrate"):
        Store.open(db_url, migrate_schema=False)
    Store.open(db_url).close()  # migrates
    Store.open(db_url, migrate_schema=False).close()


def test_a_missing_sqlite_file_is_not_created_by_a_reader(tmp_path):
    with pytest.raises(StoreError, match="no database at"):
        Store.open(f"sqlite:///{tmp_path / 'absent.db'}", migrate_schema=False)
    assert not (tmp_path / "absent.db").exists()


@pytest.mark.parametrize("url,message", [("nonsense", "not a database URL"),
                                         ("mysql://x/y", "unsupported database 'mysql'"),
                                         ("postgresql+psycopg://nobody@127.0.0.1:1/x", "database error")])
def test_bad_urls_fail_with_one_line(url, message):
    with pytest.raises(StoreError, match=message) as info:
        Store.open(url)
    assert "\n" not in str(info.value)


def test_hours_written_before_the_days_tier_are_rolled_up_into_it(db, db_url, clock):
    # Revision 0003 adds days; the hours already stored are marked for the first rollup, so a query reads
    # them (not the empty days) until then, and the same totals from days after.
    from history import T0

    migrate.upgrade(db, "0002")
    with db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO series (id, domain, lookahead, target_version, draft_version, pod) "
                             "VALUES (1, 'code', 4, 't1', 'd1', 'p1')"))
        conn.execute(sa.text("INSERT INTO hours VALUES (:b, 1, 10, 40, 30, 40, 0, 0, 0.1, 0.5)"),
                     [{"b": T0 + h * 3600} for h in (0, 5, 23)])
        conn.execute(sa.text("INSERT INTO tier_state VALUES ('hour', 0, :t)"), {"t": T0 + 86400})
    store = Store.open(db_url, clock=clock)
    query = StatsQuery(since=T0, until=T0 + 86400)
    before = store.stats(query)
    assert before.plan.tiers_used() == {"hour": 86400}
    assert [(r["domain"], r["steps"], r["accepted"]) for r in before.rows] == [("code", 30, 90)]
    assert store.rollup(T0 + 86400)["day"] == 1
    after = store.stats(query)
    assert after.plan.tiers_used() == {"day": 86400} and after.rows == before.rows
    store.close(flush=False)


def test_position_rows_move_into_the_tier_rows_and_back(db, db_url, clock):
    # Revision 0005 folds <tier>_positions into at_least_0..32 of the tier row; the per-position answers
    # are the same after, and a downgrade gives the rows back.
    from history import T0

    migrate.upgrade(db, "0004")
    old = [(1, 10, 8), (2, 8, 5), (3, 5, 0)]  # K = 4: position 4 never reached (no row)
    with db.engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO series (id, domain, lookahead, target_version, draft_version, pod) "
                             "VALUES (1, 'code', 4, 't1', 'd1', 'p1'), (2, 'code', 0, 't1', 'd1', 'p1')"))
        for sid in (1, 2):
            conn.execute(sa.text("INSERT INTO windows VALUES (:b, :s, 10, 40, 14, 24, 0, 0, 0.1, 0.5)"),
                         {"b": T0, "s": sid})
        conn.execute(sa.text("INSERT INTO window_positions VALUES (:b, 1, :p, :r, :a)"),
                     [{"b": T0, "p": p, "r": r, "a": a} for p, r, a in old])
    migrate.upgrade(db)
    with db.read() as conn:
        rows = dict(conn.execute(sa.text(
            "SELECT series_id, at_least_0 || ',' || at_least_1 || ',' || at_least_2 || ',' || at_least_3 || ','"
            " || at_least_4 || ',' || COALESCE(at_least_5, -1) FROM windows")).all())
        assert "window_positions" not in sa.inspect(conn).get_table_names()
    assert rows == {1: "10,8,5,0,0,-1", 2: None}  # K = 0: every column NULL
    store = Store.open(db_url, clock=clock)
    got = store.stats(StatsQuery(by=("position",), since=T0, until=T0 + 60, tier="window")).rows
    assert [(r["position"], r["reached"], r["accepted"]) for r in got] == old
    store.close(flush=False)
    migrate.downgrade(db, "0004")
    with db.read() as conn:
        back = conn.execute(sa.text("SELECT position, reached, accepted FROM window_positions "
                                    "ORDER BY position")).all()
    assert [tuple(r) for r in back] == old


def test_packed_hours_come_back_as_rows_on_downgrade(db, db_url, clock):
    # Revision 0006 adds the block tables; the pack job fills them. A downgrade decodes every block back
    # into rows of its tier (a row still in the tier wins), and the answers are those of before.
    from history import T0, random_steps

    migrate.upgrade(db, "0005")
    migrate.upgrade(db)
    store = Store.open(db_url, StoreConfig(max_past_seconds=400 * 86400), clock=clock, backfill=True)
    store.write_records(random_steps(500, T0, 7200, seed=4))
    store.flush(T0 + 7200)
    store.rollup(T0 + 3 * 3600)
    by = ("domain", "lookahead", "pod", "minute")
    before = [store.stats(StatsQuery(by=b, since=T0, until=T0 + 7200, tier=t)).rows
              for b, t in ((by, "window"), (by, "minute"), (("domain", "position"), "window"))]
    assert store.pack(T0 + 3 * 3600) == {"window": 72, "minute": 72, "ten_minute": 72}
    store.close(flush=False)
    with db.read() as conn:
        held = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
                for t in ("windows", "minutes", "window_blocks")}
    assert held == {"windows": 0, "minutes": 0, "window_blocks": 72}
    migrate.downgrade(db, "0005")
    with db.read() as conn:
        names = set(sa.inspect(conn).get_table_names())
        assert not {"window_blocks", "minute_blocks"} & names
        counts = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar() for t in ("windows", "minutes")}
    assert counts["windows"] > 72 and counts["minutes"] > 72
    migrate.upgrade(db)  # read back as rows (nothing packed yet after this upgrade)
    store = Store.open(db_url, StoreConfig(max_past_seconds=400 * 86400), clock=clock, backfill=True)
    after = [store.stats(StatsQuery(by=b, since=T0, until=T0 + 7200, tier=t)).rows
             for b, t in ((by, "window"), (by, "minute"), (("domain", "position"), "window"))]
    store.close(flush=False)
    _same_answers(before, after)


def _same_answers(before, after):
    """Counts equal; sums of seconds to the blocks' 1e-7 s (storage/blocks.py)."""
    for old, new in zip(before, after):
        assert len(old) == len(new) > 0
        for x, y in zip(old, new):
            assert {k: v for k, v in x.items() if not isinstance(v, float)} == \
                   {k: v for k, v in y.items() if not isinstance(v, float)}
            for k, v in x.items():
                if isinstance(v, float):
                    assert v == pytest.approx(y[k], rel=1e-3, abs=1e-7), k


def test_ten_minute_blocks_come_back_as_rows_on_downgrade(db, db_url, clock):
    # Revision 0007 packs the ten-minute tier too; down to 0006 its blocks are rows again, answering the same.
    from history import T0, random_steps

    migrate.upgrade(db)
    store = Store.open(db_url, StoreConfig(max_past_seconds=400 * 86400), clock=clock, backfill=True)
    store.write_records(random_steps(500, T0, 7200, seed=5))
    store.flush(T0 + 7200)
    store.rollup(T0 + 3 * 3600)
    queries = [StatsQuery(by=b, since=T0, until=T0 + 7200, tier="ten_minute")
               for b in (("domain", "lookahead", "pod", "hour"), ("domain", "position"))]
    before = [store.stats(q).rows for q in queries]
    assert store.pack(T0 + 3 * 3600)["ten_minute"] == 72
    store.close(flush=False)
    migrate.downgrade(db, "0006")
    with db.read() as conn:
        assert "ten_minute_blocks" not in set(sa.inspect(conn).get_table_names())
        assert conn.execute(sa.text("SELECT count(*) FROM ten_minutes")).scalar() > 72
        assert conn.execute(sa.text("SELECT packed_until FROM tier_state WHERE tier = 'ten_minute'")).scalar() == 0
    migrate.upgrade(db)
    store = Store.open(db_url, StoreConfig(max_past_seconds=400 * 86400), clock=clock, backfill=True)
    after = [store.stats(q).rows for q in queries]
    store.close(flush=False)
    _same_answers(before, after)
