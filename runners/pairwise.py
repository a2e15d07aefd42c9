"""``judge.pairwise=true``: at the sweep's end, before its report, the judge compares the
compared runs' summaries pair by pair. This module only wires the sweep's config to its
judges, ``metrics.pairwise`` (the plan, the verdicts, the figures, why runs cannot be
judged) and ``tracking.runs.log_pairwise``; which runs are paired is
``report.policy.pairs_of``.

Pairs: each agentic run against each baseline, or every pair with
``judge.pairwise_pairs=all``. The judge is the sweep's own: cached, metered, its paid
calls journaled as they return (``pairwise_judge_spend.<parent>.jsonl`` in the sweep
folder), its panel asked too. The parent run gets ``pairwise.jsonl`` (one row per task x
repeat x pair x order x dimension x judge), the figures as metrics, the judge's cost
(``pairwise_judge_*``), and each verdict as an assessment on both tasks' traces. Without a
judge that can judge (``judge=none``/``offline``) nothing is asked and the parent's tag
``pairwise_skipped`` says why.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from arag.llm.cache import SpendJournal
from arag.llm.registry import PROVIDERS
from metrics.pairwise import (
    answers_of,
    metrics_of,
    outcomes,
    plan,
    summarize,
    trace_verdicts,
    unjudgeable,
    verdict_rows,
)
from report.compare import trace_ids
from report.pairwise import SKIPPED_TAG
from report.policy import no_pair, pairs_of
from report.report import compared_records
from runners import dryrun
from runners.job import load_tasks, make_judge, make_panel
from runners.scoring import judge_metrics
from runners.settings import Settings
from tracking.paths import resolve
from tracking.runs import log_pairwise

log = logging.getLogger(__name__)


def judge_pairs(client: Any, parent: dict[str, Any], jobs: list[Settings]) -> None:
    """Judge the sweep's pairs and log the result to its parent run (see the module)."""
    if not any(j.config.judge.pairwise for j in jobs):
        return
    settings = jobs[0]
    cfg = settings.config
    journal = SpendJournal(Path(parent["sweep_dir"]) / f"pairwise_judge_spend.{parent['run_id']}"
                                                      ".jsonl")
    why = unjudgeable([j.tree for j in jobs])
    judge, reason = make_judge(cfg, journal) if not why else (None, why)
    if judge is None:
        _skip(client, parent, reason)
        return
    rows, records = compared_records(client, parent)
    pairs = pairs_of(rows, cfg.judge.pairwise_pairs)
    if not pairs:
        _skip(client, parent, no_pair(rows))
        return
    dataset = load_tasks(cfg)
    answers = {row["run"]: answers_of(records.get(row["run_id"], [])) for row in rows}
    planned = plan(pairs, answers, {t.id: t for t in dataset.tasks}, dataset.corpus, judge,
                   cfg.judge.context_limit)
    judges = {cfg.judge.name: judge, **make_panel(settings, journal)}
    found = verdict_rows(planned, judges, cfg.judge.batch, cfg.runner.concurrency)
    cost = {f"pairwise_{k}": v for k, v in judge_metrics(judges, journal).items()}
    metrics = {**metrics_of(summarize(found)), **cost,
               "pairwise_requests_not_sent": float(sum(p.request is None for p in planned))}
    traces = trace_ids(parent["experiment_id"], rows)
    traced = log_pairwise(client, parent["run_id"], found, metrics,
                          trace_verdicts(outcomes(found), cfg.judge.name),
                          {r["run"]: traces.get(r["run_id"], {}) for r in rows})
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
    why = unjudgeable([j.tree for j in jobs]) or ("" if PROVIDERS.get(cfg.judge.provider).judges else
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


def _skip(client: Any, parent: dict[str, Any], why: str) -> None:
    log.warning("judge.pairwise=true: no pairwise judging: %s", why)
    client.set_tag(parent["run_id"], SKIPPED_TAG, why[:5000])
