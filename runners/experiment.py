"""One job of a sweep: config -> predictions -> scores -> one MLflow run.

``main`` is the Hydra task function: it always closes its MLflow run, and inside a
multirun it records a failure for the sweep callback instead of stopping the sweep. The
pieces live in their own modules: ``identity`` (config hashes), ``validation`` (values
and credentials), ``job`` (building the objects), ``resume`` (an earlier run of the same
config), ``scoring`` (scores, artifacts, re-scoring), ``dry_job`` (the dry run),
``naming`` (what the run is called), ``single_report`` (a run outside a sweep reports itself).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hydra.types import RunMode
from omegaconf import DictConfig

from arag import progress
from arag.datasets import DatasetError
from arag.llm import ChatModel, limits, make_model
from arag.llm.base import MissingCredentials
from arag.llm.cache import SpendJournal
from arag.memory import settle_imports
from arag.records import Prediction
from arag.redact import redact_logs
from report.policy import report_metrics
from runners.cores import math_threads
from runners.dry_job import dry_run
from runners.errors import (
    CostCapReached,
    EndpointDown,
    TooManyErrors,
    all_skipped,
    cost_cap_message,
    endpoint_down,
    show_trace,
    too_many_errors,
)
from runners.evaluate import dataset_features, window_rule
from runners.job import Job, build_system, cached, prepare
from runners.naming import job_run_name, progress_label
from runners.predict import predict
from runners.preflight import prediction_folders
from runners.resume import carry_over, prior_run
from runners.scoring import (
    log_data_identity,
    model_name,
    reference_tags,
    rescore,
    score_and_log,
    temperature_sent,
)
from runners.settings import Settings, data_label, read, require_keys
from runners.single_report import REPORT_TAG, single_run_report
from runners.sweeplock import SweepBusy, hold
from runners.validation import ConfigError
from tracking import runs as track
from tracking.logs import quiet
from tracking.storage import TrackingServerGone, check_storage, storage_errors
from tracking.traces import log_task_assessments, log_task_traces, task_assessments

log = logging.getLogger(__name__)
SUMMARY = ("n_tasks", "n_errors", "rouge2_f1_mean", "bertscore_f1_mean", "retrieval_recall_mean",
           "cost_usd_total", "latency_ms_p50")


def run(settings: Settings, parent: dict[str, Any] | None = None, run_name: str | None = None,
        sweep_id: str | None = None, single: bool = False) -> dict[str, float]:
    """One job; ``single``: a run of its own, which holds its predictions' folder as a sweep
    holds its jobs' folders."""
    cfg = settings.config
    progress.configure(cfg.runner.progress, progress_label(run_name or cfg.system.name, parent))
    if cfg.mode == "evaluate":
        require_keys(settings)
        check_storage(cfg)
        return rescore(settings, parent)
    if not cfg.runner.dry_run:
        require_keys(settings)
    check_storage(cfg, tracking=not cfg.runner.dry_run)  # every place it writes, first
    job = prepare(settings, call_models=not cfg.runner.dry_run)
    if cfg.runner.dry_run:
        return dry_run(job, run_name)
    with _single_run_lock(job.settings, single):
        return _run_job(job, parent, run_name, sweep_id)


def _run_job(job: Job, parent: dict[str, Any] | None, run_name: str | None,
             sweep_id: str | None) -> dict[str, float]:
    settings, cfg = job.settings, job.cfg
    job.sweep_run = (parent or {}).get("run_id")  # named on every line of its spend journals
    model = job.journaled(cached(job.capped(make_model(cfg.model)), cfg.cache))
    client = track.connect(cfg.tracking)
    experiment_id = (parent or {}).get("experiment_id") or track.ensure_experiment(
        client, cfg.tracking.experiment or cfg.dataset.name, cfg.tracking)
    tags = {
        **track.system_tags(cfg.system.name, job.system_class), "dataset": cfg.dataset.name,
        "model": model_name(cfg.model.name, job.system_class), "sweep_id": sweep_id or "",
        "config_hash": job.config_hash, "git_commit": track.git_commit(), **reference_tags(cfg),
        "math_threads": str(math_threads()),  # latency depends on it (runners/cores.py)
        # where the report finds what this attempt paid when the run logged no spend (a
        # failed run): the journal, and this attempt's name in it
        track.SPEND_JOURNAL_TAG: str(job.spend_path), track.SPEND_ATTEMPT_TAG: job.attempt,
    }
    resume_id, finished = prior_run(client, experiment_id, job, parent)
    if finished is not None:
        if parent is None:  # a single run killed while writing its report gets it now
            single_run_report(client, track.find_run(client, experiment_id, job.config_hash),
                              str(cfg.tracking.uri))
        return finished
    label = run_name or cfg.system.name  # what the report calls it (tag run_label)
    tags["run_label"] = label
    with track.tracked_run(client, experiment_id, f"{label} {data_label(cfg.dataset)}", tags,
                           (parent or {}).get("run_id"), resume_id) as tracker:
        if resume_id:  # a continued run's report is written again, with what it adds
            tracker.set_tags({REPORT_TAG: "false"})
        tracker.log_params({**track.flatten(settings.tree),
                            "temperature_sent": temperature_sent(model, cfg.system.temperature)})
        log_data_identity(tracker, job)
        tracker.log_text(settings.yaml, "config.yaml")
        metrics, predictions = _execute(job, model, tracker, progress_label(
            run_name or cfg.system.name, parent))
        problems = {"too_many_errors": too_many_errors(metrics, cfg.runner),
                    "all_skipped": all_skipped(predictions)}
        failed = next((why for why in problems.values() if why), None)
        if failed:  # FAILED, so the same command continues it (retrying errors)
            tracker.set_tags({tag: why for tag, why in problems.items() if why})
            tracker.end_status = "FAILED"
    log.info("%s: %s", cfg.system.name, ", ".join(
        f"{k}={v:.4g}" for k, v in metrics.items() if k in SUMMARY))
    if parent is None:
        single_run_report(client, client.get_run(tracker.run_id), str(cfg.tracking.uri))
    if failed:  # an endpoint that is not there stops the sweep: the next job would wait too
        raise (EndpointDown if endpoint_down(metrics) else TooManyErrors)(
            f"run {tracker.run_id}: {failed}")
    cap = cfg.runner.max_cost_usd
    if tracker.end_status == "KILLED" and cap is not None:  # only the cost cap stops a run
        raise CostCapReached(cost_cap_message(tracker.run_id, metrics, cap))
    return metrics


def spend_metrics(job: Job, predictions: list[Prediction]) -> dict[str, float]:
    """``cost_usd_spent_total``: what this attempt of the run paid, every call as journaled
    when it returned (the index's chunk contexts included); ``cost_usd_spent_earlier``: what
    earlier attempts paid for the predictions this one carries over (a resumed run's
    answers keep their original cost, counted there and not again);
    ``cost_usd_unrecorded_total``: the part of both no record counts (tasks in flight at a
    kill, errored tasks predicted again, chunk contexts). None without a journal (nothing
    was paid for)."""
    if not job.spend_path.exists():
        return {}
    new, earlier = SpendJournal(job.spend_path, job.attempt).spent()
    recorded = sum(p.cost_usd or 0.0 for p in predictions)
    return {"cost_usd_spent_total": new, "cost_usd_spent_earlier": earlier,
            "cost_usd_unrecorded_total": max(0.0, new + earlier - recorded)}


def rate_limit_metrics(paced: limits.Totals) -> dict[str, float]:
    """``rate_limit_wait_s``: what the run's requests waited for their accounts' rate
    limits, summed over requests; ``rate_limited_429s``: the 429s they got. None when the
    run sent no request through a limiter (the offline model)."""
    if not paced.requests:
        return {}
    return {"rate_limit_wait_s": paced.wait_s, "rate_limited_429s": float(paced.rate_limited)}


def _execute(job: Job, model: ChatModel, tracker: track.RunTracker, label: str
             ) -> tuple[dict[str, float], list[Prediction]]:
    cfg = job.cfg
    paced_from = limits.totals()
    system = build_system(job, model)
    if not cfg.runner.rerun:  # runner.rerun=true answers every task again
        carry_over(job)
    outcome = predict(
        system, job.dataset.tasks, job.predictions_path, source=job.dataset.name,
        concurrency=cfg.runner.concurrency, progress=cfg.runner.progress, label=label,
        retry_errors=cfg.runner.retry_errors, max_cost_usd=cfg.runner.max_cost_usd,
        task_digests=job.task_digests(), repeats=cfg.runner.repeats, cap=job.spend_cap,
    )
    if outcome.stop_reason:
        tracker.set_tags({"stopped": outcome.stop_reason, "n_not_run": str(len(outcome.not_run))})
        tracker.end_status = "KILLED"
    # stuffing's skip rule for this run's model and settings, whichever system runs
    features = dataset_features(job.dataset, *window_rule(
        cfg, job.system_class, job.dataset.corpus, system.ctx.model.count_tokens))
    metrics, records = score_and_log(job, outcome.predictions, tracker, {
        "n_not_run": float(len(outcome.not_run)), "n_resumed": float(outcome.n_resumed),
        "n_answered_again": float(outcome.n_changed),
        **job.index_metrics(), **job.dataset_metrics, **job.system_class.run_metrics,
        **spend_metrics(job, outcome.predictions)}, features)
    paced = rate_limit_metrics(limits.totals() - paced_from)
    tracker.log_metrics(paced)  # the model's calls and the judge's, on the run's accounts
    metrics.update(paced)
    fields = [m.name for m in report_metrics()]
    references: dict[str, str | None] = {p.id: p.ground_truth for p in outcome.predictions}
    n_traces = log_task_traces(
        tracker.experiment_id, tracker.run_id, outcome.predictions, agentic=system.agentic,
        tags={t: f.values for t, f in features.items()},
        assessments=task_assessments(records, cfg.judge.name, fields, references))
    # what a kill left a trace without (new traces were written with theirs)
    n_assessed = log_task_assessments(tracker.experiment_id, tracker.run_id, records,
                                      cfg.judge.name, fields, references)
    log.info("%s: %d task traces logged with their scores, %d earlier ones completed",
             cfg.system.name, n_traces, n_assessed)
    return metrics, outcome.predictions


def main(cfg: DictConfig) -> dict[str, float] | None:
    """Hydra task function: run one job; in a sweep, record a failure and let the sweep go on."""
    from hydra.core.hydra_config import HydraConfig

    quiet(cfg.runner.verbose, tracking=not cfg.runner.dry_run)  # MLflow imported by now
    redact_logs()  # Hydra configured this job's log handlers just now
    settle_imports()
    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    parent = track.read_parent(Path(hc.sweep.dir)) if multirun else None
    run_name = job_run_name(cfg, hc, (parent or {}).get("swept_keys", []),
                            (parent or {}).get("file_labels"))
    try:
        settings = read(cfg)
        with storage_errors(settings.config):
            return run(settings, parent, run_name=run_name,
                       sweep_id=(parent or {}).get("sweep_id"), single=not multirun)
    except TrackingServerGone as exc:
        # nothing more can be logged: the sweep stops here instead of failing job by job
        log.error("%s", exc, exc_info=show_trace())
        raise SystemExit(f"error: {exc}") from None
    except EndpointDown as exc:
        log.error("%s", exc, exc_info=show_trace())
        if multirun:  # every job after it would wait out the same retries
            _record_failure(Path(hc.sweep.dir), run_name, str(exc))
            raise SystemExit(f"error: the sweep stops at {run_name}: every call failed on "
                             "connection errors, so its next jobs would too. Run the same "
                             "command again once the endpoint answers (finished tasks are "
                             "kept)") from None
        raise SystemExit(f"error: {exc}") from None
    except (ConfigError, DatasetError, track.TrackingError, MissingCredentials,
            TooManyErrors, CostCapReached, SweepBusy) as exc:
        message = str(exc)
        log.error("%s", message, exc_info=show_trace())
        if not multirun:
            raise SystemExit(f"error: {message}") from None
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        log.exception("job failed")
        if not multirun:
            raise
    _record_failure(Path(hc.sweep.dir), run_name, message)
    return None


@contextmanager
def _single_run_lock(settings: Settings, single: bool) -> Iterator[None]:
    """A single run holds its predictions' folder (named by the loaded dataset's digest) as
    a sweep does (the sweep callback holds its jobs' folders itself)."""
    cfg = settings.config
    if not single or cfg.runner.dry_run or cfg.mode != "run":
        yield
        return
    locks = hold(prediction_folders([settings]))
    try:
        yield
    finally:
        locks.release()


def _record_failure(sweep_dir: Path, job: str, message: str) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / track.FAILED_JOBS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps({"job": job, "error": message}) + "\n")
