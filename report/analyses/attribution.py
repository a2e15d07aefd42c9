"""Why a system loses: its missed gold facts blamed on retrieval or on generation, and its
unsupported claims, from the ``attribution`` scorer's per-task facts and claims.

Claims and notes (their words: ``report/writers/attribution_words.py``):

* ``attribution_table``: per system, its gold facts by status (covered / retrieved but
  unused / not retrieved / unknown) and its claims (unsupported, from memory), with a
  stacked bar; a run whose records never say what it read has "unknown", never 0, under
  the two causes.
* ``cause`` (key): per system with missed facts, which cause leads: named only when a
  two-sided sign test on the per-task counts (``metrics.stats.sign_test``) puts one above
  the other at α = 0.05; otherwise ``figures["cause"]`` is None ("neither cause leads (341
  vs 328)"). Beside it, the unsupported share both ways, named: pooled over all checked
  claims, and the mean per task (``attribution_unsupported_rate_mean``).
* ``attribution_gap`` (key): for each pair the verdict decided, where the loser's gap lies.
* ``attribution_agreement``: per judged run, how often text matching gives the judge's
  status (the agreement of the no-LLM path with the judged one).
* Notes ``attribution_unknown`` (facts whose context is unknown) and ``attribution_no_gold``.

The parent run gets ``attribution.jsonl`` (one row per task, system, repeat and fact or
claim) and, in compare.html, each task's causes with the fact text.
"""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from metrics.aggregate import task_means
from metrics.attribution import (
    COVERED,
    FROM_MEMORY,
    NOT_RETRIEVED,
    UNKNOWN,
    UNSUPPORTED,
    UNUSED,
    agreement,
    artifact_rows,
)
from metrics.stats import ALPHA, SignTest, sign_test
from report import plots
from report.model import Analysis, Claim, Note, Row, Table, register_analysis
from report.verdict import Decision

SECTION = "Why each system loses"
CAUSES = (NOT_RETRIEVED, UNUSED)  # the sign test's first and second count
SIGN_RULE = f"two-sided sign test on per-task counts, α = {ALPHA}"
UNSUPPORTED_MEAN = "attribution_unsupported_rate_mean"  # the run metric: mean per task


class Inputs(Protocol):
    """What this analysis reads of ``report.analyses.Inputs`` (which registers it: this
    module cannot import it back)."""

    @property
    def finished(self) -> list[Row]: ...
    @property
    def records(self) -> dict[str, list[Row]]: ...
    @property
    def decided(self) -> list[Decision]: ...


@dataclass(frozen=True)
class Tally:
    """One run's gold facts and answer claims by status, over all its answers, and each
    task's count of facts missed for each cause (repeats summed)."""

    run: str
    facts: Counter[str]
    claims: Counter[str]
    per_task: dict[str, Counter[str]]
    known_context: int  # facts whose record says what was read (in_context not None)
    unsupported_mean: float | None  # mean over tasks of attribution_unsupported_rate

    @property
    def missed(self) -> int:
        return self.facts[NOT_RETRIEVED] + self.facts[UNUSED]

    @property
    def context_unknown(self) -> bool:
        """No fact of the run has a known context: its causes are unknown, not 0."""
        return bool(sum(self.facts.values())) and not self.known_context

    @property
    def cause_test(self) -> SignTest:
        tasks = sorted(self.per_task)
        return sign_test([self.per_task[t][NOT_RETRIEVED] for t in tasks],
                         [self.per_task[t][UNUSED] for t in tasks])

    @property
    def main_cause(self) -> str | None:
        """The cause that leads by the sign test (None: nothing missed, or neither leads)."""
        if not self.missed:
            return None
        leader = self.cause_test.leader
        return None if leader is None else CAUSES[leader]

    @property
    def checked_claims(self) -> int:
        return sum(self.claims.values())

    @property
    def unsupported_pooled(self) -> float | None:
        """Unsupported claims over all the run's checked claims (pooled)."""
        return self.claims[UNSUPPORTED] / self.checked_claims if self.checked_claims else None


def tally(run: Row, records: list[Row]) -> Tally | None:
    """A run's tally, or None when its records have no attribution (the scorer did not run)."""
    scored = [r for r in records if r.get("attribution_method")]
    if not scored:
        return None
    facts = [f for r in scored for f in r.get("attribution_facts") or []]
    per_task: dict[str, Counter[str]] = defaultdict(Counter)
    for r in scored:
        per_task[str(r["id"])].update(f["status"] for f in r.get("attribution_facts") or [])
    means = task_means(scored, "attribution_unsupported_rate")
    return Tally(run["run"], Counter(f["status"] for f in facts),
                 Counter(c["status"] for r in scored for c in r.get("attribution_claims") or []),
                 dict(per_task), sum(f.get("in_context") is not None for f in facts),
                 sum(means.values()) / len(means) if means else None)


@register_analysis("attribution", 30)
def analysis(inputs: Inputs) -> Analysis:
    tallies = {run["run_id"]: t for run in inputs.finished
               if (t := tally(run, inputs.records.get(run["run_id"], []))) is not None}
    if not tallies:
        return Analysis()
    rows = [row for run in inputs.finished if run["run_id"] in tallies
            for r in inputs.records[run["run_id"]]
            for row in artifact_rows(r["id"], run["run"], r.get("repeat"), r)]
    found = list(tallies.values())
    claims = [overview(found), *(cause(t) for t in found if t.missed),
              *_gaps(inputs, tallies), *_agreement(inputs, tallies)]
    return Analysis(claims=claims, notes=_notes(found), artifacts={"attribution.jsonl": rows},
                    plots=[partial(plots.attribution_plot, _bars(found))])


def cell(t: Tally, status: str) -> int | None:
    """A cause's count in a table; None (unknown, never 0) where the run never says what it
    read."""
    return None if status in CAUSES and t.context_unknown else t.facts[status]


def overview(tallies: list[Tally]) -> Claim:
    table = Table(["run", "gold facts", "covered", "retrieved, unused", "not retrieved",
                   "unknown", "claims", "unsupported", "from memory"],
                  [[t.run, sum(t.facts.values()), t.facts[COVERED], cell(t, UNUSED),
                    cell(t, NOT_RETRIEVED), t.facts[UNKNOWN], t.checked_claims,
                    t.claims[UNSUPPORTED], t.claims[FROM_MEMORY]] for t in tallies])
    return Claim("attribution_table", SECTION, tuple(t.run for t in tallies),
                 figures={t.run: {"facts": dict(t.facts), "claims": dict(t.claims),
                                  "context_unknown": t.context_unknown} for t in tallies},
                 table=table)


def cause(t: Tally) -> Claim:
    """Which cause leads a run's missed facts, by the sign test; and its unsupported share
    pooled and per task, each named."""
    test = t.cause_test
    leader = t.main_cause
    return Claim("cause", SECTION, (t.run,), p=test.p, n_tasks=len(t.per_task),
                 rule=SIGN_RULE, key=True,
                 figures={"cause": leader, NOT_RETRIEVED: test.first, UNUSED: test.second,
                          "missed": t.missed,
                          "share_of_missed": (t.facts[leader] / t.missed) if leader else None,
                          "tasks_more_not_retrieved": test.more,
                          "tasks_more_unused": test.fewer, "tasks_tied": test.ties,
                          "claims_checked": t.checked_claims,
                          "claims_unsupported": t.claims[UNSUPPORTED],
                          "unsupported_pooled": t.unsupported_pooled,
                          "unsupported_mean_per_task": t.unsupported_mean})


def _notes(tallies: list[Tally]) -> list[Note]:
    out = []
    for t in tallies:
        if t.facts[UNKNOWN]:
            out.append(Note("attribution_unknown", SECTION, (t.run,),
                            {"unknown": t.facts[UNKNOWN],
                             "context_unknown": t.context_unknown}))
        if not sum(t.facts.values()):
            out.append(Note("attribution_no_gold", SECTION, (t.run,)))
    return out


def _gaps(inputs: Inputs, tallies: dict[str, Tally]) -> list[Claim]:
    """For each pair the verdict decided: where the losing system's gap lies, beside the
    winner's."""
    out, seen = [], set()
    for d in inputs.decided:
        winner = d.better
        if winner is None:
            continue
        loser = d.second if winner is d.first else d.first
        pair = (winner["run_id"], loser["run_id"])
        if pair in seen or not all(r in tallies for r in pair):
            continue
        seen.add(pair)
        lost, won = tallies[loser["run_id"]], tallies[winner["run_id"]]
        out.append(Claim("attribution_gap", SECTION, (loser["run"], winner["run"]),
                         metric=d.key, key=True,
                         figures={"loser": loser["run"], "winner": winner["run"],
                                  "sides": [_side(lost), _side(won)]}))
    return out


def _side(t: Tally) -> dict[str, Any]:
    """One side of a gap: its missed facts by cause and the cause that leads (or None)."""
    return {"run": t.run, "missed": t.missed, NOT_RETRIEVED: t.facts[NOT_RETRIEVED],
            UNUSED: t.facts[UNUSED], "cause": t.main_cause,
            "context_unknown": t.context_unknown}


def _agreement(inputs: Inputs, tallies: dict[str, Tally]) -> list[Claim]:
    """Per judged run: how often the no-LLM path gives the judge's status, by kind."""
    out = []
    for run_id, t in tallies.items():
        found = {k: v for k, v in agreement(inputs.records.get(run_id, [])).items() if v[1]}
        if found:
            out.append(Claim("attribution_agreement", SECTION, (t.run,),
                             figures={k: {"agree": a, "n": n, "share": a / n}
                                      for k, (a, n) in found.items()}))
    return out


def _bars(tallies: list[Tally]) -> list[tuple[str, dict[str, float], float | None]]:
    """Per run: each fact status's share of all its facts, and its unsupported claim share
    (pooled over all its checked claims)."""
    out = []
    for t in tallies:
        total = sum(t.facts.values())
        shares = {s: t.facts[s] / total if total else 0.0
                  for s in (COVERED, UNUSED, NOT_RETRIEVED, UNKNOWN)}
        out.append((t.run, shares, t.unsupported_pooled))
    return out


def compare_details(record: dict[str, Any]) -> str:
    """compare.html: the task's missed facts with their cause, and unsupported claims."""
    facts = [f for f in record.get("attribution_facts") or [] if f["status"] != COVERED]
    claims = [c for c in record.get("attribution_claims") or [] if c["status"] != "supported"]
    if not facts and not claims:
        return ""
    items = "".join(f"<li><b>{html.escape(f['status'].replace('_', ' '))}</b>: "
                    f"{html.escape(f['text'])}</li>" for f in facts)
    items += "".join(f"<li><b>claim {html.escape(c['status'].replace('_', ' '))}</b>: "
                     f"{html.escape(c['text'])}</li>" for c in claims)
    return (f"<details><summary>why it missed ({len(facts)} facts, {len(claims)} claims)"
            f"</summary><ul>{items}</ul></details>")
