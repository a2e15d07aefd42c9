"""The sweep report, built from the runs' records (the model, the analyses, the writers) and
written to the parent run when a multirun ends: report.md/.html, compare.html, plots and the
analyses' artifacts. ``python -m report <parent run id>`` rebuilds it for any past sweep."""

from __future__ import annotations

import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from metrics.stats import correlation
from report import (
    analyses,
    baseline,
    compare,
    console,
    human_agreement,
    meta_eval,
    pairwise,
    plots,
    policy,
    verdict,
)
from report.analyses import sequential
from report.answer import compose
from report.model import Analysis, Claim, Note
from report.policy import comparison_order, report_metrics
from report.result import ReportResult, compared, run_fields
from report.verdict import common_rows, task_sets
from report.writers import markdown as writers_md
from report.writers import tables, words
from report.writers.html import html_body, readable_markdown, to_html, with_added_sections
from tracking import spend
from tracking.human_labels import HumanLabel, read_feedback_labels, read_labels_file
from tracking.runs import RunTracker
from tracking.sweeps import child_runs, run_records
from tracking.traces import RunTraces

# report.md's section on the sweep's latest baseline comparison (report/baseline_report.py)
BASELINE_SECTION = "## Against the baseline"

log = logging.getLogger(__name__)
Row = dict[str, Any]
Records = dict[str, list[Row]]  # run id -> its eval records


def run_row(run: Any) -> Row:
    """A job run as the report reads it (``result.run_fields``), with its sequential settings."""
    return {**run_fields(run), "sequential": sequential.settings_of(run.data.params)}


def compared_records(client, parent: Row) -> tuple[list[Row], Records]:
    """The sweep's compared runs (report rows) and their records by run id, as the report
    reads them (for what is judged across runs at the sweep's end: ``judge.pairwise``)."""
    runs = [r for r in child_runs(client, parent) if compared(run_row(r))]
    with tempfile.TemporaryDirectory() as tmp:
        return [run_row(r) for r in runs], {r.info.run_id: run_records(client, r, Path(tmp) / r.info.run_id)
                                         for r in runs}


def primary_metric(records_by_run: Records) -> str:
    """The quality score to compare on: the first of ``comparison_order`` any run has."""
    order = comparison_order()
    records = [r for recs in records_by_run.values() for r in recs]
    for key in order:
        if any(r.get(key) is not None for r in records):
            return key
    # nothing scored: the first the records say why they lack, so the finding can say it
    why = [key for key in order if any(key in r.get("null_reasons", {}) for r in records)]
    return (why or order)[0]


def decide_on(rows: list[Row], records_by_run: Records,
              requested: list[str] | None = None) -> list[str]:
    """The metrics the verdict decides on: ``requested`` (``report.decide_on``; empty: the
    default, ``primary_metric``), or, for None (a rebuild without ``--decide-on``), the logged."""
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
    """One value for the options a report is written with (what it decides on, the labels
    file's content, the analyses' options): a re-run with other options is told apart."""
    import hashlib

    labels = Path(human_labels).expanduser() if human_labels else None
    chosen = {k: v for k, v in (options or {}).items()
              if k not in (*BASELINE_OPTIONS, *SHOWN_ONLY) and v not in (None, [], {}, "")}
    chosen.update(decide_on=list(decide_on or []), human_labels=hashlib.sha256(
        labels.read_bytes()).hexdigest() if labels and labels.is_file() else None)
    text = json.dumps(chosen, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def build_report(rows: list[Row], records_by_run: Records, title: str, requested: list[str] | None = None,
                 judged_pairs: pairwise.PairwiseView | None = None, options: Mapping[str, Any] | None = None,
                 labels: list[HumanLabel] | None = None, more_caveats: Sequence[Note] = (),
                 more_claims: Sequence[Claim] = (),
                 people: human_agreement.HumanAgreement | None = None) -> tuple[str, Row]:
    """report.md and the model it is rendered from (the common rows the plots draw, the
    family of tests, the analyses' claims and notes, the answer, the headline rows);
    ``requested``: ``report.decide_on``; ``more_caveats``: caveats from outside the runs;
    ``people``: ``labels`` already held against the judge (compared once, not again)."""
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
                                                     judged_pairs, people)))
    analysis.claims += more_claims  # a regression against the baseline: stated in the answer
    answers = compose(analysis.claims, keys)
    headline = verdict.headline_rows(sets, finished, key, keys[1:])
    answer = writers_md.sweep_answer(analysis.claims, keys, answers, finished)
    notes = [*analysis.notes, *more_caveats]
    out = [f"# {title}\n", f"**Answer:** {answer}\n", writers_md.banner(notes),
           writers_md.runs_line(rows, keys), writers_md.data_line(rows),
           "## Headline\n\n" + writers_md.headline_table(headline, key),
           "## Task sets\n\n" + tables.task_sets(sets)]
    # the analyses' claims said in the key finding (the pairwise judge, a reversing panel
    # judge, document length); a meta-evaluation's key finding is its own section
    inline = [] if meta else [c for c in analysis.claims if c.section == "Key finding"
                              and c.kind not in writers_md.FAMILY_KINDS]
    finding = "" if meta else (writers_md.key_finding(analysis.claims, keys, headline)
                               + "".join(f"\n{words.say(c)}\n" for c in inline))
    if finding:
        out.append(f"## Key finding\n\n{finding}\n")
    out.append(writers_md.section_of([c for c in analysis.claims if c.kind not in
                                      (*writers_md.FAMILY_KINDS, "regression")
                                      and all(c is not i for i in inline)]))
    shown = [m.name for m in report_metrics()]
    common = common_rows(sets, [*shown, "word_count", "loops"])
    out.append(tables.quality_section(common, finished, len(sets.all_ids), judged))
    out.append("\n## Cost and latency\n\n" + tables.cost(finished, headline, judged)
               + tables.total_line(rows, *((judged_pairs.cost_usd, judged_pairs.cost_usd_earlier)
                                          if judged_pairs else ()))
               + writers_md.latency_cache_note(finished))
    gap = plots.cost_plot_gap(finished, key)
    out.append(f"\n{gap}\n" if gap else "\n![cost vs quality](plots/cost_vs_quality.png)\n")
    out.append("\n## Error taxonomy\n\n" + (tables.taxonomy(finished) if judged else
                                               "No judge: the error taxonomy needs `judge=...`.\n"))
    arag_points = _loop_section(out, common, records_by_run, key)
    if not meta:  # a meta-evaluation compares signals with people, not systems
        out.append("\n## Paired comparisons\n")
        out.append(tables.paired(sets, keys, decided, any(a.descriptive_family for a in answers)))
    return "\n".join(out), {"arag_points": arag_points, "common_rows": common, "keys": keys,
                            "decided": decided, "finding": finding, "answer": answer,
                            "analysis": analysis, "answers": answers, "headline": headline, "notes": notes}


def _loop_section(out: list[str], common: list[Row], records_by_run: Records, key: str
                  ) -> list[tuple[float, float]]:
    """The agents' recall against their loops, and a loop-budget sweep's table."""
    agents = [r for r in common if r["agentic"]]
    points = [(float(x["loops"]), float(x["retrieval_recall"])) for r in agents
              for x in records_by_run.get(r["run_id"], [])
              if x.get("retrieval_recall") is not None and x.get("loops") is not None]
    swept = len({r.get("max_loops") for r in agents}) > 1
    gap = plots.loops_plot_gap(points, swept=swept)
    out.append("\n## Retrieval and the loop budget\n")
    found = correlation([p[0] for p in points], [p[1] for p in points]) if points else None
    out.append((f"{gap}\n" if gap else "![recall vs loops](plots/recall_vs_loops.png)\n")
               + (f"\n{tables.loops_recall(found)}" if points else ""))
    if swept:
        out.append("\n![loop budget](plots/loop_budget_curve.png)\n"
                   + tables.loop_budget(agents, key) + "\n" + writers_md.LOOPS_NOTE + "\n")
    return points


def result_of(rows: list[Row], records: Records, title: str, requested: list[str] | None = None,
              options: Mapping[str, Any] | None = None, artifact_uri: str = "", run_id: str = "",
              experiment_id: str = "", **more: Any) -> ReportResult:
    """The report's model for these runs, as every writer reads it (no store needed)."""
    _, data = build_report(rows, records, title, requested, options=options, **more)
    return _result(data, rows, records, options, artifact_uri, run_id, experiment_id)


def _result(data: Row, rows: list[Row], records: Records, options: Mapping[str, Any] | None,
            artifact_uri: str, run_id: str, experiment_id: str, trust: Sequence[Claim] = ()
            ) -> ReportResult:
    analysis = data["analysis"]
    return ReportResult(run_id, experiment_id, rows, records, data["keys"][0], artifact_uri,
                        data["finding"], trust=list(trust),
                        keys=data["keys"], decided=data["decided"], answer=data["answer"],
                        answers=data["answers"],
                        claims=analysis.claims, caveat_notes=data["notes"], headline=data["headline"],
                        answered=[c for a in data["answers"] for c in [*a.claims, *a.pending]],
                        console=getattr(console_mode := (options or {}).get("console"), "value",
                                        console_mode) or "summary")


def key_finding(finished: list[Row], records_by_run: Records, key: str | list[str]) -> str:
    """The key finding of these runs on ``key`` (or each decision metric), as report.md says it."""
    from report.analyses.family import family

    keys = [key] if isinstance(key, str) else key
    sets = task_sets(finished, records_by_run)
    decided = verdict.decisions(sets, keys)
    claims = family(analyses.Inputs(finished, finished, records_by_run, sets, keys, decided)).claims
    return writers_md.key_finding(claims, keys, verdict.headline_rows(sets, finished, keys[0]))


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


def write_sweep_report(client, parent: Row, decide_on: list[str] | None = None,
                       human_labels: str | None = None, options: Mapping[str, Any] | None = None,
                       regressions: Sequence[Claim] | None = None) -> ReportResult:
    """Build the report for a parent run and log it there, with each child's headline
    metrics and a comparison table; ``decide_on`` None: what the runs logged."""
    # kept first, so a report that cannot be written is rebuilt as it was asked for
    settings = json.dumps({"decide_on": decide_on, "human_labels": human_labels,
                           "options": dict(options or {})}, default=str)
    if len(settings) <= 5000:  # MLflow's tag limit; longer, a rebuild takes the defaults
        client.set_tag(parent["run_id"], REPORT_SETTINGS_TAG, settings)
    else:
        log.warning("the report settings (%d characters) are too long to keep on the sweep "
                    "run: a rebuild (python -m report) uses the defaults", len(settings))
    children = child_runs(client, parent)
    title = writers_md.question_title([run_row(r) for r in children],
                                      str(parent.get("sweep_id") or parent["run_id"]), decide_on)
    result = _write_report(client, client.get_run(parent["run_id"]), children, title,
                           sweep=True, decide_on=decide_on, human_labels=human_labels,
                           options=options, regressions=regressions)
    logged: list[str] = next((r["decide_on"] for r in result.rows if r.get("decide_on")), [])
    client.set_tag(parent["run_id"], REPORT_OPTIONS_TAG, options_key(
        options, logged if decide_on is None else decide_on, human_labels))
    return result


def people_labels(rows: list[Row], experiment_id: str, human_labels: str | None,
                  traces: RunTraces | None = None) -> list[HumanLabel]:
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
                  options: Mapping[str, Any] | None = None,
                  regressions: Sequence[Claim] | None = None) -> ReportResult:
    """``regressions``: the baseline comparison's, when the sweep has just made one; None: the
    stored comparison's (a rebuild), if the sweep has one."""
    target_run_id = target.info.run_id
    rows = [run_row(r) for r in runs]
    spend.annotate(rows, runs, target.info.start_time if sweep else None, client,
                   target if sweep else None)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        records = {r.info.run_id: run_records(client, r, folder / r.info.run_id) for r in runs}
        for row in rows:
            for rec in records[row["run_id"]]:
                rec.setdefault("system", row["system"])
        judged_pairs = pairwise.read(client, target, folder / "pairwise") if sweep else None
        traces = RunTraces(target.info.experiment_id)  # searched once, read twice
        labels = people_labels(rows, target.info.experiment_id, human_labels, traces) \
            if sweep else []
        # refused labels stop the report before anything is written
        people = human_agreement.compare(labels, records, rows)
        validated = meta_eval.validations(client, rows)  # the store read once
        if regressions is None and sweep:
            regressions = _stored_regressions(client, target_run_id, folder)
        text, data = build_report(rows, records, title, requested=decide_on, judged_pairs=judged_pairs,
                                  options=options, labels=labels,
                                  more_caveats=meta_eval.judge_caveats(validated),
                                  more_claims=regressions or (), people=people)
        analysis: Analysis = data["analysis"]
        trust = meta_eval.trust(validated, human_agreement.agreement(people))
        text += writers_md.trust_section(trust)
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
            html_body(writers_md.summary(data["answer"], data["headline"], key, analysis.claims))),
            encoding="utf-8")
        # every claim and note with the words the Markdown writer gives it (``text``)
        found = [{**item.record(), "text": words.say(item)}
                 for item in [*analysis.claims, *trust, *data["notes"]]]
        artifacts = {"findings.jsonl": found, **analysis.artifacts} if found else {}
        written = sorted(artifacts)
        for name in json.loads(target.data.tags.get(REPORT_ARTIFACTS_TAG) or "[]"):
            artifacts.setdefault(name, [])  # rewritten with the report, never left from before
        for name, lines in artifacts.items():
            (folder / name).write_text("".join(json.dumps(r, default=str) + "\n" for r in lines), "utf-8")
        for name in ("report.md", "report.html", "compare.html", *artifacts):
            client.log_artifact(target_run_id, str(folder / name))
        for path in made:
            client.log_artifact(target_run_id, str(path), "plots")
        client.set_tag(target_run_id, REPORT_ARTIFACTS_TAG, json.dumps(written))
    result = _result(data, rows, records, options, f"{target.info.artifact_uri}/report.html",
                     target_run_id, target.info.experiment_id, trust)
    for run_id, metrics in [(target_run_id, analysis.metrics), *analysis.run_metrics.items()]:
        if metrics:
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


def _stored_regressions(client: Any, run_id: str, folder: Path) -> list[Claim]:
    """The regressions of the sweep's stored baseline comparison (none without one)."""
    try:
        path = Path(client.download_artifacts(run_id, baseline.ARTIFACT, str(folder)))
    except Exception:  # noqa: BLE001 - a sweep never held against a baseline
        return []
    return baseline.claims(json.loads(path.read_text(encoding="utf-8")))


def stored_report(client: Any, run_id: str) -> str:
    """The run's report.md as stored ("" when it has none)."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            return Path(client.download_artifacts(run_id, "report.md", tmp)).read_text(
                encoding="utf-8")
        except Exception:  # noqa: BLE001 - a sweep whose report was never written
            return ""
