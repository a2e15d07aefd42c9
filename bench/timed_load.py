"""Load a dataset as a run would (composed config, any overrides) and time it: shared by
the benchmarks that report what an adapter derives."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from hydra import compose, initialize_config_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import runners.config  # noqa: E402,F401  (registers the schema)
from arag.datasets import Dataset, load_dataset  # noqa: E402
from tracking.paths import resolve  # noqa: E402


def timed_load(dataset: str, overrides: list[str]) -> tuple[Any, Dataset, float]:
    """(composed config, loaded dataset, seconds the load took) for ``dataset=<dataset>``."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[f"dataset={dataset}", *overrides])
    started = time.perf_counter()
    loaded = load_dataset(cfg.dataset, resolve("."))
    return cfg, loaded, time.perf_counter() - started


def load_line(dataset: Dataset, seconds: float) -> str:
    """How long the load took and how many PDFs it parsed or found in the parse cache."""
    parsing = dataset.reports["pdf_parsing"]
    return (f"load: {seconds:.1f} s ({parsing['n_parsed']} PDFs parsed, "
            f"{parsing['n_from_cache']} from the parse cache)")
