"""The words of the labels-corrected analysis's claims and notes
(``report/analyses/corrected``): one function per kind, taking the Claim or Note and
returning Markdown, and the verdict's answer when corrected differences decide."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from report.model import Claim, Note, Table

LABEL_MORE = "label more: `python -m report label-sample --for ppi`"


def _interval(mean: float, low: float, high: float) -> str:
    return f"{mean:.2f} [{low:.2f}, {high:.2f}]"


def ppi_means(claim: Claim) -> str:
    f = claim.figures
    return (f"`{f['dimension']}` ({f['scale']}): each run's judged {f['unit']} over all its "
            "tasks, corrected by people's labels (PPI++, 95% CI including the judge's error); "
            "*moved by* is corrected minus judged.")


def ppi_means_table(claim: Claim) -> Table | None:
    """The claim's table with its intervals written out (n/a: no corrected figure)."""
    if claim.table is None:
        return None
    rows = [[run, n, raw, "n/a" if ci is None else _interval(*ci),
             "n/a" if moved is None else moved] for run, n, raw, ci, moved in claim.table.rows]
    return Table(claim.table.header, rows)


def _difference(claim: Claim) -> str:
    a, b = claim.runs
    low, high = claim.ci or (0.0, 0.0)
    f = claim.figures
    if f["shown"]:
        says = f"{f['higher']} is higher on `{claim.metric}` after correction"
    else:
        says = f"after correction the CI includes 0: no difference on `{claim.metric}` is shown"
    return (f"{a} − {b} = {_interval(claim.difference or 0.0, low, high)} "
            f"({f['shared']} tasks labelled for both): {says}")


def corrected(claim: Claim) -> str:
    if claim.figures["decides"]:
        return f"**Corrected by your labels:** {_difference(claim)}."
    a, b = claim.runs
    low, high = claim.ci or (0.0, 0.0)
    return (f"{a} − {b} corrected = {_interval(claim.difference or 0.0, low, high)}: not used "
            f"to decide on `{claim.metric}` (see below).")


def ppi_too_few_shared(note: Note) -> str:
    a, b = note.runs
    c = note.counts
    return (f"{a} vs {b} on `{c['dimension']}`: too few shared labels ({c['shared']} of at "
            f"least {c['min_shared']}, `report.ppi.min_shared`): no corrected decision "
            f"({LABEL_MORE}).")


def ppi_zero_width(note: Note) -> str:
    a, b = note.runs
    return (f"{a} vs {b} on `{note.counts['dimension']}`: the corrected interval has zero "
            "width (people's and the judge's differences agree exactly on the shared labels), "
            "which no sample supports: not a decision.")


def ppi_no_estimate(note: Note) -> str:
    (run,) = note.runs
    c = note.counts
    s = "s" * (c["labelled"] != 1)
    return (f"No corrected `{c['dimension']}` for {run} ({c['labelled']} labelled answer{s}; "
            f"at least {c['min_labels']} and one unlabelled task needed).")


def ppi_all_labelled(note: Note) -> str:
    (run,) = note.runs
    c = note.counts
    return (f"No correction of `{c['dimension']}` for {run}: people labelled every one of its "
            f"{c['labelled']} tasks, so their mean ({c['people_mean']:.2f}) is the estimate; "
            "nothing is left for the judge to stand in for.")


def answer(claims: Sequence[Claim], keys: Sequence[str], raw: str) -> str:
    """The verdict's answer when people's labels decide: the corrected differences on the
    decision metrics that decide (enough shared labels, an interval of non-zero width), then
    the raw answer for comparison; ``raw`` unchanged when none decides."""
    deciding = [c for c in claims if c.kind == "corrected" and c.figures.get("decides")
                and c.metric in keys]
    if not deciding:
        return raw
    said = "; ".join(_difference(c) for c in deciding)
    return f"Corrected by your labels (PPI++): {said}. The judge's raw scores: {raw}"


WORDS: dict[str, Callable[[Any], str]] = {
    "ppi_means": ppi_means, "corrected": corrected, "ppi_too_few_shared": ppi_too_few_shared,
    "ppi_zero_width": ppi_zero_width, "ppi_no_estimate": ppi_no_estimate,
    "ppi_all_labelled": ppi_all_labelled}
TABLES: dict[str, Callable[[Claim], Table | None]] = {"ppi_means": ppi_means_table}
