"""``python -m report label-sample <sweep>``: the answers of a judged sweep for people to
label, so the report can hold the judge against them (``report.human_labels``).

The sample is stratified by run and by the judge's score on the first dimension: answers
are drawn in turn from each (run, judge score) group, at random within a group (seeded),
so every run and every score the judge gave is labelled, the rare low scores included.
It is written as a labels-file template (one JSON line per answer and dimension, ``score``
and ``labeller`` null, the question and the answer beside them) and, with ``--html``, as a
self-contained page that shows each answer and saves the filled-in labels file. The
judge's scores are in neither: a labeller who sees them anchors on them.
"""

from __future__ import annotations

import argparse
import html
import json
import random
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

from tracking.human_labels import FIVE_POINT, YES_NO
from tracking.paths import resolve_tracking_uri
from tracking.runs import TrackingError
from tracking.sweeps import child_runs, find_sweep, run_records, sweep_info

# 60 answers: 20 per run of a three-system sweep; on 60 pairs a moderate weighted kappa has a
# 95% CI about +-0.15 wide (yes/no: +-0.2), enough to tell "fair" from "good" (simulated)
DEFAULT_SIZE = 60
DEFAULT_DIMENSIONS = ("geval_faithfulness", "geval_coverage")
Picked = tuple[str, dict[str, Any]]  # (run label, record)


def stratified_sample(records: dict[str, list[dict[str, Any]]], dimension: str, size: int,
                      seed: int = 0) -> list[Picked]:
    """Up to ``size`` answers (run label -> its records), in turn from each (run, judge
    score) group; answers with an error or without a judge score are not drawn."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = defaultdict(list)
    for run, recs in sorted(records.items()):
        for rec in recs:
            score = rec.get(dimension)
            if rec.get("predicted") and isinstance(score, int | float) and not rec.get("error") \
                    and int(rec.get("repeat") or 0) == 0:
                groups[(run, round(float(score)))].append(rec)
    rng = random.Random(seed)
    queues = []
    for key in sorted(groups):
        group = sorted(groups[key], key=lambda r: r["id"])
        rng.shuffle(group)
        queues.append((key[0], group))
    picked: list[Picked] = []
    while len(picked) < size and any(group for _, group in queues):
        for run, group in queues:
            if group and len(picked) < size:
                picked.append((run, group.pop()))
    return picked


def template_lines(picked: list[Picked], dimensions: list[str], scale: str = FIVE_POINT
                   ) -> list[dict[str, Any]]:
    """One line per answer and dimension, on ``scale``, ``score`` and ``labeller`` null."""
    return [{"task_id": rec["id"], "system": run, "dimension": dim, "scale": scale,
             "score": None, "labeller": None, "question": rec.get("question"),
             "answer": rec.get("predicted")}
            for run, rec in picked for dim in dimensions]


def _safe_json(value: Any) -> str:
    """JSON to embed in a <script> block: no character of the data can end the block or
    start markup (``<``, ``>`` and ``&`` are written as JSON escapes)."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


# the page's own code: it shows the data as text (textContent), never as markup
_PAGE_SCRIPT = """
const items = JSON.parse(document.getElementById('items').textContent);
const scale = JSON.parse(document.getElementById('scale').textContent);
const list = document.getElementById('list');
items.forEach((item, k) => {
  const box = document.createElement('section');
  const head = document.createElement('h3');
  head.textContent = (k + 1) + '. ' + item.system + ' / ' + item.task_id + ' — ' + item.dimension;
  const question = document.createElement('p');
  question.textContent = item.question || '';
  const answer = document.createElement('pre');
  answer.textContent = item.answer || '';
  const pick = document.createElement('select');
  pick.dataset.k = k;
  [['', '—'], ...scale].forEach(([value, text]) => {
    const option = document.createElement('option');
    option.value = value; option.textContent = text; pick.appendChild(option);
  });
  box.append(head, question, answer, pick);
  list.appendChild(box);
});
document.getElementById('save').addEventListener('click', () => {
  const labeller = document.getElementById('labeller').value.trim();
  if (!labeller) { alert('Write your name or initials first.'); return; }
  const lines = [...document.querySelectorAll('select')].filter(s => s.value !== '')
    .map(s => { const item = items[Number(s.dataset.k)];
      return JSON.stringify({task_id: item.task_id, system: item.system,
        dimension: item.dimension, scale: item.scale, score: Number(s.value),
        labeller: labeller}); });
  const blob = new Blob([lines.join('\\n') + '\\n'], {type: 'application/x-ndjson'});
  const link = document.createElement('a');
  link.href = URL.createObjectURL(blob); link.download = 'labels.jsonl'; link.click();
});
"""
SCALES = {FIVE_POINT: [[str(s), str(s)] for s in range(1, 6)],
          YES_NO: [["1", "1 consistent"], ["0", "0 inconsistent"]]}


def page(lines: list[dict[str, Any]], title: str, scale: str) -> str:
    """A self-contained HTML page that shows each answer and saves ``labels.jsonl``."""
    style = ("body{font-family:system-ui,sans-serif;max-width:900px;margin:2em auto;padding:0 1em}"
             "pre{background:#f6f6f6;padding:.6em;white-space:pre-wrap}section{margin:1.5em 0}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body><h1>{html.escape(title)}</h1>"
            "<p>Score each answer against its source (open the task's trace in the MLflow "
            "UI to read what the system read), then save: the file is "
            "<code>report.human_labels</code>.</p>"
            "<label>Labeller <input id='labeller'></label> <button id='save'>Save "
            "labels.jsonl</button><div id='list'></div>"
            f"<script type='application/json' id='items'>{_safe_json(lines)}</script>"
            f"<script type='application/json' id='scale'>{_safe_json(SCALES[scale])}</script>"
            f"<script>{_PAGE_SCRIPT}</script></body></html>")


def sweep_records(client: Any, ref: str) -> tuple[str, dict[str, list[dict[str, Any]]]]:
    """The sweep's name and its finished runs' records by run label."""
    parent = find_sweep(client, ref, key="label-sample")
    runs = [r for r in child_runs(client, sweep_info(parent)) if r.info.status == "FINISHED"]
    with tempfile.TemporaryDirectory() as tmp:
        records = {(r.data.tags.get("run_label") or r.info.run_name):
                   run_records(client, r, Path(tmp) / r.info.run_id) for r in runs}
    return parent.info.run_name, records


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m report label-sample",
        description="Write a sample of a judged sweep's answers for people to label.")
    parser.add_argument("sweep", help="the sweep's parent run id, name or <tag>=<value>")
    parser.add_argument("--size", type=int, default=DEFAULT_SIZE,
                        help=f"answers to sample (default {DEFAULT_SIZE})")
    parser.add_argument("--dimension", action="append", dest="dimensions",
                        help="a judge score to label (repeatable; default: "
                             + ", ".join(DEFAULT_DIMENSIONS) + ")")
    parser.add_argument("--scale", choices=sorted(SCALES), default=FIVE_POINT,
                        help="the scale people label on (written on every line)")
    parser.add_argument("--out", default="labels.jsonl", help="the labels-file template")
    parser.add_argument("--html", default=None, help="also write this labelling page")
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    args = parser.parse_args(argv)
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=resolve_tracking_uri(args.tracking_uri))
    try:
        name, records = sweep_records(client, args.sweep)
    except TrackingError as exc:  # no such sweep: one line and the fix
        print(f"error: {exc}", file=sys.stderr)
        return 2
    dimensions = args.dimensions or list(DEFAULT_DIMENSIONS)
    picked = stratified_sample(records, dimensions[0], args.size)
    if not picked:
        print(f"error: no answer of {name!r} has a {dimensions[0]} score to stratify by. Fix: "
              "label a judged sweep (judge=...), or name a score it has with --dimension",
              file=sys.stderr)
        return 2
    lines = template_lines(picked, dimensions, args.scale)
    Path(args.out).write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    print(f"{len(picked)} answers x {len(dimensions)} dimension(s) -> {args.out}")
    if args.html:
        Path(args.html).write_text(page(lines, f"Label: {name}", args.scale), encoding="utf-8")
        print(f"labelling page -> {args.html}")
    return 0
