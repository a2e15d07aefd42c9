"""A sequential sweep (``runner.sequential=true``) in rounds, driven by the sweeper
``hydra_plugins.arag_eval_rounds.RoundsSweeper`` (Hydra takes sweepers only from its
plugin namespace).

Each round launches every job again with ``runner.round_tasks`` set to ``batch_size`` more
tasks of the seeded order (``metrics.sequential.run_order``); ``round_tasks`` is not part of
a run's identity, so each round continues the job's run and answers only its new tasks.
After each round the sweeper looks: each comparison on ``report.decide_on`` gets its
anytime-valid interval, and ``stop_reason`` says whether to go on. Every look is a row of
``sequential.jsonl`` in the sweep folder and on the parent run. A killed sweep run again
replays its looks from the runs' records (rounds already answered ask nothing), so it
stops at the look it would have stopped at, and goes on from the round it was in.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from hydra.core.utils import JobReturn

from metrics.sequential import stop_reason
from report.analyses.sequential import looks_at
from runners.preflight import check_jobs, job_configs
from tracking import runs as track
from tracking.spend import journal_entries, spend_until
from tracking.sweeps import run_records

log = logging.getLogger(__name__)
LOOKS_FILE = "sequential.jsonl"


class Rounds:
    """The rounds of one sequential sweep."""

    def __init__(self, config: Any, jobs: list[list[str]], sweep_dir: Path) -> None:
        self.runner, self.report = config.runner, config.report
        self.jobs, self.sweep_dir = jobs, sweep_dir
        self.settings = check_jobs(job_configs(config), dry_run=True)  # the runs' identities
        self.labels = labels(jobs)
        self.client = track.connect(config.tracking)
        self.looks: list[dict[str, Any]] = []

    def run(self, launcher: Any) -> list[list[JobReturn]]:
        returns, first_job, n = [], 0, 0
        while True:
            n += self.runner.batch_size
            if self.runner.max_tasks is not None:
                n = min(n, self.runner.max_tasks)
            batch = [[*job, f"runner.round_tasks={n}"] for job in self.jobs]
            results = launcher.launch(batch, initial_job_idx=first_job)
            first_job += len(batch)
            returns.append(list(results))
            failed = [r for r in results if r.status.name != "COMPLETED" or r._return_value is None]
            row = self._look(n, failed=bool(failed))
            if row["stop"] is not None:
                return returns

    def _look(self, n: int, failed: bool) -> dict[str, Any]:
        parent = track.read_parent(self.sweep_dir) or {}
        runs = [track.find_run(self.client, str(parent.get("experiment_id")), s.config_hash)
                for s in self.settings]
        with tempfile.TemporaryDirectory() as tmp:
            records = {_label(run, label): run_records(self.client, run, Path(tmp) / str(i))
                       if run is not None else [] for i, (label, run) in
                       enumerate(zip(self.labels, runs, strict=True))}
        metrics = [dict(run.data.metrics) if run is not None else {} for run in runs]
        total = int(max(m.get("n_tasks_of_data", 0) for m in metrics))
        done = min(n, total)
        looks = looks_at(records, list(self.report.decide_on), self.runner.order_seed, done,
                         dict(self.report.equivalence_margin))
        capped = any(run is not None and run.data.tags.get("stopped") for run in runs)
        stop = stop_reason(looks, done, total, self.runner.max_tasks, cost_capped=capped)
        costs = [look_spend(run, done, m) for run, m in zip(runs, metrics, strict=True)]
        spend = sum(c for c in costs if c is not None) if None not in costs else None
        row = {"look": len(self.looks) + 1, "tasks": done, "tasks_total": total,
               "spend_usd": spend,
               "estimated_full_usd": spend * total / done if done and spend is not None else None,
               "stop": stop.value if stop else ("job_failed" if failed else None),
               "comparisons": [look.row() for look in looks]}
        self.looks.append(row)
        self._write(parent.get("run_id"))
        log.info("look %d after %d of %d tasks (spent %s): %s", row["look"], done, total,
                 "unknown" if spend is None else f"${spend:.4f}",
                 "; ".join(f"{lk.metric} {lk.first} - {lk.second} in [{lk.low:.3g}, "
                           f"{lk.high:.3g}] {lk.state.value}" for lk in looks))
        return row

    def _write(self, parent_id: str | None) -> None:
        path = self.sweep_dir / LOOKS_FILE
        path.write_text("".join(json.dumps(r) + "\n" for r in self.looks), encoding="utf-8")
        if parent_id:  # a killed sweep keeps the looks it made
            self.client.log_artifact(parent_id, str(path))


def look_spend(run: Any, tasks: int, metrics: dict[str, float]) -> float | None:
    """What a run's rounds up to ``tasks`` tasks paid, its judge included, from its spend
    journals (so a look replayed after a kill states what it stated then); a run without a
    journal: its records' cost (None: they give none)."""
    entries = (journal_entries(run) if run is not None else None) or []
    system = [e for e in entries if e["kind"] == "system"]
    recorded = metrics.get("cost_usd_total")  # a free or unjournaled system: its records'
    if not system and recorded is None:
        return None  # the system's cost is unknown, and so is the look's
    judge = spend_until([e for e in entries if e["kind"] == "judge"], tasks)
    return (spend_until(system, tasks) if system else float(recorded or 0.0)) + judge


def _label(run: Any, label: str) -> str:
    """What the report calls the run (tag ``run_label``), so the looks read as it does."""
    return run.data.tags.get("run_label") or label if run is not None else label


def labels(jobs: list[list[str]]) -> list[str]:
    """Each job named by the overrides that tell it from the others (``system.top_k=1``)."""
    common = set.intersection(*(set(job) for job in jobs)) if jobs else set()
    return [" ".join(o for o in job if o not in common) or f"job {i}" for i, job in enumerate(jobs)]
