"""Numeric facts without a judge (after the ECTSum authors' checks).

``numeric_precision``: share of the numbers in the summary that occur in the source the
system used. ``numeric_recall``: share of the reference's numbers that occur in the
summary. Numbers are normalised before matching: "$1.2 billion" = "1,200 million",
"2.5%" = "2.5 percent", "98 cents" = "$0.98". A number matches when it equals the other
after rounding to the precision it was written with ("$452 million" matches
"$452.2 million"), a rounding of at most 5% of the value. Years and quarter labels are not
facts and are ignored.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from arag.memory import kept_by_characters
from metrics.base import NO_CONTEXT, Metric, PerTaskScorer, Scores, ScoringItem, register_scorer

SCALES = {"thousand": 1e3, "k": 1e3, "million": 1e6, "mn": 1e6, "m": 1e6, "billion": 1e9,
          "bn": 1e9, "b": 1e9, "trillion": 1e12}
NUMBER = re.compile(
    r"(?P<dollar>\$\s?)?(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"\s?(?P<unit>%|percent\b|per cent\b|basis points?\b|bps\b|cents?\b|"
    r"thousand\b|million\b|billion\b|trillion\b|mn\b|bn\b|[kmb]\b)?",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Quantity:
    value: float
    kind: str  # pct | bps | amount | count
    tolerance: float  # half a unit in the last written digit, in value units

    @property
    def slack(self) -> float:
        """Rounding as written, but never more than 5% of the value ("$2 billion" does not
        match "$1,577 million"; "$1.58 billion" does)."""
        return min(self.tolerance, 0.05 * abs(self.value))

    def matches(self, other: Quantity) -> bool:
        if self.kind != other.kind and {self.kind, other.kind} != {"amount", "count"}:
            return False
        return abs(self.value - other.value) <= max(self.slack, other.slack) + 1e-9


def quantities(text: str) -> list[Quantity]:
    out = []
    for m in NUMBER.finditer(text):
        raw, unit = m.group("num"), (m.group("unit") or "").lower()
        before = text[max(0, m.start() - 1):m.start()].lower()
        if before == "q" or (before.isalpha() and not m.group("dollar")):
            continue  # q3, fy2024, h1
        decimals = len(raw.split(".")[1]) if "." in raw else 0
        value = float(raw.replace(",", ""))
        tol = 0.5 * 10 ** -decimals
        if unit in ("%", "percent", "per cent"):
            out.append(Quantity(value, "pct", tol))
        elif unit.startswith("basis") or unit == "bps":
            out.append(Quantity(value, "bps", tol))
        elif unit.startswith("cent"):
            out.append(Quantity(value / 100, "amount", tol / 100))
        elif unit in SCALES:
            out.append(Quantity(value * SCALES[unit], "amount", tol * SCALES[unit]))
        elif m.group("dollar"):
            out.append(Quantity(value, "amount", tol))
        elif decimals == 0 and 1900 <= value <= 2100:
            continue  # a year
        else:
            out.append(Quantity(value, "count", tol))
    return out


# characters of sources whose numbers are kept: a sweep scores every system of a task
# against the same document, job after job, so each document is read once. Bounded by
# characters, not by a count: references and claims checked between two documents weigh
# little and do not push a document out (a count of 1,024 kept none of ECTSum train's)
CHARS_KEPT = 20_000_000


@kept_by_characters(CHARS_KEPT)
def source_quantities(source: str) -> tuple[Quantity, ...]:
    """``quantities`` of a source, read once however many summaries are checked against it."""
    return tuple(quantities(source))


def share_found(needles: list[Quantity], haystack: Sequence[Quantity]) -> float | None:
    if not needles:
        return None
    return sum(any(n.matches(h) for h in haystack) for n in needles) / len(needles)


@register_scorer("numeric")
class NumericScorer(PerTaskScorer):
    metrics = [Metric("numeric_precision", "numeric P", report=True, bounds=(0.0, 1.0)),
               Metric("numeric_recall", "numeric R", report=True, bounds=(0.0, 1.0))]
    reference_fields = ("numeric_recall",)

    def score_one(self, item: ScoringItem) -> Scores:
        summary = quantities(item.prediction.predicted or "")
        context = item.context_text
        precision = share_found(summary, source_quantities(context)) if context is not None else None
        recall = share_found(quantities(item.task.reference), summary)
        s = Scores({"numeric_precision": precision, "numeric_recall": recall})
        if context is None:
            s.null_reasons["numeric_precision"] = NO_CONTEXT
        elif precision is None:
            s.null_reasons["numeric_precision"] = "the summary states no numbers"
        if recall is None:
            s.null_reasons["numeric_recall"] = "the reference states no numbers"
        return s
