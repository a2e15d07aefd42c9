"""What an earlier run of the same config means for this one: continue it, reuse it, or
start fresh."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from runners.errors import has_errors
from runners.job import Job
from tracking import runs as track

log = logging.getLogger(__name__)


def prior_run(client: Any, experiment_id: str, job: Job, parent: dict[str, Any] | None
              ) -> tuple[str | None, dict[str, float] | None]:
    """(run id to continue, or None; its metrics when it FINISHED and there is nothing to
    do, or None)."""
    cfg = job.cfg
    existing = track.find_run(client, experiment_id, job.config_hash)
    if cfg.runner.rerun:
        start_fresh(job.predictions_path)
        return None, None
    if existing is None:
        return None, None
    if nothing_to_do(existing, cfg.runner):
        log.info("%s: this configuration already FINISHED as run %s (config hash %s); nothing "
                 "to do. runner.rerun=true runs it again", cfg.system.name,
                 existing.info.run_id, job.config_hash)
        record_reused(parent, existing.info.run_id)
        return None, dict(existing.data.metrics)
    errored = has_errors(existing.data.metrics) and cfg.runner.retry_errors
    log.info("%s: continuing run %s (%s before%s)", cfg.system.name, existing.info.run_id,
             existing.info.status, "; retrying its errors" if errored else "")
    track.close_orphaned_parent(client, existing, (parent or {}).get("run_id"))
    return existing.info.run_id, None


def nothing_to_do(run: Any, runner: Any) -> bool:
    """A FINISHED run of this config is reused as it is: unless it is to be run again, or
    it holds errors and errored tasks are retried (errors are not results)."""
    if run is None or runner.rerun or run.info.status != "FINISHED":
        return False
    return not (runner.retry_errors and has_errors(run.data.metrics))


def start_fresh(predictions_path: Path) -> None:
    """runner.rerun=true: keep the old predictions aside and predict every task again."""
    if predictions_path.exists():
        aside = predictions_path.with_name(f"predictions.{int(time.time())}.jsonl")
        predictions_path.rename(aside)
        log.info("runner.rerun=true: previous predictions kept as %s", aside)
        damaged = predictions_path.with_name(predictions_path.name + ".damaged")
        if damaged.exists():  # lines set aside from that log go with it
            damaged.rename(aside.with_name(aside.name + ".damaged"))


def record_reused(parent: dict[str, Any] | None, run_id: str) -> None:
    if parent and parent.get("sweep_dir"):
        with open(Path(parent["sweep_dir"]) / track.REUSED_RUNS_FILE, "a") as f:
            f.write(json.dumps({"run_id": run_id}) + "\n")
