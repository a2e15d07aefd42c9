"""Words for a regression against the baseline (``report/baseline.py``): the line a CI log
shows and the answer states. Every number is one the comparison put on the claim."""

from __future__ import annotations

from report.model import Claim
from report.writers.cells import Style, interval, number, signed
from report.writers.words import words


@words("regression")
def _regression(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    against = f"baseline sweep {f['baseline']!r} ({f['baseline_run_id']})"
    if short:
        return (f"{style.strong(c.runs[0])} regressed on {style.code(c.metric or '')} against "
                f"{against}: {signed(c.difference, 4)} {interval(c.ci, 4, sign=True)}, beyond "
                f"the margin {f['margin']:g}")
    return (f"REGRESSION: {c.runs[0]} is worse on {c.metric} by "
            f"{number(abs(c.difference or 0.0), 4)} (candidate minus baseline "
            f"{signed(c.difference, 4)}, 95% CI {interval(c.ci, 4, sign=True)}, wholly beyond "
            f"the margin {f['margin']:g}) against {against}")
