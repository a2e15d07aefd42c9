"""Everything a sweep is checked for before its parent run opens: the overrides (one per
key), each job's config (composed as Hydra will compose it), its values, URL credentials
in config files, provider keys, storage and data. A sweep that fails here leaves no run.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from arag.redact import keys_with_credentials
from runners.job import load_tasks, prepare
from runners.resume import nothing_to_do, own_experiments
from runners.settings import Settings, read, require_keys
from runners.validation import ConfigError, check_policies
from tracking.paths import resolve
from tracking.runs import find_run
from tracking.storage import check_storage

log = logging.getLogger(__name__)


def job_overrides(overrides: list[str]) -> list[list[str]]:
    """The overrides of each job of the sweep, as Hydra's basic sweeper expands them.

    A swept key set again (``system=naive,stuffing system=arag``) is an error: Hydra would
    keep the last and silently drop jobs. A plain value set twice keeps Hydra's "last wins".
    """
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    seen: dict[str, str] = {}
    swept: set[str] = set()
    for o in parsed:
        key, line = o.get_key_element().lstrip("+~"), str(o.input_line)
        if o.is_sweep_override():
            swept.add(key)
            values = list(o.sweep_string_iterator())
            if len(set(values)) < len(values):  # the same job twice, adjusted twice
                twice = sorted({v for v in values if values.count(v) > 1})
                raise ConfigError(
                    f"{line} names {', '.join(twice)} more than once: the same job would run "
                    f"twice and be compared twice. Fix: {key}={','.join(dict.fromkeys(values))}")
        if key in seen and key in swept:
            merged = ",".join(_choices(seen[key]) + _choices(line))
            raise ConfigError(
                f"{seen[key]} and {line} both set {key}: a sweep takes one override per key. "
                f"Fix: {key}={merged}")
        seen[key] = line
    return [job for batch in BasicSweeper.split_arguments(parsed, None) for job in batch]


def _choices(line: str) -> list[str]:
    return line.split("=", 1)[1].split(",") if "=" in line else []


def job_configs(config: DictConfig) -> list[DictConfig]:
    """Each job's config without the ``hydra`` node, as the task function will get it."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    jobs = []
    for overrides in job_overrides(list(config.hydra.overrides.task)):
        job = loader.load_sweep_config(config, overrides)
        leaked = keys_with_credentials(OmegaConf.to_container(job, resolve=False))
        if leaked:
            raise ConfigError(credentials_message(leaked))
        job = copy.deepcopy(job)
        with read_write(job), open_dict(job):
            del job["hydra"]
        jobs.append(job)
    return jobs


def credentials_message(keys: list[str]) -> str:
    return (f"{', '.join(keys)} holds credentials in a URL (user:password@) in a config file, "
            "where they would be written to every run's config. Fix: put the API key in its "
            "environment variable (e.g. ANTHROPIC_API_KEY) and give the URL without "
            "credentials")


def check_jobs(configs: list[DictConfig], dry_run: bool) -> list[Settings]:
    """Every job's settings, identified by its config and its dataset's digest, after
    checking the values, keys, storage and data of every job, each distinct setting once;
    each job's system is configured on its data (a predictions file is read and checked)."""
    jobs = [read(cfg) for cfg in configs]
    check_policies(configs)
    checked: set[str] = set()
    for job in [] if dry_run else jobs:
        require_keys(job)
        where = _key(job, "tracking", "cache", "runner")
        if where not in checked:
            check_storage(job.config)
            checked.add(where)
    datasets: dict[str, Any] = {}
    for job in jobs:
        data = _key(job, "dataset", "task_type")
        if data not in datasets:  # the dataset loads (files, fields, gold) as the job will
            datasets[data] = load_tasks(job.config, call_models=False)
        system = _key(job, "dataset", "task_type", "system", "retrieval")
        if system not in checked:
            prepare(job, call_models=False, dataset=datasets[data])
            checked.add(system)
    # identified by their data as the jobs will be: a changed dataset is no finished sweep
    return [job.with_dataset(datasets[_key(job, "dataset", "task_type")].digest)
            for job in jobs]


def judged_fields(jobs: list[Settings]) -> set[str]:
    """The fields a judge will score in this sweep: those of each job's scorers that ask a
    judge (``Scorer.judge_requests``), in the jobs that have a judge that can judge."""
    from arag.llm.registry import PROVIDERS
    from metrics import Scorer, default_scorers

    out: set[str] = set()
    for job in jobs:
        cfg = job.config
        provider = str(cfg.judge.provider)
        if provider == "none" or not PROVIDERS.has(provider) or not PROVIDERS.get(provider).judges:
            continue
        scorers = list(job.tree["metrics"]["scorers"])
        out |= {f for s in default_scorers() if s.name in scorers
                and type(s).judge_requests is not Scorer.judge_requests for f in s.fields}
    return out


def check_labels(path: str, labels: list[Any], jobs: list[Settings]) -> None:
    """``report.human_labels`` against what the sweep will score, before anything runs
    (``tracking.human_labels.check_judged``: ``python -m report`` checks a rebuild's
    labels with it too)."""
    from tracking.human_labels import check_judged

    check_judged(path, labels, judged_fields(jobs), jobs[0].config.judge.name if jobs else "none")


def prediction_folders(jobs: list[Settings]) -> dict[Path, str]:
    """The folder of each job's predictions (what a second sweep must not write to), with
    what it holds in words."""
    return {resolve(job.config.runner.runs_dir) / job.predictions_hash:
            f"the predictions of {job.config.system.name}" for job in jobs}


def _key(job: Settings, *nodes: str) -> str:
    return json.dumps({n: job.tree.get(n) for n in nodes}, sort_keys=True, default=str)


def all_finished(client: Any, experiment_id: str, jobs: list[Settings]) -> list[Any] | None:
    """The runs of a sweep whose every job already FINISHED with nothing left to do, or
    None."""
    runs = [find_run(client, experiment_id, job.config_hash,
                     own_experiments(client, job.config)) for job in jobs]
    if not all(nothing_to_do(run, job.config.runner) for run, job in zip(runs, jobs, strict=True)):
        return None
    return runs
