"""G-Eval (Liu et al. 2023) faithfulness and coverage, and the error taxonomy.

Step A: evaluation steps are generated once per (dimension, judge model, prompt version)
by the judge and cached as JSON under ``<cache.dir>/geval/``; every run logs the steps it
used. Step B: per task and dimension, one chain-of-thought call scores the prediction
1-5 over those steps. Faithfulness is judged against the context the system actually
used (chunks read by the agent, top-k chunks for naive, the whole document for
stuffing); coverage against the reference summary.

A reply without a parseable score gives ``None`` and ``geval_<dim>_parse_failed=True``
with the reply kept verbatim: never a default score.

Error taxonomy: every task scoring below 3 on either dimension gets one judge call that
assigns codes from exactly ``ERROR_CODES``; anything else in the reply is dropped and
logged.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from arag.llm.base import ChatModel, ModelError
from metrics.base import (
    Scorer,
    Scores,
    ScoringItem,
    answered,
    missing_reference,
    register_scorer,
)

log = logging.getLogger(__name__)
PROMPT_VERSION = "v1"

DIMENSIONS = {
    "faithfulness": (
        "Faithfulness (1-5): the factual consistency of the predicted summary with the source "
        "context. A faithful summary states only facts supported by the context; every figure "
        "(amount, percentage, per-share value, period) must match the context exactly. "
        "Penalize hallucinated facts, wrong numbers, and facts attributed to the wrong period, "
        "segment or company."
    ),
    "coverage": (
        "Coverage (1-5): how completely the predicted summary covers the key facts of the "
        "reference summary (results, per-share earnings, margins, guidance). Each key fact of "
        "the reference that is missing or wrong lowers the score; extra correct detail does "
        "not raise it."
    ),
}
ERROR_CODES = {
    "H": "hallucination: a fact or figure not supported by the context",
    "N": "numeric error: a figure misstated (value, unit, sign, or scale)",
    "O": "omission: a key fact of the reference is missing",
    "P": "period or entity mix-up: a right figure attributed to the wrong quarter, year, "
         "segment or company",
    "IR": "irrelevant retrieval: the summary relies on context about another company or "
          "document",
    "IC": "incomplete context: the context the system read lacked facts the summary needed",
    "V": "verbosity or format: far off the requested length or style",
}

STRICT = re.compile(r"Final score:\s*([1-5])\b")
TOLERANT = (
    re.compile(r"final\s*score\s*\**\s*[:=\-]?\s*\**\s*([1-5])(?:\.0)?\s*(?:/\s*5|out of 5)?\b",
               re.IGNORECASE),
    re.compile(r"\bscore\s*\**\s*[:=]\s*\**\s*([1-5])(?:\.0)?\s*(?:/\s*5|out of 5)?\b",
               re.IGNORECASE),
    re.compile(r"\b([1-5])\s*(?:/\s*5|out of 5)\b", re.IGNORECASE),
)


def parse_score(reply: str) -> int | None:
    """The strict ``Final score: N`` form (last one wins), then tolerant fallbacks."""
    strict = STRICT.findall(reply)
    if strict:
        return int(strict[-1])
    for pattern in TOLERANT:
        found = pattern.findall(reply)
        if found:
            return int(found[-1])
    return None


def parse_codes(reply: str) -> tuple[list[str], list[str]]:
    """Codes from a ``Codes: H, O`` line (or the whole reply); returns (kept, dropped)."""
    line = next((m.group(1) for m in re.finditer(r"codes?\s*:\s*(.*)", reply, re.IGNORECASE)),
                reply)
    tokens = [t.upper() for t in re.findall(r"[A-Za-z]+", line)]
    if tokens and tokens[0] == "NONE":
        return [], []
    kept = [t for t in dict.fromkeys(tokens) if t in ERROR_CODES]
    dropped = [t for t in dict.fromkeys(tokens) if t not in ERROR_CODES]
    return kept, dropped


class CriteriaStore:
    """Step A: evaluation steps per (dimension, judge, prompt version), cached as JSON."""

    def __init__(self, judge: ChatModel, judge_id: str, cache_dir: Path, regenerate: bool):
        self.judge = judge
        self.judge_id = judge_id
        self.folder = cache_dir / "geval"
        self.regenerate = regenerate
        self.used: dict[str, dict[str, Any]] = {}

    def path(self, dimension: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.judge_id)
        return self.folder / f"criteria_{dimension}_{safe}_{PROMPT_VERSION}.json"

    def get(self, dimension: str) -> str:
        path = self.path(dimension)
        if path.exists() and not self.regenerate:
            try:
                entry = json.loads(path.read_text())
                self.used[dimension] = entry
                return entry["steps"]
            except (json.JSONDecodeError, KeyError):
                log.warning("G-Eval criteria file %s is damaged; generating a new one", path)
        completion = self.judge.complete(
            system="You design evaluation procedures for financial summaries.",
            messages=[{"role": "user", "content": (
                f"Evaluation criterion:\n{DIMENSIONS[dimension]}\n\nWrite the evaluation steps "
                "(3-6 numbered steps) a careful grader follows to score a predicted summary on "
                "this criterion. Reply with the steps only.")}],
            max_tokens=600, temperature=0.0,
        )
        entry = {"dimension": dimension, "judge": self.judge_id, "prompt_version": PROMPT_VERSION,
                 "definition": DIMENSIONS[dimension], "steps": completion.text.strip()}
        self.folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(entry, f, indent=2)
        os.replace(tmp, path)
        self.used[dimension] = entry
        return entry["steps"]


def scoring_prompt(dimension: str, steps: str, item: ScoringItem) -> str:
    if dimension == "faithfulness":
        source = f"Source context:\n{item.context_text or '(the system read no context)'}"
    else:
        source = f"Reference summary:\n{item.task.reference}"
    return (
        f"You will grade one predicted summary on one criterion.\n\nEvaluation criterion:\n"
        f"{DIMENSIONS[dimension]}\n\nEvaluation steps:\n{steps}\n\nQuestion:\n"
        f"{item.task.question}\n\n{source}\n\nPredicted summary:\n{item.prediction.predicted}\n\n"
        "Follow the evaluation steps, reasoning briefly, then end with a line of the exact form "
        "'Final score: N' where N is an integer from 1 to 5."
    )


def taxonomy_prompt(item: ScoringItem, reasons: dict[str, str]) -> str:
    codes = "\n".join(f"{k}: {v}" for k, v in ERROR_CODES.items())
    return (
        f"A predicted summary scored low. Assign the error codes that apply.\n\nCodes:\n{codes}\n"
        f"\nQuestion:\n{item.task.question}\n\nReference summary:\n"
        f"{item.task.reference or '(none available)'}\n\n"
        f"Predicted summary:\n{item.prediction.predicted}\n\nGrader's faithfulness reasoning:\n"
        f"{reasons.get('faithfulness', '')}\n\nGrader's coverage reasoning:\n"
        f"{reasons.get('coverage', '')}\n\nReply with one line of the form 'Codes: H, O' using "
        "only the codes above, or 'Codes: none'."
    )


class GEvalScorer(Scorer):
    name = "geval"
    fields = ["geval_faithfulness", "geval_coverage"]

    def __init__(self, judge: ChatModel | None, judge_id: str, cache_dir: Path,
                 regenerate_criteria: bool = False, concurrency: int = 4,
                 no_judge_reason: str = "no judge configured (judge=none)", batch: bool = False):
        self.judge = judge
        self.criteria = CriteriaStore(judge, judge_id, cache_dir, regenerate_criteria) \
            if judge else None
        self.concurrency = concurrency
        self.no_judge_reason = no_judge_reason
        self.batch = batch
        self.dropped_codes: list[str] = []

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        if self.judge is None or self.criteria is None:
            for s in out:
                s.null(self.fields + ["error_codes"], self.no_judge_reason)
            return out
        steps = {d: self.criteria.get(d) for d in DIMENSIONS}
        todo = []
        for i, (item, s) in enumerate(zip(items, out, strict=True)):
            why = answered(item)
            if why:
                s.null(self.fields + ["error_codes"], why)
            else:
                todo.append((i, item, s))
        # Step B: every (task, dimension) scoring call, then the taxonomy for low scorers;
        # coverage is judged against the reference, so a task without one is not sent
        dims = {i: [d for d in DIMENSIONS if d != "coverage" or not missing_reference(item)]
                for i, item, _ in todo}
        scoring = {f"{i}:{d}": _request(_SCORER_SYSTEM, scoring_prompt(d, steps[d], item), 700)
                   for i, item, _ in todo for d in dims[i]}
        replies = self._run(scoring)
        low = []
        for i, item, s in todo:
            if "coverage" not in dims[i]:
                s.null(["geval_coverage"], missing_reference(item) or "")
                s.values["geval_coverage_reasoning"] = None
            reasons = self._apply_scores(s, {d: replies[f"{i}:{d}"] for d in dims[i]})
            if self._needs_codes(s):
                low.append((i, item, s, reasons))
        codes = self._run({str(i): _request(_TAXONOMY_SYSTEM, taxonomy_prompt(item, reasons), 100)
                           for i, item, _, reasons in low})
        for i, item, s, _ in low:
            self._apply_codes(item, s, codes[str(i)])
        return out

    def _run(self, requests: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """All requests as one Message Batch, or concurrent single calls."""
        if self.batch:
            return self.judge.complete_batch(requests)

        def one(request: dict[str, Any]) -> Any:
            try:
                return self.judge.complete(**request)
            except ModelError as exc:
                return exc

        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            return dict(zip(requests, pool.map(one, requests.values()), strict=True))

    def _apply_scores(self, s: Scores, replies: dict[str, Any]) -> dict[str, str]:
        reasons: dict[str, str] = {}
        for dim, reply in replies.items():
            field = f"geval_{dim}"
            if isinstance(reply, ModelError):
                s.null([field], f"judge call failed: {reply}")
                s.values[f"{field}_reasoning"] = None
                continue
            text = reply.text
            score = parse_score(text)
            reasons[dim] = text
            s.values[field] = float(score) if score is not None else None
            s.values[f"{field}_reasoning"] = text
            s.values[f"{field}_parse_failed"] = score is None
            if score is None:
                s.null_reasons[field] = "the judge's reply has no parseable 'Final score'"
        return reasons

    def _needs_codes(self, s: Scores) -> bool:
        scores = [s.values.get(f"geval_{d}") for d in DIMENSIONS]
        if any(v is not None and v < 3 for v in scores):
            return True
        if any(v is None for v in scores):
            s.null(["error_codes"], "not every G-Eval dimension has a score")
        else:
            s.values["error_codes"] = []
        return False

    def _apply_codes(self, item: ScoringItem, s: Scores, reply: Any) -> None:
        if isinstance(reply, ModelError):
            s.null(["error_codes"], f"judge call failed: {reply}")
            return
        kept, dropped = parse_codes(reply.text)
        if dropped:
            log.warning("task %s: judge gave codes outside %s, dropped: %s", item.task.id,
                        sorted(ERROR_CODES), dropped)
            self.dropped_codes.extend(dropped)
        s.values["error_codes"] = kept
        s.values["error_codes_reply"] = reply.text


_SCORER_SYSTEM = "You are a strict, careful grader of financial summaries."
_TAXONOMY_SYSTEM = "You classify errors in financial summaries."


def _request(system: str, prompt: str, max_tokens: int) -> dict[str, Any]:
    return {"system": system, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": max_tokens, "temperature": 0.0}


@register_scorer("geval")
def _geval(cfg: Any, judge: ChatModel | None = None, judge_reason: str = "",
           cache_dir: Path | None = None, **_: Any) -> Scorer:
    return GEvalScorer(judge, f"{cfg.judge.provider}/{cfg.judge.model_id}",
                       cache_dir or Path(cfg.cache.dir),
                       cfg.metrics.geval.regenerate_criteria, cfg.runner.concurrency,
                       judge_reason or "no judge configured (judge=none)",
                       batch=bool(cfg.judge.get("batch", False)))
