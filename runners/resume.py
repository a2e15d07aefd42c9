"""What an earlier run of the same config means for this one: continue it, reuse it, or
start fresh."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from arag.files import write_bytes_atomically
from runners.errors import has_errors, replies_to_ask_again
from runners.identity import predictions_identity
from runners.job import SPEND_FILE, Job
from runners.predict import read_log, unchanged
from tracking import runs as track

log = logging.getLogger(__name__)
# in each predictions folder: the identity of its config without the data, so a run on
# changed data finds the predictions of the same config on the earlier data
LINEAGE_FILE = "config_identity.txt"


def prior_run(client: Any, experiment_id: str, job: Job, parent: dict[str, Any] | None
              ) -> tuple[str | None, dict[str, float] | None]:
    """(run id to continue, or None; its metrics when it FINISHED and there is nothing to
    do, or None)."""
    cfg = job.cfg
    existing = track.find_run(client, experiment_id, job.config_hash,
                              own_experiments(client, cfg))
    if cfg.runner.rerun:
        start_fresh(job.predictions_path)
        return None, None
    if existing is None:
        return None, None
    if nothing_to_do(existing, cfg.runner) and not _round_grows(existing, job):
        log.info("%s: this configuration already FINISHED as run %s (config hash %s); nothing "
                 "to do. runner.rerun=true runs it again", cfg.system.name,
                 existing.info.run_id, job.config_hash)
        mine = existing.data.tags.get("mlflow.parentRunId") == (parent or {}).get("run_id")
        # a child already is one of its runs; a run of another experiment is reused as it is
        if existing.info.experiment_id != experiment_id or (
                not mine and not adopt(client, existing, parent)):
            record_reused(parent, existing.info.run_id)
        return None, dict(existing.data.metrics)
    errored = has_errors(existing.data.metrics) and cfg.runner.retry_errors
    unread = replies_to_ask_again(existing.data.metrics)
    log.info("%s: continuing run %s (%s before%s%s)", cfg.system.name, existing.info.run_id,
             existing.info.status, "; retrying its errors" if errored else "",
             f"; asking the judge again for {unread} unreadable replies" if unread else "")
    track.close_orphaned_parent(client, existing, (parent or {}).get("run_id"))
    return existing.info.run_id, None


def own_experiments(client: Any, cfg: Any) -> list[str]:
    """The experiment a run of this config has alone (``tracking.experiment`` or its
    dataset's name), where a sweep over several datasets finds its finished runs."""
    return track.experiment_ids(client, [str(cfg.tracking.experiment or cfg.dataset.name)])


def _round_grows(run: Any, job: Job) -> bool:
    """A sequential sweep's round asks more tasks than its run FINISHED with: it goes on.
    (A run logged without ``n_tasks_asked`` answered every task.)"""
    asked = run.data.metrics.get("n_tasks_asked")
    return asked is not None and asked < len(job.dataset.tasks)


def nothing_to_do(run: Any, runner: Any) -> bool:
    """A FINISHED run of this config is reused as it is: unless it is to be run again, it
    holds judge replies that could not be read and are asked again (``judge.reask_unreadable``),
    or it holds errors and errored tasks are retried (errors are not results)."""
    if run is None or runner.rerun or run.info.status != "FINISHED":
        return False
    if replies_to_ask_again(run.data.metrics):
        return False
    return not (runner.retry_errors and has_errors(run.data.metrics))


def start_fresh(predictions_path: Path) -> None:
    """runner.rerun=true: keep the old predictions aside and predict every task again."""
    stamp = int(time.time())
    if predictions_path.exists():
        aside = predictions_path.with_name(f"predictions.{stamp}.jsonl")
        predictions_path.rename(aside)
        log.info("runner.rerun=true: previous predictions kept as %s", aside)
        damaged = predictions_path.with_name(predictions_path.name + ".damaged")
        if damaged.exists():  # lines set aside from that log go with it
            damaged.rename(aside.with_name(aside.name + ".damaged"))
    spend = predictions_path.with_name(SPEND_FILE)
    if spend.exists():  # their spend goes with them
        spend.rename(spend.with_name(f"spend.{stamp}.jsonl"))


def adopt(client: Any, run: Any, parent: dict[str, Any] | None) -> bool:
    """A finished job whose sweep run never finished (killed, its report never written)
    moves under this sweep's run, so the latest sweep run lists it in the UI too."""
    old = run.data.tags.get("mlflow.parentRunId")
    new = (parent or {}).get("run_id")
    if not new or not old or old == new or client.get_run(old).info.status == "FINISHED":
        return False
    client.set_tag(run.info.run_id, "mlflow.parentRunId", new)
    client.set_tag(run.info.run_id, "moved_from_sweep_run", old)
    return True


def record_reused(parent: dict[str, Any] | None, run_id: str) -> None:
    if parent and parent.get("sweep_dir"):
        with open(Path(parent["sweep_dir"]) / track.REUSED_RUNS_FILE, "a") as f:
            f.write(json.dumps({"run_id": run_id}) + "\n")


def carry_over(job: Job) -> int:
    """A run whose data changed starts a new predictions folder (its identity holds the
    dataset's digest); it starts from the predictions the same config made on the earlier
    data, keeping those of every task whose content is unchanged (``task_digest``), so only
    new and changed tasks are answered. Returns how many were kept."""
    path = job.predictions_path
    lineage = predictions_identity(job.settings.tree, job.settings.files)
    path.parent.mkdir(parents=True, exist_ok=True)
    (path.parent / LINEAGE_FILE).write_text(lineage + "\n")
    if path.exists():
        return 0
    earlier = _earlier_folder(path.parent, lineage)
    if earlier is None:
        return 0
    kept = unchanged(read_log(earlier / path.name), job.task_digests())
    order = {t.id: i for i, t in enumerate(job.dataset.tasks)}
    kept = {k: p for k, p in kept.items() if not p.error}
    ordered = sorted(kept.values(), key=lambda p: (order.get(p.id, len(order)), p.repeat))
    if ordered:
        write_bytes_atomically(path, "".join(p.to_json() + "\n" for p in ordered).encode())
    n_kept = len({p.id for p in ordered})
    log.info("%s: the data changed since %s; kept the predictions of %d unchanged task(s), "
             "the other %d are answered", job.cfg.system.name, earlier, n_kept,
             len(job.dataset.tasks) - n_kept)
    return len(ordered)


def _earlier_folder(folder: Path, lineage: str) -> Path | None:
    """The most recently written predictions folder of the same config on other data."""
    found = [f.parent for f in folder.parent.glob(f"*/{LINEAGE_FILE}")
             if f.parent != folder and (f.parent / "predictions.jsonl").exists()
             and f.read_text().strip() == lineage]
    return max(found, key=lambda f: (f / "predictions.jsonl").stat().st_mtime, default=None)
