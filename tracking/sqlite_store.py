"""A local sqlite store made fast to create and cheap to write.

Creating: MLflow migrates a new sqlite store from nothing through every alembic revision
(several seconds on this machine, paid by every fresh store: each new user, each test).
The first creation keeps a migrated copy with no experiment in it, per MLflow version, under
the user's cache (``$XDG_CACHE_HOME/arag-eval``, else ``~/.cache/arag-eval``); later
creations copy it and let MLflow add its default experiment, with this store's own artifact
location and time, and verify the schema. A template MLflow refuses, or a cache that cannot
be written, falls back to migrating from nothing: it changes the time a creation takes,
never the store.

Writing: MLflow commits every call (a score on a trace, a metric) as its own transaction,
and sqlite's default rollback journal syncs the disk on each. The store is switched to
write-ahead logging (``journal_mode=WAL``, kept in the file) and this process's connections
sync at checkpoints only (``synchronous=NORMAL``): a commit survives a killed process as
before, and about five times more of them fit in a second. A power cut can lose the last
commits, not the store. (WAL needs a local disk: sqlite's shared memory does not work over
a network filesystem; such a store keeps its journal mode when the switch fails.)
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

log = logging.getLogger(__name__)
SQLITE = "sqlite:///"


def create(tmp: Path) -> None:
    """A migrated MLflow store in ``tmp`` with its default experiment, every connection
    closed; from the cached template when there is one that MLflow accepts."""
    template = template_path()
    if template is not None and template.is_file():
        try:
            shutil.copyfile(template, tmp)
            _open(tmp)
            return
        except (OSError, RuntimeError) as exc:
            log.debug("store template %s not used (%s); migrating from nothing", template, exc)
            tmp.unlink(missing_ok=True)
    _open(tmp)
    use_wal(tmp)
    if template is not None:
        _save_template(tmp, template)


def template_path() -> Path | None:
    """Where the empty store of this MLflow version is kept; None when no cache is known."""
    try:
        from importlib.metadata import version

        mlflow_version = version("mlflow")
    except Exception:  # noqa: BLE001 - no version: no template, the store is migrated
        return None
    root = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache")
    return Path(root) / "arag-eval" / f"mlflow-{mlflow_version}-empty-store.db"


def use_wal(path: Path) -> None:
    """Switch the store at ``path`` to write-ahead logging (kept in the file); a store that
    cannot switch (busy, or on a filesystem without shared memory) keeps its journal."""
    try:
        with closing(sqlite3.connect(path, timeout=5)) as db:
            db.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        log.debug("%s keeps its journal mode (%s)", path, exc)


def sync_at_checkpoints() -> None:
    """This process's sqlite connections (MLflow's engines) sync at WAL checkpoints, not at
    every commit; installed once, for sqlite connections only."""
    global _installed
    if _installed:
        return
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "connect", _on_connect)
    _installed = True


_installed = False


def _on_connect(dbapi_connection, _record) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        dbapi_connection.execute("PRAGMA synchronous=NORMAL")


def _open(path: Path) -> None:
    """MLflow's own store on ``path`` (migrating it when empty, adding the default
    experiment when missing, verifying the schema), then every connection closed."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    uri = SQLITE + str(path)
    try:
        SqlAlchemyStore(uri, path.parent.as_uri())
    except Exception as exc:  # noqa: BLE001 - e.g. a full disk during the migration
        raise RuntimeError(f"{type(exc).__name__}: {str(exc)[:300]}") from None
    finally:
        engine = SqlAlchemyStore._engine_map.pop(uri, None)
        if engine is not None:
            engine.dispose()


def _save_template(store: Path, template: Path) -> None:
    part = template.with_name(f".{template.name}.{os.getpid()}.part")
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(store, part)
        with closing(sqlite3.connect(part)) as db:
            db.execute("DELETE FROM experiment_tags WHERE experiment_id = 0")
            db.execute("DELETE FROM experiments WHERE experiment_id = 0")
            db.commit()
        os.replace(part, template)
    except (OSError, sqlite3.Error) as exc:
        log.debug("no store template at %s (%s)", template, exc)
    finally:
        part.unlink(missing_ok=True)
