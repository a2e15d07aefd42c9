"""Examples chosen from the numbers, on the decision metric's common tasks: where an agentic run
beats every other by the widest margin, one where a run without retrieval beats every run that
retrieves, and the worst task."""

from __future__ import annotations

from report import policy
from report.meta_eval import is_meta_evaluation
from report.model import Analysis, Claim, Inputs, Row, register_analysis
from report.verdict import TaskSets, by_dataset

SECTION = "Examples chosen from the numbers"


@register_analysis("examples", 90)
def examples(inputs: Inputs) -> Analysis:
    if is_meta_evaluation(inputs.finished):
        return Analysis()
    parts = by_dataset(inputs.sets)
    return Analysis(claims=[c for name, part in parts.items()
                            for c in _chosen(part, inputs.keys[0], name if len(parts) > 1 else None)])


def _chosen(sets: TaskSets, key: str, dataset: str | None) -> list[Claim]:
    ids, runs = sets.common_for(key), [r for r in sets.runs if sets.has(r, key)]
    sign = 1.0 if policy.higher_is_better(key) else -1.0

    def score(run: Row, tid: str) -> float | None:
        return sets.tables[run["run_id"]].get(tid, {}).get(key)

    def margins(run: Row, rivals: list[Row]) -> list[tuple[float, str]]:
        found = [(sign * mine - max(sign * t for t in theirs if t is not None), tid) for tid in ids
                 if (mine := score(run, tid)) is not None and rivals
                 and None not in (theirs := [score(r, tid) for r in rivals])]
        return sorted(((m, t) for m, t in found if m > 0), reverse=True)

    def example(kind: str, run: Row, tid: str, margin: float | None = None) -> Claim:
        rec = sets.tables[run["run_id"]][tid]
        return Claim("example", SECTION, (run["run"],), key, figures={
            "kind": kind, "dataset": dataset, "task": tid, "margin": margin, "scores": {
                r["run"]: s for r in runs if (s := score(r, tid)) is not None},
            **{k: rec.get(k) for k in ("question", "reference", "system", "predicted")},
            "no_reference": rec.get("null_reasons", {}).get("rouge2_f1"),
            "reasoning": rec.get("geval_coverage_reasoning") or rec.get(
                "geval_faithfulness_reasoning") if kind == "failure" else None})

    agentic = next((r for r in runs if r.get("agentic")), None)
    others = [r for r in runs if r is not agentic]
    out = [example("agent_wins", agentic, tid, m) for m, tid in margins(agentic, others)[:2]] \
        if agentic is not None and others else []
    retrieving = [r for r in runs if r.get("retrieves")]
    wins = [(run, w[0][1]) for run in runs if not run.get("retrieves")
            if retrieving and (w := margins(run, retrieving))]
    out += [example("closed_wins", *wins[0])] if wins else []
    scored = [(r, t) for r in runs for t in ids if score(r, t) is not None]
    if scored:
        out.append(example("failure", *min(scored, key=lambda p: sign * (score(*p) or 0))))
    return out or [Claim("example", SECTION, metric=key, figures={"kind": "none"})]
