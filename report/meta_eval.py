"""A meta-evaluation run (``dataset=summedits``): each faithfulness signal's agreement with
people, beside the published figures on the same domain; and, for a judged sweep, the
judge's measured agreement with people from the store (docs/validate-your-judge.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from report.model import Claim, Note

Row = dict[str, Any]
SUFFIX = "_balanced_accuracy"
# SummEdits (Laban et al. 2023, "LLMs as Factual Reasoners"), upstream README
# (github.com/salesforce/factualNLG): balanced accuracy on the ectsum domain's test split
PUBLISHED = (("GPT-4", 87.0), ("Gemini-pro", 83.1), ("ChatGPT", 78.6), ("Claude 2.1", 77.1),
             ("QAFactEval", 72.6), ("SummaC-Conv", 57.9), ("people", 95.4))
EDITS = ("entity_modification", "antonym_swap", "hallucinated_fact_insertion",
         "negation_insertion_removal")
SHOWN = ("auc_roc", "auc_roc_valued", "auc_roc_valued_n", "threshold", "no_value",
         "unreadable", *(f"recall_{e}" for e in EDITS))  # a signal's figures in its table
VALIDATING_SIGNAL = "geval_faithfulness"
# a judge is "validated" only when the whole 95% CI of its balanced accuracy lies above this
# floor: 50% is chance, so a CI reaching it is no evidence the judge tells faithful ones apart
VALIDATION_FLOOR = 0.5


def signals(row: Row) -> list[str]:
    return [k[: -len(SUFFIX)] for k in row if k.endswith(SUFFIX)]


def is_meta_evaluation(rows: list[Row]) -> bool:
    """Whether these runs measure faithfulness signals against people, not compare systems."""
    return bool(rows) and all(signals(r) for r in rows)


def signal_figures(row: Row, s: str) -> dict[str, Any]:
    return {"balanced_accuracy": row.get(s + SUFFIX), "ci_low": row.get(f"{s}{SUFFIX}_ci_low"),
            "ci_high": row.get(f"{s}{SUFFIX}_ci_high"), "n": row.get(f"{s}_n")}


def meta_findings(rows: list[Row]) -> list[Claim]:
    """Each meta-evaluation run's key finding: every signal's balanced accuracy, the split."""
    return [Claim("meta_evaluation", "Key finding", (row["run"],), key=True, figures={
        "split": row.get("dataset_split"), "domain": row.get("dataset_domain"),
        "signals": {s: signal_figures(row, s) for s in signals(row)}, "published": dict(PUBLISHED)})
        for row in rows if signals(row)]


def signal_tables(rows: list[Row]) -> list[Claim]:
    """One table per meta-evaluation run: its signals and the published anchors."""
    return [Claim(
        "meta_signals", f"Agreement with people: {row['run']}", (row["run"],), figures={
            "domain": row.get("dataset_domain"), "split": row.get("dataset_split"),
            "edits": list(EDITS), "published": dict(PUBLISHED), "signals": {
                s: {**signal_figures(row, s), **{k: row.get(f"{s}_{k}") for k in SHOWN}}
                for s in signals(row)}})
        for row in rows if signals(row)]


def _measured(client: Any, model_id: str, prompt_version: str | None) -> Any | None:
    """The store's latest run measuring this judge model and prompts against people, or None."""
    experiments = [e.experiment_id for e in client.search_experiments()]
    runs = client.search_runs(experiments, filter_string=(
        "params.`dataset.adapter` = 'summedits' and "
        f"params.`judge.model_id` = '{model_id}'"), order_by=["attributes.start_time DESC"])
    return next((r for r in runs if VALIDATING_SIGNAL + SUFFIX in r.data.metrics
                 and r.data.params.get("judge_prompt_version") == prompt_version), None)


def _validation(run: Any, model_id: str, judge: str) -> Claim:
    """The judge's measured agreement (below the floor: ``judge_below_chance``), or none."""
    if run is None:
        return Claim("judge_unvalidated", "How far the judge can be trusted",
                     figures={"model_id": model_id, "judge": judge})
    m, params = run.data.metrics, run.data.params
    low = m.get(f"{VALIDATING_SIGNAL}{SUFFIX}_ci_low")
    return Claim("judge_validated" if low is not None and low > VALIDATION_FLOOR else
                 "judge_below_chance", "How far the judge can be trusted", figures={
                     "model_id": model_id, "floor": VALIDATION_FLOOR, "run_id": run.info.run_id,
                     "domain": params.get("dataset.options.domain"),
                     "split": params.get("dataset.split"),
                     **signal_figures(m, VALIDATING_SIGNAL)})


def validations(client: Any, rows: list[Row]) -> list[Claim]:
    """Each judge's measured agreement with people, as the store holds it: every judge (model
    id, name, prompt version) of a judged sweep that is not a meta-evaluation itself."""
    judges = sorted({(str(r["judge_model_id"]), str(r.get("judge")), r.get("judge_prompt_version"))
                     for r in rows if (r.get("judge_calls") or 0) > 0 and not signals(r)
                     and r.get("judge_model_id")}, key=lambda j: j[:2])
    return [_validation(_measured(client, model_id, version), model_id, name)
            for model_id, name, version in judges]


def judge_caveats(validated: Sequence[Claim]) -> list[Note]:
    """A caveat for each judge that was measured against people and did not beat chance."""
    return [Note("judge_below_chance", counts=dict(c.figures)) for c in validated
            if c.kind == "judge_below_chance"]


def trust(validated: Sequence[Claim], people: Sequence[Claim] = ()) -> list[Claim]:
    """How far the judge can be trusted: its agreement with people's labels (``people``,
    ``human_agreement.agreement``) first, which replaces "unvalidated"; then each judge the
    store measured (one not better than chance is a caveat instead: ``judge_caveats``)."""
    return [*people, *(c for c in validated if c.kind == "judge_validated"
                       or c.kind == "judge_unvalidated" and not people)]
