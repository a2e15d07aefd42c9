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


UI_PORT_ENV = "ARAG_UI_PORT"  # the port `make ui` serves on; the links we print follow it


def ui_address() -> str:
    """Where ``make ui`` serves the MLflow UI: port 5000, or ``$ARAG_UI_PORT`` (which
    ``make ui`` reads too), so printed addresses and trace links open the UI one runs."""
    raw = os.environ.get(UI_PORT_ENV, "").strip() or "5000"
    if not raw.isdigit() or not 0 < int(raw) < 65536:
        raise ValueError(f"{UI_PORT_ENV}={raw!r} is not a port. Fix: export {UI_PORT_ENV}=5001 "
                         "(1-65535), or unset it for 5000")
    return f"http://127.0.0.1:{int(raw)}"
