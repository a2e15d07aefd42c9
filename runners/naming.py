"""What a job's run is called: its name in MLflow (the system, the keys a sweep varies)
and its place in the sweep for the progress bar."""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any

from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from arag.config import ConfigError
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


def job_run_name(cfg: DictConfig, hc: Any, swept: list[str],
                 file_labels: dict[str, str] | None = None) -> str:
    """``arag max_loops=6``: the system, then the keys a sweep varies; a single run names
    its overrides (``naive retrieval.top_k=8``), leaving out where things are stored and
    what the data label shows. The run's name adds the data label (``arag
    ectsum/val[:30]``); the report calls it by this one (tag ``run_label``).
    ``file_labels``: the sweep's names for its prediction files (``sweep_labels``)."""
    if hc.mode == RunMode.MULTIRUN:
        parts = _swept_parts(cfg, swept, hc.runtime.choices)
    else:
        parts = [o for o in hc.overrides.task
                 if not o.startswith(("system=", f"{_FILE_KEY}=", *_PLACES, *_IN_DATA_LABEL))]
    return " ".join([_system_label(cfg, file_labels),
                     *(p for p in parts if not _endpoint(p))])[:250]


def _endpoint(part: str) -> bool:
    """An endpoint (``model.base_url=http://...``): where the model is served, not what the
    run is, and a URL a run label must not carry into pages and descriptions."""
    key, _, value = part.partition("=")
    return key.lstrip("+~").endswith("base_url") or "://" in value


def _swept_parts(cfg: DictConfig, swept: list[str], choices: Any) -> list[str]:
    return [f"{k}={choices[k] if k in choices else _shown(OmegaConf.select(cfg, k))}"
            for k in swept if k not in ("system", _FILE_KEY)]


def _system_label(cfg: DictConfig, file_labels: dict[str, str] | None = None) -> str:
    """The system's own name for its run (an external run: its file's stem, or the name
    the sweep gave its file), or its ``system.name`` when the kind is unknown (the config
    check then names it)."""
    try:
        system = SYSTEMS.get(str(cfg.system.kind))
    except UnknownName:
        return str(cfg.system.name)
    file = _file_of(cfg)
    label = system.run_label(str(cfg.system.name), file)
    if file and file_labels and label == Path(file).stem:  # named after its file
        return file_labels.get(file, label)
    return label


def _file_of(cfg: DictConfig) -> str | None:
    value = OmegaConf.select(cfg, _FILE_KEY)
    return str(value) if value else None


def distinct_file_labels(files: list[str]) -> dict[str, str]:
    """Each file's name for its run: its stem, or, where stems collide
    (``ectsum/predictions.jsonl``, ``ectsum_naive/predictions.jsonl``), the nearest folder
    names that tell the files apart (``ectsum``, ``ectsum_naive``). A file no folder tells
    apart from another keeps its stem (``sweep_labels`` then refuses the sweep)."""
    paths = {f: Path(f) for f in dict.fromkeys(files)}
    labels = {f: p.stem for f, p in paths.items()}
    for stem in {s for s in labels.values() if list(labels.values()).count(s) > 1}:
        same = [f for f in paths if labels[f] == stem]
        for depth in range(1, max(len(paths[f].parent.parts) for f in same) + 1):
            named = {f: "/".join(paths[f].parent.parts[-depth:]) for f in same}
            if all(named.values()) and len(set(named.values())) == len(same):
                labels.update(named)
                break
    return labels


def _option_name(value: Any) -> Any:
    """A swept group's option as named (``model=claude-haiku-4-5``), not its whole node."""
    return value.get("name", value) if isinstance(value, DictConfig) else value


def sweep_labels(jobs: list[DictConfig], swept: list[str]) -> dict[str, str]:
    """The sweep's names for its prediction files (``distinct_file_labels``), after checking
    that no two jobs would share a run label (and so write the same parent metrics): else
    ConfigError naming both and the fix, before anything runs."""
    from report.console import metric_label

    files = [f for job in jobs if (f := _file_of(job))]
    file_labels = distinct_file_labels(files)
    seen: dict[str, str] = {}
    for job in jobs:
        choices = {k: _option_name(OmegaConf.select(job, k)) for k in swept}
        label = " ".join([_system_label(job, file_labels),
                          *_swept_parts(job, swept, choices)])
        key = metric_label(label)
        where = _file_of(job) or f"system={job.system.kind}"
        if key in seen and seen[key] != where:
            raise ConfigError(
                f"two runs of this sweep would both be called {label!r} ({seen[key]} and "
                f"{where}), so the second would overwrite the first's parent metrics. Fix: "
                "give each prediction file a distinct name or folder, or run them as separate "
                "sweeps with system.name=<a name for each>")
        seen[key] = where
    return file_labels


def _shown(value: Any) -> Any:
    """A swept value as it was typed: ``dense``, not ``RetrievalMethod.dense``."""
    return value.name if isinstance(value, Enum) else value


def sweep_run_name(jobs: list[DictConfig], swept: list[str],
                   file_labels: dict[str, str] | None = None) -> str:
    """``ectsum/test[:12] arag·naive·stuffing repeats=3``: what tells a sweep's parent run
    apart in MLflow's run list, most telling first: the data, the systems, the other keys
    it sweeps, then the settings that change the comparison (repeats, sequential stopping,
    people's labels, a baseline, slices, the judge)."""
    from runners.settings import data_label

    first = jobs[0]
    data = "+".join(dict.fromkeys(data_label(job.dataset) for job in jobs))
    systems = "·".join(dict.fromkeys(_system_label(job, file_labels) for job in jobs))
    varied = []
    for key in swept:
        if key in ("system", "dataset", _FILE_KEY) or key.startswith(("dataset.", *_PLACES)):
            continue
        values = dict.fromkeys(str(_shown(_option_name(OmegaConf.select(job, key))))
                               for job in jobs)
        varied.append(f"{key}={'·'.join(values)}")
    runner, report = first.runner, first.report
    settings = [
        f"repeats={runner.repeats}" if runner.repeats > 1 else "",
        "sequential" if runner.get("sequential") else "",
        f"labels={Path(str(report.human_labels)).name}" if report.get("human_labels") else "",
        f"baseline={report.baseline}" if report.baseline else "",
        f"slice_by={'·'.join(report.slice_by)}" if report.slice_by else "",
        f"decide_on={'·'.join(report.decide_on)}" if report.decide_on else "",
        f"judge={first.judge.name}" if "judge" not in swept and str(first.judge.provider)
        != "none" else "",
    ]
    return " ".join([data, systems, *varied, *(s for s in settings if s)])[:250]


def experiment_name(jobs: list[DictConfig]) -> str:
    """The MLflow experiment of a sweep: ``tracking.experiment``, else its dataset's name;
    a sweep over several datasets goes in one named after them all
    (``ectsum+financebench_qfs``), its job runs with it."""
    return "+".join(dict.fromkeys(str(job.tracking.experiment or job.dataset.name)
                                  for job in jobs))
