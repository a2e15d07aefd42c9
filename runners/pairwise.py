"""``judge.pairwise=true``: at the sweep's end, before its report, the judge compares the
compared runs' summaries pair by pair (``metrics.pairwise``).

Pairs: each agentic run against each baseline (``report.policy.agent_baselines``), or
every pair with ``judge.pairwise_pairs=all``. The judge is the sweep's own: cached,
metered, its paid calls journaled as they return (``pairwise_judge_spend.<parent>.jsonl``
in the sweep folder), its panel asked too. The parent run gets ``pairwise.jsonl`` (one
row per task x repeat x pair x order x dimension x judge), the figures as metrics, the
judge's cost (``pairwise_judge_*``), and each verdict as an assessment on both tasks'
traces. Without a judge that can judge (``judge=none``/``offline``) nothing is asked and
the parent's tag ``pairwise_skipped`` says why.
"""

from __future__ import annotations

import json
import logging
import tempfile
from pathlib import Path
from typing import Any

from arag.config import PairwisePairs
from arag.llm.cache import SpendJournal
from arag.llm.registry import PROVIDERS
from metrics.pairwise import (
    Outcome,
    Pair,
    answers_of,
    metrics_of,
    outcomes,
    plan,
    summarize,
    verdict_rows,
)
from report import policy
from report.compare import trace_ids
from report.pairwise import ARTIFACT, SKIPPED_TAG
from report.report import compared_records
from runners import dryrun
from runners.job import load_tasks, make_judge, make_panel
from runners.scoring import judge_metrics
from runners.settings import Settings
from tracking.paths import resolve
from tracking.traces import log_trace_feedback

log = logging.getLogger(__name__)
RATIONALE_CHARS = 4000  # of each order's reply, on a trace


def judge_pairs(client: Any, parent: dict[str, Any], jobs: list[Settings]) -> None:
    """Judge the sweep's pairs and log the result to its parent run (see the module)."""
    if not any(j.config.judge.pairwise for j in jobs):
        return
    settings = jobs[0]
    cfg = settings.config
    journal = SpendJournal(Path(parent["sweep_dir"]) / f"pairwise_judge_spend.{parent['run_id']}"
                                                      ".jsonl")
    why = _cannot(jobs)
    judge, reason = make_judge(cfg, journal) if not why else (None, why)
    if judge is None:
        _skip(client, parent, reason)
        return
    rows, records = compared_records(client, parent)
    pairs = pairs_of(rows, cfg.judge.pairwise_pairs)
    if not pairs:
        _skip(client, parent, "fewer than two compared runs" if len(rows) < 2 else
              "no agentic run against a baseline to compare; judge.pairwise_pairs=all "
              "compares every pair")
        return
    dataset = load_tasks(cfg)
    answers = {row["run"]: answers_of(records.get(row["run_id"], [])) for row in rows}
    planned = plan(pairs, answers, {t.id: t for t in dataset.tasks}, dataset.corpus, judge,
                   cfg.judge.context_limit)
    judges = {cfg.judge.name: judge, **make_panel(settings, journal)}
    found = verdict_rows(planned, judges, cfg.judge.batch, cfg.runner.concurrency)
    summary = summarize(found)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ARTIFACT
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in found),
                        encoding="utf-8")
        client.log_artifact(parent["run_id"], str(path))
    cost = {f"pairwise_{k}": v for k, v in judge_metrics(judges, journal).items()}
    metrics = {**metrics_of(summary), **cost,
               "pairwise_requests_not_sent": float(sum(p.request is None for p in planned))}
    for key, value in metrics.items():
        client.log_metric(parent["run_id"], key, value)
    traced = _assess(parent["experiment_id"], rows, outcomes(found), cfg.judge.name)
    log.info("pairwise judge: %d pair(s), %d replies (%d from the response cache), $%.4f, "
             "%d verdicts on traces", len(pairs), int(cost.get("pairwise_judge_calls", 0)),
             int(cost.get("pairwise_judge_cached_calls", 0)),
             cost.get("pairwise_judge_cost_usd_total", 0.0), traced)


def estimate_pairs(sweep_dir: Path, jobs: list[Settings]) -> None:
    """``runner.dry_run=true``: the pairwise judge's calls on the jobs' dry-run answers,
    per judge, priced (those the response cache holds are free) and added to the sweep's
    total."""
    if not jobs or not jobs[0].config.judge.pairwise:
        return
    cfg = jobs[0].config
    runs = dryrun.recorded_answers(sweep_dir)
    rows = [{**r, "run_id": r["run"]} for r in runs]
    why = _cannot(jobs) or ("" if PROVIDERS.get(cfg.judge.provider).judges else
                            f"judge={cfg.judge.name} is not a judge")
    pairs = pairs_of(rows, cfg.judge.pairwise_pairs) if not why else []
    if not pairs:
        print(f"[dry run] pairwise judge: nothing to ask ({why or 'no pair to compare'})",
              flush=True)
        return
    dataset = load_tasks(cfg, call_models=False)
    planned = plan(pairs, {r["run"]: answers_of(r["records"]) for r in runs},
                   {t.id: t for t in dataset.tasks}, dataset.corpus, dryrun.NoCallJudge(),
                   cfg.judge.context_limit)
    requests = {str(n): p.request for n, p in enumerate(planned) if p.request is not None}
    estimates = [dryrun.estimate_requests(f"pairwise judge ({len(pairs)} pairs, both orders)",
                                          requests, judge, resolve(cfg.cache.dir))
                 for judge in (cfg.judge, *jobs[0].panel.values())]
    for est in estimates:
        est.cost_usd /= 2 if cfg.judge.batch else 1
        print(est.line(), flush=True)
    dryrun.record(sweep_dir, dryrun.summarize("pairwise judge", {"judge": estimates}))


def pairs_of(rows: list[dict[str, Any]], which: PairwisePairs) -> list[Pair]:
    """The compared pairs: each agentic run against each baseline, or every pair of
    contenders (bounds such as the oracle are reference points, never compared)."""
    if which == PairwisePairs.all:
        runs = [r["run"] for r in policy.contenders(rows)]
        return [Pair(a, b) for i, a in enumerate(runs) for b in runs[i + 1:]]
    agents, baselines = policy.agent_baselines(rows)
    return [Pair(a["run"], b["run"]) for a in agents for b in baselines]


def _cannot(jobs: list[Settings]) -> str:
    """Why the sweep's runs cannot be judged pairwise by one judge on one dataset."""
    for what in ("judge", "dataset", "task_type"):
        values = {json.dumps(j.tree.get(what), sort_keys=True, default=str) for j in jobs}
        if len(values) > 1:
            return f"the sweep's jobs differ in {what}: pairs are judged by one judge on one dataset"
    return ""


def _skip(client: Any, parent: dict[str, Any], why: str) -> None:
    log.warning("judge.pairwise=true: no pairwise judging: %s", why)
    client.set_tag(parent["run_id"], SKIPPED_TAG, why[:5000])


def _assess(experiment_id: str, rows: list[dict[str, Any]], found: list[Outcome],
            judge: str) -> int:
    """The primary judge's verdict on each task, on both runs' traces of it, with both
    replies as the rationale (a task judged in several repeats: its first)."""
    traces = trace_ids(experiment_id, rows)
    run_ids = {r["run"]: r["run_id"] for r in rows}
    feedback: list[tuple[str, str, str, str | None, str]] = []
    for o in sorted(found, key=lambda o: o.repeat):
        if o.judge != judge or o.status == "not_judged":
            continue
        for me, other in ((o.pair.a, o.pair.b), (o.pair.b, o.pair.a)):
            trace = traces.get(run_ids[me], {}).get(o.task_id)
            name = f"pairwise_{o.dimension}_vs_{other}"
            if trace and (trace, name) not in {(f[0], f[1]) for f in feedback}:
                feedback.append((trace, name, _value(o, me), _rationale(o), judge))
    return log_trace_feedback(feedback)


def _value(o: Outcome, me: str) -> str:
    if o.status == "unreadable":
        return "unreadable"
    if o.status == "inconsistent":
        return "tie (position-inconsistent)"
    return "tie" if o.winner == "tie" else "win" if o.winner == me else "loss"


def _rationale(o: Outcome) -> str:
    return "\n\n".join(f"{r['first']} shown first, {r['second']} second:\n"
                       f"{(r.get('reply') or '')[:RATIONALE_CHARS]}" for r in o.rows)
