"""Words for "The judge corrected by your labels" (``report/analyses/corrected.py``): each
run's corrected mean, each pair's corrected difference, and why a comparison decides
nothing (too few shared labels, a zero-width interval, every task labelled)."""

from __future__ import annotations

from collections.abc import Sequence

from report.answer import compose
from report.model import Claim, Note
from report.writers.cells import Style, interval, number
from report.writers.words import answer as answer_words
from report.writers.words import words

LABEL_MORE = "label more: python -m report label-sample --for ppi"


@words("ppi_means")
def ppi_means(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    return (f"{style.code(f['dimension'])} ({f['scale']}): each run's judged {f['unit']} over "
            "all its tasks, corrected by people's labels (PPI++, 95% CI including the judge's "
            "error); *moved by* is corrected minus judged.")


def _difference(c: Claim, style: Style) -> str:
    a, b = c.runs
    f = c.figures
    says = (f"{f['higher']} is higher on {style.code(c.metric or '')} after correction"
            if f["shown"] else "after correction the CI includes 0: no difference on "
            f"{style.code(c.metric or '')} is shown")
    return (f"{a} − {b} = {number(c.difference, 2)} {interval(c.ci, 2)} ({f['shared']} tasks "
            f"labelled for both): {says}")


@words("corrected")
def corrected(c: Claim, style: Style, short: bool) -> str:
    if c.figures["decides"]:
        said = _difference(c, style)
        return said if short else f"{style.strong('Corrected by your labels:')} {said}."
    a, b = c.runs
    return (f"{a} − {b} corrected = {number(c.difference, 2)} {interval(c.ci, 2)}: not used to "
            f"decide on {style.code(c.metric or '')} (see the caveats).")


@words("ppi_too_few_shared")
def too_few_shared(n: Note, style: Style, short: bool) -> str:
    a, b = n.runs
    k = n.counts
    said = (f"{a} vs {b} on {style.code(k['dimension'])}: too few shared labels "
            f"({k['shared']} of at least {k['min_shared']}")
    if short:
        return said + "): no corrected decision"
    return (said + f", {style.code('report.ppi.min_shared')}): no corrected decision "
            f"({style.code(LABEL_MORE)}).")


@words("ppi_zero_width")
def zero_width(n: Note, style: Style, short: bool) -> str:
    a, b = n.runs
    said = (f"{a} vs {b} on {style.code(n.counts['dimension'])}: the corrected interval has "
            "zero width")
    if short:
        return said + ": not a decision"
    return (said + " (people's and the judge's differences agree exactly on the "
            f"{n.counts['shared']} shared labels), which no sample supports: not a decision.")


@words("ppi_no_estimate")
def no_estimate(n: Note, style: Style, short: bool) -> str:
    (run,) = n.runs
    k = n.counts
    s = "s" * (k["labelled"] != 1)
    return (f"No corrected {style.code(k['dimension'])} for {run} ({k['labelled']} labelled "
            f"answer{s}; at least {k['min_labels']} and one unlabelled task needed).")


@words("ppi_all_labelled")
def all_labelled(n: Note, style: Style, short: bool) -> str:
    (run,) = n.runs
    k = n.counts
    said = (f"No correction of {style.code(k['dimension'])} for {run}: people labelled all "
            f"{k['labelled']} of its tasks, so their mean ({number(k['people_mean'], 2)}) is the "
            "estimate")
    return said if short else said + "; nothing is left for the judge to stand in for."


def answer(claims: Sequence[Claim], keys: Sequence[str], composed: str,
           style: Style | None = None) -> str:
    """The answer (``composed``, from every claim) and, when corrected differences decide
    it, the judge's raw answer beside them (composed without the corrected claims)."""
    if not any(c.kind == "corrected" and c.decisive and c.metric in keys for c in claims):
        return composed
    raw = answer_words(compose([c for c in claims if c.kind != "corrected"], keys),
                       *([style] if style else []))
    return f"{composed} The judge's raw scores: {raw}"
