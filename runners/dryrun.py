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
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from arag.llm.base import ChatModel, Completion, Message, ToolSpec
from arag.llm.cache import is_cached
from arag.llm.offline import OfflineModel
from arag.llm.pricing import Prices

log = logging.getLogger(__name__)
# Claude's tokenizer yields ~10% more tokens than BERT WordPiece on English financial text
CLAUDE_PER_WORDPIECE = 1.1


@lru_cache(maxsize=1)
def _tokenizer():
    from transformers import AutoTokenizer

    from arag.retrieval.embedder import packaged_minilm_path

    return AutoTokenizer.from_pretrained(packaged_minilm_path())


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
    for task in tasks:
        system.predict(task, source)
    prices = Prices.from_config(model_cfg)
    cost = (model.input_tokens * prices.input + model.output_tokens * prices.output) / 1e6
    return Estimate(run_name, len(tasks), model.calls, model.input_tokens, model.output_tokens,
                    cost)
