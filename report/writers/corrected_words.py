"""Words for "The judge corrected by your labels" (``report/analyses/corrected.py``): each
run's corrected mean, each pair's corrected difference, and why a comparison decides
nothing (too few shared labels, a zero-width interval, every task labelled)."""

from __future__ import annotations

from collections.abc import Sequence

from report.answer import compose
from report.model import Claim
from report.writers.cells import Style, interval, number
from report.writers.words import Sentences, sentences, words
from report.writers.words import answer as answer_words

sentences(
    ppi_means=Sentences("{code[dimension]} ({scale}): each run's judged {unit} over all its tasks, "
                        "corrected by people's labels (PPI++, 95% CI including the judge's "
                        "error); *moved by* is corrected minus judged."),
    ppi_too_few_shared=Sentences(
        "{a} vs {b} on {code[dimension]}: too few shared labels ({shared} of at least "
        "{min_shared}", short="): no corrected decision",
        full=", {code[report.ppi.min_shared]}): no corrected decision "
        "({code[label more: python -m report label-sample --for ppi]})."),
    ppi_zero_width=Sentences(
        "{a} vs {b} on {code[dimension]}: the corrected interval has zero width",
        short=": not a decision", full=" (people's and the judge's differences agree exactly "
        "on the {shared} shared labels), which no sample supports: not a decision."),
    ppi_all_labelled=Sentences(
        "No correction of {code[dimension]} for {a}: people labelled all {labelled} of its "
        "tasks, so their mean ({people_mean:,.2f}) is the estimate",
        full="; nothing is left for the judge to stand in for."),
    ppi_no_estimate=Sentences(
        "No corrected {code[dimension]} for {a} ({labelled} labelled answer{s}; at least "
        "{min_labels} and one unlabelled task needed).",
        parts=lambda n, _: {"s": "s" * (n.counts["labelled"] != 1)}),
)


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


def answer(claims: Sequence[Claim], keys: Sequence[str], composed: str,
           style: Style | None = None) -> str:
    """The answer (``composed``, from every claim) and, when corrected differences decide
    it, the judge's raw answer beside them (composed without the corrected claims)."""
    if not any(c.kind == "corrected" and c.decisive and c.metric in keys for c in claims):
        return composed
    raw = answer_words(compose([c for c in claims if c.kind != "corrected"], keys),
                       *([style] if style else []))
    return f"{composed} The judge's raw scores: {raw}"
