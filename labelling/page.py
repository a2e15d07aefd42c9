"""The labelling page of ``python -m report label-sample --html``: each sampled answer once,
with every dimension to label, each dimension's rubric and what it is judged against (the
reference; the text of the context the system read, source by source, from
``labelling.sources``; a link to the answer's trace), all of it as escaped text; it saves
the filled-in labels file under a name of its own (``<template>.labelled.jsonl``). The
judge's scores are not on it: a labeller who sees them anchors on them."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from arag.records import answer_key
from labelling.sources import Read
from tracking.human_labels import FIVE_POINT, YES_NO

Picked = tuple[str, dict[str, Any]]  # (run label, record)


def _safe_json(value: Any) -> str:
    """JSON to embed in a <script> block: no character of the data can end the block or
    start markup (``<``, ``>`` and ``&`` are written as JSON escapes)."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# the page's own code: it only gathers the choices made. Every text of the data is in the
# page as escaped HTML (html.escape), so nothing from the data runs as markup or script
_PAGE_SCRIPT = """
const scale = JSON.parse(document.getElementById('scale').textContent);
const saveAs = JSON.parse(document.getElementById('save-as').textContent);
document.getElementById('save').addEventListener('click', () => {
  const labeller = document.getElementById('labeller').value.trim();
  if (!labeller) { alert('Write your name or initials first.'); return; }
  const lines = [...document.querySelectorAll('select')].filter(s => s.value !== '')
    .map(s => JSON.stringify({task_id: s.dataset.task, system: s.dataset.system,
      dimension: s.dataset.dimension, scale: scale, score: Number(s.value),
      labeller: labeller}));
  const blob = new Blob([lines.join('\\n') + '\\n'], {type: 'application/x-ndjson'});
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob); link.download = saveAs; link.click();
});
"""
SCALES = {FIVE_POINT: [[str(s), str(s)] for s in range(1, 6)],
          YES_NO: [["1", "1 consistent"], ["0", "0 inconsistent"]]}
Traces = dict[tuple[str, str], str]  # (run label, task id) -> the trace's address in the UI
# a source longer than this (a stuffed 10-K) is cut at a line end, saying how much was cut
MAX_SOURCE_CHARS = 20_000
AGAINST = {"context": "the context the system read (above)",
           "reference": "the reference summary (above)",
           "both": "the reference summary and the context the system read (above)"}


def rubrics(dimensions: list[str]) -> dict[str, dict[str, str]]:
    """Each dimension's rubric as the judge was given it, and what it is judged against
    (``context``, ``reference`` or ``both``); a dimension of the team's own says where it is
    defined."""
    from metrics.geval import DEFAULT_DIMENSIONS

    known = {f"geval_{d.name}": {"definition": d.definition, "against": d.against.value}
             for d in DEFAULT_DIMENSIONS}
    return {d: known.get(d, {"definition": f"{d}: as defined in this sweep's "
                                           "metrics.geval.dimensions (its run parameters)",
                             "against": "context"}) for d in dimensions}


def page_answers(picked: list[Picked], dimensions: list[str], traces: Traces | None = None,
                 read: dict[tuple[str, str], Read] | None = None) -> list[dict[str, Any]]:
    """Each sampled answer once, with every dimension to label, the reference and the
    context it read (``read``: by run label and answer key, from ``labelling.sources``)."""
    out = []
    for run, rec in picked:
        key = answer_key(rec["id"], int(rec.get("repeat") or 0))
        ids = rec.get("context_chunk_ids") or []
        context = (read or {}).get((run, key)) or Read(notes=[
            "the text the system read was not read back; the chunks it read: "
            + (f"{len(ids)}, {', '.join(ids)}" if ids else "not recorded")
            + " (the trace shows them)"])
        out.append({"task_id": rec["id"], "system": run, "question": rec.get("question"),
                    "answer": rec.get("predicted"), "dimensions": dimensions,
                    "reference": rec.get("reference"), "context": context,
                    "trace": (traces or {}).get((run, rec["id"]))})
    return out


def labelled_name(template: str) -> str:
    """The name the page saves under: beside the template's, never the same
    (``labels.jsonl`` -> ``labels.labelled.jsonl``)."""
    path = Path(template)
    return f"{path.stem.removesuffix('.labelled')}.labelled{path.suffix or '.jsonl'}"


def shown_text(text: str, limit: int = MAX_SOURCE_CHARS) -> str:
    """``text`` escaped in a <pre>; past ``limit`` characters it is cut at a line end and
    the page says how much of it is not shown."""
    if len(text) <= limit:
        return f"<pre>{html.escape(text)}</pre>"
    cut = text.rfind("\n", 0, limit)
    cut = cut if cut > limit // 2 else limit
    rest = text[cut:]
    return (f"<pre>{html.escape(text[:cut])}</pre><p class='cut'>Cut here: "
            f"{len(rest.split()):,} more words ({len(rest):,} characters) of this source are "
            "not shown on this page (the trace and the document hold them).</p>")


def _source(name: str, text: str) -> str:
    return (f"<details><summary>{html.escape(name)} ({len(text.split()):,} words)</summary>"
            f"{shown_text(text)}</details>")


def _sources_html(item: dict[str, Any], against: set[str]) -> str:
    """The reference (for dimensions judged against it) and the context read (for those
    judged against the context), each source in a block of its own."""
    out = []
    if against & {"reference", "both"}:
        reference = item["reference"]
        out.append("<h4>The reference summary</h4>" + (
            f"<details open><summary>reference ({len(reference.split()):,} words)</summary>"
            f"{shown_text(reference)}</details>" if reference
            else "<p class='note'>This task has no reference summary.</p>"))
    if against & {"context", "both"}:
        read: Read = item["context"]
        out.append(f"<h4>The context the system read: {len(read.sources)} source(s)</h4>"
                   + "".join(f"<p class='note'>{html.escape(n)}</p>" for n in read.notes)
                   + "".join(_source(name, text) for name, text in read.sources))
    return "".join(out)


def _answer_html(k: int, item: dict[str, Any], rubric: dict[str, dict[str, str]],
                 scale: str) -> str:
    """One answer: the question, the answer, what it is judged against, then each
    dimension's rubric and its choice."""
    esc = html.escape
    trace = (f"<p><a href='{esc(item['trace'])}' target='_blank' rel='noopener'>open the "
             "trace (every step the system took)</a></p>" if item["trace"] else "")
    options = "<option value=''>—</option>" + "".join(
        f"<option value='{esc(v)}'>{esc(text)}</option>" for v, text in SCALES[scale])
    dims = "".join(
        f"<div class='dimension'><h4>{esc(d)}</h4><p class='rubric'>"
        f"{esc(rubric[d]['definition'])}</p><p class='muted'>Judge it against "
        f"{AGAINST.get(rubric[d]['against'], AGAINST['context'])}.</p><label>score <select "
        f"data-task='{esc(item['task_id'])}' data-system='{esc(item['system'])}' "
        f"data-dimension='{esc(d)}'>{options}</select></label></div>"
        for d in item["dimensions"])
    return (f"<section><h3>{k}. {esc(item['system'])} / {esc(item['task_id'])}</h3>{trace}"
            f"<p>{esc(item['question'] or '')}</p><h4>Answer</h4>"
            f"<pre class='answer'>{esc(item['answer'] or '')}</pre>"
            f"{_sources_html(item, {rubric[d]['against'] for d in item['dimensions']})}"
            f"{dims}</section>")


def page(answers: list[dict[str, Any]], title: str, scale: str, save_as: str) -> str:
    """A self-contained HTML page that shows each answer once, with what it is judged
    against and each dimension's rubric, and saves the labels as ``save_as``."""
    style = ("body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto;padding:0 1em}"
             "pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}section{margin:1.5em 0;"
             "border-top:1px solid #ccc}.rubric{font-style:italic}.muted,.note{color:#666}"
             "details pre{max-height:24em;overflow:auto}.cut{color:#a40}"
             ".answer{background:#eef4ff}")
    rubric = rubrics(sorted({d for a in answers for d in a["dimensions"]}))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            "<p>Score each answer on each dimension by its rubric, against what it names: the "
            "reference summary, or the context the system read (click a source to open it). "
            "Then save: the file "
            f"(<code>{html.escape(save_as)}</code>) is <code>report.human_labels</code>.</p>"
            "<label>Labeller <input id='labeller'></label> <button id='save'>Save "
            f"{html.escape(save_as)}</button>"
            + "".join(_answer_html(k, a, rubric, scale) for k, a in enumerate(answers, 1))
            + "<script type='application/json' id='scale'>"
            f"{_safe_json(scale)}</script>"
            f"<script type='application/json' id='save-as'>{_safe_json(save_as)}</script>"
            f"<script>{_PAGE_SCRIPT}</script></body></html>")
