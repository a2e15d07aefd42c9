"""What a written report found (``ReportResult``), for the console's verdict and the
MLflow overview, and the run rows it is built from: its own module so the console needs
nothing of the report's builder."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from report import verdict
from report.answer import Answer
from report.model import Claim, Note
from report.verdict import headline_rows, task_sets

# report row field -> the run's param it is read from, as logged
PARAMS = {"judge": "judge.name", "judge_provider": "judge.provider", "judge_model_id": "judge.model_id",
          "judge_prompt_version": "judge_prompt_version", "model_provider": "model.provider",
          "model_id": "model.model_id", "max_loops": "max_loops", "target_length": "target_length",
          "dataset": "dataset.name", "dataset_digest": "dataset_digest",
          "dataset_split": "dataset.split", "dataset_domain": "dataset.options.domain",
          "temperature_sent": "temperature_sent"}


def run_fields(run: Any) -> dict[str, Any]:
    """A job run as the report reads it: its metrics, and what its tags and params say."""
    tags, params = run.data.tags, run.data.params
    flag = {name: tags.get(f"system_{name}") == "true" for name in ("agentic", "bound", "retrieves")}
    return {**run.data.metrics, **{k: params.get(p) for k, p in PARAMS.items()}, **flag,
            # the short name (system and swept keys) a job run was given, without its data label
            "run": tags.get("run_label") or run.info.run_name, "run_id": run.info.run_id,
            "status": run.info.status, "system": tags.get("system", ""),
            "judge_samples": params.get("judge.samples", "1"),
            "judge_panel": json.loads(params.get("judge.panel") or "[]"), "model": tags.get("model"),
            "synthetic": params.get("dataset.synthetic") == "True",
            "hyde": params.get("retrieval.hyde") == "True",
            "tools": json.loads(params.get("system.tools") or "[]"),
            "system_notes": json.loads(tags.get("system_notes") or "[]"),
            **declared(tags), "references": tags.get("dataset_references"),
            "repeats": int(params.get("runner.repeats") or 1),
            "decide_on": json.loads(params.get("report.decide_on") or "[]")}


def declared(tags: dict[str, str]) -> dict[str, Any]:
    """What a run declared beyond retrieving and being agentic (None: a run logged before
    it declared these): whether it reads whole documents, searches the index itself, calls
    its model here, and the model it labels (a pipeline outside the harness)."""
    flags = {flag: (None if tags.get(f"system_{flag}") is None
                    else tags[f"system_{flag}"] == "true")
             for flag in ("long_context", "searches", "calls_models")}
    return {**flags, "model_label": tags.get("model_label")}


def compared(row: dict[str, Any]) -> bool:
    """A run whose records the report compares: finished, or stopped early by the cost cap
    (KILLED; what it answered before the cap is as good as any other answer)."""
    return row["status"] in ("FINISHED", "KILLED")



@dataclass
class ReportResult:
    """What a written report found, for the console's verdict."""

    run_id: str  # the run the report was logged to
    experiment_id: str
    rows: list[dict[str, Any]]  # one per job run, finished first
    records: dict[str, list[dict[str, Any]]]  # run id -> eval records
    key: str  # the comparison metric
    artifact_uri: str  # where report.html is
    finding: str  # the key finding, as the report states it
    trust: list[Claim] = field(default_factory=list)  # how far the judge can be trusted
    keys: list[str] = field(default_factory=list)  # the decision metrics (report.decide_on)
    decided: list[verdict.Decision] = field(default_factory=list)  # the verdict's tests
    answer: str = ""  # the one sentence that answers the question, said first everywhere
    claims: list[Claim] = field(default_factory=list)  # every analysis's claims
    caveat_notes: list[Note] = field(default_factory=list)  # every analysis's notes
    answered: list[Claim] = field(default_factory=list)  # the claims the answer states
    answers: list[Answer] = field(default_factory=list)  # the answer, per dataset
    console: str = "summary"  # report.console: summary or full
    headline: list[dict[str, Any]] = field(default_factory=list)  # verdict.headline_rows

    @property
    def finished(self) -> list[dict[str, Any]]:
        return [r for r in self.rows if compared(r)]

    def __post_init__(self) -> None:
        if not self.headline:  # one table for every writer (``verdict.headline_rows``)
            self.headline = headline_rows(task_sets(self.finished, self.records),
                                          self.finished, self.key, self.keys[1:])
