"""What a job's run is called: its name in MLflow (the system, the keys a sweep varies)
and its place in the sweep for the progress bar."""

from __future__ import annotations

from enum import Enum
from typing import Any

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from arag.registry import UnknownName
from arag.systems import SYSTEMS

# overrides that say where things are kept, not what runs: left out of a run's name
_PLACES = ("tracking.", "cache.", "runner.", "hydra.", "dataset.root=")
# overrides the run name's data label (settings.data_label) already shows
_IN_DATA_LABEL = ("dataset=", "dataset.split=", "dataset.limit=")
# the file an external run reads: its stem names the run (System.run_label), not the path
_FILE_KEY = "system.predictions"


def progress_label(name: str, parent: dict[str, Any] | None) -> str:
    """``job 2/3 naive``: the job's place in its sweep, for the progress bar."""
    from hydra.core.hydra_config import HydraConfig

    if not parent or not parent.get("n_jobs") or not HydraConfig.initialized():
        return name
    return f"job {HydraConfig.get().job.num + 1}/{parent['n_jobs']} {name}"


def job_run_name(cfg: DictConfig, hc: Any, swept: list[str]) -> str:
    """``arag max_loops=6``: the system, then the keys a sweep varies; a single run names
    its overrides (``naive retrieval.top_k=8``), leaving out where things are stored and
    what the data label shows. The run's name adds the data label (``arag
    ectsum/val[:30]``); the report calls it by this one (tag ``run_label``)."""
    choices = hc.runtime.choices
    if hc.mode == RunMode.MULTIRUN:
        parts = [f"{k}={choices[k] if k in choices else _shown(OmegaConf.select(cfg, k))}"
                 for k in swept if k not in ("system", _FILE_KEY)]
    else:
        parts = [o for o in hc.overrides.task
                 if not o.startswith(("system=", f"{_FILE_KEY}=", *_PLACES, *_IN_DATA_LABEL))]
    return " ".join([_system_label(cfg), *(p for p in parts if not _endpoint(p))])[:250]


def _endpoint(part: str) -> bool:
    """An endpoint (``model.base_url=http://...``): where the model is served, not what the
    run is, and a URL a run label must not carry into pages and descriptions."""
    key, _, value = part.partition("=")
    return key.lstrip("+~").endswith("base_url") or "://" in value


def _system_label(cfg: DictConfig) -> str:
    """The system's own name for its run (an external run: its file's stem), or its
    ``system.name`` when the kind is unknown (the config check then names it)."""
    try:
        system = SYSTEMS.get(str(cfg.system.kind))
    except UnknownName:
        return str(cfg.system.name)
    return system.run_label(str(cfg.system.name), OmegaConf.select(cfg, _FILE_KEY))


def _shown(value: Any) -> Any:
    """A swept value as it was typed: ``dense``, not ``RetrievalMethod.dense``."""
    return value.name if isinstance(value, Enum) else value
