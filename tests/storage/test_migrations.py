"""Migrations build exactly the schema in storage/schema.py; an unknown newer schema is refused."""

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from storage import SchemaError, Store, StoreError
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
