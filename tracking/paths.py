"""Every relative path in the config resolves against the project root, not the cwd."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def resolve(path: str | Path) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else PROJECT_ROOT / p


def resolve_tracking_uri(uri: str) -> str:
    """``sqlite:///relative.db`` -> absolute, so every job of a sweep shares one store."""
    prefix = "sqlite:///"
    if uri.startswith(prefix) and not uri.startswith(prefix + "/"):
        path = resolve(uri[len(prefix):])
        path.parent.mkdir(parents=True, exist_ok=True)
        return prefix + str(path)
    return uri


DEFAULT_URI = "sqlite:///mlruns/mlflow.db"  # the project's own store
URI_ENV = "MLFLOW_TRACKING_URI"  # MLflow's own convention for reaching a team's server


def default_tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI`` when set (as every MLflow tool reads it), else the project's
    store; ``tracking.uri`` / ``--tracking-uri`` on the command line win over both."""
    return os.environ.get(URI_ENV, "").strip() or DEFAULT_URI


def store_line(configured: str, uri: str | None = None) -> str:
    """``MLflow store: http://team:5000 (from $MLFLOW_TRACKING_URI)``: which store a command
    uses and why (``configured``: as given; ``uri``: as resolved)."""
    from arag.redact import redact

    if configured == os.environ.get(URI_ENV, "").strip():
        origin = f"from ${URI_ENV}"
    else:
        origin = "the default store" if configured == DEFAULT_URI else "given on the command"
    return f"MLflow store: {redact(uri or configured)} ({origin})"


def artifact_location(uri: str, configured: str | None) -> str | None:
    """Where a new experiment keeps its artifacts: ``tracking.artifact_location`` when set;
    beside a sqlite store (``X/mlflow.db`` -> ``X/artifacts``: the default store's are
    ``mlruns/artifacts``), so a store moved or shared keeps its artifacts with it; None for a
    server, which keeps (or proxies) its own; ``mlruns/artifacts`` for any other store."""
    if configured:
        return configured
    if uri.startswith(("http://", "https://")):
        return None
    prefix = "sqlite:///"
    if uri.startswith(prefix):  # (an in-memory sqlite store is refused before: storage.py)
        return str(resolve(uri[len(prefix):]).parent / "artifacts")
    return "mlruns/artifacts"


UI_PORT_ENV = "ARAG_UI_PORT"  # the port `make ui` serves on; the links we print follow it


def ui_address() -> str:
    """Where ``make ui`` serves the MLflow UI: port 5000, or ``$ARAG_UI_PORT`` (which
    ``make ui`` reads too), so printed addresses and trace links open the UI one runs."""
    raw = os.environ.get(UI_PORT_ENV, "").strip() or "5000"
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{UI_PORT_ENV}={raw!r} is not a port. Fix: export {UI_PORT_ENV}=5001 "
                         "(1-65535), or unset it for 5000")
    return f"http://127.0.0.1:{int(raw)}"
