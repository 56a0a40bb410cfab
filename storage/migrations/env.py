"""Alembic environment: run on the engine handed over by storage.migrate (there is no alembic.ini)."""

from alembic import context

from storage.schema import metadata

engine = context.config.attributes["engine"]
with engine.connect() as connection:
    # Batch mode lets ALTER TABLE work on SQLite (copy-and-move); PostgreSQL alters in place.
    context.configure(connection=connection, target_metadata=metadata,
                      render_as_batch=connection.dialect.name == "sqlite")
    with context.begin_transaction():
        context.run_migrations()
    connection.commit()
