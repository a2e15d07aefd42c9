"""The sweep report: the answer to "which system wins, where, at what cost", from numbers.

Written to the parent run when a multirun ends (``report.md``, ``report.html``, plots),
and rebuildable for any past sweep:

    python -m runners.report <parent run id> [--tracking-uri sqlite:///mlruns/mlflow.db]

Every sentence is assembled from measured values; no model writes any of it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import tempfile
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from metrics import Metric, declared_metrics
from runners import plots
from runners.track import REUSED_RUNS_FILE

log = logging.getLogger(__name__)


def comparison_order() -> list[str]:
    """The scores a sweep may compare on, in the order the scorers declare: the first that
    any run has is used (G-Eval coverage when judged, ROUGE-2 with references, retrieval
    precision last, so a sweep with neither references nor a judge still gets a finding)."""
    ranked = [m for m in declared_metrics() if m.compare_priority is not None]
    return [m.name for m in sorted(ranked, key=lambda m: m.compare_priority or 0)]


def report_metrics() -> list[Metric]:
    """The quality table's columns: what scorers declare for the report, comparison
    metrics first."""
    order = {name: i for i, name in enumerate(comparison_order())}
    return sorted((m for m in declared_metrics() if m.report),
                  key=lambda m: (order.get(m.name, len(order)), m.name))


def child_runs(client, parent: dict[str, Any]) -> list[Any]:
    """The sweep's job runs: its children plus finished runs it reused unchanged."""
    runs = client.search_runs(
        [parent["experiment_id"]],
        filter_string=f"tags.mlflow.parentRunId = '{parent['run_id']}'",
        order_by=["attributes.start_time ASC"],
    )
    reused = Path(parent.get("sweep_dir") or "/nonexistent") / REUSED_RUNS_FILE
    if reused.exists():
        ids = [json.loads(line)["run_id"] for line in reused.read_text().splitlines() if line]
        runs += [client.get_run(i) for i in dict.fromkeys(ids)]
    return [r for r in runs if r.info.status == "FINISHED"] + \
        [r for r in runs if r.info.status != "FINISHED"]


def _row(run: Any) -> dict[str, Any]:
    row: dict[str, Any] = dict(run.data.metrics)
    tags = run.data.tags
    row.update(run=run.info.run_name, run_id=run.info.run_id, status=run.info.status,
               system=tags.get("system", ""), agentic=tags.get("system_agentic") == "true",
               retrieves=tags.get("system_retrieves") == "true",
               judge=run.data.params.get("judge.name"),
               max_loops=run.data.params.get("max_loops"),
               target_length=run.data.params.get("target_length"))
    return row


def _records(client, run: Any, folder: Path) -> list[dict[str, Any]]:
    try:
        path = client.download_artifacts(run.info.run_id, "predictions.eval.jsonl", str(folder))
        evals = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
        path = client.download_artifacts(run.info.run_id, "predictions.jsonl", str(folder))
        preds = {json.loads(line)["id"]: json.loads(line)
                 for line in Path(path).read_text().splitlines() if line}
    except Exception:  # noqa: BLE001 - a run without artifacts (failed early) has no records
        return []
    for r in evals:
        p = preds.get(r["id"], {})
        r.update(predicted=p.get("predicted"), reference=p.get("ground_truth"),
                 question=p.get("question"))
    return evals


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) for c in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


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


def paired(a: list[dict], b: list[dict], key: str, seed: int = 0) -> dict[str, Any] | None:
    """Paired difference a - b on tasks both scored: mean, bootstrap 95% CI, Wilcoxon p."""
    from scipy.stats import wilcoxon

    bv = {r["id"]: r.get(key) for r in b}
    pairs = [(r[key], bv[r["id"]]) for r in a
             if r.get(key) is not None and bv.get(r["id"]) is not None]
    if len(pairs) < 2:
        return None
    diff = np.array([x - y for x, y in pairs])
    rng = np.random.default_rng(seed)
    boots = diff[rng.integers(0, len(diff), size=(2000, len(diff)))].mean(axis=1)
    p = float(wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0
    low, high = np.percentile(boots, [2.5, 97.5])
    return {"n": len(diff), "mean_diff": float(diff.mean()), "ci_low": float(low),
            "ci_high": float(high), "p": p, "wins": int((diff > 0).sum()),
            "losses": int((diff < 0).sum())}


def build_report(rows: list[dict[str, Any]], records_by_run: dict[str, list[dict[str, Any]]],
                 title: str) -> tuple[str, dict[str, Any]]:
    """Markdown report and the plot data it refers to."""
    judged = any(r.get("geval_coverage_mean") is not None for r in rows)
    key = primary_metric(records_by_run)
    out = [f"# {title}\n"]
    finished = [r for r in rows if r["status"] == "FINISHED"]
    out.append(f"Runs: {len(finished)} finished"
               + (f", {len(rows) - len(finished)} not finished ("
                  + ", ".join(f"{r['run']}: {r['status']}" for r in rows
                              if r["status"] != "FINISHED") + ")" if len(finished) < len(rows)
                  else "") + f". Comparison metric: `{key}`.\n")
    out.append("## Key finding\n\n" + key_finding(finished, records_by_run, key) + "\n")

    out.append("## Quality\n")
    no_judge = "" if judged else "G-Eval columns: no judge (run with `judge=claude-haiku-4-5`)."
    out.append(f"Means over answered tasks with bootstrap 95% CIs. {no_judge}\n")
    out.append(_quality_table(finished))
    out.append("\n![comparison](plots/comparison.png)\n")

    out.append("## Cost and latency\n")
    out.append(_table(
        ["run", "tasks", "errors", "skipped", "mean cost / task ($)", "total cost ($)",
         "P50 latency (ms)", "P90", "P99", "cost per coverage point", "mean loops"],
        [[r["run"], int(r.get("n_tasks", 0)), int(r.get("n_errors", 0)),
          int(r.get("n_skipped", 0)), _fmt(r.get("cost_usd_mean"), 5),
          _fmt(r.get("cost_usd_total"), 4), _fmt(r.get("latency_ms_p50"), 0),
          _fmt(r.get("latency_ms_p90"), 0), _fmt(r.get("latency_ms_p99"), 0),
          _fmt(r.get("cost_per_coverage_point"), 5) if judged else "no judge",
          _fmt(r.get("loops_mean"), 1)] for r in finished]))

    out.append("\n## Error taxonomy\n")
    if judged:
        out.append(_table(["run"] + [f"{c}" for c in plots.ERROR_CODES],
                          [[r["run"]] + [r.get(f"error_rate_{c}") for c in plots.ERROR_CODES]
                           for r in finished]))
        out.append("\n![taxonomy](plots/error_taxonomy_by_system.png)\n")
    else:
        out.append("No judge: the error taxonomy needs `judge=...`.\n")

    out.append("\n## Retrieval and the loop budget\n")
    arag_points = [(float(x["loops"]), float(x["retrieval_recall"]))
                   for r in finished if r["agentic"]
                   for x in records_by_run.get(r["run_id"], [])
                   if x.get("retrieval_recall") is not None and x.get("loops") is not None]
    out.append("![recall vs loops](plots/recall_vs_loops.png)\n" if arag_points
               else "No agentic run with retrieval gold in this sweep.\n")
    budgets = {r.get("max_loops") for r in finished if r["agentic"]}
    if len(budgets) > 1:
        out.append("\n![loop budget](plots/loop_budget_curve.png)\n")
        curve = sorted((int(r["max_loops"]), r) for r in finished if r["agentic"])
        out.append(_table(["max_loops", key, "retrieval recall", "mean loops", "mean cost ($)"],
                          [[m, r.get(f"{key}_mean"), r.get("retrieval_recall_mean"),
                            r.get("loops_mean"), r.get("cost_usd_mean")] for m, r in curve]))

    out.append("\n## Paired comparisons\n")
    out.append(f"On `{key}`, over the tasks both runs scored: mean difference (first minus "
               "second) with a paired bootstrap 95% CI (2,000 resamples) and a two-sided "
               "Wilcoxon signed-rank p-value.\n\n")
    pair_rows = []
    for a, b in itertools.combinations(finished, 2):
        res = paired(records_by_run.get(a["run_id"], []), records_by_run.get(b["run_id"], []),
                     key)
        if res:
            pair_rows.append([f"{a['run']} vs {b['run']}", res["n"], res["mean_diff"],
                              f"[{res['ci_low']:.3f}, {res['ci_high']:.3f}]", res["p"],
                              f"{res['wins']}/{res['losses']}"])
    out.append(_table(["pair", "tasks", "mean diff", "95% CI", "Wilcoxon p", "wins/losses"],
                      pair_rows) if pair_rows else "Fewer than two runs share scored tasks.\n")

    out.append("\n## Examples chosen from the numbers\n")
    out.append(examples(finished, records_by_run, key))
    return "\n".join(out), {"arag_points": arag_points}


def _quality_table(finished: list[dict[str, Any]]) -> str:
    """One column per declared report metric (mean [95% CI]), the share at or above its
    threshold where it declares one, and words against the target."""
    header: list[str] = ["run"]
    cells: list[Callable[[dict[str, Any]], Any]] = []
    for m in report_metrics():
        header.append(m.title)
        cells.append(partial(_with_ci, key=m.name))
        if m.share_at_least is not None:
            header.append(f"≥{m.share_at_least:g}")
            cells.append(partial(_get, key=m.share_key))
    header.append("words (target)")
    cells.append(lambda r: f"{_fmt(r.get('word_count_mean'), 1)} ({r.get('target_length')})")
    return _table(header, [[r["run"], *(cell(r) for cell in cells)] for r in finished])


def key_finding(finished: list[dict[str, Any]], records_by_run: dict[str, list[dict]],
                key: str) -> str:
    scored = [r for r in finished if r.get(f"{key}_mean") is not None]
    if not scored:
        reasons = Counter(x.get("null_reasons", {}).get(key) for recs in records_by_run.values()
                          for x in recs)
        reasons.pop(None, None)
        why = f": {reasons.most_common(1)[0][0]}" if reasons else ""
        return f"No run has `{key}` scores{why}."
    best = max(scored, key=lambda r: r[f"{key}_mean"])
    cheapest = min(scored, key=lambda r: r.get("cost_usd_mean") or 0.0)
    others = [r for r in scored if r is not best]
    runner_up = max(others, key=lambda r: r[f"{key}_mean"]) if others else None
    tied = runner_up is not None and runner_up[f"{key}_mean"] == best[f"{key}_mean"]
    text = (f"On {int(best.get('n_answered', 0))} tasks, **{best['run']}** "
            f"{'ties for the highest' if tied else 'scores highest on'} `{key}` "
            f"({best[f'{key}_mean']:.3f}")
    if runner_up is not None:
        res = paired(records_by_run.get(best["run_id"], []),
                     records_by_run.get(runner_up["run_id"], []), key)
        text += f" vs {runner_up['run']} {runner_up[f'{key}_mean']:.3f}"
        if res:
            verdict = "significant" if res["p"] < 0.05 else "not significant"
            text += (f"; paired difference {res['mean_diff']:+.3f}, 95% CI "
                     f"[{res['ci_low']:.3f}, {res['ci_high']:.3f}], Wilcoxon p={res['p']:.3g}, "
                     f"{verdict} at 0.05")
    text += (f") at ${best.get('cost_usd_mean') or 0.0:.5f} per task and "
             f"{best.get('latency_ms_p50') or 0.0:.0f} ms median latency.")
    if cheapest is not best:
        text += (f" The cheapest, {cheapest['run']}, costs "
                 f"${cheapest.get('cost_usd_mean') or 0:.5f} per task for "
                 f"{cheapest[f'{key}_mean']:.3f}.")
    return text


def examples(finished: list[dict[str, Any]], records_by_run: dict[str, list[dict]],
             key: str) -> str:
    """Tasks where an agentic run beats every other run by the widest margin, one where a
    run without retrieval beats every run that retrieves, and the sweep's worst task."""
    tables = {r["run_id"]: {x["id"]: x for x in records_by_run.get(r["run_id"], [])}
              for r in finished}
    out = []

    def block(title: str, rec: dict[str, Any], note: str) -> None:
        out.append(f"### {title}: `{rec['id']}`\n\n{note}\n\n**Question:** {rec.get('question')}"
                   f"\n\n**Reference:**\n\n```\n{rec.get('reference')}\n```\n\n**Predicted "
                   f"({rec.get('system')}):**\n\n```\n{rec.get('predicted')}\n```\n")

    def score(run: dict[str, Any], tid: str) -> float | None:
        return (tables[run["run_id"]].get(tid) or {}).get(key)

    def margins(run: dict[str, Any], rivals: list[dict[str, Any]]) -> list[tuple[float, str]]:
        """(margin over the best rival, task) where ``run`` beats every rival."""
        found = []
        for tid in tables[run["run_id"]]:
            mine, theirs = score(run, tid), [score(r, tid) for r in rivals]
            if mine is not None and theirs and all(t is not None for t in theirs):
                best = max(t for t in theirs if t is not None)
                if mine > best:
                    found.append((mine - best, tid))
        return sorted(found, reverse=True)

    def scores_note(tid: str, extra: str = "") -> str:
        listed = ", ".join(f"{r['run']} {score(r, tid):.3f}" for r in finished
                           if score(r, tid) is not None)
        return f"`{key}`: {listed}{extra}."

    agentic = next((r for r in finished if r.get("agentic")), None)
    others = [r for r in finished if r is not agentic]
    if agentic is not None and others:
        for margin, tid in margins(agentic, others)[:2]:
            block(f"{agentic['run']} beats every other run", tables[agentic["run_id"]][tid],
                  scores_note(tid, f" (margin {margin:.3f})"))
    retrieving = [r for r in finished if r.get("retrieves")]
    for run in (r for r in finished if not r.get("retrieves")):
        wins = margins(run, retrieving) if retrieving else []
        if wins:
            block(f"{run['run']}, without retrieval, wins", tables[run["run_id"]][wins[0][1]],
                  scores_note(wins[0][1]))
            break
    failures = [x for recs in records_by_run.values() for x in recs if x.get(key) is not None]
    if failures:
        worst = min(failures, key=lambda x: x[key])
        reasoning = worst.get("geval_coverage_reasoning") or worst.get(
            "geval_faithfulness_reasoning")
        note = f"Lowest `{key}` of the sweep: {worst[key]:.3f}."
        if reasoning:
            note += "\n\nJudge's reasoning:\n\n> " + "\n> ".join(reasoning.splitlines())
        block("A failure", worst, note)
    return "\n".join(out) if out else "Not enough scored tasks to choose examples.\n"


def to_html(markdown_text: str, title: str) -> str:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render(markdown_text)
    style = ("body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
             "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;"
             "padding:3px 6px}img{max-width:100%}pre{background:#f6f6f6;padding:.6em}")
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title>"
            f"<style>{style}</style></head><body>{body}</body></html>")


def write_run_report(client, run_id: str) -> None:
    """A single run (no sweep) gets the per-run part of the report, logged to itself."""
    run = client.get_run(run_id)
    _write_report(client, run_id, [run], f"Run report: {run.info.run_name}")


def write_sweep_report(client, parent: dict[str, Any]) -> None:
    """Build the report for a parent run and log it there (report.md, report.html, plots)."""
    _write_report(client, parent["run_id"], child_runs(client, parent),
                  f"Sweep report: {parent.get('sweep_id', parent['run_id'])}")


def _write_report(client, target_run_id: str, runs: list[Any], title: str) -> None:
    rows = [_row(r) for r in runs]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        records = {r.info.run_id: _records(client, r, folder / r.info.run_id) for r in runs}
        for rid, recs in records.items():
            system = next(x["system"] for x in rows if x["run_id"] == rid)
            for rec in recs:
                rec.setdefault("system", system)
        text, data = build_report(rows, records, title)
        (folder / "report.md").write_text(text, encoding="utf-8")
        (folder / "report.html").write_text(to_html(text, title), encoding="utf-8")
        plot_dir = folder / "plots"
        plot_dir.mkdir()
        finished = [r for r in rows if r["status"] == "FINISHED"]
        made = [plots.comparison_plot(finished, plot_dir),
                plots.taxonomy_by_system(finished, plot_dir),
                plots.recall_vs_loops(data["arag_points"], plot_dir),
                plots.loop_budget_curve(finished, plot_dir)]
        client.log_artifact(target_run_id, str(folder / "report.md"))
        client.log_artifact(target_run_id, str(folder / "report.html"))
        for path in made:
            if path is not None:
                client.log_artifact(target_run_id, str(path), "plots")
    log.info("report over %d run(s) logged to run %s", len(rows), target_run_id)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Rebuild the report of a past sweep.")
    parser.add_argument("parent_run_id")
    parser.add_argument("--tracking-uri", default="sqlite:///mlruns/mlflow.db")
    args = parser.parse_args(argv)
    from mlflow import MlflowClient

    from runners.paths import resolve_tracking_uri

    client = MlflowClient(tracking_uri=resolve_tracking_uri(args.tracking_uri))
    run = client.get_run(args.parent_run_id)
    write_sweep_report(client, {"run_id": run.info.run_id,
                                "experiment_id": run.info.experiment_id,
                                "sweep_id": run.data.tags.get("sweep_id", ""),
                                "sweep_dir": run.data.tags.get("sweep_dir", "")})
    print(f"report logged to run {run.info.run_id}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO)
    main()
