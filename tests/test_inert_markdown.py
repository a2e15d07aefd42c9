"""Text from the data (run labels, labellers' names, answers) never becomes markup in what
MLflow renders as Markdown: the parent run's description and report.md."""

from __future__ import annotations

import re

from report import human_agreement
from report.overview import description
from report.report import ReportResult, build_report
from report.writers import markdown as writers_md
from report.writers.html import readable_markdown
from report.writers.markdown import inert
from tests.test_report import rec, row
from tracking.human_labels import HumanLabel

LABEL = '<img src="x" onerror="alert(1)">'


def test_inert_markdown_opens_no_tag_and_leaves_comparisons_and_code_as_they_read():
    assert inert(f"run {LABEL} wins") == 'run &lt;img src="x" onerror="alert(1)"> wins'
    assert inert("p < 0.05 and <!-- x --> </b>") == "p < 0.05 and &lt;!-- x --> &lt;/b>"
    assert inert(f"`{LABEL}` stays code") == f"`{LABEL}` stays code"
    # a label that closes its own code span is outside it, and escaped there
    assert "<img" not in inert(f"`x`{LABEL}``")


def test_a_run_label_and_a_labellers_name_are_never_markup_in_description_or_report():
    records = {name: [rec(f"t{k}", 4 - k % 2 * (name == "naive")) for k in range(8)]
               for name in (LABEL, "naive")}
    rows = [row(LABEL, system="arag"), row("naive")]
    text, data = build_report(rows, records, f"sweep {LABEL}", ["geval_coverage"])
    assert LABEL in text  # the data is kept, as text
    people = human_agreement.compare(
        [HumanLabel(f"t{k}", "naive", "geval_coverage", 3 + k % 2, who, "file l.jsonl")
         for k in range(8) for who in ("<b>ana</b>", "bo")], records,
        [{**r, "run_id": r["run"], "geval_coverage_parse_failures": 0.0} for r in rows])
    text += writers_md.section_of(human_agreement.claims(people))
    assert "<b>ana</b>" in text
    report_md = readable_markdown(text, set())
    assert "<img" not in report_md and "<b>" not in report_md
    result = ReportResult("p", "1", rows, records, "geval_coverage", "file:///r",
                          data["finding"], keys=["geval_coverage"], decided=data["decided"],
                          answer=data["answer"])
    note = description(result)
    outside_code = "".join(re.split(r"(`+[^`]*`+)", note)[::2])
    assert LABEL.replace("<", "&lt;") in note and "<img" not in outside_code


def test_report_html_has_every_section_of_report_md_after_the_baseline_adds_one():
    from report.writers.html import to_html, with_added_sections

    records = {name: [rec(f"t{k}", 4 - k % 2 * (name == "naive")) for k in range(8)]
               for name in ("arag", "naive")}
    text, _ = build_report([row("arag"), row("naive")], records, "t", ["geval_coverage"])
    page = to_html(text, "t")
    # the baseline comparison adds its section to report.md after the report is written
    md = readable_markdown(text, set()) + "\n\n## Against the baseline\n\n**No regression.**\n"
    headings = [line[3:] for line in md.splitlines() if line.startswith("## ")]
    assert "<h2>Against the baseline</h2>" not in page  # as today's report.html was
    synced = with_added_sections(md, page)
    for heading in headings:
        assert f"<h2>{heading.replace('`', '')}</h2>" in synced.replace("<code>", "").replace(
            "</code>", ""), heading
    assert synced.count("<h2>") == len(headings)  # nothing shown twice
    # a later comparison's section replaces the earlier one
    again = with_added_sections(md.replace("No regression", "Regressed"), synced)
    assert "Regressed" in again and "No regression" not in again
