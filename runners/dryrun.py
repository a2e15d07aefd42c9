"""``runner.dry_run=true``: what a run would cost, with no model called.

Each task goes through the real system (real retrieval, real prompts) with the offline
model standing in for the configured one, so the A-RAG loop issues plausible tool calls.
Every request the system builds is counted with the local estimate a run's rate limiter
uses (``arag.llm.tokens``: the packaged MiniLM WordPiece tokenizer, scaled) and priced
with the configured model's prices. Prompt-cache discounts are not assumed: the estimate is an upper bound
for input. With ``runner.repeats=K`` every task is answered K times, each a request of its
own, so the system's and the judge's calls are priced K times over (the stand-in answers
every repeat alike, so one pass is estimated and multiplied).
"""

from __future__ import annotations

import json
import logging
import multiprocessing as mp
import os
import threading
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from arag.llm.base import ChatModel, Completion, Message, ToolSpec, call_arguments, estimate_tokens
from arag.llm.cache import is_cached
from arag.llm.limits import Seeds
from arag.llm.offline import OfflineModel
from arag.llm.pricing import Prices
from arag.llm.rate_headers import INPUT, OUTPUT, REQUESTS, TOKENS
from arag.llm.tokens import count_tokens  # the estimate a run's rate limiter paces by
from arag.llm.window import judge_window, request_tokens
from arag.records import Prediction
from metrics import Scorer, ScoringItem

log = logging.getLogger(__name__)


@lru_cache(maxsize=256)
def _counted(text: str) -> int:
    return count_tokens(text)


@lru_cache(maxsize=64)  # a task's requests; tasks are estimated one after another
def _part_tokens(text: str) -> int:
    return count_tokens(text)


class EstimatingModel(ChatModel):
    """Answers like the offline model; counts what the configured model would be sent."""

    provider = "estimate"

    def __init__(self, name: str, stand_in: OfflineModel):
        self.name = name
        self.stand_in = stand_in
        self.input_tokens = 0
        self.output_tokens = 0
        self.calls = 0
        self._lock = threading.Lock()

    def count_tokens(self, text: str) -> int:
        return count_tokens(text)

    def complete(self, system: str, messages: list[Message], tools: list[ToolSpec] | None = None,
                 max_tokens: int = 1024, temperature: float = 0.0,
                 tool_choice: str = "auto") -> Completion:
        completion = self.stand_in.complete(system, messages, tools, max_tokens, temperature,
                                            tool_choice)
        # the request's parts counted one by one: an agent's next request repeats its
        # history, whose messages are then counted once (the sum is the whole's count but
        # for a token or two at the seams)
        parts = [json.dumps(system), json.dumps([t.to_api() for t in tools or []]),
                 *(json.dumps(m) for m in messages)]
        sent = sum(_part_tokens(p) for p in parts)
        produced = count_tokens(json.dumps(completion.content))
        with self._lock:
            self.input_tokens += sent
            self.output_tokens += produced
            self.calls += 1
        return completion


@dataclass
class Estimate:
    run: str
    n_tasks: int
    n_calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    n_cached: int | None = None  # calls the response cache already answers (not counted)
    model: str = ""
    # requests that do not fit the model's window: never sent, not counted (arag.llm.window)
    unsent: list[int] = field(default_factory=list)  # the tokens each would need
    window: str = ""  # the setting they exceed, as ``key=value``
    # the account whose rate limits pace these calls, and its limits per minute (the
    # config's model.*_per_minute; empty: none known)
    account: str = ""
    limits: dict[str, float] = field(default_factory=dict)
    predictions: list[Prediction] = field(default_factory=list, repr=False)

    def repeated(self, repeats: int) -> Estimate:
        """The same calls made for each of ``repeats`` answers to every task."""
        if repeats == 1:
            return self
        return replace(self, run=f"{self.run} (x{repeats} repeats)",
                       n_calls=self.n_calls * repeats, input_tokens=self.input_tokens * repeats,
                       output_tokens=self.output_tokens * repeats,
                       cost_usd=self.cost_usd * repeats,
                       n_cached=self.n_cached)  # cached for repeat 0: the rest are asked

    def line(self) -> str:
        if self.n_cached is None:
            return (f"[dry run] {self.run}: {self.n_tasks} tasks, {self.n_calls} model calls, "
                    f"~{self.input_tokens:,} input tokens, ~{self.output_tokens:,} output "
                    f"tokens, estimated cost ${self.cost_usd:.4f}")
        return (f"[dry run] {self.run}: {self.n_calls} calls to {self.model} ({self.n_cached} "
                f"more already in the response cache), ~{self.input_tokens:,} input tokens, "
                f"at most {self.output_tokens:,} output tokens, estimated cost "
                f"${self.cost_usd:.4f}{self.unsent_words()}")

    def unsent_words(self) -> str:
        if not self.unsent:
            return ""
        return (f"; {len(self.unsent)} more would not fit {self.window} (largest "
                f"~{max(self.unsent):,} tokens): not sent, their scores null with the reason")


def estimate_requests(label: str, requests: dict[str, dict[str, Any]], model_cfg: Any,
                      cache_dir: Any, window: str | None = None) -> Estimate:
    """Price calls a dataset still needs (``max_tokens`` as the output: an upper bound);
    those the response cache already answers cost nothing and are not counted. ``window``:
    the setting holding ``model_cfg.context_limit`` when requests over it are never sent
    (a judge's); they are counted apart, by the rule a run applies."""
    needed = {cid: request_tokens(estimate_tokens, **call_arguments(r))
              for cid, r in requests.items()} if window else {}
    unsent = [n for n in needed.values() if n > model_cfg.context_limit]
    requests = {cid: r for cid, r in requests.items()
                if needed.get(cid, 0) <= model_cfg.context_limit}
    todo = [r for r in requests.values()
            if not is_cached(cache_dir, model_cfg.provider, model_cfg.model_id,
                             model_cfg.base_url, getattr(model_cfg, "reask_unreadable", 0), **r)]
    # a system prompt many requests share (a document, for chunk contexts) is counted once
    input_tokens = sum(_counted(r["system"]) + count_tokens(json.dumps(r["messages"]))
                       for r in todo)
    output_tokens = sum(int(r["max_tokens"]) for r in todo)
    prices = Prices.from_config(model_cfg)
    cost = (input_tokens * prices.input + output_tokens * prices.output) / 1e6
    return Estimate(label, len(requests), len(todo), input_tokens, output_tokens, cost,
                    n_cached=len(requests) - len(todo), model=model_cfg.name, unsent=unsent,
                    window=f"{window}={model_cfg.context_limit:,}" if window else "",
                    **paced_by(model_cfg))


def estimate(run_name: str, system_factory: Any, tasks: list, model_cfg: Any, source: str,
             offline_options: Any) -> Estimate:
    stand_in = OfflineModel(model_cfg.name, offline_options.chunks_per_read,
                            offline_options.max_chunks_read, offline_options.search_top_k)
    model = EstimatingModel(model_cfg.name, stand_in)
    system = system_factory(model)
    done = _predict_all(system, model, tasks, source)
    prices = Prices.from_config(model_cfg)
    cost = (done.input_tokens * prices.input + done.output_tokens * prices.output) / 1e6
    return Estimate(run_name, len(tasks), done.calls, done.input_tokens, done.output_tokens,
                    cost, predictions=done.predictions, **paced_by(model_cfg))


def paced_by(model_cfg: Any) -> dict[str, Any]:
    """The account a model's calls share a rate limiter on (``arag.llm.limits``: provider,
    endpoint and model) and the limits its config gives."""
    return {"account": f"{model_cfg.provider}:{model_cfg.base_url or ''}:{model_cfg.model_id}",
            "limits": Seeds.from_config(model_cfg).per_minute()}


# Tasks are estimated on every core: a task's answer and counts depend on that task alone
# (the stand-in and the counts are pure), so the sums are the same however the tasks are
# split. The offline answers are Python work, so the split is over processes forked from
# this one, which inherit the system, its index and the dataset as they are; contiguous
# slices keep a document's tasks together (the extractive answer keeps scores per document).
TASKS_PER_WORKER = 8  # fewer and a fork costs more than it saves
_forked: tuple[Any, EstimatingModel, list, str] | None = None


@dataclass
class Counted:
    predictions: list[Prediction]
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


def _predict_all(system: Any, model: EstimatingModel, tasks: list, source: str) -> Counted:
    global _forked
    workers = min(os.cpu_count() or 1, len(tasks) // TASKS_PER_WORKER)
    _forked = (system, model, tasks, source)
    try:
        if workers < 2 or "fork" not in mp.get_all_start_methods():
            return _predict_slice((0, len(tasks)))
        bounds = [len(tasks) * k // workers for k in range(workers + 1)]
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("fork")) as pool:
            parts = list(pool.map(_predict_slice, zip(bounds, bounds[1:], strict=False)))
    finally:
        _forked = None
    return Counted([p for part in parts for p in part.predictions],
                   sum(part.calls for part in parts), sum(part.input_tokens for part in parts),
                   sum(part.output_tokens for part in parts))


def _predict_slice(bounds: tuple[int, int]) -> Counted:
    """The tasks ``tasks[start:end]`` estimated by the model's counts from zero."""
    assert _forked is not None
    system, model, tasks, source = _forked
    model.input_tokens = model.output_tokens = model.calls = 0
    predictions = [system.predict(task, source) for task in tasks[bounds[0]:bounds[1]]]
    return Counted(predictions, model.calls, model.input_tokens, model.output_tokens)


def judge_requests(scorers: list[Scorer], items: list[ScoringItem], judge_id: str,
                   primary: bool) -> dict[str, dict[str, Any]]:
    """Every call the scorers would make to one judge for these items, as each scorer
    declares them (``Scorer.judge_requests``), by ``<scorer>:<id>``."""
    return {f"{scorer.name}:{key}": request for scorer in scorers
            for key, request in scorer.judge_requests(items, judge_id, primary).items()}


def estimate_judge(label: str, items: list[ScoringItem], scorers: list[Scorer],
                   judge_cfgs: list[Any], cache_dir: Path, batch: bool = False
                   ) -> list[Estimate]:
    """What judging these items would cost, per judge (the primary, then the panel): what
    every scorer declares it would ask that judge, each judge with its own prices; calls
    the response cache holds are free, Message Batches half price."""
    estimates = []
    for rank, judge_cfg in enumerate(judge_cfgs):
        judge_id = f"{judge_cfg.provider}/{judge_cfg.model_id}"
        est = estimate_requests(f"{label} judge", judge_requests(scorers, items, judge_id,
                                                                 primary=rank == 0),
                                judge_cfg, cache_dir,
                                window=judge_window(None if rank == 0 else judge_cfg.name))
        if batch:
            est.cost_usd /= 2
        estimates.append(est)
    return estimates


class NoCallJudge(ChatModel):
    """The judge scorers are built with for a dry run: they declare their calls, never
    make one."""

    provider = "estimate"
    name = "dry-run judge"

    def complete(self, *args: Any, **kwargs: Any) -> Completion:
        raise AssertionError("a dry run makes no judge call; Scorer.judge_requests declares them")


SWEEP_FILE = "dry_run.jsonl"


def start_sweep(sweep_dir: Path) -> None:
    """A dry run reports its own jobs only: a sweep folder used again (a fixed
    ``hydra.sweep.dir``, as docs/ci.md recommends) starts with no earlier dry run's rows."""
    for name in (SWEEP_FILE, ANSWERS_FILE):
        (sweep_dir / name).unlink(missing_ok=True)


def record(sweep_dir: Path, summary: dict[str, Any]) -> None:
    """A job's summary (``summarize``), for the sweep's total (jobs may run in other
    processes)."""
    with open(sweep_dir / SWEEP_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(summary) + "\n")


ANSWERS_FILE = "dry_run_answers.jsonl"


def record_answers(sweep_dir: Path, run: str, system_class: Any,
                   predictions: list[Prediction]) -> None:
    """A job's dry-run answers and what its system declares, for the pairwise judge's
    estimate at the sweep's end (``judge.pairwise``)."""
    row = {"run": run, "agentic": system_class.agentic, "bound": system_class.bound,
           "records": [{"id": p.id, "predicted": p.predicted, "error": p.error,
                        "skipped": p.skipped} for p in predictions]}
    with open(sweep_dir / ANSWERS_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def recorded_answers(sweep_dir: Path) -> list[dict[str, Any]]:
    """Each job's dry-run answers (a sweep folder used again: its latest of each run)."""
    path = sweep_dir / ANSWERS_FILE
    rows = [json.loads(line) for line in path.read_text().splitlines() if line] \
        if path.exists() else []
    return list({row["run"]: row for row in rows}.values())


def summarize(run: str, parts: dict[str, list[Estimate]]) -> dict[str, Any]:
    """A job's calls and cost, in total and per part (system, judge, dataset), and what it
    asks of each rate-limited account (``paced``)."""
    paced: dict[str, dict[str, Any]] = {}
    for e in (e for es in parts.values() for e in es if e.limits):
        asked = paced.setdefault(e.account, {"limits": e.limits, REQUESTS: 0, INPUT: 0,
                                             OUTPUT: 0})
        asked["limits"] = {b: min(v, asked["limits"].get(b, v)) for b, v in
                           {**asked["limits"], **e.limits}.items()}
        asked[REQUESTS] += e.n_calls
        asked[INPUT] += e.input_tokens
        asked[OUTPUT] += e.output_tokens
    return {"run": run, "calls": sum(e.n_calls for es in parts.values() for e in es),
            "cost_usd": sum(e.cost_usd for es in parts.values() for e in es),
            "parts": {part: sum(e.cost_usd for e in es) for part, es in parts.items() if es},
            **({"paced": paced} if paced else {})}


def total_line(label: str, summaries: list[dict[str, Any]]) -> str:
    """``[dry run] sweep total: 3 jobs, 102 calls, estimated cost $0.33 (system $0.12,
    judge $0.21)``; and the wall time the configured rate limits allow, if any."""
    parts: dict[str, float] = {}
    for s in summaries:
        for part, cost in s["parts"].items():
            parts[part] = parts.get(part, 0.0) + cost
    split = ", ".join(f"{part} ${cost:.4f}" for part, cost in parts.items())
    jobs = f"{len(summaries)} jobs, " if len(summaries) != 1 else ""
    line = (f"[dry run] {label}: {jobs}{sum(s['calls'] for s in summaries):,} calls, "
            f"estimated cost ${sum(s['cost_usd'] for s in summaries):.4f} ({split})")
    least = wall_minutes(summaries)
    if least is not None:
        what = "this sweep" if label.startswith("sweep") else "this run"
        line += f"\n[dry run] at {least[1]} {what} needs at least {_minutes(least[0])}"
    return line


def wall_minutes(summaries: list[dict[str, Any]], share: Any = None
                 ) -> tuple[float, str] | None:
    """The least wall time the configured rate limits allow these jobs, and the limits
    that set it (``400,000 input tokens/min``); None when no limit is configured.

    Each account's budgets start full and refill their limit each minute, so its calls
    need at least ``asked / limit - 1`` minutes on the budget they take most of; accounts
    are added up (a job asks its model, then its judge). ``share``: the share of each
    summary's calls counted (a sequential sweep's stop), all by default."""
    asked: dict[str, dict[str, Any]] = {}
    for s in summaries:
        part = share(s) if share is not None else 1.0
        for account, a in s.get("paced", {}).items():
            total = asked.setdefault(account, {"limits": a["limits"], REQUESTS: 0.0, INPUT: 0.0,
                                               OUTPUT: 0.0})
            for budget in (REQUESTS, INPUT, OUTPUT):
                total[budget] += a[budget] * part
    if not asked:
        return None
    minutes, binding = 0.0, []
    for total in asked.values():
        need = {REQUESTS: total[REQUESTS], INPUT: total[INPUT], OUTPUT: total[OUTPUT],
                TOKENS: total[INPUT] + total[OUTPUT]}
        most = max(total["limits"], key=lambda b: need[b] / total["limits"][b])
        minutes += max(0.0, need[most] / total["limits"][most] - 1)
        binding.append(f"{total['limits'][most]:,.0f} {most.replace('_', ' ')}/min")
    return minutes, " and ".join(binding)


def _minutes(minutes: float) -> str:
    return f"{int(minutes):,} min" if minutes >= 1 else f"{int(minutes * 60)} s"


def sweep_total(sweep_dir: Path, runner: Any = None) -> str:
    """The sweep's total over every job's summary; a sequential sweep's as a range."""
    path = sweep_dir / SWEEP_FILE
    rows = [json.loads(line) for line in path.read_text().splitlines() if line] \
        if path.exists() else []
    line = total_line("sweep total", rows)
    if runner is not None and runner.sequential and rows:
        line += "\n" + sequential_range(rows, runner.batch_size, runner.max_tasks)
    return line


def _task_share(tasks: int) -> Any:
    return lambda s: min(tasks, s["tasks"]) / s["tasks"] if s.get("tasks") else 0.0


def sequential_range(summaries: list[dict[str, Any]], batch_size: int, max_tasks: int | None
                     ) -> str:
    """What a sequential sweep may spend: from its smallest stop (every comparison settled
    at the first look) to the full set (or ``runner.max_tasks``), each job's estimate
    scaled by the share of its tasks it would answer (a task costs about the same
    whenever it runs)."""
    def spend(tasks: int) -> float:
        return sum(s["cost_usd"] * _task_share(tasks)(s) for s in summaries)
    total = max(s.get("tasks") or 0 for s in summaries)
    most = min(total, max_tasks) if max_tasks is not None else total
    least = min(batch_size, most)
    cap = " (runner.max_tasks)" if most < total else ""
    line = (f"[dry run] sequential: between ${spend(least):.4f} (stopped at the first look, "
            f"after {least} of {total} tasks) and ${spend(most):.4f} (after {most} "
            f"tasks{cap}); where in between depends on how soon the comparisons are settled")
    soonest = wall_minutes(summaries, _task_share(least))
    latest = wall_minutes(summaries, _task_share(most))
    if soonest is not None and latest is not None:
        line += (f"\n[dry run] sequential: at {latest[1]} it needs at least between "
                 f"{_minutes(soonest[0])} (stopped at the first look) and "
                 f"{_minutes(latest[0])} (after {most} tasks)")
    return line
