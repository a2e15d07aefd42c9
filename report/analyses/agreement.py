"""Agreement with people: a meta-evaluation's signals against SummEdits' labels
(``report.meta_eval``), and people's labels of the answers against the judge
(``report.human_agreement``: "Agreement with your labels"). The report refuses unusable
labels before it is built (``report.report``); here they only leave the section out."""

from __future__ import annotations

from report.human_agreement import claims, compare
from report.meta_eval import signal_tables
from report.model import Analysis, Inputs, register_analysis
from tracking.human_labels import LabelsError


@register_analysis("meta_evaluation", 5)
def meta_evaluation(inputs: Inputs) -> Analysis:
    return Analysis(claims=signal_tables(inputs.finished))


@register_analysis("human_agreement", 80)
def human_agreement(inputs: Inputs) -> Analysis:
    if not inputs.labels:
        return Analysis()
    try:
        found = compare(inputs.labels, inputs.records, inputs.rows, warn=False)
    except LabelsError:
        return Analysis()
    return Analysis(claims=claims(found))
