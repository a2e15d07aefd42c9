"""An analysis added the way a user adds one, from their own package: this module, named by
the entry point ``shortest_answer`` in group ``arag_eval.analyses``; importing it registers
the analysis. It claims, per compared run, the length of its shortest answer, and returns
claims only: the report's writers say it (from its fields: it brings no words of its own)."""

from __future__ import annotations

from report.model import Analysis, Claim, Inputs, register_analysis


@register_analysis("shortest_answer", 90)
def shortest_answer(inputs: Inputs) -> Analysis:
    claims = []
    for run in inputs.sets.runs:
        words = [len(str(r.get("predicted") or "").split())
                 for r in inputs.records.get(run["run_id"], []) if r.get("predicted")]
        if words:
            claims.append(Claim("shortest_answer", "Shortest answers", (run["run"],),
                                "word_count", n_tasks=len(words), key=True,
                                figures={"shortest_words": min(words)}))
    return Analysis(claims=claims, artifacts={"shortest_answer.jsonl": [
        {"run": c.runs[0], "shortest_words": c.figures["shortest_words"]} for c in claims]})
