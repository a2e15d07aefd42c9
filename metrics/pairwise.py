"""A pairwise judge: which of two systems' summaries of the same task is better.

A sweep-level scorer: it takes the aligned records of two systems (same task id and
``repeat``) and asks the judge, on each dimension (faithfulness against the source,
coverage against the reference, overall), which summary is better. The reply contract is
fixed: the answers are labelled by the lines ``Summary A:`` and ``Summary B:`` and the
reply's last line is ``Winner: A``, ``Winner: B`` or ``Winner: tie``.

Every pair is asked in both orders (LLM judges favour whichever answer they read first).
Two readable replies that name the same system decide it; two that disagree are a tie
and *position-inconsistent*. A reply without a readable last line is *unreadable*: the
pair is counted as such and never turned into a tie. A request that would not fit the
judge's context window (``judge.context_limit``, tokens estimated by the judge) is not
sent, recorded with the reason.

``pairwise.jsonl`` holds one row per task x repeat x pair x order x dimension x judge
(``verdict_rows``); every figure (``summarize``) is recomputed from those rows alone:
per pair and dimension win/tie/loss over tasks (repeats averaged per task first) with
bootstrap CIs, a two-sided sign test on the untied tasks, the judge's position-
inconsistency rate and first-position preference rate; the length-controlled win rate
(``length_control``: AlpacaEval 2's logistic model of the preference on the answers' word-count
difference, read at zero difference) and whether one run's answers are systematically
longer; for three or more systems a
Bradley-Terry ranking (``choix``) with bootstrap CIs over tasks; with a panel, each
judge's figures and their agreement (Krippendorff's alpha). ``trace_verdicts`` words the
primary judge's verdicts for both compared answers' traces.

Runs are compared only when one judge judges them on one dataset (``unjudgeable`` says
why not); which runs are paired is the report's policy (``report.policy.pairs_of``).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from arag.citations import strip_citations
from arag.llm.base import ChatModel, Completion, ModelError
from arag.llm.window import judge_window, request_tokens, too_long
from arag.records import Corpus, Task
from metrics.aggregate import bootstrap_ci, task_means
from metrics.judging import failure_reason, judge_calls, judge_request
from metrics.stats import agreement

PROMPT_VERSION = "p1"  # the pairwise prompt: every row of pairwise.jsonl names it
MAX_TOKENS = 400
ORDERS = ("a_first", "b_first")
DIMENSIONS = {
    "faithfulness": ("Faithfulness: which summary states only facts the source supports, "
                     "with every figure, period, segment and company exactly as the source "
                     "gives it.", "source"),
    "coverage": ("Coverage: which summary covers more of the key facts of the reference "
                 "summary (results, per-share earnings, margins, guidance); extra correct "
                 "detail does not count.", "reference"),
    "overall": ("Overall: which summary a financial analyst would rather read: faithful to "
                "the source, covering what matters, concise.", "both"),
}
_SYSTEM = "You compare two summaries of the same financial document, carefully and fairly."
_WINNER = re.compile(r"^\W*winner\W*:\W*(a|b|tie)\W*$", re.IGNORECASE)
BT_RESAMPLES = 200
BT_ALPHA = 0.01  # ILSR regularisation: keeps strengths finite when one system always wins
ARTIFACT = "pairwise.jsonl"  # on the sweep's parent run: the rows of ``verdict_rows``
RATIONALE_CHARS = 4000  # of each order's reply, in a verdict on a trace
SAME_JUDGING = ("judge", "dataset", "task_type")  # config nodes every compared run shares


def parse_winner(text: str) -> str | None:
    """``A``, ``B`` or ``tie`` from the reply's last non-empty line, or None: a reply whose
    last line is not ``Winner: A|B|tie`` is unreadable (markdown emphasis is tolerated)."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    match = _WINNER.match(lines[-1]) if lines else None
    if match is None:
        return None
    found = match.group(1).lower()
    return "tie" if found == "tie" else found.upper()


@dataclass(frozen=True)
class Answer:
    """One system's answer to one task (a record of its run)."""

    task_id: str
    repeat: int
    text: str | None  # None: no answer (error or skipped)


@dataclass(frozen=True)
class Pair:
    """Two compared runs, by their labels (run names)."""

    a: str
    b: str

    @property
    def name(self) -> str:
        return f"{self.a} vs {self.b}"


def answers_of(records: Sequence[dict[str, Any]]) -> dict[tuple[str, int], Answer]:
    """A run's answers by (task id, repeat), citation markers removed (the judge reads the
    summary a reader reads)."""
    out = {}
    for r in records:
        answered = not r.get("error") and not r.get("skipped") and r.get("predicted")
        key = (str(r["id"]), int(r.get("repeat") or 0))
        out[key] = Answer(key[0], key[1], strip_citations(r["predicted"]) if answered else None)
    return out


def source_text(task: Task, corpus: Corpus) -> str:
    """The task's documents, each under its metadata header."""
    return "\n\n".join(f'<document id="{d}">\n{corpus.documents[d].header}\n'
                       f"{corpus.documents[d].text}\n</document>"
                       for d in task.doc_ids if d in corpus.documents)


def pairwise_prompt(dimension: str, task: Task, source: str, first: str, second: str) -> str:
    definition, against = DIMENSIONS[dimension]
    parts = [f"Task: {task.question}"]
    if against in ("source", "both"):
        parts.append(f"Source:\n{source}")
    if against in ("reference", "both") and task.reference.strip():
        parts.append(f"Reference summary:\n{task.reference}")
    parts += [f"Summary A:\n{first}", f"Summary B:\n{second}",
              f"Compare the two summaries on this criterion only.\n{definition}\n"
              "The order in which the summaries appear says nothing about their quality. "
              "Explain briefly, then end with one last line, exactly one of:\n"
              "Winner: A\nWinner: B\nWinner: tie"]
    return "\n\n".join(parts)


def unjudgeable(configs: Sequence[Mapping[str, Any]]) -> str:
    """Why runs of these resolved configs cannot be judged pairwise ("" when they can):
    their answers are compared by one judge on one dataset."""
    for what in SAME_JUDGING:
        values = {json.dumps(c.get(what), sort_keys=True, default=str) for c in configs}
        if len(values) > 1:
            return f"the sweep's jobs differ in {what}: pairs are judged by one judge on one dataset"
    return ""


@dataclass
class Request:
    """One judge call of the plan: a row of ``pairwise.jsonl`` before its reply."""

    row: dict[str, Any]
    request: dict[str, Any] | None  # None: not sent (``row['skip_reason']`` says why)


def plan(pairs: Sequence[Pair], answers: dict[str, dict[tuple[str, int], Answer]],
         tasks: dict[str, Task], corpus: Corpus, judge: ChatModel, context_limit: int,
         dimensions: Sequence[str] = tuple(DIMENSIONS)) -> list[Request]:
    """Every judge call for ``pairs`` (run label -> its answers), both orders of each
    (task, repeat, dimension) both runs answered; a dimension judged against the reference
    is not asked for a task without one, and a request that would not fit the judge's
    context window is planned unsent with the reason."""
    out: list[Request] = []
    for pair in pairs:
        mine, theirs = answers.get(pair.a, {}), answers.get(pair.b, {})
        for key in [k for k in mine if k in theirs]:
            a, b, task = mine[key], theirs[key], tasks.get(key[0])
            if a.text is None or b.text is None or task is None:
                continue
            source = source_text(task, corpus)
            for dim in dimensions:
                for order in ORDERS:
                    out.append(_planned(pair, task, key[1], dim, order, source, a.text, b.text,
                                        judge, context_limit))
    return out


def _planned(pair: Pair, task: Task, repeat: int, dim: str, order: str, source: str,
             a_text: str, b_text: str, judge: ChatModel, context_limit: int) -> Request:
    first, second = (pair.a, pair.b) if order == "a_first" else (pair.b, pair.a)
    row: dict[str, Any] = {"prompt_version": PROMPT_VERSION, "task_id": task.id,
                           "repeat": repeat, "pair": pair.name, "a": pair.a, "b": pair.b,
                           "dimension": dim, "order": order,
                           "first": first, "second": second,
                           "a_words": len(a_text.split()), "b_words": len(b_text.split())}
    if DIMENSIONS[dim][1] == "reference" and not task.reference.strip():
        return Request({**row, "skip_reason": "the task has no reference summary"}, None)
    texts = (a_text, b_text) if order == "a_first" else (b_text, a_text)
    prompt = pairwise_prompt(dim, task, source, *texts)
    request = judge_request(_SYSTEM, prompt, MAX_TOKENS)
    needed = request_tokens(judge.count_tokens, **request)
    if needed > context_limit:  # the rule every judge call is held to (arag.llm.window)
        return Request({**row, "skip_reason": too_long(needed, context_limit, judge_window())},
                       None)
    return Request(row, request)


def verdict_rows(planned: list[Request], judges: Mapping[str, ChatModel], batch: bool = False,
                 concurrency: int = 1) -> list[dict[str, Any]]:
    """Every judge's reply to every planned request, as rows of ``pairwise.jsonl``: the
    reply verbatim, its ``verdict`` (A, B, tie; None: unreadable), the ``winner`` it names
    (a run label or ``tie``), or the ``error`` / ``skip_reason`` of a call not answered.
    An unreadable reply is not kept in the response cache (``judge_calls``)."""
    sent = {str(n): p.request for n, p in enumerate(planned) if p.request is not None}
    rows = []
    for name, judge in judges.items():
        replies = judge_calls(judge, sent, batch, concurrency,
                              lambda text: parse_winner(text) is not None)
        for n, p in enumerate(planned):
            rows.append(_verdict_row({**p.row, "judge": name}, replies.get(str(n))))
    return rows


def _verdict_row(row: dict[str, Any], reply: Completion | ModelError | None) -> dict[str, Any]:
    if reply is None:
        return {**row, "reply": None, "verdict": None, "winner": None}
    if isinstance(reply, ModelError):
        return {**row, "reply": None, "verdict": None, "winner": None,
                "error": failure_reason(reply)}
    verdict = parse_winner(reply.text)
    winner = {"A": row["first"], "B": row["second"], "tie": "tie"}.get(verdict or "")
    return {**row, "reply": reply.text, "verdict": verdict, "winner": winner}


# --- figures, from the rows alone -------------------------------------------------------

@dataclass
class Outcome:
    """One (judge, pair, dimension, task, repeat): both orders' replies resolved."""

    judge: str
    pair: Pair
    dimension: str
    task_id: str
    repeat: int
    status: str  # decided | inconsistent | unreadable | not_judged
    winner: str | None  # a run label, "tie", or None (unreadable, not judged)
    rows: list[dict[str, Any]]

    @property
    def score(self) -> float | None:
        """For the pair's first run: 1 win, 0.5 tie, 0 loss."""
        if self.winner is None:
            return None
        return 0.5 if self.winner == "tie" else float(self.winner == self.pair.a)


def outcomes(rows: Sequence[dict[str, Any]]) -> list[Outcome]:
    """Each (judge, pair, dimension, task, repeat) resolved from its two orders."""
    grouped: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        grouped[(row["judge"], row["a"], row["b"], row["dimension"], row["task_id"],
                 int(row.get("repeat") or 0))].append(row)
    return [_resolve(key, group) for key, group in grouped.items()]


def _resolve(key: tuple[Any, ...], group: list[dict[str, Any]]) -> Outcome:
    judge, a, b, dim, task_id, repeat = key
    winners = [r.get("winner") for r in group]
    if len(group) < 2 or any(r.get("reply") is None for r in group):
        status, winner = "not_judged", None
    elif any(r.get("verdict") is None for r in group):
        status, winner = "unreadable", None
    elif winners[0] == winners[1]:
        status, winner = "decided", winners[0]
    else:  # the judge named another winner when the order changed
        status, winner = "inconsistent", "tie"
    return Outcome(judge, Pair(a, b), dim, task_id, repeat, status, winner, group)


# --- a verdict on a trace -----------------------------------------------------------------

@dataclass(frozen=True)
class TraceVerdict:
    """A judge's verdict on one run's answer to a task, for that answer's trace: ``name``
    ``pairwise_<dimension>_vs_<other run>``, ``value`` from ``run``'s side (win, loss, tie,
    ``tie (position-inconsistent)`` or unreadable), both orders' replies as the rationale."""

    run: str
    task_id: str
    name: str
    value: str
    rationale: str
    judge: str


def trace_verdicts(found: Sequence[Outcome], judge: str) -> list[TraceVerdict]:
    """``judge``'s verdicts, each on both runs of its pair (a task judged in several
    repeats: its first; a task the judge never answered: none)."""
    out: dict[tuple[str, str, str], TraceVerdict] = {}
    for o in sorted(found, key=lambda o: o.repeat):
        if o.judge != judge or o.status == "not_judged":
            continue
        for me, other in ((o.pair.a, o.pair.b), (o.pair.b, o.pair.a)):
            name = f"pairwise_{o.dimension}_vs_{other}"
            out.setdefault((me, o.task_id, name), TraceVerdict(me, o.task_id, name,
                                                              _value(o, me), _rationale(o), judge))
    return list(out.values())


def _value(o: Outcome, me: str) -> str:
    if o.status == "unreadable":
        return "unreadable"
    if o.status == "inconsistent":
        return "tie (position-inconsistent)"
    return "tie" if o.winner == "tie" else "win" if o.winner == me else "loss"


def _rationale(o: Outcome) -> str:
    return "\n\n".join(f"{r['first']} shown first, {r['second']} second:\n"
                       f"{(r.get('reply') or '')[:RATIONALE_CHARS]}" for r in o.rows)


@dataclass
class PairFigures:
    """One judge's view of one pair on one dimension, over tasks."""

    judge: str
    pair: Pair
    dimension: str
    n_tasks: int  # tasks with a resolved outcome (repeats averaged per task)
    wins: int
    ties: int
    losses: int
    win_rate_ci: tuple[float, float] | None
    loss_rate_ci: tuple[float, float] | None
    sign_test_p: float | None  # None: no untied task
    resolved: int  # (task, repeat) outcomes with both replies readable
    inconsistent: int
    unreadable: int
    not_judged: int
    first_position: int  # readable replies naming the answer shown first
    named: int  # readable replies naming a winner (not a tie)
    length: LengthControl | None = None  # None: rows without answer lengths (older sweeps)
    # a's mean per-task preference (1 win, 0.5 tie, 0 loss): ties count ½, as in the
    # length-controlled rate, so the two rates are of one quantity
    preference: float | None = None

    @property
    def win_rate(self) -> float | None:
        """a's win rate, ties counted ½ (as the length-controlled rate counts them)."""
        return self.preference if self.n_tasks else None

    @property
    def tie_rate(self) -> float | None:
        return self.ties / self.n_tasks if self.n_tasks else None

    @property
    def loss_rate(self) -> float | None:
        """b's win rate, ties counted ½: 1 − ``win_rate``."""
        return 1 - self.preference if self.n_tasks and self.preference is not None else None

    @property
    def length_explains(self) -> bool:
        """The judge prefers one run, but at equal length the preference is not told from
        none: the length-controlled rate's CI includes 0.5 ("beats" is then never said)."""
        lc = self.length
        return (self.winner is not None and lc is not None and lc.ci is not None
                and lc.ci[0] <= 0.5 <= lc.ci[1])

    @property
    def position_inconsistency(self) -> float | None:
        return self.inconsistent / self.resolved if self.resolved else None

    @property
    def first_position_preference(self) -> float | None:
        """Of the replies naming a winner, the share naming the one shown first (0.5: no
        position bias)."""
        return self.first_position / self.named if self.named else None

    @property
    def winner(self) -> str | None:
        """The run the judge prefers on more tasks (None: as many each way, or none)."""
        if self.wins == self.losses:
            return None
        return self.pair.a if self.wins > self.losses else self.pair.b


@dataclass(frozen=True)
class LengthControl:
    """How far answer length explains a pair's preferences (AlpacaEval 2, Dubois et al. 2024,
    arXiv 2404.04475): a logistic model of the per-task preference for ``a`` on
    ``tanh(length difference / its sd)``, read at zero difference."""

    win_rate: float | None  # the length-controlled win rate of a; None: see ``why_not``
    a_longer: int  # tasks where a's answer is longer (words, repeats averaged)
    b_longer: int
    longer_p: float | None  # sign test: is one run's answer systematically longer?
    why_not: str = ""
    ci: tuple[float, float] | None = None  # 95% profile-likelihood CI of ``win_rate``

    @property
    def systematically_longer(self) -> bool:
        return self.longer_p is not None and self.longer_p < LONGER_P


LC_MIN_TASKS = 10  # fewer: the two-parameter model is not read
LONGER_P = 0.05


def length_control(scores: dict[str, float], differences: dict[str, float]) -> LengthControl:
    """``scores``: task -> a's preference (1 win, 0.5 tie, 0 loss); ``differences``: task
    -> a's words minus b's."""
    tasks = [t for t in scores if t in differences]
    diffs = np.array([differences[t] for t in tasks])
    a_longer, b_longer = int((diffs > 0).sum()), int((diffs < 0).sum())
    p = _sign_test(a_longer, b_longer)
    if len(tasks) < LC_MIN_TASKS:
        return LengthControl(None, a_longer, b_longer, p,
                             f"{len(tasks)} tasks (fewer than {LC_MIN_TASKS})")
    if not a_longer or not b_longer:
        return LengthControl(None, a_longer, b_longer, p, "one run's answer is the longer on "
                             "every task, so length and system cannot be told apart")
    rate, ci = _logistic_intercept(np.array([scores[t] for t in tasks]), diffs)
    return LengthControl(rate, a_longer, b_longer, p, ci=ci)


SLOPE_RIDGE = 0.05
CHI2_95 = 3.841458820694124  # the chi-square(1) 95% point: a profile-likelihood interval
INTERCEPT_BOUND = 12.0  # log-odds searched for the interval's ends (expit(12) = 0.999994)


def _logistic_intercept(preference: np.ndarray, diffs: np.ndarray
                        ) -> tuple[float, tuple[float, float]]:
    """The fitted preference at zero length difference and its 95% profile-likelihood CI
    (the intercepts whose best fit over the slope is within the chi-square(1) 95% point of
    the best fit), through the logistic function. A Wald or bootstrap interval fails where a
    judge always prefers the longer answer: the intercept then has no finite estimate, and
    the profile is flat across every rate length alone explains."""
    from scipy.optimize import brentq, minimize, minimize_scalar
    from scipy.special import expit

    x = np.tanh(diffs / diffs.std())

    def loss(intercept: float, slope: float) -> float:
        z = intercept + slope * x
        # a small ridge on the slope keeps a judge that always picks the longer finite
        return float(np.sum(np.logaddexp(0, z) - preference * z) + SLOPE_RIDGE * slope ** 2)

    best = minimize(lambda t: loss(t[0], t[1]), np.zeros(2), method="BFGS")

    def excess(intercept: float) -> float:
        profile = minimize_scalar(lambda slope: loss(intercept, slope)).fun
        return 2 * (float(profile) - float(best.fun)) - CHI2_95

    centre = float(np.clip(best.x[0], -INTERCEPT_BOUND, INTERCEPT_BOUND))
    ends = []
    for edge in (-INTERCEPT_BOUND, INTERCEPT_BOUND):
        ends.append(edge if excess(edge) <= 0 else brentq(excess, centre, edge)
                    if excess(centre) < 0 else centre)
    return float(expit(best.x[0])), (float(expit(ends[0])), float(expit(ends[1])))


def _length_differences(found: list[Outcome]) -> dict[str, float] | None:
    """Task -> a's words minus b's, averaged over repeats (None: rows without lengths)."""
    rows = [r for o in found for r in o.rows]
    if not rows or any(r.get("a_words") is None for r in rows):
        return None
    return task_means([{"id": r["task_id"], "d": float(r["a_words"] - r["b_words"])}
                       for r in rows], "d")


def pair_figures(found: list[Outcome]) -> PairFigures:
    """The figures of one (judge, pair, dimension)'s outcomes."""
    first = found[0]
    per_task = task_means([{"id": o.task_id, "score": o.score} for o in found], "score")
    scores = list(per_task.values())
    wins, losses = sum(s > 0.5 for s in scores), sum(s < 0.5 for s in scores)
    replies = [r for o in found if o.status in ("decided", "inconsistent") for r in o.rows]
    named = [r for r in replies if r["verdict"] in ("A", "B")]
    return PairFigures(
        first.judge, first.pair, first.dimension, len(scores), wins,
        len(scores) - wins - losses, losses,
        bootstrap_ci(scores), bootstrap_ci([1 - s for s in scores]),
        _sign_test(wins, losses),
        sum(o.status in ("decided", "inconsistent") for o in found),
        sum(o.status == "inconsistent" for o in found),
        sum(o.status == "unreadable" for o in found),
        sum(o.status == "not_judged" for o in found),
        sum(r["verdict"] == "A" for r in named), len(named),
        None if (diffs := _length_differences(found)) is None else
        length_control(per_task, diffs), float(np.mean(scores)) if scores else None)


def _sign_test(wins: int, losses: int) -> float | None:
    from scipy.stats import binomtest

    if wins + losses == 0:
        return None
    return float(binomtest(wins, wins + losses, 0.5).pvalue)


@dataclass
class Strength:
    """A run's Bradley-Terry strength (log scale, centred on 0) with a bootstrap CI."""

    run: str
    strength: float
    ci_low: float | None
    ci_high: float | None


def bradley_terry(found: list[Outcome], resamples: int = BT_RESAMPLES, seed: int = 0
                  ) -> list[Strength]:
    """Best first: strengths fitted by ``choix`` (ILSR) to every resolved (task, repeat)
    outcome of one judge and dimension (a tie counts as half a win each way), with 95%
    percentile-bootstrap CIs over tasks; empty below three runs."""
    runs = sorted({o.pair.a for o in found} | {o.pair.b for o in found})
    decided = [o for o in found if o.winner is not None]
    if len(runs) < 3 or not decided:
        return []
    index = {r: i for i, r in enumerate(runs)}
    by_task: dict[str, list[Outcome]] = defaultdict(list)
    for o in decided:
        by_task[o.task_id].append(o)
    tasks = list(by_task)
    fitted = _bt_fit(len(runs), [o for t in tasks for o in by_task[t]], index)
    rng = np.random.default_rng(seed)
    boots = np.array([_bt_fit(len(runs), [o for t in rng.choice(tasks, size=len(tasks))
                                          for o in by_task[str(t)]], index)
                      for _ in range(resamples)])
    low, high = np.percentile(boots, [2.5, 97.5], axis=0) if len(tasks) >= 2 else (None, None)
    out = [Strength(r, float(fitted[i]), None if low is None else float(low[i]),
                    None if high is None else float(high[i])) for r, i in index.items()]
    return sorted(out, key=lambda s: -s.strength)


def _bt_fit(n: int, found: list[Outcome], index: dict[str, int]) -> np.ndarray:
    """Strengths, centred on 0. choix takes no ties and no weights, so each outcome enters
    as two comparisons: a win as two wins, a tie as one win each way, so that a tie weighs
    half a win each way (the weighted Bradley-Terry likelihood, up to the regularisation)."""
    import choix

    data = []
    for o in found:
        a, b = index[o.pair.a], index[o.pair.b]
        if o.winner == "tie":
            data += [(a, b), (b, a)]
        else:
            data += [(a, b) if o.winner == o.pair.a else (b, a)] * 2
    params = np.asarray(choix.ilsr_pairwise(n, data, alpha=BT_ALPHA), dtype=float)
    return params - params.mean()


@dataclass
class Summary:
    """Every figure of a pairwise judging, recomputed from its rows."""

    judges: list[str]  # the primary judge first
    pairs: list[PairFigures]
    ranking: dict[str, list[Strength]]  # dimension -> the primary judge's ranking
    agreement: dict[str, Any] = field(default_factory=dict)  # dimension -> Agreement | None

    def figures(self, judge: str | None = None) -> list[PairFigures]:
        judge = judge or self.judges[0]
        return [f for f in self.pairs if f.judge == judge]

    def of(self, judge: str) -> dict[str, float | None]:
        """A judge's position bias over every pair and dimension."""
        mine = self.figures(judge)
        resolved = sum(f.resolved for f in mine)
        named = sum(f.named for f in mine)
        return {"position_inconsistency": sum(f.inconsistent for f in mine) / resolved
                if resolved else None,
                "first_position_preference": sum(f.first_position for f in mine) / named
                if named else None,
                "unreadable": float(sum(f.unreadable for f in mine)),
                "not_judged": float(sum(f.not_judged for f in mine))}


def summarize(rows: Sequence[dict[str, Any]], resamples: int = BT_RESAMPLES) -> Summary:
    """The figures of ``pairwise.jsonl``'s rows."""
    found = outcomes(rows)
    judges = list(dict.fromkeys(r["judge"] for r in rows))
    groups: dict[tuple[str, Pair, str], list[Outcome]] = defaultdict(list)
    for o in found:
        groups[(o.judge, o.pair, o.dimension)].append(o)
    figures = [pair_figures(g) for g in groups.values()]
    dims = list(dict.fromkeys(o.dimension for o in found))
    primary = judges[0] if judges else ""
    ranking = {d: bradley_terry([o for o in found if o.judge == primary and o.dimension == d],
                                resamples) for d in dims}
    agree = {d: _agreement([o for o in found if o.dimension == d], judges) for d in dims} \
        if len(judges) > 1 else {}
    return Summary(judges, figures, {d: r for d, r in ranking.items() if r}, agree)


def _agreement(found: list[Outcome], judges: list[str]) -> Any:
    """Krippendorff's alpha (ordinal: loss < tie < win) of the judges' resolved outcomes."""
    items = sorted({(o.pair.name, o.task_id, o.repeat) for o in found})
    column = {item: n for n, item in enumerate(items)}
    ratings = np.full((len(judges), len(items)), np.nan)
    for o in found:
        if o.score is not None:
            ratings[judges.index(o.judge), column[(o.pair.name, o.task_id, o.repeat)]] = o.score
    return agreement(ratings) if items else None


def label(name: str) -> str:
    """A run label as it may stand in an MLflow metric name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_") or "run"


def metrics_of(summary: Summary) -> dict[str, float]:
    """The parent run's metrics: per pair and dimension ``pairwise_<dim>_<a>_vs_<b>_``
    win/tie/loss rates with CIs, the length-controlled win rate (``_lc_win_rate``) and the
    tasks where each answer is the longer, sign test, position inconsistency and first-position
    preference (``pairwise_panel_<judge>_...`` for a panel judge); the judges' overall
    position bias; Bradley-Terry strengths; the panel's agreement."""
    out: dict[str, float] = {}
    for f in summary.pairs:
        who = "" if f.judge == summary.judges[0] else f"panel_{label(f.judge)}_"
        base = f"pairwise_{who}{f.dimension}_{label(f.pair.a)}_vs_{label(f.pair.b)}"
        values: dict[str, float | None] = {
            "win_rate": f.win_rate, "tie_rate": f.tie_rate, "loss_rate": f.loss_rate,
            "sign_test_p": f.sign_test_p, "position_inconsistency": f.position_inconsistency,
            "first_position_preference": f.first_position_preference,
            "n_tasks": float(f.n_tasks), "unreadable": float(f.unreadable),
            "not_judged": float(f.not_judged)}
        if f.length is not None:
            low, high = f.length.ci or (None, None)
            values |= {"lc_win_rate": f.length.win_rate, "lc_win_rate_ci_low": low,
                       "lc_win_rate_ci_high": high,
                       "a_longer_tasks": float(f.length.a_longer),
                       "b_longer_tasks": float(f.length.b_longer)}
        for name, ci in (("win_rate", f.win_rate_ci), ("loss_rate", f.loss_rate_ci)):
            if ci is not None:
                values[f"{name}_ci_low"], values[f"{name}_ci_high"] = ci
        out.update({f"{base}_{k}": v for k, v in values.items() if v is not None})
    for n, judge in enumerate(summary.judges):
        who = "" if n == 0 else f"panel_{label(judge)}_"
        out.update({f"pairwise_{who}{k}": v for k, v in summary.of(judge).items()
                    if v is not None})
    for dim, ranking in summary.ranking.items():
        for s in ranking:
            base = f"pairwise_{dim}_bt_{label(s.run)}"
            out[base] = s.strength
            if s.ci_low is not None and s.ci_high is not None:
                out[f"{base}_ci_low"], out[f"{base}_ci_high"] = s.ci_low, s.ci_high
    for dim, found in summary.agreement.items():
        if found is not None:
            out[f"pairwise_judge_agreement_{dim}"] = found.alpha
    return out

