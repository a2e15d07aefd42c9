"""A job's MLflow run: connecting to the store, creating, continuing and closing runs, and
logging params, tags, metrics and artifacts; a sweep's pairwise judging on its parent run
(``log_pairwise``). (Traces are written by ``tracking.traces``, the sweep's parent run by
``runners.callbacks``, reports by ``report.report``; ``arag`` and ``metrics`` never import
MLflow.)

Runs are created and closed explicitly with ``MlflowClient`` (no global active run), so
jobs of an in-process sweep cannot leak state into each other and a failing job is
always closed as FAILED.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arag.redact import has_credentials, redact, redact_data
from metrics.pairwise import ARTIFACT as PAIRWISE_ARTIFACT
from metrics.pairwise import TraceVerdict
from tracking.paths import PROJECT_ROOT, artifact_location, resolve, store_line
from tracking.storage import check_tracking
from tracking.traces import log_trace_feedback

log = logging.getLogger(__name__)
PARENT_FILE = "mlflow_parent.json"
FAILED_JOBS_FILE = "failed_jobs.jsonl"
REUSED_RUNS_FILE = "reused_runs.jsonl"
# a job run's tags: its predictions' spend journal, and the name of the attempt that last
# wrote to it (what a run that failed before logging its spend paid is read there)
SPEND_JOURNAL_TAG = "spend_journal"
SPEND_ATTEMPT_TAG = "spend_attempt"
# MLflow's own run links carry the tracking URI as given; our console prints redacted ones
SILENCE_RUN_LINKS = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"
SYNC_TRACES = ("MLFLOW_ENABLE_ASYNC_TRACE_LOGGING", "false")
PATHS_FILE = "paths.json"  # params that are paths on this machine, kept out of the params
SIGNIFICANT = 4  # digits a metric is logged with (the records keep every digit)
# an agentic run whose model answered tasks without any tool call: what that means, the fix
NO_TOOL_CALL_TAG = "tasks_without_tool_call"
# tags that describe a pass of a run: a continued run drops them, its new pass sets its own
PASS_TAGS = ("error", "stopped", "n_not_run", "too_many_errors", "all_skipped", NO_TOOL_CALL_TAG)
# an absolute path, a file URI or a sqlite store at an absolute path
_MACHINE_PATH = re.compile(r"^(/|~|file:|sqlite:////)")


class TrackingError(RuntimeError):
    pass


def connect(tracking_cfg: Any):
    """Point MLflow at the configured store; fail early and clearly when it is unusable
    (``tracking.storage`` checks it first, with bounded waits for a server)."""
    import mlflow
    from mlflow import MlflowClient

    uri = check_tracking(tracking_cfg)
    _say_which_store(str(tracking_cfg.uri), uri)  # before MLflow exports the URI it is given
    # Traces are logged in bulk after a job's predictions, faster than MLflow's async queue
    # drains: a full queue discards traces with only a warning (seen at 495 tasks). Logged
    # synchronously, none is dropped, and the store gets them in batches (tracking/traces.py).
    os.environ.setdefault(SYNC_TRACES[0], SYNC_TRACES[1])
    if has_credentials(uri):  # MLflow prints "View run ... at: <uri>" with them otherwise
        os.environ[SILENCE_RUN_LINKS] = "true"
    mlflow.set_tracking_uri(uri)
    client = MlflowClient(tracking_uri=uri)
    try:
        client.search_experiments(max_results=1)
    except Exception as exc:  # noqa: BLE001 - any failure here means the store is unusable
        raise TrackingError(
            f"tracking.uri={redact(str(tracking_cfg.uri))!r} is not usable ("
            f"{type(exc).__name__}: {redact(str(exc))[:300]}). Fix: start the server or set "
            "tracking.uri=sqlite:///mlruns/mlflow.db") from None
    return client


_ANNOUNCED: set[str] = set()  # stores this process has named (once per command, not per job)


def _say_which_store(configured: str, uri: str) -> None:
    """``MLflow store: http://team:5000 (from $MLFLOW_TRACKING_URI)``: runs going to a store
    the user did not expect is found at the start, not after the sweep."""
    if uri not in _ANNOUNCED:
        _ANNOUNCED.add(uri)
        log.info("%s", store_line(configured, uri))


def ensure_experiment(client, name: str, tracking_cfg: Any) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    # beside a sqlite store unless tracking.artifact_location says where; a tracking server
    # stores (or proxies) artifacts itself
    artifact_uri = artifact_location(str(tracking_cfg.uri), tracking_cfg.artifact_location)
    if artifact_uri and "://" not in artifact_uri:
        location = resolve(artifact_uri)
        location.mkdir(parents=True, exist_ok=True)
        artifact_uri = location.as_uri()
    try:
        return client.create_experiment(name, artifact_location=artifact_uri)
    except Exception:  # noqa: BLE001 - a parallel job created it first
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True,
                             text=True, timeout=5, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def system_tags(name: str, system_class: Any) -> dict[str, str]:
    """The system's name and what its class declares, so the report and the MLflow UI can
    tell agentic, retrieving and ranking runs apart without knowing any system's name."""
    notes = list(getattr(system_class, "notes", ()))  # how it was scored, for the report
    return {"system": name, "system_kind": getattr(system_class, "__name__", ""),
            **{f"system_{flag}": str(bool(getattr(system_class, flag))).lower()
               for flag in ("retrieves", "ranks", "agentic", "bound", "cites", "long_context",
                            "searches", "calls_models")},
            **({"system_notes": json.dumps(notes)[:5000]} if notes else {}),
            # the model a pipeline outside the harness used, as labelled (system.model_label)
            **({"model_label": system_class.model_label}
               if getattr(system_class, "model_label", None) else {})}


def flatten(data: Any, prefix: str = "") -> dict[str, str]:
    out: dict[str, str] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(flatten(value, f"{prefix}{key}."))
    elif isinstance(data, list):
        out[prefix[:-1]] = json.dumps(data)
    else:
        out[prefix[:-1]] = "null" if data is None else str(data)
    return out


def rounded(name: str, value: float) -> float:
    """A metric as a person reads it in MLflow: ``SIGNIFICANT`` significant digits, never
    fewer than its whole part. Counts stay whole and money (``*cost*``) keeps every digit,
    so totals add up to the cent-fraction."""
    if "cost" in name or not math.isfinite(value) or value == int(value):
        return value
    magnitude = math.floor(math.log10(abs(value)))
    return round(value, max(SIGNIFICANT - 1 - magnitude, 0))


def split_paths(params: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """(params, machine paths): a value that is a path on this machine (the embedder's folder
    in the virtualenv, a temporary store) says nothing about the experiment and makes
    MLflow's compare view unreadable; it is kept in the run's ``paths.json`` instead."""
    paths = {k: v for k, v in params.items() if _MACHINE_PATH.match(v)}
    return {k: v for k, v in params.items() if k not in paths}, paths


class RunTracker:
    """One MLflow run: params, tags, metrics and artifacts of one job."""

    def __init__(self, client, run_id: str, experiment_id: str):
        self.client = client
        self.run_id = run_id
        self.experiment_id = experiment_id
        # how the run ends when the job returns: KILLED when it stopped early (cost cap),
        # so no run with tasks left undone is FINISHED and the same command continues it
        self.end_status = "FINISHED"
        self.paths: dict[str, str] = {}  # logged as paths.json, not as params

    def log_params(self, params: dict[str, str]) -> None:
        """Log params; on a resumed run only those it lacks (cosmetic keys may differ).
        Machine paths go to ``paths.json`` (``split_paths``)."""
        from mlflow.entities import Param

        params, paths = split_paths(params)
        if paths:
            self.paths.update(paths)
            self.log_json(self.paths, PATHS_FILE)
        logged = self.client.get_run(self.run_id).data.params
        items = [Param(k, redact(v)[:6000]) for k, v in sorted(params.items()) if k not in logged]
        for i in range(0, len(items), 100):
            self.client.log_batch(self.run_id, params=items[i:i + 100])

    def metrics(self) -> dict[str, float]:
        """The run's latest metrics (a continued run has those of its earlier passes)."""
        return dict(self.client.get_run(self.run_id).data.metrics)

    def log_metrics(self, metrics: dict[str, float], step: int = 0) -> None:
        """Log metrics; a value the run already holds (a continued run's unchanged
        metrics) is not logged again, so its history has no repeated points."""
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        held = self.metrics()
        items = [Metric(k, rounded(k, float(v)), now, step) for k, v in sorted(metrics.items())
                 if not _held(held, k, rounded(k, float(v)))]
        for i in range(0, len(items), 1000):
            self.client.log_batch(self.run_id, metrics=items[i:i + 1000])

    def set_tags(self, tags: dict[str, str]) -> None:
        for key, value in tags.items():
            self.client.set_tag(self.run_id, key, redact(str(value)))

    def log_artifact(self, path: Path, artifact_path: str | None = None) -> None:
        self.client.log_artifact(self.run_id, str(path), artifact_path)

    def log_text(self, text: str, name: str) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / name
            file.write_text(redact(text), encoding="utf-8")
            self.log_artifact(file)

    def log_json(self, data: Any, name: str) -> None:
        self.log_text(json.dumps(redact_data(data), indent=2, ensure_ascii=False, default=str),
                      name)

    def log_dataset(self, name: str, digest: str, root: Path, counts: dict[str, int]) -> None:
        """The run's dataset as its MLflow dataset input (the UI's Datasets panel): its name,
        the digest of what it holds (``dataset_digest``), where it was read, and its counts
        as its profile and input tags."""
        import warnings

        from mlflow.data.dataset_source_registry import resolve_dataset_source
        from mlflow.data.meta_dataset import MetaDataset
        from mlflow.entities import DatasetInput, InputTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        with warnings.catch_warnings():  # a local path matches two local-file source kinds
            warnings.simplefilter("ignore", UserWarning)
            source = resolve_dataset_source(str(root))

        class Counted(MetaDataset):
            @property
            def profile(self) -> dict[str, int]:
                return counts

            def to_dict(self) -> dict[str, str]:  # MetaDataset leaves the profile out
                return {**super().to_dict(), "profile": json.dumps(counts)}

        dataset = Counted(source, name=name, digest=digest)
        tags = [InputTag(MLFLOW_DATASET_CONTEXT, "evaluation"),
                *(InputTag(k, str(v)) for k, v in counts.items())]
        inputs = [DatasetInput(dataset._to_mlflow_entity(), tags)]
        try:
            self.client.log_inputs(self.run_id, inputs)
        except Exception as exc:  # noqa: BLE001 - only the race below is asked again
            if "UNIQUE constraint failed: datasets" not in str(exc):
                raise
            # a parallel job of the sweep (joblib) inserted the same dataset between this
            # job's look-up and its insert: asked again, the store finds it and links it
            self.client.log_inputs(self.run_id, inputs)

    def log_table(self, rows: list[dict[str, Any]], name: str) -> None:
        import mlflow

        if not rows:
            return
        columns = list(dict.fromkeys(k for r in rows for k in r))
        table = {c: [_cell(r.get(c)) for r in rows] for c in columns}
        mlflow.log_table(data=table, artifact_file=name, run_id=self.run_id)


def _held(held: dict[str, float], key: str, value: float) -> bool:
    """Whether the run already holds this value of the metric (NaN equals NaN here)."""
    if key not in held:
        return False
    return held[key] == value or (math.isnan(held[key]) and math.isnan(value))


def _cell(value: Any) -> Any:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return value


def find_run(client, experiment_id: str, config_hash: str, also: Sequence[str] = ()):
    """The latest job run with this config hash (sweep parents excluded), or None; where
    the experiment has none, the latest FINISHED one of the experiments ``also`` names (a
    sweep over several datasets reuses a finished run of one dataset's own experiment)."""
    runs = client.search_runs(
        [experiment_id], filter_string=f"tags.config_hash = '{config_hash}'",
        order_by=["attributes.start_time DESC"], max_results=1,
    )
    others = [e for e in also if e != experiment_id]
    if not runs and others:
        runs = client.search_runs(
            others, filter_string=f"tags.config_hash = '{config_hash}' and "
            "attributes.status = 'FINISHED'", order_by=["attributes.start_time DESC"],
            max_results=1)
    return runs[0] if runs else None


def experiment_ids(client, names: Sequence[str]) -> list[str]:
    """The ids of the experiments of these names that exist."""
    found = (client.get_experiment_by_name(n) for n in dict.fromkeys(names))
    return [e.experiment_id for e in found if e is not None]


def close_orphaned_parent(client, run, new_parent_id: str | None) -> None:
    """A killed sweep leaves its parent RUNNING; once a new sweep takes over its child, the
    old parent is marked KILLED (tagged with its successor) instead of running forever."""
    old = run.data.tags.get("mlflow.parentRunId")
    if not old or old == new_parent_id:
        return
    if client.get_run(old).info.status == "RUNNING":
        client.set_tag(old, "superseded_by", new_parent_id or "a single run")
        client.set_terminated(old, "KILLED")


@contextmanager
def tracked_run(client, experiment_id: str, run_name: str, tags: dict[str, str],
                parent_run_id: str | None = None,
                resume_run_id: str | None = None) -> Iterator[RunTracker]:
    """A run that always ends: FINISHED on success (KILLED if the job stopped early), FAILED
    on any exception.

    With ``resume_run_id`` the existing run is reopened (status RUNNING) and continued.
    """
    all_tags = {"mlflow.runName": run_name, **tags}
    if parent_run_id:
        all_tags["mlflow.parentRunId"] = parent_run_id
    if resume_run_id:
        client.update_run(resume_run_id, status="RUNNING")
        run = client.get_run(resume_run_id)
        resumes = int(run.data.tags.get("resumed", "0")) + 1
        for key, value in {**all_tags, "resumed": str(resumes)}.items():
            client.set_tag(resume_run_id, key, value)
        for stale in PASS_TAGS:
            if stale in run.data.tags:
                client.delete_tag(resume_run_id, stale)
    else:
        run = client.create_run(experiment_id, tags=all_tags, run_name=run_name)
    tracker = RunTracker(client, run.info.run_id, experiment_id)
    try:
        yield tracker
    except BaseException as exc:
        try:
            client.set_tag(run.info.run_id, "error", redact(f"{type(exc).__name__}: {exc}")[:5000])
        finally:  # Ctrl-C: stopped, not broken (the same command continues it either way)
            client.set_terminated(run.info.run_id, "KILLED" if isinstance(
                exc, KeyboardInterrupt) else "FAILED")
        raise
    client.set_terminated(run.info.run_id, tracker.end_status)


def read_parent(sweep_dir: Path) -> dict[str, Any] | None:
    path = sweep_dir / PARENT_FILE
    if not path.exists():
        return None
    return json.loads(path.read_text())


def log_pairwise(client, run_id: str, rows: Sequence[dict[str, Any]],
                 metrics: Mapping[str, float], verdicts: Sequence[TraceVerdict],
                 traces: Mapping[str, Mapping[str, str]]) -> int:
    """A sweep's pairwise judging on its parent run ``run_id``: ``pairwise.jsonl`` (the
    judge's rows, as they are), ``metrics`` (every digit: the report recomputes them from
    the rows), and each verdict as an assessment on its answer's trace (``traces``: run
    label -> task id -> trace id; an answer without a trace gets none). Returns how many
    assessments were logged."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / PAIRWISE_ARTIFACT
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                        encoding="utf-8")
        client.log_artifact(run_id, str(path))
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    return log_trace_feedback([(trace, v.name, v.value, v.rationale, v.judge) for v in verdicts
                               if (trace := traces.get(v.run, {}).get(v.task_id))])
