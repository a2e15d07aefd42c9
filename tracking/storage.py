"""Where a run writes, checked before any work starts: the tracking store
(``tracking.uri``, ``tracking.artifact_location``), ``cache.dir`` and ``runner.runs_dir``.
Each problem names the key and the fix.

A tracking server is probed with a bounded timeout, so a server that is down fails in
seconds instead of hanging in MLflow's own retries. A fresh sqlite store is created and
migrated in a temporary file and linked into place only when complete, so a failed
creation (a full disk, a kill) never leaves a half-built database; one left by an older
version is detected and the message says how to recover.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from arag.config import ConfigError, option_value
from arag.files import DISK_FULL, MISPLACED, is_storage_failure
from arag.redact import redact, reveal
from tracking import sqlite_store
from tracking.paths import DEFAULT_URI, URI_ENV, artifact_location, resolve

log = logging.getLogger(__name__)
SQLITE = sqlite_store.SQLITE
PROBE_TIMEOUT_S = 8.0
PROBE_ATTEMPTS = 3  # at most ~30 s before an unreachable server is reported
# MLflow's client retries each failed call to a server 7 times, with a backoff factor of 2
# and 120 s timeouts: minutes per call, times every call of a run, before a job learns that
# the server went away. Unless the user set them, a run against a server uses these: a
# call fails after 3 tries (backoff ~2 s between them, 20 s timeout each), so a server that
# refuses connections is reported within seconds and one that hangs within
# SERVER_GONE_BOUND_S (the failing call and the two that mark the run FAILED).
HTTP_BOUNDS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
               "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "20"}
SERVER_GONE_BOUND_S = 3 * (3 * 20 + 2 + 2)


class StorageError(ConfigError):
    """A store or directory the run needs is unusable; the message names the key and fix."""


def check_storage(cfg: Any, tracking: bool = True) -> None:
    """Every place the run writes is usable (``tracking``: the MLflow store too)."""
    if tracking:
        check_tracking(cfg.tracking)
    mode = option_value(cfg.cache.mode)
    if mode != "off":
        writable_dir("cache.dir", cfg.cache.dir, "cache.dir=data/cache",
                      must_write=mode == "read_write")
    writable_dir("runner.runs_dir", cfg.runner.runs_dir, "runner.runs_dir=data/runs")


def writable_dir(key: str, value: str, example: str, must_write: bool = True,
                 shown: str | None = None) -> Path:
    """The directory ``value`` (created if missing), or StorageError naming ``key`` (with
    ``shown``, the key's value, when the directory is derived from it)."""
    path = resolve(value)
    try:
        path.mkdir(parents=True, exist_ok=True)
        if must_write:
            with tempfile.NamedTemporaryFile(dir=path, prefix=".write-check-"):
                pass
    except OSError as exc:
        raise StorageError(
            f"{key}={shown or redact(str(value))!r} needs a writable directory "
            f"({exc.strerror or exc}: {exc.filename or path}). Fix: point {key} at a directory "
            f"you can write, e.g. {example}") from None
    return path


def check_tracking(tracking_cfg: Any) -> str:
    """The MLflow URI to use for ``tracking.uri``, after checking it can be used."""
    uri = str(tracking_cfg.uri)
    shown = redact(uri)
    from_env = uri.strip() == os.environ.get(URI_ENV, "\0").strip()
    named = f"tracking.uri={shown!r}" + (f" (from ${URI_ENV})" if from_env else "")
    fix = f"export {URI_ENV}=" if from_env else "tracking.uri="
    unset = f", or unset {URI_ENV} for the project's store ({DEFAULT_URI})" if from_env else ""
    scheme = urlsplit(uri).scheme.lower()
    if not uri.strip():  # an empty variable, or tracking.uri=''
        raise StorageError(f"{named} names no tracking store. Fix: {fix}"
                           f"sqlite:///<dir>/mlflow.db (a local store){unset}")
    if scheme in ("http", "https"):
        bound_server_calls()
        probe_server(reveal(uri), shown)
        return reveal(uri)
    if scheme and scheme not in known_schemes() and not (len(scheme) == 1 and os.name == "nt"):
        raise StorageError(
            f"{named}: {scheme!r} is not a tracking store MLflow knows (it knows "
            f"{', '.join(sorted(known_schemes()))}). Fix: {fix}sqlite:///<dir>/mlflow.db (a "
            f"local store; {DEFAULT_URI} is the project's) or http://host:5000 (a server)"
            f"{unset}")
    if scheme in ("", "file") and os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() != "true":
        # a folder is MLflow's file store, which MLflow refuses: a sqlite file there works
        folder = (urlsplit(uri).path if scheme else uri).rstrip("/") or "."
        raise StorageError(f"{named} is a folder, and MLflow no longer keeps runs in a folder "
                           f"(its file store). Fix: {fix}sqlite:///{resolve(folder)}/mlflow.db "
                           f"(a store in that folder){unset}")
    if scheme == "sqlite" and _in_memory(uri):
        raise StorageError(
            f"tracking.uri={shown!r} is an in-memory store: every run is lost when the process "
            f"ends (and a sweep's jobs do not share it). Fix: tracking.uri={DEFAULT_URI}")
    artifacts = artifact_location(uri, tracking_cfg.artifact_location)
    if artifacts and "://" not in artifacts:
        writable_dir("tracking.artifact_location", artifacts,
                     "tracking.artifact_location=mlruns/artifacts")
    if uri.startswith(SQLITE):
        path = resolve(uri[len(SQLITE):])
        writable_dir("tracking.uri", str(path.parent), f"tracking.uri={DEFAULT_URI}",
                     shown=shown)
        prepare_sqlite(path, shown)
        return SQLITE + str(path)
    if scheme in ("", "file"):
        writable_dir("tracking.uri", urlsplit(uri).path if scheme else uri,
                     "tracking.uri=mlruns")
    return uri


def _in_memory(uri: str) -> bool:
    """``sqlite://`` (SQLAlchemy's in-memory database), ``sqlite:///:memory:`` and the
    ``mode=memory`` URI form keep nothing past the process."""
    database = uri.split("://", 1)[1].removeprefix("/")
    return database in ("", ":memory:") or database.startswith(":memory:?") \
        or "mode=memory" in urlsplit(uri).query


def known_schemes() -> set[str]:
    """URI schemes with a tracking store (MLflow's registry, plugins included)."""
    try:
        from mlflow.tracking._tracking_service.utils import _tracking_store_registry

        return {s for s in _tracking_store_registry._registry if s}
    except (ImportError, AttributeError):  # an MLflow that moved its registry
        return {"file", "sqlite", "postgresql", "mysql", "mssql", "http", "https",
                "databricks"}


def bound_server_calls() -> None:
    """MLflow's HTTP retries bounded (HTTP_BOUNDS), where the user has not set them."""
    for name, value in HTTP_BOUNDS.items():
        os.environ.setdefault(name, value)


class TrackingServerGone(StorageError):
    """The tracking server stopped answering while the job ran: nothing more can be
    logged, so the command stops (the same command resumes once the server is back)."""


def server_gone(exc: BaseException, uri: str) -> TrackingServerGone | None:
    """The error to report when ``exc`` came from a tracking server at ``uri`` that no
    longer answers (one short probe says so); None otherwise."""
    if urlsplit(uri).scheme.lower() not in ("http", "https"):
        return None
    if not type(exc).__module__.startswith(("mlflow", "requests", "urllib3")):
        return None
    try:
        probe_server(reveal(uri), redact(uri), attempts=1, timeout=5.0)
    except StorageError:
        return TrackingServerGone(
            f"the tracking server at {redact(uri)} went away ({redact(_first_line(exc))[:200]})."
            " Fix: start it again, then run the same command: finished tasks are kept and "
            "not asked again")
    return None


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def probe_server(url: str, shown: str, attempts: int = PROBE_ATTEMPTS,
                 timeout: float = PROBE_TIMEOUT_S) -> None:
    """Any HTTP answer from the server, within ``attempts`` bounded tries."""
    last = ""
    parts = urlsplit(url)  # reachability needs no credentials: a 401 is an answer too
    health = parts._replace(netloc=parts.netloc.rpartition("@")[2],
                            path=parts.path.rstrip("/") + "/health").geturl()
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(health, timeout=timeout):
                return
        except urllib.error.HTTPError:
            return  # it answered (e.g. a proxy without /health): it is reachable
        except (OSError, ValueError) as exc:
            if isinstance(exc, ssl.SSLError) or isinstance(getattr(exc, "reason", None),
                                                           ssl.SSLError):
                return  # it answered TLS; MLflow's client applies its own certificates
            last = f"{type(exc).__name__}: {getattr(exc, 'reason', exc)}"
        if attempt + 1 < attempts:
            time.sleep(1.0)
    raise StorageError(
        f"tracking.uri={shown!r} is not reachable ({redact(last)[:200]}, {attempts} "
        f"tries). Fix: start the tracking server (mlflow server --host ... --port ...), or "
        f"set tracking.uri={DEFAULT_URI}")


def prepare_sqlite(path: Path, shown: str) -> None:
    """A complete sqlite store at ``path``: created atomically when missing; a half-built
    one (an interrupted creation by an older version) is refused with how to recover."""
    if path.is_dir():
        raise StorageError(f"tracking.uri={shown!r} names a directory, not a database file. "
                           f"Fix: tracking.uri=sqlite:///{path}/mlflow.db")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise StorageError(f"tracking.uri={shown!r}: {path} is read-only for this user (every "
                           "run writes to the store). Fix: make it writable (chmod u+rw "
                           f"{path}), or set tracking.uri={DEFAULT_URI} for a store of your own")
    sqlite_store.sync_at_checkpoints()
    if path.exists() and path.stat().st_size > 0:
        _refuse_half_built(path, shown)
        sqlite_store.use_wal(path)
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.creating")
    try:
        sqlite_store.create(tmp)
        try:
            os.link(tmp, path)  # never replaces a store another process just created
        except FileExistsError:
            if path.stat().st_size == 0:  # an empty file is no store: take its place
                os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        raise StorageError(f"tracking.uri={shown!r}: could not create the store ({exc}). "
                           "Fix: free disk space or point tracking.uri elsewhere") from None
    finally:
        tmp.unlink(missing_ok=True)
    log.info("created the MLflow store %s", path)


def _refuse_half_built(path: Path, shown: str) -> None:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master "
                                               "WHERE type='table'")}
            runs = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] \
                if "runs" in tables else 0
    except sqlite3.DatabaseError as exc:
        raise StorageError(f"tracking.uri={shown!r}: {path} is not an sqlite database ({exc}). "
                           "Fix: point tracking.uri at another file, or move this one "
                           "away") from None
    leftovers = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    if not leftovers and "alembic_version" in tables:
        return
    why = f"its tables {leftovers}" if leftovers else "it has no schema version"
    fix = (f"it holds no runs: delete it (rm {path}) and run again" if not runs else
           f"it holds {runs} runs: back it up, drop the table(s) {leftovers} and run "
           f"`mlflow db upgrade sqlite:///{path}`")
    raise StorageError(f"tracking.uri={shown!r}: the store was left half-built by an "
                       f"interrupted creation ({why}). Fix: {fix}")


@contextmanager
def storage_errors(cfg: Any) -> Iterator[None]:
    """A write that fails while the job runs (a full disk, a read-only store, a file where a
    directory should be) becomes a StorageError naming the path, the key that chose it and
    the fix, instead of a traceback; a tracking server that went away, TrackingServerGone."""
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        explained = explain_write_failure(exc, cfg) or server_gone(exc, str(cfg.tracking.uri))
        if explained is None:
            raise
        raise explained from exc


def explain_write_failure(exc: BaseException, cfg: Any) -> StorageError | None:
    """The StorageError for a failed write, or None when ``exc`` is not one."""
    failure = _failed_write(exc, cfg)
    if failure is None:
        return None
    code, path = failure
    why = os.strerror(code)
    places = _write_places(cfg)
    owner = _owner(Path(path), places) if path else None
    again = "; then run the same command again (finished tasks are kept)"
    if owner is None:
        listed = "; ".join(f"{k}={redact(v)!r}" for k, (v, _, _) in places.items())
        return StorageError(f"a write failed: {why} ({type(exc).__name__}: "
                            f"{redact(str(exc))[:200]}). The run writes under {listed}. Fix: "
                            f"{_fix(code, 'the key of that volume', '')}{again}")
    key, (value, _, example) = owner
    return StorageError(f"{path}: {why}. It is under {key}={redact(value)!r}. Fix: "
                        f"{_fix(code, key, example)}{again}")


def _failed_write(exc: BaseException, cfg: Any) -> tuple[int, str | None] | None:
    """(errno, the path written, if known) of a failed write; None for other errors."""
    if isinstance(exc, OSError) and exc.errno is not None and is_storage_failure(exc):
        return exc.errno, exc.filename if isinstance(exc.filename, str) else None
    text = str(exc)  # sqlite's own errors, through MLflow and SQLAlchemy
    if "database or disk is full" in text:
        return errno.ENOSPC, _sqlite_path(str(cfg.tracking.uri))
    if "readonly database" in text:
        return errno.EROFS, _sqlite_path(str(cfg.tracking.uri))
    return None


def _fix(code: int | None, key: str, example: str) -> str:
    elsewhere = f"point {key} elsewhere" + (f", e.g. {example}" if example else "")
    if code in DISK_FULL:
        return f"free disk space (or quota) on that volume, or {elsewhere}"
    if code in MISPLACED:
        return f"a file stands where a directory is expected (or the reverse): move it, or " \
               f"{elsewhere}"
    return f"make it writable for this user, or {elsewhere}"


def _write_places(cfg: Any) -> dict[str, tuple[str, Path, str]]:
    """key -> (its value, the local directory it chooses, an example fix)."""
    places = {"runner.runs_dir": (str(cfg.runner.runs_dir), "runner.runs_dir=data/runs"),
              "cache.dir": (str(cfg.cache.dir), "cache.dir=data/cache")}
    location = artifact_location(str(cfg.tracking.uri), cfg.tracking.artifact_location) or ""
    if location and ("://" not in location or location.startswith("file://")):
        places["tracking.artifact_location"] = (location,
                                                "tracking.artifact_location=mlruns/artifacts")
    out = {k: (v, resolve(urlsplit(v).path if v.startswith("file://") else v), example)
           for k, (v, example) in places.items()}
    db = _sqlite_path(str(cfg.tracking.uri))
    if db is not None:
        out["tracking.uri"] = (str(cfg.tracking.uri), Path(db).parent,
                               f"tracking.uri={DEFAULT_URI}")
    return out


def _owner(path: Path, places: dict[str, tuple[str, Path, str]]
           ) -> tuple[str, tuple[str, Path, str]] | None:
    """The key whose directory holds ``path`` (the most specific one)."""
    path = resolve(path)
    holders = [(key, place) for key, place in places.items() if path.is_relative_to(place[1])]
    return max(holders, key=lambda kp: len(kp[1][1].parts), default=None)


def _sqlite_path(uri: str) -> str | None:
    return str(resolve(uri[len(SQLITE):])) if uri.startswith(SQLITE) else None
