"""Score a job's predictions and log everything to its run; re-score a past run.

Only what the system declares decides how it is scored: whether it retrieves, its ranking
and the context its faithfulness is judged against (``arag.systems.base``).
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.agent import prompt_texts
from arag.datasets.features import Features
from arag.llm.base import ChatModel
from arag.llm.cache import MeteredModel, SpendJournal
from arag.records import Prediction
from arag.retrieval import build_chunks
from arag.retrieval.embedder import resolve_embedder_path
from arag.systems import System
from arag.trace import called_a_tool, model_calls
from metrics import aggregate
from metrics.judging import JUDGE_TEMPERATURE
from report.console import headline_metrics
from report.plots import run_plots
from report.writers.caveat_words import tool_call_caveat
from report.writers.cells import PLAIN
from runners.config import RunConfig
from runners.errors import TO_ASK_AGAIN, error_metrics, judge_error_counts, zero_stale_counts
from runners.evaluate import dataset_features, evaluate, window_rule
from runners.identity import prompt_versions
from runners.job import Job, make_scorers, prepare
from runners.settings import Settings, read
from runners.validation import ConfigError
from tracking import runs as track
from tracking.paths import resolve

log = logging.getLogger(__name__)
DATASET_DIGEST_PARAM = "dataset_digest"  # Dataset.digest, on every job run and sweep run


def score_and_log(job: Job, predictions: list[Prediction], tracker: track.RunTracker,
                  extra: dict[str, float], features: dict[str, Features] | None = None
                  ) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """Score predictions and log metrics, records, tables, reports and plots to the run;
    returns the run's metrics and the eval records (each with its task's ``features``;
    without them, those the dataset gives without the run's model)."""
    cfg = job.cfg
    tasks = {t.id: t for t in job.dataset.tasks}
    for p in predictions:  # a reused prediction is scored against today's reference
        p.ground_truth = tasks[p.id].reference
    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size, cfg.retrieval.chunk_overlap)
    judge_spend = SpendJournal(job.judge_spend_path(tracker.run_id), tags=job.journal_tags)
    scorers, judges = make_scorers(job.settings, judge_spend)
    records = evaluate(predictions, tasks, job.dataset.corpus, chunks, scorers,
                       cfg.target_length, job.system_class, cfg.system.citations,
                       features or dataset_features(job.dataset))
    calls = model_call_counts(predictions) if job.system_class.calls_models else {}
    metrics = {**aggregate(records, scorers), **calls, **extra,
               **tool_call_counts(predictions, job.system_class, cfg.system.tools),
               **judge_metrics(judges, judge_spend),
               **error_metrics(predictions, judge_error_counts(judges))}
    metrics.update(zero_stale_counts(tracker.metrics(), metrics))
    tracker.log_metrics(metrics)
    tracker.log_metrics(headline_metrics(metrics))  # the first charts MLflow shows
    tracker.log_params({**used_models(cfg, scorers), **({"judge_temperature_sent": (
        temperature_sent(judges[cfg.judge.name], JUDGE_TEMPERATURE))} if judges else {})})
    flag_tasks_without_tool_call(tracker, cfg.system.name, metrics)
    tracker.log_json(prompt_texts(), "prompts.json")
    with tempfile.TemporaryDirectory() as tmp:
        for name, lines in (("predictions.jsonl", [p.to_json() for p in predictions]),
                            ("predictions.eval.jsonl",
                             [json.dumps(r, ensure_ascii=False) for r in records])):
            file = Path(tmp) / name
            file.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            tracker.log_artifact(file)
        for plot in run_plots(records, Path(tmp), scorers):
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
        for name, data in scorer.artifacts().items():
            if isinstance(data, str):  # a file already in its format (e.g. JSON lines)
                tracker.log_text(data, name)
            else:
                tracker.log_json(data, name)
    for name, data in job.system_class.artifacts.items():  # e.g. traces kept as given
        tracker.log_json(data, name)
    return metrics, records


def log_data_identity(tracker: track.RunTracker, job: Job) -> None:
    """What the run read: the param ``dataset_digest`` (baselines and repeats compare it)
    and the MLflow dataset input with the same digest and the run's counts."""
    data = job.dataset
    tracker.log_params({DATASET_DIGEST_PARAM: data.digest})
    tracker.log_dataset(data.name, data.digest, resolve(job.cfg.dataset.root),
                        {"n_documents": len(data.corpus.documents), "n_tasks": len(data.tasks)})


def reference_tags(cfg: RunConfig) -> dict[str, str]:
    """``dataset_references``: the file of the team's own references the run scored
    against (``dataset.references``), for the report to name."""
    path = cfg.dataset.references
    return {"dataset_references": Path(str(path)).name} if path else {}


def model_name(configured: str, system_class: type[System]) -> str:
    """The run's ``model`` tag: the model a pipeline outside the harness says it used
    (``system.model_label``), else the configured one."""
    return getattr(system_class, "model_label", None) or configured


def model_call_counts(predictions: list[Prediction]) -> dict[str, float]:
    """Model calls made and those the response cache answered (whose latency is the
    cache's, not the model's)."""
    calls = [s for p in predictions for s in model_calls(p.trace)]  # tools' calls included
    return {"model_calls": float(len(calls)),
            "model_calls_cached": float(sum(1 for s in calls if s.cached))}


def tool_call_counts(predictions: list[Prediction], system_class: type[System],
                     tools: list[str]) -> dict[str, float]:
    """For an agentic system offered tools: its answered tasks on which the model called no
    tool (``tasks_without_tool_call``) and their share of the answered. Such a task was
    answered closed-book; a model that never calls one (a chat template without tool
    calling) turns the agent into closed-book answering (``report.policy.agentic_void``)."""
    if not (system_class.agentic and tools):
        return {}
    answered = [p for p in predictions if not p.error and not p.skipped]
    without = sum(1 for p in answered if not called_a_tool(p.trace))
    return {"tasks_without_tool_call": float(without),
            **({"tasks_without_tool_call_share": without / len(answered)} if answered else {})}


def flag_tasks_without_tool_call(tracker: track.RunTracker, system: str,
                                 metrics: dict[str, float]) -> None:
    """An agentic run whose model answered tasks without any tool call says so in the log
    and in a tag (``tasks_without_tool_call``): what it means for the comparison, the fix.
    The run is not failed: some tasks need no tool."""
    if not metrics.get("tasks_without_tool_call"):
        return
    note = tool_call_caveat(int(metrics["tasks_without_tool_call"]), int(metrics["n_answered"]),
                            PLAIN)
    log.warning("%s: %s", system, note)
    tracker.set_tags({track.NO_TOOL_CALL_TAG: note})


def temperature_sent(model: ChatModel, requested: float) -> str:
    """What a model's requests carry as temperature, as the run's params show it."""
    sent = model.sent_temperature(requested)
    return "not sent (the model's default applies)" if sent is None else f"{sent:g}"


def judge_metrics(judges: dict[str, MeteredModel], spend: SpendJournal) -> dict[str, float]:
    """Judge calls, cached calls and cost over every judge of the run (extra samples and
    the panel included) in this attempt, and each panel judge's own;
    ``judge_cost_usd_spent_total``: what the judges were paid in this attempt, as journaled
    when each call returned; ``judge_cost_usd_spent_earlier``: what earlier attempts of the
    run paid (calls made before a kill, which this attempt answers from the response cache
    at no cost), counted there and not again; ``judge_replies_to_ask_again``:
    replies that could not be read and that the next run of the same command asks again."""
    if not judges:
        return {}
    out = {"judge_calls": float(sum(j.calls for j in judges.values())),
           TO_ASK_AGAIN: float(sum(j.to_ask_again for j in judges.values())),
           "judge_cached_calls": float(sum(j.cached_calls for j in judges.values())),
           "judge_cost_usd_total": sum(j.cost_usd for j in judges.values()),
           **dict(zip(("judge_cost_usd_spent_total", "judge_cost_usd_spent_earlier"),
                      spend.spent(), strict=True))}
    for name, judge in list(judges.items())[1:]:
        out.update({f"panel_{name}_judge_calls": float(judge.calls),
                    f"panel_{name}_judge_cost_usd_total": judge.cost_usd})
    return out


def used_models(cfg: RunConfig, scorers: list[Any]) -> dict[str, str]:
    """Params naming the files the run's numbers came from (the embedder the index was built
    with, the BERTScore model), so an outside script can recompute every metric."""
    used = {"embedder_path_used": str(resolve_embedder_path(cfg.retrieval.embedder.path)),
            **prompt_versions()}
    for scorer in scorers:
        used.update(scorer.provenance())
    return used


def _table_rows(predictions: list[Prediction], records: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    rows = []
    for p, r in zip(predictions, records, strict=True):
        row = {"id": p.id, "question": p.question, "predicted": p.predicted,
               "reference": p.ground_truth}
        row.update({k: v for k, v in r.items() if k not in ("id", "null_reasons", "system")})
        if isinstance(r.get("citations"), list):
            row["citations"] = _claims_and_sources(r["citations"])
        rows.append(row)
    return rows


def _claims_and_sources(claims: list[dict[str, Any]]) -> str:
    """One line per claim, the chunks backing it and the verdict, for the eval table."""
    verdict = {True: "backed", False: "not backed", None: "unchecked"}
    return "\n".join(
        f"{c['claim']} <- {', '.join(c['valid']) or 'no valid citation'}"
        + (f" ({verdict[c['supported']]})" if c["valid"] else "") for c in claims)


def rescore(settings: Settings, parent: dict[str, Any] | None = None) -> dict[str, float]:
    """Score an existing run's predictions again (e.g. with a judge); no system is run.

    The source run's own config decides the dataset, chunking and system; this command's
    ``judge``, ``metrics``, ``cache`` and ``runner`` apply. The result is a new run tagged
    with ``source_run_id``.
    """
    cfg = settings.config
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
    # the source run's config, with this command's judge, metrics, cache, runner, tracking
    merged = OmegaConf.merge(OmegaConf.structured(RunConfig), src_cfg, {
        k: settings.tree[k] for k in ("judge", "metrics", "cache", "runner", "tracking")})
    assert isinstance(merged, DictConfig)
    merged.mode, merged.source_run_id = "evaluate", cfg.source_run_id
    rescoring = read(merged)
    job = prepare(rescoring, recorded=predictions)
    scored = rescoring.config
    tags = {**track.system_tags(scored.system.name, job.system_class),
            "dataset": scored.dataset.name,
            "model": model_name(scored.model.name, job.system_class),
            "judge": scored.judge.name, "mode": "evaluate", "source_run_id": cfg.source_run_id,
            "config_hash": job.config_hash, "git_commit": track.git_commit(),
            "sweep_id": (parent or {}).get("sweep_id", ""), **reference_tags(scored)}
    name = f"rescore {source.info.run_name} judge={scored.judge.name}"
    with track.tracked_run(client, source.info.experiment_id, name, tags,
                           (parent or {}).get("run_id")) as tracker:
        tracker.log_params(track.flatten(rescoring.tree))
        log_data_identity(tracker, job)
        tracker.log_text(rescoring.yaml, "config.yaml")
        # the re-scored run's model window, as its run had it (stuffing's skip rule)
        features = dataset_features(job.dataset, *window_rule(scored, job.system_class,
                                                              job.dataset.corpus))
        metrics, _ = score_and_log(job, predictions, tracker, {**job.dataset_metrics,
                                                               **job.system_class.run_metrics},
                                   features)
    log.info("re-scored run %s as %s", cfg.source_run_id, tracker.run_id)
    return metrics
