"""``compare.html``: every task of a sweep, its runs side by side (a run's repeats side by
side in its cell), each answer with its scores, error, the chunks it read with the gold ones
marked, its path, causes and judge's reasoning, and a link to its MLflow trace. The rows sort
by the difference between two chosen runs on a chosen score (a task's mean over repeats) and
filter by a document feature (a numeric one by its quartile bin, as ``report.slice_by`` bins
it). Self-contained (inline CSS and JS, nothing fetched), so it works in MLflow's sandboxed
artifact viewer and from a downloaded file alike."""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path
from typing import Any

from arag.datasets.features import known_features
from arag.records import answer_key
from metrics import declared_metrics
from metrics.slices import feature_bins
from report import policy
from report.analyses import attribution, trajectory
from report.verdict import per_task
from tracking.paths import ui_address
from tracking.traces import trace_ids as trace_ids  # its callers' name for it
from tracking.traces import trace_route

log = logging.getLogger(__name__)

# the page's own CSS and script, inlined into it (nothing is fetched)
_STYLE, _SCRIPT = (Path(__file__).with_name(f"compare.{kind}").read_text(encoding="utf-8")
                   for kind in ("css", "js"))


def score_fields(records: dict[str, list[dict[str, Any]]], key: str) -> list[str]:
    """The comparison metric, then every declared report metric some record has."""
    present = {k for recs in records.values() for r in recs for k, v in r.items()
               if v is not None}
    names = [key] + [m.name for m in declared_metrics() if m.report and m.name != key]
    return [n for n in dict.fromkeys(names) if n in present]


def _chunks(record: dict[str, Any]) -> str:
    read = record.get("context_chunk_ids") or []
    if not read:
        return ""
    gold = record.get("gold_chunk_ids")
    gold_set = set(gold) if isinstance(gold, list) else None
    legend = (f"{sum(c in gold_set for c in read)} of {len(read)} gold (green)"
              if gold_set is not None else "gold not recorded")
    return (f"<details><summary>{len(read)} chunks read: {legend}</summary>"
            f"{_spans(read, gold_set or set())}</details>")


def _spans(chunks: list[str], gold: set[str], numbered: bool = False) -> str:
    """Chunk ids as marks, the gold ones marked (``numbered``: with their rank)."""
    return "".join(f"<span class='chunk{' gold' if c in gold else ''}'>"
                   f"{f'{i}. ' if numbered else ''}{html.escape(c)}</span>"
                   for i, c in enumerate(chunks, start=1))


def _json(value: Any) -> str:
    """JSON safe inside a <script> element."""
    return json.dumps(value).replace("</", "<\\/")


def _number(value: float) -> str:
    return f"{value:.0f}" if float(value).is_integer() else f"{value:.3f}"


def _cell(answers: list[dict[str, Any]], fields: list[str], routes: list[str | None]) -> str:
    """A run's cell: its one answer, or its repeats side by side."""
    if not answers:
        return "<td class='muted'>not run</td>"
    if len(answers) == 1:
        return f"<td>{_answer(answers[0], fields, routes[0])}</td>"
    shown = "".join(f"<div class='repeat'><div class='muted'>repeat {a.get('repeat') or 0}"
                    f"</div>{_answer(a, fields, route)}</div>"
                    for a, route in zip(answers, routes, strict=True))
    return f"<td><div class='repeats'>{shown}</div></td>"


def _answer(record: dict[str, Any], fields: list[str], route: str | None) -> str:
    if record.get("error"):
        out = (f"<div class='err'>error [{html.escape(str(record.get('error_kind') or 'error'))}]"
               f": {html.escape(str(record['error']))}</div>")
    elif record.get("skipped"):
        out = f"<div class='muted'>skipped: {html.escape(str(record.get('skip_reason')))}</div>"
    else:
        out = f"<div class='out'>{html.escape(record.get('predicted') or '')}</div>"
    scores = ", ".join(f"{f} {_number(record[f])}" for f in fields if record.get(f) is not None)
    codes = record.get("error_codes")
    if codes:
        scores += f"; error codes {', '.join(codes)}"
    if record.get("cached_calls"):
        scores += f"; {record['cached_calls']} call(s) from the response cache"
    link = (f" <a class='trace' href='{ui_address()}/{route}' data-route='/{route}' "
            "target='_blank' rel='noopener'>trace</a>" if route else "")
    return (f"{out}<div class='scores'>{html.escape(scores)}{link}</div>{_chunks(record)}"
            f"{details(record)}")


def page(finished: list[dict[str, Any]], records: dict[str, list[dict[str, Any]]], key: str,
         traces: dict[str, dict[str, str]], experiment_id: str, title: str,
         judged: dict[str, str] | None = None, header: str = "") -> str:
    """The page: the report's answer and headline table (``header``, HTML rendered from the
    report's model), a header row of runs, then one row per task (in the first run's
    order); ``judged``: per task, the pairwise judge's verdicts as HTML (under the task)."""
    by_run = [_answers_by_task(records.get(run["run_id"], [])) for run in finished]
    task_ids = list(dict.fromkeys(t for recs in by_run for t in recs))
    fields = score_fields(records, key)
    head = "".join(f"<th>{html.escape(r['run'])}" + (
        f"<br><span class='muted'>{html.escape(r['system'])}</span>"
        if r["system"] != r["run"] else "") + "</th>" for r in finished)
    features = task_feature_labels(by_run, task_ids)
    rows = [_row(tid, finished, by_run, fields, traces, experiment_id, (judged or {}).get(tid, ""),
                 {f: labels.get(tid) for f, labels in features.items()}) for tid in task_ids]
    choices = "".join(f"<option>{html.escape(f)}</option>" for f in features)
    values = _json({f: list(dict.fromkeys(labels.values())) for f, labels in features.items()})
    options = "".join(f"<option value='{i}'>{html.escape(r['run'])}</option>"
                      for i, r in enumerate(finished))
    second = options.replace("value='1'>", "value='1' selected>", 1)
    metrics = "".join(f"<option>{html.escape(f)}</option>" for f in fields)
    directions = _json({f: policy.higher_is_better(f) for f in fields})
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}: tasks"
        f"</title><style>{_STYLE}</style></head><body><h1>{html.escape(title)}: every task, "
        f"side by side</h1>{header}<p>{len(task_ids)} tasks, {len(finished)} runs. Sorted by the "
        "difference between two runs, the tasks where the first does best against the second "
        "first (by the metric's direction; tasks where either has no score last).</p>"
        f"<div class='controls'>sort by <select id='metric'>{metrics}</select> of "
        f"<select id='runA'>{options}</select> minus <select id='runB'>{second}</select>"
        f" &nbsp; show tasks with <select id='feature'><option value=''>(every task)</option>"
        f"{choices}</select> = <select id='featureValue'></select> "
        f"(<span id='shown'>{len(task_ids)}</span> shown)</div>"
        f"<div class='scroll'><table><thead><tr><th class='q'>task</th><th>difference</th>"
        f"{head}</tr></thead><tbody id='rows'>{''.join(rows)}</tbody></table></div>"
        f"<script type='application/json' id='directions'>{directions}</script>"
        f"<script type='application/json' id='features'>{values}</script>"
        f"<script>{_SCRIPT}</script></body></html>")


def task_feature_labels(by_run: list[dict[str, list[dict[str, Any]]]], task_ids: list[str]
                        ) -> dict[str, dict[str, str]]:
    """Feature -> task id -> the label the filter shows: a categorical value as it is, a
    numeric one's quartile bin (``metrics.slices.feature_bins``); only features some task
    carries."""
    first = {t: next(recs[t][0] for recs in by_run if t in recs) for t in task_ids}
    out: dict[str, dict[str, str]] = {}
    for feature in known_features():
        values = {t: r[feature] for t, r in first.items() if r.get(feature) is not None}
        if values:
            out[feature] = {t: b.label if b.lo is not None else str(values[t])
                            for b in feature_bins(values) for t in b.ids}
    return out


def _answers_by_task(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Task id -> its answers in repeat order, tasks in first-seen order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["id"], []).append(r)
    return {t: sorted(answers, key=lambda a: a.get("repeat") or 0) for t, answers in out.items()}


def _row(task_id: str, finished: list[dict[str, Any]],
         by_run: list[dict[str, list[dict[str, Any]]]], fields: list[str],
         traces: dict[str, dict[str, str]], experiment_id: str, judged: str = "",
         features: dict[str, str | None] | None = None) -> str:
    first = next(recs[task_id][0] for recs in by_run if task_id in recs)
    # a task's score for sorting: its mean over repeats (verdict.per_task)
    means = {i: per_task(recs[task_id])[task_id] for i, recs in enumerate(by_run) if task_id in recs}
    scores = {i: {f: m.get(f) for f in fields} for i, m in means.items()}
    cells = []
    for run, recs in zip(finished, by_run, strict=True):
        answers = recs.get(task_id, [])
        found = [traces.get(run["run_id"], {}).get(answer_key(task_id, a.get("repeat") or 0))
                 for a in answers]
        routes = [trace_route(experiment_id, t) if t else None for t in found]
        cells.append(_cell(answers, fields, routes))
    reference = html.escape(first.get("reference") or "")
    return (f"<tr data-scores='{html.escape(json.dumps(scores))}' "
            f"data-features='{html.escape(json.dumps(features or {}))}'><td class='q'><b>"
            f"{html.escape(task_id)}</b><br>{html.escape(first.get('question') or '')}"
            f"<details><summary>reference</summary><div class='out'>{reference}</div></details>"
            f"{judged}</td><td class='diff'></td>{''.join(cells)}</tr>")


def details(record: dict[str, Any]) -> str:
    """What a run's cell shows below its chunks: the sections its chunks touched, where its
    ranking put the gold, and the judge's reasoning per G-Eval dimension (folded)."""
    return (_section_strip(record) + _ranking(record) + _path(record)
            + attribution.compare_details(record) + _reasoning(record))


def _path(record: dict[str, Any]) -> str:
    cells = trajectory.path_cells(record)
    if not cells:
        return ""
    shown = " · ".join(
        f"{html.escape(label)} " + (html.escape(", ".join(value) or "none") if isinstance(value, list)
                                    else _number(value) if value is not None
                                    else f"<span title='{html.escape(why or '')}'>unknown</span>")
        for label, value, why in cells)
    return f"<div class='path'><span class='muted'>path:</span> {shown}</div>"


_TOUCHED = "background:#2e7d32;color:#fff"
_MISSED = "background:#eee;color:#777"


def _section_strip(record: dict[str, Any]) -> str:
    """One box per section of the task's documents, filled where a chunk the system used
    lies (``sections_touched``), with the share touched."""
    sections = record.get("sections_touched")
    if not sections:
        return ""
    boxes = "".join(
        f"<span class='section' title='{html.escape(s['doc_id'])} lines {s['first_line']}-"
        f"{s['last_line']}: {'touched' if s['touched'] else 'not touched'}' style='display:"
        f"inline-block;margin:1px;padding:1px 4px;font-size:11px;"
        f"{_TOUCHED if s['touched'] else _MISSED}'>{html.escape(s['section'])}</span>"
        for s in sections)
    share = record.get("section_coverage")
    label = f"sections touched {share:.0%}" if share is not None else "sections"
    return f"<div class='sections'><span class='muted'>{label}:</span> {boxes}</div>"


def _reasoning(record: dict[str, Any]) -> str:
    """The judge's reasoning for each G-Eval dimension the record was judged on."""
    dims = [k[len("geval_"):-len("_reasoning")] for k, v in record.items()
            if k.startswith("geval_") and k.endswith("_reasoning") and v]
    return "".join(
        f"<details class='reasoning'><summary>judge: {html.escape(dim)} "
        f"{'no score' if (score := record.get(f'geval_{dim}')) is None else _number(score)}"
        f"</summary><div class='out'>{html.escape(str(record[f'geval_{dim}_reasoning']))}"
        "</div></details>" for dim in dims)


def _ranking(record: dict[str, Any]) -> str:
    """Where the system's ranking holds gold (``gold_hit_ranks``) and its top chunks."""
    top = record.get("top_hit_ids")
    if not top:
        return ""
    ranks = record.get("gold_hit_ranks")
    where = ("gold not recorded" if ranks is None else "no gold in the ranking" if not ranks
             else "gold at rank " + ", ".join(str(r) for r in ranks))
    return (f"<details class='ranking'><summary>ranking: {html.escape(where)}</summary>"
            f"{_spans(top, set(record.get('gold_chunk_ids') or []), numbered=True)}</details>")
