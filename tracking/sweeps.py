"""Reading finished sweeps back from MLflow: a sweep's parent run found by what a person
calls it, its job runs, and each job's records (what the sweep report and a baseline
comparison are computed from), and marking a sweep as regressed against another.

A sweep is named by its parent run id, its name (the parent's run name, e.g.
``sweep system=arag,naive``, or its ``sweep_id`` tag), or a tag as ``<key>=<value>``
(``release=v1.4``, a tag set on the parent in the MLflow UI). Where a name or tag fits
several sweeps, the latest finished one is taken.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tracking.runs import REUSED_RUNS_FILE, TrackingError

PARENT_ROLE = "sweep_parent"
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_TAG_KEY = re.compile(r"^[\w.\-/ ]+$")


class SweepNotFound(TrackingError):
    pass


def find_sweep(client: Any, ref: str, key: str = "report.baseline") -> Any:
    """The parent run of the finished sweep ``ref`` names (see the module docstring);
    ``key``: the setting ``ref`` came from, named in the error."""
    ref = ref.strip()
    if _RUN_ID.match(ref):
        return _parent_by_id(client, ref, key)
    experiments = [e.experiment_id for e in client.search_experiments()]
    found: list[Any] = []
    for where in _filters(ref):
        found = client.search_runs(
            experiments, filter_string=f"tags.role = '{PARENT_ROLE}' and {where}",
            order_by=["attributes.start_time DESC"], max_results=20) if experiments else []
        found = [r for r in found if r.info.status == "FINISHED"] or found
        if found:
            break
    if not found:
        raise SweepNotFound(
            f"{key}={ref!r}: no sweep has that run id, name, sweep_id or tag. Fix: pass the "
            "parent run id of a finished sweep (MLflow UI: the sweep's row, Run ID), its "
            "name, or a tag it carries as <key>=<value>")
    return found[0]


def _filters(ref: str) -> list[str]:
    """MLflow search filters for a sweep's name, its sweep id, then a ``key=value`` tag."""
    filters = [f"attributes.run_name = {_quote(ref)}", f"tags.sweep_id = {_quote(ref)}"]
    tag, sep, value = (part.strip() for part in ref.partition("="))
    if sep and _TAG_KEY.match(tag) and value:
        filters.append(f"tags.`{tag}` = {_quote(value)}")
    return filters


def _quote(value: str) -> str:
    return "'" + value.replace("'", "\\'") + "'"


def _parent_by_id(client: Any, run_id: str, key: str) -> Any:
    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - MLflow raises its own error for an unknown id
        raise SweepNotFound(f"{key}={run_id!r}: no run has this id in this tracking store. "
                            "Fix: check tracking.uri, or pass the sweep's name") from None
    if run.data.tags.get("role") != PARENT_ROLE:
        parent = run.data.tags.get("mlflow.parentRunId")
        fix = f"{key}={parent}" if parent else "the parent run id of a sweep (run with -m)"
        raise SweepNotFound(f"{key}={run_id!r} is a job run, not a sweep. Fix: {fix}")
    return run


def sweep_info(run: Any) -> dict[str, Any]:
    """What ``child_runs`` and the report need of a parent run."""
    return {"run_id": run.info.run_id, "experiment_id": run.info.experiment_id,
            "sweep_id": run.data.tags.get("sweep_id", ""),
            "sweep_dir": run.data.tags.get("sweep_dir", "")}


def child_runs(client: Any, parent: dict[str, Any]) -> list[Any]:
    """The sweep's job runs: its children plus finished runs it reused unchanged."""
    runs = client.search_runs(
        [parent["experiment_id"]],
        filter_string=f"tags.mlflow.parentRunId = '{parent['run_id']}'",
        order_by=["attributes.start_time ASC"],
    )
    reused = Path(parent.get("sweep_dir") or "/nonexistent") / REUSED_RUNS_FILE
    if reused.exists():
        ids = [json.loads(line)["run_id"] for line in reused.read_text().splitlines() if line]
        children = {r.info.run_id for r in runs}  # a run reused and then adopted: once
        runs += [client.get_run(i) for i in dict.fromkeys(ids) if i not in children]
    return [r for r in runs if r.info.status == "FINISHED"] + \
        [r for r in runs if r.info.status != "FINISHED"]


def run_records(client: Any, run: Any, folder: Path) -> list[dict[str, Any]]:
    """A job run's eval records, each with what its prediction says beside the scores
    (answer, reference, context); none for a run without artifacts (failed early)."""
    try:
        path = client.download_artifacts(run.info.run_id, "predictions.eval.jsonl", str(folder))
        evals = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
        path = client.download_artifacts(run.info.run_id, "predictions.jsonl", str(folder))
        preds = {_record_key(p): p for p in (json.loads(line) for line in
                                              Path(path).read_text().splitlines() if line)}
    except Exception:  # noqa: BLE001 - a run without artifacts (failed early) has no records
        return []
    for r in evals:
        p = preds.get(_record_key(r), {})
        r.update(predicted=p.get("predicted"), reference=p.get("ground_truth"),
                 question=p.get("question"), error_kind=p.get("error_kind"),
                 context_chunk_ids=p.get("context_chunk_ids") or p.get("retrieved_chunk_ids"),
                 cached_calls=sum(1 for s in p.get("trace") or [] if s.get("cached")))
    return evals


def _record_key(record: dict[str, Any]) -> tuple[str, int]:
    """A record's task and repeat (``runner.repeats``: several records per task; records
    made before repeats: 0)."""
    return record["id"], int(record.get("repeat") or 0)


def mark_compared(client: Any, run_id: str, baseline_run_id: str, outcome: str,
                  regressed: bool) -> None:
    """Tag a sweep's parent with the baseline it was compared with and the outcome; tag
    ``regression`` only while the latest comparison found one."""
    client.set_tag(run_id, "baseline_run_id", baseline_run_id)
    client.set_tag(run_id, "baseline_comparison", outcome[:5000])
    if regressed:
        client.set_tag(run_id, "regression", "true")
    elif "regression" in client.get_run(run_id).data.tags:
        client.delete_tag(run_id, "regression")


def set_description_section(client: Any, run_id: str, heading: str, text: str) -> None:
    """Put ``text`` under ``heading`` at the end of the run's description (the Markdown
    MLflow shows on its Overview), replacing the section an earlier call wrote."""
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NOTE

    note = client.get_run(run_id).data.tags.get(MLFLOW_RUN_NOTE, "")
    kept = note.split(heading, 1)[0].rstrip()
    section = f"{heading}\n\n{text.strip()}"
    client.set_tag(run_id, MLFLOW_RUN_NOTE, f"{kept}\n\n{section}" if kept else section)
