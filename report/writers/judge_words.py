"""Words for the judge's trustworthiness (``report/analyses/judge.py``); the method is in
docs/judging.md."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from report.model import Claim
from report.writers.cells import UNKNOWN, Style, interval, markdown_table, number, share
from report.writers.words import words

REASONING_CHARS = 1500
METHOD = "docs/judging.md#judging-g-eval-error-taxonomy-numeric-facts"


def table(style: Style, short: bool, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A table under a claim's words, in report.md only (the console says the words)."""
    return "" if short or not style.markdown or not rows else "\n\n" + markdown_table(header, rows)


@words("judge_samples")
def samples(c: Claim, style: Style, short: bool) -> str:
    runs, dims = c.figures["runs"], c.figures["dimensions"]
    if not runs:
        return (f"{style.strong('Judge self-consistency:')} one judge reply per item "
                f"({style.code('judge.samples=1')}): its own spread is not measured; "
                f"{style.code('judge.samples=3')} measures it.")
    return (f"{style.strong('Judge self-consistency:')} the judge's SD per item over its "
            f"samples, averaged over items (1-5 scale; 0: it always agreed with itself; {METHOD})."
            + table(style, short, ["run", "samples", *(f"judge SD ({d})" for d in dims)],
                    [[run, *cells] for run, cells in runs.items()]))


def _alpha(value: float | None, low: float | None, high: float | None, n: float | None) -> str:
    if value is None:
        return "undefined (too few items or one value throughout)"
    return number(value) + (f" {interval((low, high))}" if low is not None else "") + \
        f" (n={int(n or 0)})"


@words("judge_panel")
def panel(c: Claim, style: Style, short: bool) -> str:
    runs, dims = c.figures["runs"], c.figures["dimensions"]
    if not runs:
        return (f"{style.strong('Judge agreement:')} no panel "
                f"({style.code('judge.panel=[claude-sonnet-4-6]')} adds a second judge).")
    return (f"{style.strong('Judge agreement:')} Krippendorff's alpha between the primary judge "
            f"and the panel on the same items (below about 0.67 a verdict resting on one judge is "
            f"fragile; {METHOD})." + table(
                style, short, ["run", "judges", *(f"alpha ({d})" for d in dims),
                               "panel parse failures"],
                [[run, " + ".join(filter(None, [f["judges"][0], ", ".join(f["judges"][1:])])),
                  *(_alpha(*f["alpha"][d]) for d in dims),
                  ", ".join(f"{k}: {v}" for k, v in f["failures"].items())]
                 for run, f in runs.items()]))


def _quote(text: Any) -> str:
    text = str(text or "(no reply)")
    if len(text) > REASONING_CHARS:
        text = text[:REASONING_CHARS] + " […]"
    return "\n".join(f"  > {line}" for line in text.splitlines())


@words("judge_disagreement")
def disagreement(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    head = (f"{style.code(f['task'])} ({c.runs[0]}), {f['dimension']}: primary judge "
            f"{f['primary']:.2f}, {f['judge']} {f['other']:.2f} "
            f"(gap {abs(f['primary'] - f['other']):.2f})")
    if short or not style.markdown:
        return "Judges disagree: " + head
    which = f" (the first of its {f['samples']} samples)" if f["samples"] > 1 else ""
    return ((f"{style.strong('Where the judges disagree most:')}\n\n" if f["rank"] == 0 else "")
            + f"- {head}\n\n  Primary judge{which}:\n\n{_quote(f['primary_reasoning'])}\n\n"
            f"  {f['judge']}{which}:\n\n{_quote(f['other_reasoning'])}")


@words("judge_reversal")
def reversal(c: Claim, style: Style, short: bool) -> str:
    f, dim = c.figures, c.figures["dimension"]
    pairs = "; ".join(f"{a} minus {b}: primary judge {mine:+.2f}, {f['judge']} {theirs:+.2f}, "
                      f"on {n} tasks" for a, b, mine, theirs, n in f["pairs"])
    return (f"The panel judge {f['judge']} reverses the primary judge's ranking on {dim} "
            f"({pairs}): which run is better on {dim} depends on the judge.")


def _dimension(mean: float | None, low: float | None, high: float | None,
               at_least_4: float | None, failures: int) -> str:
    if mean is None:
        return UNKNOWN
    return (number(mean) + (f" {interval((low, high))}" if low is not None else "")
            + (f"; ≥4: {share(at_least_4)}" if at_least_4 is not None else "")
            + f"; parse failures: {failures}")


@words("judge_dimensions")
def dimensions(c: Claim, style: Style, short: bool) -> str:
    runs = c.figures["runs"]
    extra = list(next(iter(runs.values()), {}))
    return (f"{style.strong('Further G-Eval dimensions')} ({style.code('metrics.geval.dimensions')}: "
            + ", ".join(extra) + "), each run over its own answered tasks: mean [95% CI]; share "
            "scoring 4 or more; replies without a readable score." + table(
                style, short, ["run", *extra],
                [[run, *(_dimension(*f[d]) for d in extra)] for run, f in runs.items()]))
