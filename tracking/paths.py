"""Every relative path in the config resolves against the project root, not the cwd."""

from __future__ import annotations

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
