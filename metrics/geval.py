"""G-Eval (Liu et al. 2023) on the dimensions ``metrics.geval.dimensions`` lists, and the
error taxonomy.

A dimension is a name, a definition the judge is given, and what the prediction is judged
against: ``context`` (what the system used), ``reference`` (the reference summary) or
``both``. The defaults are faithfulness (against the context) and coverage (against the
reference); a team adds its own ("guidance covered", conciseness) in config and each gets
the same cached criteria, scores, reasoning, parse counts and report rows.

Step A: evaluation steps are generated once per (dimension, judge model, prompt version)
by the judge and cached as JSON under ``<cache.dir>/geval/`` (a changed definition writes
new ones); every run logs the steps it used; ``regenerate_criteria`` asks the judge itself
again, past the response cache.
Step B: per task and dimension, one chain-of-thought call scores the prediction 1-5 over
those steps. Faithfulness is judged against the context the system actually
used (chunks read by the agent, top-k chunks for naive, the whole document for
stuffing); coverage against the reference summary.

A reply without a parseable score gives ``None`` and ``geval_<dim>_parse_failed=True``
with the reply kept verbatim: never a default score, nor one cut from "3.5" or "2-3".
Every record carries ``geval_<dim>``, ``geval_<dim>_reasoning`` and
``geval_<dim>_parse_failed``, null when there was no reply (no judge, no answer, a failed
call, or a failed Message Batch: each of its items null with the reason).

Samples (``judge.samples=N``): each (task, dimension) is asked N times (each sample a
response-cache entry of its own); the score is the mean of the parsed samples, every
parsed score is kept (``geval_<dim>_samples``) and their SD is the judge's own spread
(``geval_<dim>_judge_sd``; the run logs its mean). Panel (``judge.panel``): further judges
score the same items with the same prompts and criteria (``geval_panel``); the run logs
Krippendorff's alpha (ordinal) of all judges per dimension (``judge_agreement_<dim>``, with
a bootstrap CI) and each panel judge's mean and parse failures.

Error taxonomy: every task scoring below 3 on either dimension gets one judge call that
assigns codes from exactly ``ERROR_CODES`` (the evaluation plan's: P is premature
termination, IC incoherence), defined in the request; anything else in the reply is
dropped and logged. A reply with no readable ``Codes:`` list, or naming only codes outside
the set, gives null codes (``error_codes_parse_failed``), not "no errors". P and IR are
also assigned mechanically, from the agent's path against the gold evidence
(``metrics.trajectory``: ``trajectory_p``, ``trajectory_ir``, ``trajectory_codes``), which
logs how often each agrees with the judge's.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import MISSING

from arag.config import ConfigError, option_value
from arag.files import write_text_atomically
from arag.llm.base import ChatModel, Completion, ModelError
from arag.llm.cache import forget_reply, fresh_replies
from metrics.base import (
    NO_CONTEXT,
    NO_JUDGE,
    Metric,
    Scorer,
    ScorerEnv,
    Scores,
    ScoringItem,
    answered,
    count_flags,
    missing_reference,
    register_scorer,
)
from metrics.judging import (
    Sampled,
    failure_reason,
    judge_calls,
    judge_request,
    unreadable_reason,
)
from metrics.stats import agreement

log = logging.getLogger(__name__)
PROMPT_VERSION = "v2"  # judge prompts: the criteria cache and every run identity

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
LIKERT_BINS = (0.5, 1.5, 2.5, 3.5, 4.5, 5.5)
# the default dimensions' place in the sweep report's choice of comparison metric
_COMPARE_PRIORITY = {"coverage": 1, "faithfulness": 2}


class Against(str, Enum):
    """What a dimension's score is judged against."""

    context = "context"  # the context the system used (System.judged_context)
    reference = "reference"  # the task's reference summary
    both = "both"


@dataclass
class Dimension:
    """One G-Eval dimension (an entry of ``metrics.geval.dimensions``)."""

    name: str = MISSING  # the record fields are geval_<name>, geval_<name>_reasoning, ...
    definition: str = MISSING  # what the judge is told the 1-5 score means
    against: Against = Against.context

    @property
    def needs_reference(self) -> bool:
        return self.against != Against.context

    @property
    def needs_context(self) -> bool:
        return self.against != Against.reference

    def unjudgeable(self, item: ScoringItem) -> str | None:
        """Why this task cannot be judged on this dimension, or None if it can."""
        if self.needs_reference and missing_reference(item):
            return missing_reference(item)
        if self.needs_context and item.context_text is None:
            return NO_CONTEXT
        return None


DEFAULT_DIMENSIONS = (Dimension("faithfulness", DIMENSIONS["faithfulness"], Against.context),
                      Dimension("coverage", DIMENSIONS["coverage"], Against.reference))
_NAME = re.compile(r"[a-z][a-z0-9_]{0,40}")


def dimensions_from(entries: Any) -> list[Dimension]:
    """Typed dimensions from config entries; ConfigError naming the key and the fix."""
    dims: list[Dimension] = []
    for n, entry in enumerate(entries):
        name, definition = str(entry.name), str(entry.definition or "").strip()
        against = Against(option_value(entry.against))
        key = f"metrics.geval.dimensions[{n}]"
        if not _NAME.fullmatch(name):
            raise ConfigError(f"{key}.name={name!r}: a dimension name becomes the field "
                              "geval_<name>. Fix: lower-case letters, digits and _ "
                              "(e.g. guidance_covered)")
        if not definition:
            raise ConfigError(f"{key}.definition is empty. Fix: say what a 1 and a 5 mean")
        if name in {d.name for d in dims}:
            raise ConfigError(f"{key}.name={name!r} is listed twice. Fix: name each once")
        dims.append(Dimension(name, definition, against))
    if not dims:
        raise ConfigError("metrics.geval.dimensions is empty. Fix: list at least one, or drop "
                          "geval from metrics.scorers")
    return dims


# The evaluation plan's taxonomy, defined to the judge exactly so.
ERROR_CODES = {
    "H": "hallucination: a fact or figure not supported by the source context",
    "N": "numeric error: a figure misstated (value, unit, sign, scale or period)",
    "O": "omission: a key fact of the reference summary is missing",
    "P": "premature termination: the system answered after fewer retrieval steps than the "
         "task needed, without covering the document's relevant sections, so whole parts "
         "of the reference are missing",
    "IR": "irrelevant retrieval: the summary relies on context about another company, "
          "period or document",
    "IC": "incoherence: the summary is internally contradictory or broken (statements that "
          "conflict, garbled or unfinished sentences)",
    "V": "verbosity or format: far off the requested length or style",
}

# A number as the judge wrote it, fraction and range included, so that "3.5", "2-3" and
# "4 out of 10" are read whole and rejected, never cut down to a score.
_NUMBER = r"\d+(?:\.\d+)?"
_WRITTEN = (rf"({_NUMBER}(?:[ \t]*(?:-|–|—|to|or)[ \t]*{_NUMBER})?"
            rf"(?:[ \t]*(?:/|out[ \t]+of)[ \t]*{_NUMBER})?)")
_SCORE = re.compile(r"([1-5])(?:\.0+)?(?:\s*(?:/|out\s+of)\s*5(?:\.0+)?)?")
# From the form the prompt asks for to prose; the first form present decides.
SCORE_FORMS = (
    re.compile(r"Final score:\s*" + _WRITTEN),
    re.compile(r"final\s*score\s*\**\s*[:=\-]?\s*\**\s*" + _WRITTEN, re.IGNORECASE),
    re.compile(r"\b(?:score|rating)\s*\**\s*[:=]\s*\**\s*" + _WRITTEN, re.IGNORECASE),
    # a rating in prose, ending its clause: "I rate it 4 out of 5." is one, "it covers 4
    # out of 5 key facts" is a count
    re.compile(r"\b(?:rate|rated|rating|give|giving|grade|graded|score|scored)\b[^.\d\n]{0,40}?"
               rf"(?<![\d.])({_NUMBER}[ \t]*(?:/|out[ \t]+of)[ \t]*{_NUMBER})"
               r"(?=[ \t]*(?:[.!;,)]|\**[ \t]*$))", re.IGNORECASE | re.MULTILINE),
)
_CODES_LINE = re.compile(r"^[^\n:]*?\bcodes?\b[\s*`]*:\s*(.*)$", re.IGNORECASE | re.MULTILINE)
_NO_CODES = re.compile(r"(?:none|n/?a|no|nothing)\b", re.IGNORECASE)


def parse_score(reply: str) -> int | None:
    """The score the judge wrote, or None.

    The first form present decides (``Final score: N``, then ``final score N``/``**Final
    score:** N``, then ``Score: N``, then a prose rating ``I rate it N out of 5.``) and its
    last occurrence is the verdict. It must be a whole number from 1 to 5, on a scale of 5
    if one is given: ``3.5``, ``2-3`` and ``4 out of 10`` are parse failures.
    """
    for form in SCORE_FORMS:
        written = form.findall(reply)
        if written:
            score = _SCORE.fullmatch(written[-1].strip())
            return int(score.group(1)) if score else None
    return None


def parse_codes(reply: str) -> tuple[list[str], list[str]] | None:
    """Codes of the last ``Codes: H, O`` line (or of a one-line reply) as (kept, dropped).

    ``none``, ``N/A``, ``no codes ...`` mean no codes; a gloss such as ``H
    (hallucination)`` or ``H: hallucination`` is not a code. None: there is no list, or
    it says none and names codes too.
    """
    lines = _CODES_LINE.findall(reply)
    listing = lines[-1] if lines else reply if "\n" not in reply.strip() else ""
    listing = re.sub(r"\([^)]*\)", " ", listing)
    items = [i.strip(" \t*`'\".") for i in re.split(r"[,;]|\band\b", listing)]
    items = [i for i in items if i]
    heads = [re.split(r"\s*[:=\-–—]\s*", i)[0] for i in items]
    tokens = list(dict.fromkeys(t.upper() for h in heads for t in re.findall(r"[A-Za-z]+", h)))
    if items and _NO_CODES.match(items[0]):
        named = [t for h in heads[1:] for t in re.findall(r"[A-Za-z]+", h.upper())]
        return None if any(t in ERROR_CODES for t in named) else ([], [])
    if not tokens:
        return None
    return [t for t in tokens if t in ERROR_CODES], [t for t in tokens if t not in ERROR_CODES]


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

    def cached(self, dimension: Dimension) -> str | None:
        """The steps on disk for this dimension's definition, or None."""
        try:
            entry = json.loads(self.path(dimension.name).read_text())
            if entry.get("definition", dimension.definition) != dimension.definition:
                return None  # written for another definition of the same name
            return str(entry["steps"]) or None
        except (OSError, ValueError, KeyError, AttributeError):
            return None

    def get(self, dimension: Dimension) -> str:
        """The steps of a dimension; the same ones for the whole life of the store (a run),
        regenerated at most once."""
        if dimension.name in self.used:
            return self.used[dimension.name]["steps"]
        path = self.path(dimension.name)
        if path.exists() and not self.regenerate:
            steps = self.cached(dimension)
            if steps is not None:
                self.used[dimension.name] = json.loads(path.read_text())
                return steps
            log.warning("G-Eval criteria file %s is damaged or for another definition of %r; "
                        "generating new ones", path, dimension.name)
        # the request never changes, so regenerating must ask the judge, not the response
        # cache (the new reply replaces the cached one)
        with fresh_replies(self.judge) if self.regenerate else nullcontext():
            completion = self.judge.complete(**criteria_request(dimension))
        if not completion.text.strip():  # never kept: the next run asks again
            forget_reply(self.judge, criteria_request(dimension))
            raise ModelError("the judge wrote no evaluation steps", kind="unparseable")
        entry = {"dimension": dimension.name, "judge": self.judge_id,
                 "prompt_version": PROMPT_VERSION, "definition": dimension.definition,
                 "against": dimension.against.value, "steps": completion.text.strip()}
        write_text_atomically(path, json.dumps(entry, indent=2))
        self.used[dimension.name] = entry
        return entry["steps"]


def criteria_request(dimension: Dimension) -> dict[str, Any]:
    """Step A's judge call for one dimension (``complete()`` kwargs)."""
    return judge_request(
        "You design evaluation procedures for financial summaries.",
        f"Evaluation criterion:\n{dimension.definition}\n\nWrite the evaluation steps (3-6 "
        "numbered steps) a careful grader follows to score a predicted summary on this "
        "criterion. Reply with the steps only.", 600)


def scoring_prompt(dimension: Dimension, steps: str, item: ScoringItem) -> str:
    context = f"Source context:\n{item.context_text or '(the system read no context)'}"
    reference = f"Reference summary:\n{item.task.reference}"
    source = {Against.context: context, Against.reference: reference,
              Against.both: f"{context}\n\n{reference}"}[dimension.against]
    return (
        f"You will grade one predicted summary on one criterion.\n\nEvaluation criterion:\n"
        f"{dimension.definition}\n\nEvaluation steps:\n{steps}\n\nQuestion:\n"
        f"{item.task.question}\n\n{source}\n\nPredicted summary:\n{item.prediction.predicted}\n\n"
        "Follow the evaluation steps, reasoning briefly, then end with a line of the exact form "
        "'Final score: N' where N is an integer from 1 to 5."
    )


def taxonomy_prompt(item: ScoringItem, reasons: dict[str, str],
                    dimensions: list[str] | tuple[str, ...] = tuple(DIMENSIONS)) -> str:
    codes = "\n".join(f"{k}: {v}" for k, v in ERROR_CODES.items())
    graders = "".join(f"Grader's {d} reasoning:\n{reasons.get(d, '')}\n\n" for d in dimensions)
    return (
        f"A predicted summary scored low. Assign the error codes that apply.\n\nCodes:\n{codes}\n"
        f"\nQuestion:\n{item.task.question}\n\nReference summary:\n"
        f"{item.task.reference or '(none available)'}\n\n"
        f"Predicted summary:\n{item.prediction.predicted}\n\n{graders}"
        "Reply with one line of the form 'Codes: H, O' using only the codes above, or "
        "'Codes: none'."
    )


@dataclass
class GEvalOptions:
    regenerate_criteria: bool = False  # ask the judge for new evaluation steps
    # what the judge scores 1-5: name, definition, against (context | reference | both).
    # Default: faithfulness (against the context the system used) and coverage (against the
    # reference); a list replaces them, so keep those you still want
    # (docs/metrics-and-options.md)
    dimensions: list[Dimension] = field(default_factory=lambda: list(DEFAULT_DIMENSIONS))


def dimension_metrics(dimensions: list[Dimension]) -> list[Metric]:
    """Per dimension: its score (in the report) and the judge's spread over samples."""
    return [*(Metric(f"geval_{d.name}", f"G-Eval {d.name}", share_at_least=4, bins=LIKERT_BINS,
                     report=True, compare_priority=_COMPARE_PRIORITY.get(d.name),
                     bounds=(1.0, 5.0))
              for d in dimensions),
            *(Metric(f"geval_{d.name}_judge_sd", f"judge SD ({d.name})", histogram=False)
              for d in dimensions)]


PRIMARY = "primary"


@dataclass
class _Judged:
    """One judge's samples for every (task, dimension) it was asked about."""

    replies: dict[tuple[int, str], Sampled]


@register_scorer("geval")
class GEvalScorer(Scorer):
    Options = GEvalOptions

    @classmethod
    def from_config(cls, options: Any, env: ScorerEnv) -> Scorer:
        return cls(env.judge, env.judge_id, env.cache_dir, options.regenerate_criteria,
                   env.concurrency, env.judge_reason, batch=env.judge_batch,
                   samples=env.judge_samples, panel=env.panel,
                   dimensions=dimensions_from(options.dimensions))

    def __init__(self, judge: ChatModel | None, judge_id: str, cache_dir: Path,
                 regenerate_criteria: bool = False, concurrency: int = 4,
                 no_judge_reason: str = NO_JUDGE, batch: bool = False, samples: int = 1,
                 panel: dict[str, ChatModel] | None = None,
                 dimensions: list[Dimension] | None = None):
        self.judge = judge
        self.dimensions = {d.name: d for d in dimensions or DEFAULT_DIMENSIONS}
        self.metrics = dimension_metrics(list(self.dimensions.values()))
        self.cache_dir = cache_dir
        self.criteria = CriteriaStore(judge, judge_id, cache_dir, regenerate_criteria) \
            if judge else None
        self.concurrency = concurrency
        self.no_judge_reason = no_judge_reason
        self.batch = batch
        self.samples = max(1, samples)
        self.panel = dict(panel or {}) if judge else {}
        self.dropped_codes: list[str] = []

    @property
    def names(self) -> list[str]:
        return list(self.dimensions)

    def score(self, items: list[ScoringItem]) -> list[Scores]:
        out = [Scores() for _ in items]
        if self.judge is None or self.criteria is None:
            for s in out:
                self._unjudged(s, self.no_judge_reason)
            return out
        try:
            steps = {d: self.criteria.get(self.dimensions[d]) for d in self.names}
        except ModelError as exc:  # every other scorer's metrics are still logged
            for s in out:
                _no_reply(s, self.names, f"the judge could not write the G-Eval criteria: {exc}")
                s.null(["error_codes"], f"the judge could not write the G-Eval criteria: {exc}")
            return out
        todo = []
        for i, (item, s) in enumerate(zip(items, out, strict=True)):
            why = answered(item)
            if why:
                self._unjudged(s, why)
            else:
                todo.append((i, item, s))
        # Step B: every (task, dimension, sample) scoring call, by every judge; then the
        # taxonomy for low scorers. A dimension judged against the reference is not sent
        # for a task without one, nor one judged against the context for a task whose
        # record does not say what its context was.
        dims = {i: self._judgeable(item) for i, item, _ in todo}
        primary = self._ask(self.judge, todo, dims, steps)
        panel = {name: self._ask(judge, todo, dims, steps) for name, judge in self.panel.items()}
        low = []
        for i, item, s in todo:
            for d in self.names:
                if d not in dims[i]:
                    _no_reply(s, [d], self.dimensions[d].unjudgeable(item) or "")
            reasons = self._apply_scores(s, {d: primary.replies[(i, d)] for d in dims[i]})
            if self.panel:
                s.values["geval_panel"] = {name: _panel_entry({d: judged.replies[(i, d)]
                                                               for d in dims[i]})
                                           for name, judged in panel.items()}
            if self._needs_codes(s):
                low.append((i, item, s, reasons))
        codes = self._run(self.judge, {str(i): self._taxonomy_request(item, reasons)
                                       for i, item, _, reasons in low},
                          lambda text: parse_codes(text) is not None)
        for i, item, s, _ in low:
            self._apply_codes(item, s, codes[str(i)])
        return out

    def _judgeable(self, item: ScoringItem) -> list[str]:
        """The dimensions this task can be judged on (those needing a reference need one,
        those needing the context need a record that says what it was)."""
        return [d for d in self.names if not self.dimensions[d].unjudgeable(item)]

    def _scoring_requests(self, todo: list[tuple[int, ScoringItem]], dims: dict[int, list[str]],
                          steps: dict[str, str]) -> dict[str, dict[str, Any]]:
        return {f"{i}-{d}-{k}": judge_request(
                    _SCORER_SYSTEM, scoring_prompt(self.dimensions[d], steps[d], item), 700,
                    sample=k)
                for i, item in todo for d in dims[i] for k in range(self.samples)}

    def _taxonomy_request(self, item: ScoringItem, reasons: dict[str, str]) -> dict[str, Any]:
        return judge_request(_TAXONOMY_SYSTEM, taxonomy_prompt(item, reasons, self.names), 100)

    def _ask(self, judge: ChatModel, todo: list[tuple[int, ScoringItem, Scores]],
             dims: dict[int, list[str]], steps: dict[str, str]) -> _Judged:
        """``judge.samples`` independent replies per (task, dimension) from one judge."""
        requests = self._scoring_requests([(i, item) for i, item, _ in todo], dims, steps)
        replies = self._run(judge, requests, lambda text: parse_score(text) is not None)
        return _Judged({(i, d): Sampled.read([replies[f"{i}-{d}-{k}"]
                                              for k in range(self.samples)], parse_score)
                        for i, _, _ in todo for d in dims[i]})

    def judge_requests(self, items: list[ScoringItem], judge_id: str, primary: bool
                       ) -> dict[str, dict[str, Any]]:
        """Every call scoring ``items`` would make to the judge ``judge_id`` (for the dry
        run): the criteria it has not written yet, each (task, dimension, sample), and for
        the primary judge one taxonomy call per task (made only below 3: an upper bound).
        Criteria not written yet are stood in for by typical steps."""
        store = CriteriaStore(None, judge_id, self.cache_dir, False)  # type: ignore[arg-type]
        cached = {d: store.cached(self.dimensions[d]) for d in self.names}
        requests = {f"criteria-{d}": criteria_request(self.dimensions[d])
                    for d, steps in cached.items() if steps is None}
        todo = [(i, item) for i, item in enumerate(items) if not answered(item)]
        requests.update(self._scoring_requests(
            todo, {i: self._judgeable(item) for i, item in todo},
            {d: steps or STEPS_STAND_IN for d, steps in cached.items()}))
        if primary:
            requests.update({f"{i}-taxonomy": self._taxonomy_request(item, {})
                             for i, item in todo})
        return requests

    def _run(self, judge: ChatModel, requests: dict[str, dict[str, Any]],
             readable: Callable[[str], bool]) -> dict[str, Completion | ModelError]:
        return judge_calls(judge, requests, self.batch, self.concurrency, readable)

    def _unjudged(self, s: Scores, reason: str) -> None:
        _no_reply(s, self.names, reason)
        s.null(["error_codes"], reason)
        if self.panel:
            s.values["geval_panel"] = None

    def aggregate(self, answered: list[dict[str, Any]], records: list[dict[str, Any]]
                  ) -> dict[str, float]:
        """Parse failures (per judge), error-taxonomy rates over judged tasks, cost per
        coverage point, and the panel's agreement with the primary judge."""
        out = count_flags(records, [f"geval_{d}_parse_failed" for d in self.names]
                          + ["error_codes_parse_failed"])
        assessed = [r["error_codes"] for r in answered if isinstance(r.get("error_codes"), list)]
        if assessed:
            for code in ERROR_CODES:
                out[f"error_rate_{code}"] = float(np.mean([code in c for c in assessed]))
        coverage = [r["geval_coverage"] for r in answered if r.get("geval_coverage") is not None]
        if coverage and np.mean(coverage):
            cost = [r["cost_usd"] for r in answered if r.get("cost_usd") is not None]
            out["cost_per_coverage_point"] = (float(np.mean(cost)) if cost else 0.0) / float(
                np.mean(coverage))
        if self.samples > 1:
            for d in self.names:
                out[f"geval_{d}_sample_parse_failures"] = float(sum(
                    r.get(f"geval_{d}_sample_parse_failures") or 0 for r in records))
        out.update(panel_aggregates(answered, list(self.panel), self.names))
        return out

    def artifacts(self) -> dict[str, Any]:
        if self.criteria is not None and self.criteria.used:
            return {"geval_criteria.json": self.criteria.used}
        return {}

    def _apply_scores(self, s: Scores, replies: dict[str, Sampled]) -> dict[str, str]:
        """The primary judge's scores (mean of its samples), its own spread, and the first
        reply of each dimension as its reasoning (what the taxonomy call is shown)."""
        reasons: dict[str, str] = {}
        for dim, sampled in replies.items():
            field = f"geval_{dim}"
            if not sampled.answered:
                _no_reply(s, [dim], sampled.errors[0])
                continue
            reasons[dim] = sampled.first_reply or ""
            s.values[field] = sampled.score
            s.values[f"{field}_reasoning"] = sampled.first_reply
            s.values[f"{field}_parse_failed"] = sampled.score is None
            if sampled.score is None:
                s.null_reasons[field] = sampled.null_reason(
                    "the judge's reply has no parseable 'Final score'")
            if self.samples > 1:
                s.values[f"{field}_samples"] = sampled.scores
                s.values[f"{field}_replies"] = sampled.replies
                s.values[f"{field}_sample_parse_failures"] = sampled.parse_failures
            s.values[f"{field}_judge_sd"] = sampled.spread
            if sampled.spread is None:
                s.null_reasons[f"{field}_judge_sd"] = (
                    "one judge reply per item (judge.samples=1)" if self.samples == 1
                    else "fewer than two of the judge's samples have a score")
        return reasons

    def _needs_codes(self, s: Scores) -> bool:
        scores = [s.values.get(f"geval_{d}") for d in self.names]
        if any(v is not None and v < 3 for v in scores):
            return True
        if any(v is None for v in scores):
            s.null(["error_codes"], "not every G-Eval dimension has a score")
        else:
            s.values["error_codes"] = []
        return False

    def _apply_codes(self, item: ScoringItem, s: Scores, reply: Any) -> None:
        if isinstance(reply, ModelError):
            s.null(["error_codes"], failure_reason(reply))
            return
        parsed = parse_codes(reply.text)
        s.values["error_codes_reply"] = reply.text
        s.values["error_codes_parse_failed"] = parsed is None
        if parsed is None:
            s.null(["error_codes"], unreadable_reason(
                "the judge's reply has no readable 'Codes:' line", reply))
            return
        kept, dropped = parsed
        if dropped:
            log.warning("task %s: judge gave codes outside %s, dropped: %s", item.task.id,
                        sorted(ERROR_CODES), dropped)
            self.dropped_codes.extend(dropped)
        if dropped and not kept:  # not "no errors": the judge named none we can count
            s.null(["error_codes"], f"the judge named only codes outside the taxonomy: "
                                    f"{', '.join(dropped)}")
            return
        s.values["error_codes"] = kept


def _panel_entry(replies: dict[str, Sampled]) -> dict[str, Any]:
    """A panel judge's view of one task: per dimension its score (mean of its samples),
    whether its replies had none, and its first reply."""
    entry: dict[str, Any] = {}
    for dim, sampled in replies.items():
        entry[dim] = sampled.score
        entry[f"{dim}_parse_failed"] = sampled.answered and sampled.score is None
        entry[f"{dim}_reasoning"] = sampled.first_reply
        if not sampled.answered:
            entry[f"{dim}_error"] = sampled.errors[0]
    return entry


def panel_aggregates(answered: list[dict[str, Any]], panel: list[str],
                     dimensions: list[str] | tuple[str, ...] = tuple(DIMENSIONS)
                     ) -> dict[str, float]:
    """Per panel judge: mean scores and parse failures; per dimension: Krippendorff's alpha
    (ordinal) of every judge's item scores, with its bootstrap CI and how many items."""
    out: dict[str, float] = {}
    if not panel:
        return out
    for dim in dimensions:
        views = [[r.get(f"geval_{dim}") for r in answered]]
        for name in panel:
            entries = [((r.get("geval_panel") or {}).get(name) or {}) for r in answered]
            scores = [e.get(dim) for e in entries]
            views.append(scores)
            out[f"panel_{name}_geval_{dim}_parse_failures"] = float(
                sum(1 for e in entries if e.get(f"{dim}_parse_failed")))
            if any(v is not None for v in scores):
                out[f"panel_{name}_geval_{dim}_mean"] = float(
                    np.mean([v for v in scores if v is not None]))
        ratings = np.array([[np.nan if v is None else v for v in view] for view in views],
                           dtype=float)
        found = agreement(ratings) if ratings.size else None
        if found is not None:
            out[f"judge_agreement_{dim}"] = found.alpha
            out[f"judge_agreement_{dim}_n"] = float(found.n_items)
            if found.ci_low is not None and found.ci_high is not None:
                out[f"judge_agreement_{dim}_ci_low"] = found.ci_low
                out[f"judge_agreement_{dim}_ci_high"] = found.ci_high
    return out


def _no_reply(s: Scores, dimensions: list[str], reason: str) -> None:
    """No judge reply for these dimensions: every field of theirs present, null, with why."""
    for dim in dimensions:
        s.null([f"geval_{dim}", f"geval_{dim}_judge_sd"], reason)
        s.values[f"geval_{dim}_reasoning"] = None
        s.values[f"geval_{dim}_parse_failed"] = None


# typical G-Eval evaluation steps, standing in for criteria the judge has not written yet
STEPS_STAND_IN = " ".join(["Read the summary and the source, check each stated figure and "
                           "period against it, and note what is missing or unsupported."] * 4)
_SCORER_SYSTEM = "You are a strict, careful grader of financial summaries."
_TAXONOMY_SYSTEM = "You classify errors in financial summaries."
