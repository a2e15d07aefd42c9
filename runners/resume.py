"""What an earlier run of the same config means for this one: continue it, reuse it, or
start fresh."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from runners import track
from runners.job import Job

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
    if existing.info.status == "FINISHED" and not cfg.runner.retry_errors:
        log.info("%s: this configuration already FINISHED as run %s (config hash %s); nothing "
                 "to do. runner.rerun=true runs it again, runner.retry_errors=true retries its "
                 "errored tasks", cfg.system.name, existing.info.run_id, job.config_hash)
        record_reused(parent, existing.info.run_id)
        return None, dict(existing.data.metrics)
    log.info("%s: continuing run %s (%s before)", cfg.system.name, existing.info.run_id,
             existing.info.status)
    track.close_orphaned_parent(client, existing, (parent or {}).get("run_id"))
    return existing.info.run_id, None


def start_fresh(predictions_path: Path) -> None:
    """runner.rerun=true: keep the old predictions aside and predict every task again."""
    if predictions_path.exists():
        aside = predictions_path.with_name(f"predictions.{int(time.time())}.jsonl")
        predictions_path.rename(aside)
        log.info("runner.rerun=true: previous predictions kept as %s", aside)


def record_reused(parent: dict[str, Any] | None, run_id: str) -> None:
    if parent and parent.get("sweep_dir"):
        with open(Path(parent["sweep_dir"]) / track.REUSED_RUNS_FILE, "a") as f:
            f.write(json.dumps({"run_id": run_id}) + "\n")
