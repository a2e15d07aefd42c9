"""A job's dry run (``runner.dry_run=true``): what it would cost, with no model called and
nothing embedded that the cache does not already hold."""

from __future__ import annotations

from pathlib import Path

from hydra.types import RunMode

from arag.llm.registry import PROVIDERS
from arag.retrieval import build_chunks
from arag.retrieval.chunk_context import context_requests
from metrics import ScorerEnv, build_scorers
from runners import dryrun
from runners.evaluate import scoring_items
from runners.job import Job, build_system
from tracking.paths import resolve


def dry_run(job: Job, run_name: str | None) -> dict[str, float]:
    """What the run would cost, with no model called (``runner.dry_run=true``): the
    system's calls, the judge's, any the dataset still needs, and their total."""
    cfg = job.cfg
    name = run_name or cfg.system.name
    est = dryrun.estimate(name, lambda m: build_system(job, m), job.dataset.tasks, cfg.model,
                          job.dataset.name, cfg.model.offline)
    repeats = cfg.runner.repeats  # every repeat is a request of its own: priced K times
    parts = {"system": [est.repeated(repeats)],
             "judge": [e.repeated(repeats) for e in _judge_estimates(job, name, est.predictions)]}
    if cfg.retrieval.llm_context:  # the contexts the model would write for the index
        chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size,
                              cfg.retrieval.chunk_overlap)
        parts["retrieval"] = [dryrun.estimate_requests(
            f"{name} chunk contexts", context_requests(job.dataset.corpus, chunks), cfg.model,
            resolve(cfg.cache.dir))]
    pending = job.dataset.pending
    if pending is not None:  # e.g. silver references the dataset would have written
        parts["dataset"] = [dryrun.estimate_requests(f"{job.dataset.name} needs",
                                                     pending.requests(job.dataset),
                                                     pending.model_cfg, resolve(cfg.cache.dir))]
    for e in (e for es in parts.values() for e in es):
        print(e.line(), flush=True)
    if job.index_estimated:
        print(f"{name}: estimate: {job.index_estimated}, so the dry run embedded nothing and "
              "ranked chunks by keywords; the chunks read, and so the system's tokens and "
              "cost, are approximate", flush=True)
    index = job.index_metrics()
    if index:  # what the dry run's search cost: loading a cached index or the stand-in
        print(f"{name}: index: {index['index_sentences_embedded']:.0f} sentences embedded, "
              f"{index['index_sentences_reused']:.0f} reused from the cache", flush=True)
    summary = {**dryrun.summarize(name, parts), "tasks": len(job.dataset.tasks)}
    print(dryrun.total_line(f"{name} total", [summary]), flush=True)
    sweep_dir = _sweep_dir()
    if sweep_dir is not None:
        dryrun.record(sweep_dir, summary)
        if cfg.judge.pairwise:  # the sweep's end prices the pairwise judge on these answers
            dryrun.record_answers(sweep_dir, name, job.system_class, est.predictions)
    return {"n_tasks": float(est.n_tasks), "estimated_cost_usd": summary["cost_usd"], **index}


def _judge_estimates(job: Job, name: str, predictions: list) -> list[dryrun.Estimate]:
    """The judge's calls on the dry run's predictions, as the run's scorers declare them
    (none without a judge that judges)."""
    cfg = job.cfg
    if not PROVIDERS.get(cfg.judge.provider).judges:
        return []
    chunks = build_chunks(job.dataset.corpus, cfg.retrieval.chunk_size,
                          cfg.retrieval.chunk_overlap)
    items = scoring_items(predictions, {t.id: t for t in job.dataset.tasks},
                          job.dataset.corpus, chunks, cfg.target_length, job.system_class,
                          cfg.system.citations)
    panel = job.settings.panel
    env = ScorerEnv(judge=dryrun.NoCallJudge(), judge_id=f"{cfg.judge.provider}/"
                    f"{cfg.judge.model_id}", judge_samples=cfg.judge.samples,
                    panel={n: dryrun.NoCallJudge() for n in panel},
                    cache_dir=resolve(cfg.cache.dir))
    return dryrun.estimate_judge(name, items, build_scorers(cfg.metrics, env),
                                 [cfg.judge, *panel.values()], resolve(cfg.cache.dir),
                                 batch=cfg.judge.batch)


def _sweep_dir() -> Path | None:
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return None
    path = Path(HydraConfig.get().sweep.dir)
    path.mkdir(parents=True, exist_ok=True)
    return path
