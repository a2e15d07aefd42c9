"""When the verdict decides on the no-LLM ``factcheck``, the report quotes how far it agrees
with people out of sample and on which split (``metrics.factcheck.MEASURED_HELD_OUT``)."""

from __future__ import annotations

from typing import Protocol

from metrics.factcheck import MEASURED_HELD_OUT
from report.findings import Finding
from report.model import Analysis, register_analysis


class Inputs(Protocol):
    @property
    def keys(self) -> list[str]: ...


@register_analysis("factcheck_quote", 50)
def factcheck_accuracy(inputs: Inputs) -> Analysis:
    if "factcheck" not in inputs.keys:
        return Analysis()
    measured = "; ".join(f"{ba:.3f} [{low:.3f}, {high:.3f}] on SummEdits' {split} split"
                         for split, (ba, low, high) in MEASURED_HELD_OUT.items())
    return Analysis(findings=[Finding(
        "factcheck", "How far the judge can be trusted",
        f"The verdict decides on `factcheck`, a no-LLM check whose balanced accuracy against "
        f"people, held out from its tuning, is {measured} (95% CIs; "
        "docs/validate-your-judge.md): a screen for changed figures, names and opposites, "
        "not a judge of faithfulness.",
        {split: list(v) for split, v in MEASURED_HELD_OUT.items()}, caveat=True)])
