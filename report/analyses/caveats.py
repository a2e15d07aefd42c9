"""The caveats: what limits what the report may claim, as notes every writer says before any
figure; a meta-evaluation (``dataset=summedits``) compares no systems, so gets only its own."""

from __future__ import annotations

from typing import Any

from metrics import declared_metrics
from metrics.base import parse_failure_counts
from report import policy
from report.analyses.judge import judged_dimensions
from report.analyses.repeats import cannot_vary, repeated
from report.meta_eval import is_meta_evaluation
from report.model import Analysis, Claim, Inputs, Note, register_analysis

Row = dict[str, Any]
JUDGES_THAT_DO_NOT_JUDGE = ("none", "offline")


@register_analysis("caveats", -10)
def caveats(inputs: Inputs) -> Analysis:
    rows = inputs.finished
    return Analysis(notes=caveat_notes(rows), claims=[] if is_meta_evaluation(rows) else
                    _query_priors(rows))


def caveat_notes(rows: list[Row]) -> list[Note]:
    """The notes on what these runs' figures can show."""
    notes = [Note("repeats_fixed", runs=tuple(r["run"] for r in repeated(rows) if cannot_vary(r))),
             _unreadable(rows), _resumed(rows)]
    if not is_meta_evaluation(rows):
        notes += _comparison_notes(rows)
    return [n for n in notes if n.runs or n.counts]


def _runs(rows: list[Row], test: Any) -> tuple[str, ...]:
    return tuple(sorted({r["run"] for r in rows if test(r)}))


def _comparison_notes(rows: list[Row]) -> list[Note]:
    # a run whose model was called elsewhere (predictions from a file) is not the offline model's
    notes = [Note("offline_model", runs=_runs(rows, lambda r: r.get("model_provider") == "offline"
                                                   and r.get("calls_models") is not False)),
             Note("no_judge", runs=_runs(rows, lambda r: r.get("judge_provider")
                                           in JUDGES_THAT_DO_NOT_JUDGE)),
             Note("synthetic", runs=_runs(rows, lambda r: r.get("synthetic")))]
    share = max((r.get("docs_within_context_budget_share") or 0.0 for r in rows), default=0.0)
    if share > 0.5:
        notes.append(Note("fits_budget", counts={"share": share, "chunks": max(
            r.get("context_budget_chunks") or 0 for r in rows)}))
    missing = max((r.get("n_tasks_without_reference") or 0.0 for r in rows), default=0.0)
    if missing:
        shown = [m for m in declared_metrics() if m.report]
        can = [m.title for m in shown if any(r.get(f"{m.name}_mean") is not None for r in rows)]
        notes.append(Note("no_reference", counts={"tasks": missing, "can": can,
                                                  "cannot": [m.title for m in shown
                                                             if m.title not in can]}))
    notes += [Note("references", runs=(r["run"],), counts={"from": r["references"]})
              for r in rows if r.get("references")]
    notes += _agreement(rows)
    notes += [Note("tool_calls", runs=(r["run"],), counts={
        "without": policy.tasks_without_tool_call(r), "answered": int(r.get("n_answered") or 0),
        "void": policy.void_agent(r)}) for r in rows if policy.tasks_without_tool_call(r)]
    for r in rows:
        for note in r.get("system_notes") or []:
            notes.append(Note(note["kind"], runs=(r["run"],), counts=note)
                         if isinstance(note, dict) else
                         Note("system_note", runs=(r["run"],), counts={"text": note}))
    return notes


def _agreement(rows: list[Row]) -> list[Note]:
    """Low agreement between the judge and its panel (alpha below ``policy.AGREEMENT_FLOOR``)."""
    low: dict[str, list[tuple[str, float]]] = {}
    for r in rows:
        for d in judged_dimensions(rows) if r.get("judge_panel") else []:
            alpha = r.get(f"judge_agreement_{d}")
            if alpha is not None and alpha < policy.AGREEMENT_FLOOR:
                low.setdefault(d, []).append((r["run"], alpha))
    return [Note("judge_agreement", runs=tuple(run for run, _ in found),
                 counts={"dimension": d, "alphas": [a for _, a in found],
                         "floor": policy.AGREEMENT_FLOOR}) for d, found in low.items()]


def _unreadable(rows: list[Row]) -> Note:
    """Judge-scored fields whose replies could not be read, per run (no score on those tasks)."""
    found = {r["run"]: {"fields": fails, "answered": int(r.get("n_answered") or 0)}
             for r in rows if (fails := {f: int(v) for f, v in parse_failure_counts(r).items() if v})}
    return Note("unreadable", runs=tuple(found), counts={"runs": found} if found else {})


def _resumed(rows: list[Row]) -> Note:
    """Runs whose measured latencies were resumed from an earlier run, made under its load."""
    resumed = [r for r in rows if (r.get("n_resumed") or 0) > 0
               and r.get("latency_ms_p50") is not None]
    return Note("resumed_latency", runs=tuple(r["run"] for r in resumed), counts={
        "answers": [[int(r["n_resumed"]), int(r.get("n_tasks") or 0)] for r in resumed],
        "sequential": all(r.get("sequential") for r in resumed)} if resumed else {})


def _query_priors(rows: list[Row]) -> list[Claim]:
    """What each retrieving run whose queries are known searches with beyond the question."""
    how = {r["run"]: ("offline_agent" if r.get("model_provider") == "offline" else "agent")
           if r.get("agentic") else "hyde" if r.get("hyde") else "question"
           for r in rows if r.get("retrieves") and r.get("searches") is not False}
    return [Claim("query_priors", "Key finding", tuple(how), figures={"how": how, "tools": {
        r["run"]: r.get("tools") or [] for r in rows if r["run"] in how}})] if how else []
