"""When the verdict decides on the no-LLM ``factcheck``, the report quotes how far it agrees
with people out of sample and on which split (``metrics.factcheck.MEASURED_HELD_OUT``)."""

from __future__ import annotations

from metrics.factcheck import MEASURED_HELD_OUT
from report.model import Analysis, Inputs, Note, register_analysis


@register_analysis("factcheck_quote", 50)
def factcheck_accuracy(inputs: Inputs) -> Analysis:
    if "factcheck" not in inputs.keys:
        return Analysis()
    return Analysis(notes=[Note("factcheck_accuracy", "How far the judge can be trusted",
                                counts={split: list(v) for split, v in MEASURED_HELD_OUT.items()})])
