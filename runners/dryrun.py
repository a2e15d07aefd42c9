"""``runner.dry_run=true``: what a run would cost, with no model called.

Each task goes through the real system (real retrieval, real prompts) with the offline
model standing in for the configured one, so the A-RAG loop issues plausible tool calls.
Every request the system builds is counted with a local tokenizer (the packaged MiniLM
WordPiece tokenizer, scaled by ``CLAUDE_PER_WORDPIECE``) and priced with the configured
model's prices. Prompt-cache discounts are not assumed: the estimate is an upper bound
for input.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from arag.llm.base import ChatModel, Completion, Message, ToolSpec
from arag.llm.cache import is_cached
from arag.llm.offline import OfflineModel
from arag.llm.pricing import Prices
from arag.records import Prediction, Task

log = logging.getLogger(__name__)
# Claude's tokenizer yields ~10% more tokens than BERT WordPiece on English financial text
CLAUDE_PER_WORDPIECE = 1.1


@lru_cache(maxsize=1)
def _tokenizer():
    from transformers import AutoTokenizer

    from arag.retrieval.embedder import packaged_minilm_path

    tokenizer = AutoTokenizer.from_pretrained(packaged_minilm_path())
    tokenizer.model_max_length = 10**9  # it counts tokens here; nothing is fed to the model
    return tokenizer


def count_tokens(text: str) -> int:
    ids = _tokenizer()(text, add_special_tokens=False, truncation=False)["input_ids"]
    return int(len(ids) * CLAUDE_PER_WORDPIECE) + 1


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
        request = json.dumps({"system": system, "messages": messages,
                              "tools": [t.to_api() for t in tools or []]})
        sent = count_tokens(request)
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
    predictions: list[Prediction] = field(default_factory=list, repr=False)

    def line(self) -> str:
        if self.n_cached is None:
            return (f"[dry run] {self.run}: {self.n_tasks} tasks, {self.n_calls} model calls, "
                    f"~{self.input_tokens:,} input tokens, ~{self.output_tokens:,} output "
                    f"tokens, estimated cost ${self.cost_usd:.4f}")
        return (f"[dry run] {self.run}: {self.n_calls} calls to {self.model} ({self.n_cached} "
                f"more already in the response cache), ~{self.input_tokens:,} input tokens, "
                f"at most {self.output_tokens:,} output tokens, estimated cost "
                f"${self.cost_usd:.4f}")


def estimate_requests(label: str, requests: dict[str, dict[str, Any]], model_cfg: Any,
                      cache_dir: Any) -> Estimate:
    """Price calls a dataset still needs (``max_tokens`` as the output: an upper bound);
    those the response cache already answers cost nothing and are not counted."""
    todo = [r for r in requests.values()
            if not is_cached(cache_dir, model_cfg.provider, model_cfg.model_id, **r)]
    input_tokens = sum(count_tokens(json.dumps({"system": r["system"],
                                                "messages": r["messages"]})) for r in todo)
    output_tokens = sum(int(r["max_tokens"]) for r in todo)
    prices = Prices.from_config(model_cfg)
    cost = (input_tokens * prices.input + output_tokens * prices.output) / 1e6
    return Estimate(label, len(requests), len(todo), input_tokens, output_tokens, cost,
                    n_cached=len(requests) - len(todo), model=model_cfg.name)


def estimate(run_name: str, system_factory: Any, tasks: list, model_cfg: Any, source: str,
             offline_options: Any) -> Estimate:
    stand_in = OfflineModel(model_cfg.name, offline_options.chunks_per_read,
                            offline_options.max_chunks_read, offline_options.search_top_k)
    model = EstimatingModel(model_cfg.name, stand_in)
    system = system_factory(model)
    predictions = [system.predict(task, source) for task in tasks]
    prices = Prices.from_config(model_cfg)
    cost = (model.input_tokens * prices.input + model.output_tokens * prices.output) / 1e6
    return Estimate(run_name, len(tasks), model.calls, model.input_tokens, model.output_tokens,
                    cost, predictions=predictions)


# typical G-Eval evaluation steps, standing in for criteria the judge has not written yet
_STEPS_STAND_IN = " ".join(["Read the summary and the source, check each stated figure and "
                            "period against it, and note what is missing or unsupported."] * 4)


def judge_requests(items: list[tuple[Prediction, Task, str | None]], steps: dict[str, str],
                   samples: int = 1, taxonomy: bool = True,
                   scorers: tuple[str, ...] = ()) -> dict[str, dict[str, Any]]:
    """Every call G-Eval would make to one judge for these (prediction, task, judged
    context) items: one per task, dimension and sample, plus (the primary judge) at most
    one error-taxonomy call per task (made only for tasks scoring below 3: an upper
    bound) and the calls of the other judged ``scorers`` it runs (one claim check per task
    for ``factual_consistency``, one verdict per QA task for ``qa``)."""
    from metrics.base import ScoringItem, answered, missing_reference
    from metrics.consistency import _SYSTEM as _CLAIMS_SYSTEM
    from metrics.consistency import claims_prompt
    from metrics.geval import (
        _SCORER_SYSTEM,
        _TAXONOMY_SYSTEM,
        DIMENSIONS,
        judge_request,
        scoring_prompt,
        taxonomy_prompt,
    )
    from metrics.qa import _SYSTEM as _QA_SYSTEM
    from metrics.qa import verdict_prompt

    requests: dict[str, dict[str, Any]] = {}
    for pred, task, context in items:
        item = ScoringItem(pred, task, None, context, 0, False)
        if answered(item):
            continue
        for dim in DIMENSIONS:
            if dim == "coverage" and missing_reference(item):
                continue
            for sample in range(samples):
                requests[f"{task.id}:{dim}:{sample}"] = judge_request(
                    _SCORER_SYSTEM, scoring_prompt(dim, steps[dim], item), 700, sample=sample)
        if taxonomy:
            requests[f"{task.id}:taxonomy"] = judge_request(
                _TAXONOMY_SYSTEM, taxonomy_prompt(item, {}), 100)
        if "factual_consistency" in scorers:
            requests[f"{task.id}:claims"] = judge_request(_CLAIMS_SYSTEM, claims_prompt(item),
                                                          1200)
        if "qa" in scorers and task.task_type == "qa":
            requests[f"{task.id}:verdict"] = judge_request(_QA_SYSTEM, verdict_prompt(item), 400)
    return requests


def estimate_judge(label: str, items: list[tuple[Prediction, Task, str | None]],
                   judge_cfgs: list[Any],
                   cache_dir: Path, samples: int = 1, batch: bool = False,
                   scorers: tuple[str, ...] = ()) -> list[Estimate]:
    """What judging these predictions would cost, per judge (the primary, then the panel):
    criteria still to be written, then every scoring call of every sample (and the
    primary's taxonomy calls), each judge with its own prices; calls the response cache
    holds are free, Message Batches half price."""
    from metrics.geval import DIMENSIONS, CriteriaStore

    estimates = []
    for rank, judge_cfg in enumerate(judge_cfgs):
        judge_id = f"{judge_cfg.provider}/{judge_cfg.model_id}"
        store = CriteriaStore(None, judge_id, cache_dir, False)  # type: ignore[arg-type]
        steps = {dim: _cached_steps(store.path(dim)) for dim in DIMENSIONS}
        to_write = [dim for dim, s in steps.items() if s is None]
        est = estimate_requests(f"{label} judge", judge_requests(
            items, {d: s or _STEPS_STAND_IN for d, s in steps.items()}, samples,
            taxonomy=rank == 0, scorers=scorers if rank == 0 else ()), judge_cfg, cache_dir)
        # each criteria still to write: one call, its prompt about as long as the stand-in
        prompt, prices = count_tokens(_STEPS_STAND_IN), Prices.from_config(judge_cfg)
        est.n_calls += len(to_write)
        est.input_tokens += len(to_write) * prompt
        est.output_tokens += len(to_write) * 600
        est.cost_usd += len(to_write) * (prompt * prices.input + 600 * prices.output) / 1e6
        if batch:
            est.cost_usd /= 2
        estimates.append(est)
    return estimates


def _cached_steps(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text())["steps"]) or None
    except (OSError, ValueError, KeyError):
        return None


SWEEP_FILE = "dry_run.jsonl"


def record(sweep_dir: Path, summary: dict[str, Any]) -> None:
    """A job's summary (``summarize``), for the sweep's total (jobs may run in other
    processes)."""
    with open(sweep_dir / SWEEP_FILE, "a", encoding="utf-8") as f:
        f.write(json.dumps(summary) + "\n")


def summarize(run: str, parts: dict[str, list[Estimate]]) -> dict[str, Any]:
    """A job's calls and cost, in total and per part (system, judge, dataset)."""
    return {"run": run, "calls": sum(e.n_calls for es in parts.values() for e in es),
            "cost_usd": sum(e.cost_usd for es in parts.values() for e in es),
            "parts": {part: sum(e.cost_usd for e in es) for part, es in parts.items() if es}}


def total_line(label: str, summaries: list[dict[str, Any]]) -> str:
    """``[dry run] sweep total: 3 jobs, 102 calls, estimated cost $0.33 (system $0.12,
    judge $0.21)``."""
    parts: dict[str, float] = {}
    for s in summaries:
        for part, cost in s["parts"].items():
            parts[part] = parts.get(part, 0.0) + cost
    split = ", ".join(f"{part} ${cost:.4f}" for part, cost in parts.items())
    jobs = f"{len(summaries)} jobs, " if len(summaries) != 1 else ""
    return (f"[dry run] {label}: {jobs}{sum(s['calls'] for s in summaries):,} calls, "
            f"estimated cost ${sum(s['cost_usd'] for s in summaries):.4f} ({split})")


def sweep_total(sweep_dir: Path) -> str:
    """The sweep's total over every job's summary."""
    path = sweep_dir / SWEEP_FILE
    rows = [json.loads(line) for line in path.read_text().splitlines() if line] \
        if path.exists() else []
    return total_line("sweep total", rows)
