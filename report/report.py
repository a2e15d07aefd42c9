"""The sweep report: the answer to "which system wins, where, at what cost", from numbers.

Written to the parent run when a multirun ends (``report.md``, ``report.html``, plots),
and rebuildable for any past sweep:

    python -m report <parent run id> [--tracking-uri sqlite:///mlruns/mlflow.db]

A rebuild records: it replaces the sweep's report.md and report.html and writes its MLflow
description again from them (``report.overview``), so the two answer alike.

Every sentence is assembled from measured values; no model writes any of it.
"""

from __future__ import annotations

import base64
import html
import json
import logging
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from metrics.geval import ERROR_CODES
from report import (
    analyses,
    compare,
    console,
    human_agreement,
    meta_eval,
    pairwise,
    plots,
    policy,
    spend,
    verdict,
)
from report.analyses import sequential
from report.answer import compose
from report.meta_eval import judge_caveats, judge_validation
from report.model import Analysis, Note
from report.policy import comparison_order, report_metrics
from report.result import ReportResult, compared
from report.sections import loops_recall
from report.verdict import (
    SMALL_N,
    TaskSets,
    common_rows,
    paired_section,
    task_set_section,
    task_sets,
)
from report.verdict import fmt as _fmt
from report.verdict import table as _table
from report.writers import corrected_words, words
from report.writers import markdown as writers_md
from tracking.human_labels import (
    HumanLabel,
    read_feedback_labels,
    read_labels_file,
)
from tracking.runs import RunTracker
from tracking.sweeps import child_runs, run_records
from tracking.traces import RunTraces

# report.md's section on the sweep's latest baseline comparison (report/baseline_report.py)
BASELINE_SECTION = "## Against the baseline"

log = logging.getLogger(__name__)


def _row(run: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict(run.data.metrics)
    tags = run.data.tags
    params = run.data.params
    # the short name (system and swept keys) a job run was given, without its data label
    row.update(run=tags.get("run_label") or run.info.run_name, run_id=run.info.run_id, status=run.info.status,
               system=tags.get("system", ""), agentic=tags.get("system_agentic") == "true",
               bound=tags.get("system_bound") == "true",
               retrieves=tags.get("system_retrieves") == "true",
               judge=params.get("judge.name"), judge_provider=params.get("judge.provider"),
               judge_samples=params.get("judge.samples", "1"),
               judge_panel=json.loads(params.get("judge.panel") or "[]"),
               model_provider=params.get("model.provider"), model=tags.get("model"),
               model_id=params.get("model.model_id"),
               synthetic=params.get("dataset.synthetic") == "True",
               max_loops=params.get("max_loops"),
               hyde=params.get("retrieval.hyde") == "True",
               tools=json.loads(params.get("system.tools") or "[]"),
               system_notes=json.loads(tags.get("system_notes") or "[]"),
               target_length=params.get("target_length"),
               **declared(tags), references=tags.get("dataset_references"),
               dataset=params.get("dataset.name"), dataset_digest=params.get("dataset_digest"),
               repeats=int(params.get("runner.repeats") or 1),
               temperature_sent=params.get("temperature_sent"),
               dataset_split=params.get("dataset.split"),
               dataset_domain=params.get("dataset.options.domain"),
               judge_model_id=params.get("judge.model_id"),
               judge_prompt_version=params.get("judge_prompt_version"),
               decide_on=json.loads(params.get("report.decide_on") or "[]"),
               sequential=sequential.settings_of(params))
    return row


def compared_records(client, parent: dict[str, Any]
                     ) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The sweep's compared runs (report rows) and their records by run id, as the report
    reads them (for what is judged across runs at the sweep's end: ``judge.pairwise``)."""
    runs = [r for r in child_runs(client, parent) if compared(_row(r))]
    with tempfile.TemporaryDirectory() as tmp:
        return [_row(r) for r in runs], {r.info.run_id: run_records(client, r, Path(tmp) / r.info.run_id)
                                         for r in runs}


def declared(tags: dict[str, str]) -> dict[str, Any]:
    """What a run declared beyond retrieving and being agentic (None: a run logged before
    it declared these): whether it reads whole documents, searches the index itself, calls
    its model here, and the model it labels (a pipeline outside the harness)."""
    flags = {flag: (None if tags.get(f"system_{flag}") is None
                    else tags[f"system_{flag}"] == "true")
             for flag in ("long_context", "searches", "calls_models")}
    return {**flags, "model_label": tags.get("model_label")}



def _get(row: dict[str, Any], key: str) -> Any:
    return row.get(key)


def _with_ci(row: dict[str, Any], key: str) -> str:
    mean = row.get(f"{key}_mean")
    if mean is None:
        return "–"
    lo, hi = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    return f"{mean:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None else f"{mean:.3f}"


def primary_metric(records_by_run: dict[str, list[dict[str, Any]]]) -> str:
    """The quality score to compare on: the first of ``comparison_order`` any run has."""
    order = comparison_order()
    records = [r for recs in records_by_run.values() for r in recs]
    for key in order:
        if any(r.get(key) is not None for r in records):
            return key
    # nothing scored: the first the records say why they lack, so the finding can say it
    why = [key for key in order if any(key in r.get("null_reasons", {}) for r in records)]
    return (why or order)[0]


def decide_on(rows: list[dict[str, Any]], records_by_run: dict[str, list[dict[str, Any]]],
              requested: list[str] | None = None) -> list[str]:
    """The metrics the verdict decides on: ``requested`` (the command's ``report.decide_on``;
    empty: the documented default, ``primary_metric``), or, when the command says nothing
    (None: a rebuild without ``--decide-on``), what the runs logged as ``report.decide_on``."""
    logged: list[str] = next((r["decide_on"] for r in rows if r.get("decide_on")), [])
    return policy.decision_metrics(logged if requested is None else requested,
                                   primary_metric(records_by_run))


REPORT_OPTIONS_TAG = "report_options"  # on a sweep run: the options its report was written with
# on a sweep run: those options as written (JSON), for a rebuild (``python -m report``)
REPORT_SETTINGS_TAG = "report_settings"
# on a run: the analysis artifacts its report wrote, each rewritten (empty) by the next
REPORT_ARTIFACTS_TAG = "report_artifacts"
# the baseline comparison's options: it runs again on every re-run, whatever the report holds
BASELINE_OPTIONS = ("baseline", "fail_on", "min_overlap", "baseline_map")
SHOWN_ONLY = ("console",)  # options of what is printed, not of what the report says


def options_key(options: Mapping[str, Any] | None, decide_on: list[str] | None,
                human_labels: str | None) -> str:
    """One value for the options a sweep report is written with (what it decides on, the
    labels file's content, the analyses' options), so a re-run with other options is told
    from one with the same."""
    import hashlib

    labels = Path(human_labels).expanduser() if human_labels else None
    chosen = {k: v for k, v in (options or {}).items()
              if k not in (*BASELINE_OPTIONS, *SHOWN_ONLY) and v not in (None, [], {}, "")}
    chosen.update(decide_on=list(decide_on or []), human_labels=hashlib.sha256(
        labels.read_bytes()).hexdigest() if labels and labels.is_file() else None)
    text = json.dumps(chosen, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def build_report(rows: list[dict[str, Any]], records_by_run: dict[str, list[dict[str, Any]]],
                 title: str, requested: list[str] | None = None,
                 judged_pairs: pairwise.PairwiseView | None = None,
                 options: Mapping[str, Any] | None = None,
                 labels: list[HumanLabel] | None = None,
                 more_caveats: Sequence[Note] = ()) -> tuple[str, dict[str, Any]]:
    """Markdown report and the plot data it refers to (``common_rows``: the compared runs'
    means over the common tasks, which the comparison plot draws; ``decided``: the verdict's
    family of tests; ``analysis``: what the registered analyses found, ``report/analyses.py``);
    ``judged_pairs``: the sweep's pairwise judging (``judge.pairwise``);
    ``requested``: ``report.decide_on``; ``options``: the sweep's ``report`` node;
    ``labels``: people's labels of the answers, for the analyses that read them;
    ``more_caveats``: caveats from outside the runs (``meta_eval.judge_caveats``)."""
    judged = policy.judged(rows)
    keys = decide_on(rows, records_by_run, requested)
    key = keys[0]
    finished = [r for r in rows if compared(r)]
    sets = task_sets(finished, records_by_run)
    decided = verdict.decisions(sets, keys)
    meta = meta_eval.meta_findings(finished) if meta_eval.is_meta_evaluation(finished) else []
    analysis = Analysis(claims=meta)
    analysis.extend(analyses.run_all(analyses.Inputs(rows, finished, records_by_run, sets, keys,
                                                     decided, dict(options or {}), labels or [],
                                                     judged_pairs)))
    # a meta-evaluation measures signals against people: its answer is that, not a verdict
    answers = compose(analysis.claims, keys)
    headline = verdict.headline_rows(sets, finished, key, keys[1:])
    answer = (meta_eval.meta_answer(finished) if meta else
              corrected_words.answer(analysis.claims, keys, words.answer(answers)))
    notes = [*analysis.notes, *more_caveats]
    out = [f"# {title}\n", f"**Answer:** {answer}\n", writers_md.banner(notes)]
    unfinished = [f"{r['run']}: {'; '.join(filter(None, [r['status'], verdict.stopped_words(r)]))}"
                  for r in rows if r["status"] != "FINISHED"]
    out.append(f"Runs: {len(rows) - len(unfinished)} finished"
               + (f", {len(unfinished)} not finished ({', '.join(unfinished)}; a run stopped "
                  "by the cost cap, KILLED, is compared on what it answered)" if unfinished
                  else "")
               + f". {_decided_on(keys)}\n")
    out.append(data_line(rows))
    out.append("## Headline\n\n" + writers_md.headline_table(headline, key))
    out.append("## Task sets\n\n" + task_set_section(sets))
    # the analyses' claims said in the key finding (the pairwise judge, a reversing panel
    # judge, document length); a meta-evaluation's key finding is its own section
    inline = [] if meta else [c for c in analysis.claims if c.section == "Key finding"
                              and c.kind not in writers_md.FAMILY_KINDS]
    finding = "" if meta else (writers_md.key_finding(analysis.claims, keys, headline)
                               + "".join(f"\n{words.say(c)}\n" for c in inline))
    if finding:
        out.append(f"## Key finding\n\n{finding}\n")
    out.append(writers_md.section_of([c for c in analysis.claims if c.kind not in
                                      writers_md.FAMILY_KINDS and all(c is not i for i in inline)]))
    shown = [m.name for m in report_metrics()]
    common = common_rows(sets, [*shown, "word_count", "loops"])
    out.append("## Quality\n")
    no_judge = "" if judged else "G-Eval columns: no judge (run with `judge=claude-haiku-4-5`)."
    out.append("Each metric on its own common task set: the tasks every run that has the metric "
               f"answered (means with bootstrap 95% CIs; n shown where it is not all "
               f"{len(sets.all_ids)} tasks). {no_judge}\n")
    out.append(_quality_table(common, sets))
    out.append("\n![comparison](plots/comparison.png)\n")
    out.append("Each run over all the tasks it answered (its own n; not comparable across runs "
               "whose task sets differ):\n")
    out.append(_quality_table(finished))
    out.append("\n## Cost and latency\n")
    out.append(_cost_table(sets, finished, judged)
               + spend.total_line(rows, *((judged_pairs.cost_usd, judged_pairs.cost_usd_earlier)
                                          if judged_pairs else ()))
               + latency_cache_note(finished))
    gap = plots.cost_plot_gap(finished, key)
    out.append(f"\n{gap}\n" if gap else "\n![cost vs quality](plots/cost_vs_quality.png)\n")
    out.append("\n## Error taxonomy\n")
    out.append(_taxonomy(finished) if judged else
               "No judge: the error taxonomy needs `judge=...`.\n")
    arag_points = _loop_section(out, common, records_by_run, key)
    if not meta:  # a meta-evaluation compares signals with people, not systems
        out.append("\n## Paired comparisons\n")
        out.append(paired_section(sets, keys, decided,
                                  any(a.descriptive_family for a in answers)))
    return "\n".join(out), {"arag_points": arag_points, "common_rows": common,
                            "keys": keys, "decided": decided, "finding": finding,
                            "answer": answer, "analysis": analysis, "answers": answers,
                            "headline": headline, "notes": notes}


def result_of(rows: list[dict[str, Any]], records: dict[str, list[dict[str, Any]]], title: str,
              requested: list[str] | None = None, options: Mapping[str, Any] | None = None,
              artifact_uri: str = "", run_id: str = "", experiment_id: str = "",
              **more: Any) -> ReportResult:
    """The report's model for these runs, as every writer reads it (no store needed)."""
    _, data = build_report(rows, records, title, requested, options=options, **more)
    return _result(data, rows, records, options, artifact_uri, run_id, experiment_id)


def _result(data: dict[str, Any], rows: list[dict[str, Any]],
            records: dict[str, list[dict[str, Any]]], options: Mapping[str, Any] | None,
            artifact_uri: str, run_id: str, experiment_id: str, notes: str = "",
            validation: str = "") -> ReportResult:
    analysis = data["analysis"]
    return ReportResult(run_id, experiment_id, rows, records, data["keys"][0], artifact_uri,
                        data["finding"], writers_md.banner(data["notes"]), notes,
                        judge_validation=validation, keys=data["keys"],
                        decided=data["decided"], answer=data["answer"],
                        claims=analysis.claims,
                        caveat_notes=data["notes"], headline=data["headline"],
                        answered=[c for a in data["answers"] for c in [*a.claims, *a.pending]],
                        console=getattr(console_mode := (options or {}).get("console"), "value",
                                        console_mode) or "summary")


def _decided_on(keys: list[str]) -> str:
    """How the report says what it decides on and why those metrics."""
    named = ", ".join(f"`{k}` ({verdict.direction(k)})" for k in keys)
    if len(keys) > 1:
        return f"The verdict decides on {named} (`report.decide_on`)."
    return (f"Comparison metric: {named}; set by `report.decide_on`, or by default the first "
            f"of {', '.join(f'`{m}`' for m in comparison_order())} any run has.")


def data_line(rows: list[dict[str, Any]]) -> str:
    """What the runs read: the dataset's digest and its size, one clause per distinct digest
    (runs on different data say so, by name)."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row.get("dataset_digest") or "", []).append(row)
    clauses = [_data_clause(digest, group, named=len(groups) > 1)
               for digest, group in groups.items()]
    if len(clauses) == 1:
        return f"Data: {clauses[0]}.\n"
    return ("Data: the runs read different data, so their figures are not of the same "
            "tasks: " + "; ".join(clauses) + ".\n")


def _data_clause(digest: str, rows: list[dict[str, Any]], named: bool) -> str:
    first = rows[0]
    asked = verdict.tasks_asked(first) if first.get("n_tasks") is not None else None
    size = f"{_count(first.get('n_documents'))} documents, {_count(asked)} tasks"
    repeats = int(first.get("repeats") or 1)
    if repeats > 1 and asked is not None:  # n_tasks counts answers: K per task
        size = (f"{_count(first.get('n_documents'))} documents, {_count(asked / repeats)} "
                f"tasks, {_count(asked)} answers ({repeats} per task)")
    which = f"{', '.join(r['run'] for r in rows)}: " if named else ""
    held = f"dataset digest `{digest}`" if digest else \
        "dataset digest unknown (logged before runs recorded one)"
    return f"{which}`{first.get('dataset')}`, {held} ({size})"


def _count(value: Any) -> str:
    return "unknown" if value is None else f"{value:.0f}"


def key_finding(finished: list[dict[str, Any]], records_by_run: dict[str, list[dict[str, Any]]],
                key: str | list[str]) -> str:
    """The key finding of these runs on ``key`` (or each decision metric), on the tasks they
    all answered, as report.md says it."""
    from report.analyses.family import family

    keys = [key] if isinstance(key, str) else key
    sets = task_sets(finished, records_by_run)
    decided = verdict.decisions(sets, keys)
    claims = family(analyses.Inputs(finished, finished, records_by_run, sets, keys, decided)).claims
    return writers_md.key_finding(claims, keys, verdict.headline_rows(sets, finished, keys[0]))


def _unknown_cell(sets: TaskSets, run: dict[str, Any], value: Any, key: str,
                  digits: int, partial_mean: bool = False) -> str:
    """A cost or latency cell: the figure, or "unknown (k of n lack it)", never 0 or a dash;
    ``partial_mean``: with the mean over the part of the answered tasks that carry it, saying
    over how many."""
    if value is not None:
        return _fmt(value, digits)
    missing, total = verdict.lacking(sets, run, key)
    notes = [f"{missing} of {total} lack it"] if missing else []
    partial, n = run.get(f"{key}_answered_mean"), run.get(f"{key}_answered_mean_n")
    if partial_mean and partial is not None and n:
        notes.append(f"${partial:.5f} a task over {n:.0f} of {run.get('n_task_ids', 0):.0f} "
                     "answered tasks, those that carry it")
    return f"unknown ({'; '.join(notes)})" if notes else "unknown"


def _cost_table(sets: TaskSets, finished: list[dict[str, Any]], judged: bool) -> str:
    note = ("Cost per task counts every task a run ran, errored ones included (their calls "
            "were paid), as if no call had come from the response cache (so a configuration "
            "that reused a neighbour's cached calls does not look free); what was actually "
            "spent is beside it. Spent ($) and judge cost are every call paid for over every "
            "attempt of a run, a killed attempt's included (for the judge: samples and panel "
            "too). Latency percentiles are over answered tasks, errored tasks' latency is "
            "shown apart.\n\n")
    return note + _table(
        ["run", "tasks", "errors", "skipped", "cost / task ($)", "spent / task ($)",
         "spent ($)", "judge cost ($)", "P50 latency (ms)", "P90", "P99",
         "errored: P50 latency (ms)", "cost per coverage point", "mean loops"],
        [[r["run"], int(r.get("n_tasks", 0)), int(r.get("n_errors", 0)),
          int(r.get("n_skipped", 0)),
          *(_unknown_cell(sets, r, v, "cost_usd", d, partial) for v, d, partial in (
              (verdict.task_cost(r), 5, False), (r.get("cost_usd_per_task"), 5, True),
              (verdict.spent(r), 4, False))),
          _fmt(verdict.judge_spent(r), 4),
          *(_unknown_cell(sets, r, r.get(f"latency_ms_p{q}"), "latency_ms", 0)
            for q in (50, 90, 99)),
          _fmt(r.get("latency_ms_errors_p50"), 0) if r.get("n_errors") else "no errors",
          _fmt(r.get("cost_per_coverage_point"), 5) if judged else "no judge",
          _fmt(r.get("loops_mean"), 1)] for r in finished])


def _taxonomy(finished: list[dict[str, Any]]) -> str:
    """The judge's codes per run, beside the path's mechanical P and IR (metrics/trajectory)
    and how often each agrees with the judge's."""
    defs = "; ".join(f"**{c}** {d.split(':')[0]}" for c, d in ERROR_CODES.items())
    rows = [[r["run"], *(r.get(f"error_rate_{c}") for c in ERROR_CODES),
             *(cell for c in ("P", "IR") for cell in (
                 (r.get(f"trajectory_{c.lower()}_mean"), r.get(f"trajectory_judge_agreement_{c}"))
                 if r.get("agentic") else ("not agentic", "–")))]
            for r in finished]
    return (f"Share of judged tasks with each code ({defs}), as the judge assigned them to "
            "tasks scoring below 3. **P (path)**: the share of tasks whose agent stopped with "
            "budget left while gold it had seen in a search hit went unread; **IR (path)**: "
            "the share with a read from another document (docs/judging.md); *agrees*: how "
            "often each matches the judge's code, over tasks where both are known.\n\n"
            + _table(["run", *ERROR_CODES, "P (path)", "P agrees", "IR (path)", "IR agrees"],
                     rows)
            + "\n![taxonomy](plots/error_taxonomy_by_system.png)\n")


def _loop_section(out: list[str], finished: list[dict[str, Any]],
                  records_by_run: dict[str, list[dict[str, Any]]], key: str
                  ) -> list[tuple[float, float]]:
    out.append("\n## Retrieval and the loop budget\n")
    arag_points = [(float(x["loops"]), float(x["retrieval_recall"]))
                   for r in finished if r["agentic"]
                   for x in records_by_run.get(r["run_id"], [])
                   if x.get("retrieval_recall") is not None and x.get("loops") is not None]
    budgets = {r.get("max_loops") for r in finished if r["agentic"]}
    gap = plots.loops_plot_gap(arag_points, swept=len(budgets) > 1)
    out.append((f"{gap}\n" if gap else "![recall vs loops](plots/recall_vs_loops.png)\n")
               + (f"\n{loops_recall(arag_points)}" if arag_points else ""))
    if len(budgets) > 1:
        out.append("\n![loop budget](plots/loop_budget_curve.png)\n")
        curve = sorted(((int(r["max_loops"]), r) for r in finished if r["agentic"]),
                       key=lambda p: p[0])  # two agents may share a budget
        out.append(_table(["max_loops", key, "retrieval recall", "mean loops",
                           "cost / task ($, no cache)", "spent / task ($)"],
                          [[m, r.get(f"{key}_mean"), r.get("retrieval_recall_mean"),
                            r.get("loops_mean"), _fmt(verdict.task_cost(r), 5),
                            _fmt(r.get("cost_usd_per_task"), 5)] for m, r in curve])
                   + "\n" + writers_md.LOOPS_NOTE + "\n")
    return arag_points


def _quality_table(rows: list[dict[str, Any]], sets: TaskSets | None = None) -> str:
    """One column per declared report metric (mean [95% CI]), the share at or above its
    threshold where it declares one, and words against the target; over the common tasks
    (``sets``: a cell with fewer scored tasks says its n) or each run's own answered tasks."""
    header: list[str] = ["run", "tasks"]
    cells: list[Callable[[dict[str, Any]], Any]] = [
        (lambda r: len(sets.all_ids)) if sets is not None else
        (lambda r: int(r.get("n_answered", 0)))]
    scored = [m for m in report_metrics() if any(r.get(f"{m.name}_mean") is not None
                                                 for r in rows)]
    for m in scored:
        header.append(m.title)
        cells.append(partial(_with_n, key=m.name, sets=sets))
        if m.share_at_least is not None and sets is None:
            header.append(f"≥{m.share_at_least:g}")
            cells.append(partial(_get, key=m.share_key))
    header.append("words (target)")
    cells.append(lambda r: f"{_fmt(r.get('word_count_mean'), 1)} ({r.get('target_length')})")
    unscored = [m.title for m in report_metrics() if m not in scored]
    return _table(header, [[r["run"], *(cell(r) for cell in cells)] for r in rows]) + (
        f"\nNot scored in any run (the caveats and each record's null reasons say why): "
        f"{', '.join(unscored)}.\n" if unscored else "")


def _with_n(row: dict[str, Any], key: str, sets: TaskSets | None) -> str:
    text = _with_ci(row, key)
    if sets is None or text == "–":
        return text
    n = row.get(f"{key}_n")
    notes = [] if n == len(sets.all_ids) else [f"n={n}"]
    if n is not None and n < SMALL_N and row.get(f"{key}_ci_low") is not None:
        notes.append("small n: CI unreliable")
    return f"{text} ({'; '.join(notes)})" if notes else text


def latency_cache_note(finished: list[dict[str, Any]]) -> str:
    """Which runs' latencies come (partly) from the response cache: a cached call takes
    about a millisecond, so those figures say nothing about the model's speed."""
    cached = [r for r in finished if (r.get("model_calls_cached") or 0) > 0]
    if not cached:
        return ""
    parts = [f"{r['run']} ({int(r['model_calls_cached'])} of {int(r.get('model_calls') or 0)} "
             "model calls)" for r in cached]
    return ("\nLatency from the response cache: " + "; ".join(parts) + " were answered from "
            "the cache, so their latency is not the model's.\n")


_IMAGE = re.compile(r"!\[([^\]]*)\]\((plots/[^)\s]+)\)")


def readable_markdown(markdown_text: str, made: set[str]) -> str:
    """``report.md`` as text: MLflow shows Markdown artifacts verbatim, so an image link
    becomes a line naming the plot file (report.html shows it inline); a plot that was not
    drawn is left out; no text from the data can open an HTML tag (``writers.markdown.inert``)."""
    def line(match: re.Match[str]) -> str:
        alt, path = match.group(1), match.group(2)
        return f"(plot: {alt}, `{path}` in this run's artifacts)" if path in made else ""

    return writers_md.inert(_IMAGE.sub(line, markdown_text))  # data never becomes markup


def _html_body(markdown_text: str) -> str:
    """Report Markdown as HTML, with no HTML of its own: every text from a dataset, a model
    or a judge is shown as text, never run; a wide table scrolls in its own box, not the
    page (MLflow's viewer is a narrow frame)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown_text)
    return body.replace("<table>", "<div class='scroll'><table>").replace(
        "</table>", "</table></div>")


def to_html(markdown_text: str, title: str, plot_dir: Path | None = None) -> str:
    """A self-contained page: plots inlined as data URIs (MLflow shows HTML artifacts in a
    sandboxed frame where relative paths lead nowhere); a plot not drawn is left out."""
    def inline(match: re.Match[str]) -> str:
        path = plot_dir / match.group(1) if plot_dir else None
        if path is None or not path.exists():
            return ""
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'<img src="data:image/png;base64,{data}"{match.group(2)}'

    body = re.sub(r'<img src="plots/([^"/]+)"([^>]*>)', inline, _html_body(markdown_text))
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:3px 6px}img{max-width:100%}pre{background:#f6f6f6;padding:.6em;"
             "white-space:pre-wrap;overflow-wrap:anywhere}code{overflow-wrap:anywhere}"
             ".scroll{overflow-x:auto;max-width:100%;margin:.5em 0}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
            f"</title><style>{style}</style></head><body>{body}</body></html>")


_ADDED = re.compile(r"<section class='added'>.*?</section>", re.S)


def with_added_sections(report_md: str, report_html: str) -> str:
    """``report.html`` with every section of ``report.md`` it lacks (one added to report.md
    after the report was written, as the baseline comparison's "Against the baseline"),
    rendered as the rest; sections added earlier are replaced, so a later comparison's
    section is the one shown."""
    page = _ADDED.sub("", report_html)
    added = [f"<section class='added'>{_html_body(part)}</section>"
             for part in re.split(r"(?m)^(?=## )", report_md) if part.startswith("## ")
             and _html_body(part.splitlines()[0]).strip() not in page]
    return page.replace("</body>", "".join(added) + "</body>", 1)


def add_sections_to_html(client: Any, run_id: str) -> None:
    """Bring the run's ``report.html`` up to its ``report.md`` (``with_added_sections``)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            md, page = (Path(client.download_artifacts(run_id, name, tmp)).read_text(
                encoding="utf-8") for name in ("report.md", "report.html"))
        except Exception:  # noqa: BLE001 - a run without its report has nothing to bring up
            return
        out = Path(tmp) / "new" / "report.html"
        out.parent.mkdir()
        out.write_text(with_added_sections(md, page), encoding="utf-8")
        client.log_artifact(run_id, str(out))


def write_run_report(client, run_id: str) -> ReportResult:
    """A single run (no sweep) gets the per-run part of the report, logged to itself."""
    run = client.get_run(run_id)
    return _write_report(client, run, [run], f"Run report: {run.info.run_name}", sweep=False)


def write_sweep_report(client, parent: dict[str, Any], decide_on: list[str] | None = None,
                       human_labels: str | None = None,
                       options: Mapping[str, Any] | None = None) -> ReportResult:
    """Build the report for a parent run and log it there (report.md, report.html, plots,
    compare.html), with each child's headline metrics and a comparison table.
    ``decide_on``: the sweep's ``report.decide_on`` (None: what the runs logged);
    ``human_labels``: a labels file (``report.human_labels``) to hold the judge against,
    beside the HUMAN feedback on the runs' traces; ``options``: the sweep's ``report`` node,
    read by the analyses (``report/analyses.py``)."""
    # kept first, so a report that cannot be written is rebuilt as it was asked for
    settings = json.dumps({"decide_on": decide_on, "human_labels": human_labels,
                           "options": dict(options or {})}, default=str)
    if len(settings) <= 5000:  # MLflow's tag limit; longer, a rebuild takes the defaults
        client.set_tag(parent["run_id"], REPORT_SETTINGS_TAG, settings)
    else:
        log.warning("the report settings (%d characters) are too long to keep on the sweep "
                    "run: a rebuild (python -m report) uses the defaults", len(settings))
    result = _write_report(client, client.get_run(parent["run_id"]), child_runs(client, parent),
                           question_title(child_runs(client, parent),
                                          parent.get("sweep_id", parent["run_id"]), decide_on),
                           sweep=True, decide_on=decide_on, human_labels=human_labels,
                           options=options)
    logged: list[str] = next((r["decide_on"] for r in result.rows if r.get("decide_on")), [])
    client.set_tag(parent["run_id"], REPORT_OPTIONS_TAG, options_key(
        options, logged if decide_on is None else decide_on, human_labels))
    return result


def question_title(runs: list[Any], sweep: str, decide_on: list[str] | None) -> str:
    """The report's title states its question: the systems, the data and what decides."""
    rows = [_row(r) for r in runs]
    systems = " vs ".join(dict.fromkeys(r["run"] for r in rows)) or "no run"
    data = " + ".join(dict.fromkeys(str(r.get("dataset") or "?") for r in rows))
    keys = decide_on or next((r["decide_on"] for r in rows if r.get("decide_on")), [])
    on = f" on {', '.join(keys)}" if keys else ""
    return f"Which is better{on}: {systems}, {data} (sweep {sweep})"


def people_labels(rows: list[dict[str, Any]], experiment_id: str,
                  human_labels: str | None, traces: RunTraces | None = None
                  ) -> list[HumanLabel]:
    """The labels file's labels, then the HUMAN feedback on the runs' traces."""
    labels = read_labels_file(human_labels) if human_labels else []
    runs = {r["run_id"]: r["run"] for r in rows}
    try:
        return labels + read_feedback_labels(experiment_id, runs, traces)
    except Exception as exc:  # noqa: BLE001 - a store without traces still has the file's
        log.warning("people's feedback on the traces could not be read (%s): the agreement "
                    "with people uses the labels file only", exc)
        return labels


def _write_report(client, target: Any, runs: list[Any], title: str, sweep: bool,
                  decide_on: list[str] | None = None, human_labels: str | None = None,
                  options: Mapping[str, Any] | None = None) -> ReportResult:
    target_run_id = target.info.run_id
    rows = [_row(r) for r in runs]
    spend.annotate(rows, runs, target.info.start_time if sweep else None, client,
                   target if sweep else None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        records = {r.info.run_id: run_records(client, r, folder / r.info.run_id) for r in runs}
        for rid, recs in records.items():
            system = next(x["system"] for x in rows if x["run_id"] == rid)
            for rec in recs:
                rec.setdefault("system", system)
        judged_pairs = pairwise.read(client, target, folder / "pairwise") if sweep else None
        traces = RunTraces(target.info.experiment_id)  # searched once, read twice
        labels = people_labels(rows, target.info.experiment_id, human_labels, traces) \
            if sweep else []
        # refused labels stop the report before anything is written
        people = human_agreement.compare(labels, records, rows)
        judge_notes = judge_caveats(client, rows)
        text, data = build_report(rows, records, title, requested=decide_on,
                                  judged_pairs=judged_pairs, options=options, labels=labels,
                                  more_caveats=judge_notes)
        analysis: Analysis = data["analysis"]
        validation = judge_validation(client, rows, human_agreement.quote(people))
        if validation:
            text += "\n## How far the judge can be trusted\n\n" + validation
        key = data["keys"][0]
        plot_dir = folder / "plots"
        plot_dir.mkdir()
        finished = [r for r in rows if compared(r)]
        made = [p for p in (plots.comparison_plot(data["common_rows"], plot_dir),
                            plots.cost_quality_plot(finished, key, plot_dir),
                            plots.taxonomy_by_system(finished, plot_dir),
                            plots.recall_vs_loops(data["arag_points"], plot_dir),
                            plots.loop_budget_curve(data["common_rows"], key, plot_dir),
                            *(draw(plot_dir) for draw in analysis.plots))
                if p is not None]
        (folder / "report.md").write_text(
            readable_markdown(text, {f"plots/{p.name}" for p in made}), encoding="utf-8")
        (folder / "report.html").write_text(to_html(text, title, plot_dir), encoding="utf-8")
        experiment_id = target.info.experiment_id
        (folder / "compare.html").write_text(compare.page(
            finished, records, key, compare.trace_ids(experiment_id, finished, traces),
            experiment_id, title, pairwise.per_task(judged_pairs),
            _html_body(writers_md.summary(data["answer"], data["headline"], key,
                                          analysis.claims))), encoding="utf-8")
        # every claim and note with the words the Markdown writer gives it (``text``)
        found = [*({**item.record(), "text": words.say(item)}
                   for item in [*analysis.claims, *data["notes"]]),
]
        artifacts = {"findings.jsonl": found, **analysis.artifacts} if found else {}
        written = sorted(artifacts)
        for name in json.loads(target.data.tags.get(REPORT_ARTIFACTS_TAG) or "[]"):
            artifacts.setdefault(name, [])  # rewritten with the report, never left from before
        for name, lines in artifacts.items():
            (folder / name).write_text("".join(json.dumps(r, default=str) + "\n" for r in lines),
                                       encoding="utf-8")
        for name in ("report.md", "report.html", "compare.html", *artifacts):
            client.log_artifact(target_run_id, str(folder / name))
        for path in made:
            client.log_artifact(target_run_id, str(path), "plots")
        client.set_tag(target_run_id, REPORT_ARTIFACTS_TAG, json.dumps(written))
    result = _result(data, rows, records, options, f"{target.info.artifact_uri}/report.html",
                     target_run_id, target.info.experiment_id,
                     validation, validation)
    if analysis.metrics:
        RunTracker(client, target_run_id, target.info.experiment_id).log_metrics(
            analysis.metrics)
    for run_id, metrics in analysis.run_metrics.items():
        RunTracker(client, run_id, target.info.experiment_id).log_metrics(metrics)
    if sweep:
        console.log_comparison(client, target_run_id, target.info.experiment_id, result.headline,
                               key, result.decided)
    log.debug("report over %d run(s) logged to run %s", len(rows), target_run_id)
    return result


def keep_baseline_section(client: Any, run_id: str, before: str) -> None:
    """A rebuilt report keeps the baseline comparison ``before`` (the report.md it replaced)
    ended with, as the description and the tags keep it; report.html gets it too."""
    if BASELINE_SECTION not in before:
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(client.download_artifacts(run_id, "report.md", tmp))
        rebuilt = path.read_text(encoding="utf-8").split(BASELINE_SECTION, 1)[0].rstrip()
        path.write_text(f"{rebuilt}\n\n{before[before.index(BASELINE_SECTION):]}",
                        encoding="utf-8")
        client.log_artifact(run_id, str(path))
    add_sections_to_html(client, run_id)


def stored_report(client: Any, run_id: str) -> str:
    """The run's report.md as stored ("" when it has none)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return Path(client.download_artifacts(run_id, "report.md", tmp)).read_text(
                encoding="utf-8")
        except Exception:  # noqa: BLE001 - a sweep whose report was never written
            return ""
