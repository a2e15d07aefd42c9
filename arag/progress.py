"""Progress bars for long work (loading the embedder, embedding, BERTScore, judge calls,
trace logging): one switch for the process, set by the runner from ``runner.progress``,
and the job's place in its sweep (``job 2/3 naive``) in front of every bar.

Bars go to stderr and are removed when done, so a finished command shows its results, not
a pile of full bars; ``runner.progress=false`` turns them all off (logs, CI).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tqdm import tqdm


@dataclass
class _Settings:
    enabled: bool = True
    label: str = ""


_SETTINGS = _Settings()


def configure(enabled: bool, label: str = "") -> None:
    """Turn the bars on or off and name the job they belong to."""
    _SETTINGS.enabled = bool(enabled)
    _SETTINGS.label = label


def enabled() -> bool:
    return _SETTINGS.enabled


def bar(what: str, total: int | None, unit: str = "it", show: bool = True) -> Any:
    """A tqdm bar named ``<job>: <what>`` (``show=False``, or bars switched off: a silent
    one, so callers update it all the same)."""
    desc = f"{_SETTINGS.label}: {what}" if _SETTINGS.label else what
    return tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True,
                disable=not (_SETTINGS.enabled and show))
