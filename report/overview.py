"""What a person sees first on a sweep's parent run in the MLflow UI: its description.

MLflow shows a run's description (the ``mlflow.note.content`` tag) at the top of its
Overview, folded to about three lines, so it opens with the one-sentence answer, alone in
its paragraph, then the caveats, the headline table (the console's rows and columns), the
verdict's details and where the rest is. A rebuilt report writes it again."""

from __future__ import annotations

from typing import Any

from report.console import NOTE_TAG  # the run description MLflow's UI shows and edits
from report.result import ReportResult
from report.writers.markdown import inert

MAX_NOTE = 60_000  # well under MLflow's tag value limit
# the description's section on the sweep's latest baseline comparison (report.baseline,
# python -m report compare --record), and every section other commands append at its end
BASELINE_HEADING = "**Against the baseline**"
APPENDED = (BASELINE_HEADING,)


def description(result: ReportResult) -> str:
    """The parent run's description: the answer, caveats, the headline table (the same rows
    and columns as the console's and compare.html's), the verdict's details, the analyses'
    key claims, where to look."""
    from report.writers.markdown import (
        FAMILY_KINDS,
        banner,
        headline_table,
        key_finding,
        trust_paragraphs,
    )
    from report.writers.words import say

    keys = result.keys or [result.key]
    found = [say(c) for c in result.claims if c.key and c.kind not in FAMILY_KINDS | {"plot"}]
    parts = [f"**{result.answer}**" if result.answer else "", banner(result.caveat_notes),
             headline_table(result.headline, result.key),
             trust_paragraphs(result.trust),
             f"**Verdict** (decided on {', '.join(f'`{k}`' for k in keys)}): "
             + key_finding(result.claims, keys, result.headline) if result.finding else "",
             "\n\n".join(found),
             "Artifacts: `report.html` (the full report, plots inline), `compare.html` (every "
             "task, the runs side by side, links to each trace), `plots/comparison.png` (every "
             "system in one figure), `comparison_table.json`. The child runs (expand this run "
             "in the Runs list) hold each system's metrics and one trace per task."]
    text = inert("\n\n".join(p.strip() for p in parts if p))  # data is never markup
    return text if len(text) <= MAX_NOTE else text[:MAX_NOTE - 1] + "…"


def publish(client: Any, result: ReportResult) -> None:
    """Set the description on the run the report was logged to: written anew from the
    report, so the two never disagree; the sections other commands appended to it
    (``APPENDED``: a baseline comparison) stay at its end."""
    old = client.get_run(result.run_id).data.tags.get(NOTE_TAG) or ""
    starts = [old.index(heading) for heading in APPENDED if heading in old]
    kept = old[min(starts):].strip() if starts else ""
    text = f"{description(result)}\n\n{kept}" if kept else description(result)
    client.set_tag(result.run_id, NOTE_TAG,
                   text if len(text) <= MAX_NOTE else text[:MAX_NOTE - 1] + "…")
