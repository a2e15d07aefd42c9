"""One job of a sweep: config -> predictions -> scores -> one MLflow run.

``main`` is the Hydra task function: it always closes its MLflow run, and inside a
multirun it records a failure for the sweep callback instead of stopping the sweep.
"""

from __future__ import annotations

import json
import logging
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.datasets import Dataset, DatasetError, load_dataset
from arag.llm import Prices, make_model
from arag.llm.cache import CachedModel, MeteredModel
from arag.llm.claude import MissingAPIKey
from arag.records import Prediction, content_hash
from arag.retrieval import SearchIndex, build_chunks, load_or_build_index
from arag.systems import SYSTEMS, SystemContext, make_system
from metrics import aggregate, build_scorers
from metrics.geval import GEvalScorer
from runners import dryrun, track
from runners.config import RunConfig
from runners.evaluate import evaluate
from runners.paths import resolve
from runners.plots import run_plots
from runners.predict import predict
from runners.report import write_run_report
from runners.traces import log_task_traces

log = logging.getLogger(__name__)

# keys that change how a run is executed or recorded, not what it computes
# how a model is reached, not which model answers
_TRANSPORT = ("max_retries", "retry_base_delay_s", "timeout_s", "requests_per_minute",
              "tokens_per_minute", "base_url")
COSMETIC_KEYS = (
    "runner.concurrency", "runner.progress", "runner.rerun", "runner.retry_errors",
    "runner.dry_run", "runner.runs_dir", "runner.max_cost_usd", "tracking", "cache.mode",
    *(f"{node}.{key}" for node in ("model", "judge", "dataset.reference_model")
      for key in _TRANSPORT),
    # where parsed PDFs are cached and how many processes parse them: not what is computed
    "dataset.options.cache_dir", "dataset.options.parse_workers",
    "dataset.options.reference_concurrency",
)
# keys that decide the predictions (scoring settings are not among them)
PREDICTION_KEYS = ("system", "dataset", "model", "retrieval", "max_loops", "task_type",
                   "summarization_style", "target_length")
# ...except these: what the references are scored against, not what the systems see
REFERENCE_KEYS = ("dataset.reference_model", "dataset.options.reference_words",
                  "dataset.options.spot_check_fraction")


RETRIEVING_SYSTEMS = ("arag", "naive")


class ConfigError(ValueError):
    """An invalid config value; the message names the key and the fix."""


def resolved(cfg: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[return-value]


def _without(data: dict[str, Any], dotted: tuple[str, ...]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    for key in dotted:
        node = data
        *parents, last = key.split(".")
        for p in parents:
            node = node.get(p) if isinstance(node, dict) else None
        if isinstance(node, dict):  # a null node (no reference model) has nothing to drop
            node.pop(last, None)
    return data


def config_hash(cfg: DictConfig) -> str:
    """Identity of a run: the resolved config without cosmetic keys."""
    return content_hash("run", _without(resolved(cfg), COSMETIC_KEYS))


def predictions_hash(cfg: DictConfig) -> str:
    """Identity of a run's predictions: only what can change them."""
    data = _without(resolved(cfg), COSMETIC_KEYS + REFERENCE_KEYS)
    return content_hash("predictions", {k: data.get(k) for k in PREDICTION_KEYS})


def validate_config(cfg: DictConfig) -> None:
    """Value checks the schema's types cannot express; each names the key and the fix."""
    checks = [
        ("max_loops", cfg.max_loops >= 1, "a positive integer, the agent's model-call budget",
         "max_loops=6"),
        ("target_length", cfg.target_length >= 1, "a positive number of words",
         "target_length=50"),
        ("runner.concurrency", cfg.runner.concurrency >= 1, "at least 1", "runner.concurrency=4"),
        ("retrieval.top_k", cfg.retrieval.top_k >= 1, "at least 1", "retrieval.top_k=5"),
        ("retrieval.chunk_size", cfg.retrieval.chunk_size >= 1, "a positive number of words",
         "retrieval.chunk_size=120"),
        ("retrieval.chunk_overlap", cfg.retrieval.chunk_overlap >= 0, "0 or more sentences",
         "retrieval.chunk_overlap=0"),
        ("runner.max_cost_usd", cfg.runner.max_cost_usd is None or cfg.runner.max_cost_usd > 0,
         "a positive amount in USD, or null for no cap", "runner.max_cost_usd=5"),
        ("system.kind", cfg.system.kind in SYSTEMS, f"one of {sorted(SYSTEMS)}",
         "system=arag"),
        ("mode", cfg.mode in ("run", "evaluate"), "'run' or 'evaluate'", "mode=run"),
        ("source_run_id", cfg.mode != "evaluate" or bool(cfg.source_run_id),
         "the id of the MLflow run to re-score when mode=evaluate",
         "mode=evaluate source_run_id=<run id from the MLflow UI>"),
    ]
    for key, ok, must, example in checks:
        if not ok:
            value = OmegaConf.select(cfg, key)
            raise ConfigError(f"{key}={value!r} is invalid: it must be {must}. Fix: {example}")


@dataclass
class Job:
    """Everything one run needs, built before any MLflow run is opened."""

    cfg: DictConfig
    dataset: Dataset
    config_hash: str
    predictions_path: Path

    def __post_init__(self) -> None:
        self._index: SearchIndex | None = None
        self._lock = threading.Lock()

    def index_loader(self) -> SearchIndex:
        """The search index, loaded (or built) once, on first use."""
        with self._lock:
            if self._index is None:
                self._index = load_or_build_index(self.dataset.corpus, self.cfg.retrieval,
                                                  resolve(self.cfg.cache.dir),
                                                  self.cfg.cache.mode)
            return self._index


def prepare(cfg: DictConfig, call_models: bool = True) -> Job:
    validate_config(cfg)
    dataset = load_dataset(cfg.dataset, resolve("."), call_models)
    for note in dataset.notes:
        log.info("dataset %s: %s", dataset.name, note)
    wanted = str(cfg.task_type.value if hasattr(cfg.task_type, "value") else cfg.task_type)
    tasks = [t for t in dataset.tasks if t.task_type == wanted]
    if not tasks:
        raise ConfigError(f"task_type={wanted!r}: dataset {dataset.name!r} has no tasks of that "
                          "type; set task_type to the dataset's type")
    if len(tasks) < len(dataset.tasks):
        log.info("task_type=%s: %d of %d tasks", wanted, len(tasks), len(dataset.tasks))
    dataset.tasks = tasks
    runs_dir = resolve(cfg.runner.runs_dir)
    return Job(cfg, dataset, config_hash(cfg),
               runs_dir / predictions_hash(cfg) / "predictions.jsonl")


def run(cfg: DictConfig, parent: dict[str, str] | None = None, run_name: str | None = None,
        sweep_id: str | None = None) -> dict[str, float]:
    if cfg.mode == "evaluate":
        validate_config(cfg)
        require_keys(cfg)
        return rescore(cfg, parent)
    if not cfg.runner.dry_run:
        require_keys(cfg)
    job = prepare(cfg, call_models=not cfg.runner.dry_run)
    if cfg.runner.dry_run:
        est = dryrun.estimate(run_name or cfg.system.name, lambda m: build_system(job, m),
                              job.dataset.tasks, cfg.model, job.dataset.name,
                              cfg.model.offline)
        print(est.line(), flush=True)
        pending = job.dataset.pending
        if pending is not None:  # e.g. silver references the dataset would have written
            print(dryrun.estimate_requests(f"{job.dataset.name} needs", pending.requests(
                job.dataset), pending.model_cfg, resolve(cfg.cache.dir)).line(), flush=True)
        return {"n_tasks": float(est.n_tasks), "estimated_cost_usd": est.cost_usd}
    model = cached(make_model(cfg.model), cfg)
    client = track.connect(cfg.tracking)
    experiment_id = (parent or {}).get("experiment_id") or track.ensure_experiment(
        client, cfg.tracking.experiment or cfg.dataset.name, cfg.tracking)
    tags = {
        "system": cfg.system.name, "dataset": cfg.dataset.name, "model": cfg.model.name,
        "sweep_id": sweep_id or "", "config_hash": job.config_hash,
        "git_commit": track.git_commit(),
    }
    resume_id, finished = _prior_run(client, experiment_id, job, parent)
    if finished is not None:
        return finished
    with track.tracked_run(client, experiment_id, run_name or cfg.system.name, tags,
                           (parent or {}).get("run_id"), resume_id) as tracker:
        tracker.log_params(track.flatten(resolved(cfg)))
        tracker.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config.yaml")
        metrics = _execute(job, model, tracker)
    if parent is None:
        write_run_report(client, tracker.run_id)
    log.info("%s: %s", cfg.system.name, ", ".join(
        f"{k}={v:.4g}" for k, v in metrics.items()
        if k in ("n_tasks", "n_errors", "rouge2_f1_mean", "bertscore_f1_mean",
                 "retrieval_recall_mean", "cost_usd_total", "latency_ms_p50")))
    return metrics


def _prior_run(client, experiment_id: str, job: Job, parent: dict[str, str] | None):
    """What an earlier run of this config means now: (run id to continue, or None;
    its metrics when it FINISHED and there is nothing to do, or None)."""
    cfg = job.cfg
    existing = track.find_run(client, experiment_id, job.config_hash)
    if cfg.runner.rerun:
        _start_fresh(job.predictions_path)
        return None, None
    if existing is None:
        return None, None
    if existing.info.status == "FINISHED" and not cfg.runner.retry_errors:
        log.info("%s: this configuration already FINISHED as run %s (config hash %s); nothing "
                 "to do. runner.rerun=true runs it again, runner.retry_errors=true retries its "
                 "errored tasks", cfg.system.name, existing.info.run_id, job.config_hash)
        _record_reused(parent, existing.info.run_id)
        return None, dict(existing.data.metrics)
    log.info("%s: continuing run %s (%s before)", cfg.system.name, existing.info.run_id,
             existing.info.status)
    track.close_orphaned_parent(client, existing, (parent or {}).get("run_id"))
    return existing.info.run_id, None


def require_keys(cfg: DictConfig, more_providers: set[str] | frozenset[str] = frozenset()
                 ) -> None:
    """A Claude model, judge or reference model without its key stops before any run opens
    (and before any other model call is paid for); ``more_providers``: those a sweep's other
    jobs choose."""
    from arag.llm.claude import api_key

    reference = cfg.dataset.get("reference_model")
    providers = {cfg.judge.provider, reference.provider if reference else "none",
                 *more_providers}
    if cfg.mode != "evaluate":
        providers.add(cfg.model.provider)
    if "anthropic" in providers:
        api_key()


def make_judge(cfg: DictConfig):
    """(judge model, reason) — the model is None when there is no usable judge."""
    if cfg.judge.provider == "none":
        return None, "no judge configured (judge=none)"
    judge = make_model(cfg.judge)
    if not judge.can_judge:
        return None, f"judge={cfg.judge.name}: the offline model is not a judge"
    return MeteredModel(cached(judge, cfg), Prices.from_config(cfg.judge)), ""


def cached(model, cfg: DictConfig):
    """Every model and judge call goes through the content-addressed response cache."""
    mode = str(cfg.cache.mode.value if hasattr(cfg.cache.mode, "value") else cfg.cache.mode)
    if mode == "off" or model.provider == "offline":
        return model  # the offline model is deterministic and free: nothing to save
    return CachedModel(model, resolve(cfg.cache.dir), mode)


def build_system(job: Job, model):
    cfg = job.cfg
    ctx = SystemContext(
        model=model, prices=Prices.from_config(cfg.model), corpus=job.dataset.corpus,
        index_loader=job.index_loader, style=str(cfg.summarization_style.value),
        target_length=cfg.target_length, max_loops=cfg.max_loops,
        top_k=cfg.system.top_k or cfg.retrieval.top_k, scope=str(cfg.retrieval.scope.value),
        tools=list(cfg.system.tools), max_tokens=cfg.system.max_tokens,
        temperature=cfg.system.temperature, context_limit=cfg.model.context_limit,
        snippet_words=cfg.retrieval.snippet_words,
    )
    system = make_system(cfg.system.kind, cfg.system.name, ctx)
    if cfg.system.kind in RETRIEVING_SYSTEMS:
        ctx.index()  # load before the clock starts: task latency excludes index loading
    return system


def _execute(job: Job, model, tracker: track.RunTracker) -> dict[str, float]:
    cfg = job.cfg
    system = build_system(job, model)
    outcome = predict(
        system, job.dataset.tasks, job.predictions_path, source=job.dataset.name,
        concurrency=cfg.runner.concurrency, progress=cfg.runner.progress,
        retry_errors=cfg.runner.retry_errors, max_cost_usd=cfg.runner.max_cost_usd,
    )
    if outcome.stop_reason:
        tracker.set_tags({"stopped": outcome.stop_reason, "n_not_run": str(len(outcome.not_run))})
        tracker.end_status = "KILLED"
    metrics = score_and_log(job, outcome.predictions, tracker, {
        "n_not_run": float(len(outcome.not_run)), "n_resumed": float(outcome.n_resumed)})
    n_traces = log_task_traces(tracker.experiment_id, tracker.run_id, outcome.predictions)
    log.info("%s: %d task traces logged", cfg.system.name, n_traces)
    return metrics


def score_and_log(job: Job, predictions: list[Prediction], tracker: track.RunTracker,
                  extra: dict[str, float]) -> dict[str, float]:
    """Score predictions and log metrics, records, tables, reports and plots to the run."""
    cfg = job.cfg
    tasks = {t.id: t for t in job.dataset.tasks}
    for p in predictions:  # a reused prediction is scored against today's reference
        p.ground_truth = tasks[p.id].reference
    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    judge, judge_reason = make_judge(cfg)
    scorers = build_scorers(cfg, judge, judge_reason, cache_dir=resolve(cfg.cache.dir))
    records = evaluate(
        predictions, tasks, job.dataset.corpus, chunks, scorers,
        cfg.target_length, system_kind=cfg.system.kind,
    )
    metrics = {**aggregate(records), **extra}
    if judge is not None:
        metrics.update(judge_calls=float(judge.calls), judge_cached_calls=float(judge.cached_calls),
                       judge_cost_usd_total=judge.cost_usd)
    tracker.log_metrics(metrics)
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in (("predictions.jsonl", [p.to_json() for p in predictions]),
                            ("predictions.eval.jsonl",
                             [json.dumps(r, ensure_ascii=False) for r in records])):
            file = Path(tmp) / name
            file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            tracker.log_artifact(file)
        for plot in run_plots(records, Path(tmp)):
            tracker.log_artifact(plot, "plots")
    tracker.log_table(_table_rows(predictions, records), "eval_table.json")
    for name, report in job.dataset.reports.items():
        if isinstance(report, str):  # Markdown for people to read (e.g. a spot-check list)
            tracker.log_text(report, f"{name}.md")
        else:
            tracker.log_json(report, f"{name}.json")
    if job.dataset.notes:
        tracker.log_text("".join(f"- {n}\n" for n in job.dataset.notes), "dataset_notes.md")
    for scorer in scorers:
        if isinstance(scorer, GEvalScorer) and scorer.criteria and scorer.criteria.used:
            tracker.log_json(scorer.criteria.used, "geval_criteria.json")
    return metrics


def _table_rows(predictions, records) -> list[dict[str, Any]]:
    rows = []
    for p, r in zip(predictions, records, strict=True):
        row = {"id": p.id, "question": p.question, "predicted": p.predicted,
               "reference": p.ground_truth}
        row.update({k: v for k, v in r.items() if k not in ("id", "null_reasons", "system")})
        rows.append(row)
    return rows


def main(cfg: DictConfig) -> dict[str, float] | None:
    """Hydra task function: run one job; in a sweep, record a failure and let the sweep go on."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    hc = HydraConfig.get()
    multirun = hc.mode == RunMode.MULTIRUN
    parent = track.read_parent(Path(hc.sweep.dir)) if multirun else None
    run_name = _run_name(cfg, hc, (parent or {}).get("swept_keys", []))
    try:
        return run(cfg, parent, run_name=run_name,
                   sweep_id=(parent or {}).get("sweep_id"))
    except (ConfigError, DatasetError, track.TrackingError, MissingAPIKey) as exc:
        message = str(exc)
        log.error("%s", message)
        if not multirun:
            raise SystemExit(f"error: {message}") from None
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"
        log.exception("job failed")
        if not multirun:
            raise
    _record_failure(Path(hc.sweep.dir), run_name, message)
    return None


def rescore(cfg: DictConfig, parent: dict[str, str] | None = None) -> dict[str, float]:
    """Score an existing run's predictions again (e.g. with a judge); no system is run.

    The source run's own config decides the dataset, chunking and system; this command's
    ``judge``, ``metrics``, ``cache`` and ``runner`` apply. The result is a new run tagged
    with ``source_run_id``.
    """
    client = track.connect(cfg.tracking)
    try:
        source = client.get_run(cfg.source_run_id)
    except Exception:  # noqa: BLE001 - MLflow raises several types for a missing run
        raise ConfigError(f"source_run_id={cfg.source_run_id!r} is not a run in "
                          f"tracking.uri={cfg.tracking.uri!r}; copy a run id from the MLflow "
                          "UI") from None
    with tempfile.TemporaryDirectory() as tmp:
        try:
            src_cfg = OmegaConf.load(client.download_artifacts(source.info.run_id, "config.yaml",
                                                               tmp))
            preds_path = Path(client.download_artifacts(source.info.run_id,
                                                        "predictions.jsonl", tmp))
        except Exception as exc:  # noqa: BLE001
            raise ConfigError(f"run {cfg.source_run_id} has no config.yaml/predictions.jsonl "
                              f"artifacts to re-score ({exc})") from None
        predictions = [Prediction.from_dict(json.loads(line))
                       for line in preds_path.read_text(encoding="utf-8").splitlines() if line]
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), src_cfg, {
        k: OmegaConf.to_container(cfg[k], resolve=True) for k in ("judge", "metrics", "cache",
                                                                 "runner", "tracking")})
    merged.mode, merged.source_run_id = "evaluate", cfg.source_run_id
    job = prepare(merged)
    tags = {"system": merged.system.name, "dataset": merged.dataset.name,
            "model": merged.model.name, "judge": merged.judge.name, "mode": "evaluate",
            "source_run_id": cfg.source_run_id, "config_hash": config_hash(merged),
            "git_commit": track.git_commit(), "sweep_id": (parent or {}).get("sweep_id", "")}
    name = f"rescore {source.info.run_name} judge={merged.judge.name}"
    with track.tracked_run(client, source.info.experiment_id, name, tags,
                           (parent or {}).get("run_id")) as tracker:
        tracker.log_params(track.flatten(resolved(merged)))
        tracker.log_text(OmegaConf.to_yaml(merged, resolve=True), "config.yaml")
        metrics = score_and_log(job, predictions, tracker, {})
    log.info("re-scored run %s as %s", cfg.source_run_id, tracker.run_id)
    return metrics


def _start_fresh(predictions_path: Path) -> None:
    """runner.rerun=true: keep the old predictions aside and predict every task again."""
    if predictions_path.exists():
        aside = predictions_path.with_name(f"predictions.{int(time.time())}.jsonl")
        predictions_path.rename(aside)
        log.info("runner.rerun=true: previous predictions kept as %s", aside)


def _record_reused(parent: dict[str, str] | None, run_id: str) -> None:
    if parent and parent.get("sweep_dir"):
        with open(Path(parent["sweep_dir"]) / track.REUSED_RUNS_FILE, "a") as f:
            f.write(json.dumps({"run_id": run_id}) + "\n")


def _run_name(cfg: DictConfig, hc: Any, swept: list[str]) -> str:
    """``system=arag,max_loops=6``: the swept keys of this job, else the system's name."""
    choices = hc.runtime.choices
    parts = [f"{k}={choices[k] if k in choices else OmegaConf.select(cfg, k)}" for k in swept]
    return ",".join(parts) or cfg.system.name


def _record_failure(sweep_dir: Path, job: str, message: str) -> None:
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / track.FAILED_JOBS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps({"job": job, "error": message}) + "\n")
