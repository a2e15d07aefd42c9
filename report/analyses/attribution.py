"""Why a system loses: its missed gold facts blamed on retrieval or on generation, and its
unsupported claims, from the ``attribution`` scorer's per-task facts and claims (the method:
docs/judging.md#attribution-why-a-system-loses; the words:
``report/writers/attribution_words.py``). The parent run gets ``attribution.jsonl`` and
compare.html each task's causes (``compare_details``)."""

from __future__ import annotations

import html
from collections import Counter, defaultdict
from dataclasses import dataclass
from functools import partial
from typing import Any

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
from report.model import Analysis, Claim, Inputs, Note, Row, Table, register_analysis, runs_with

SECTION = "Why each system loses"
CAUSES = (NOT_RETRIEVED, UNUSED)  # the sign test's first and second count
SIGN_RULE = f"two-sided sign test on per-task counts, α = {ALPHA}"


@dataclass(frozen=True)
class Tally:
    """One run's gold facts and answer claims by status over all its answers, each task's
    facts by status (repeats summed) and its mean unsupported rate per task."""

    run: str
    facts: Counter[str]
    claims: Counter[str]
    per_task: dict[str, Counter[str]]
    known_context: int  # facts whose record says what was read (in_context not None)
    unsupported_mean: float | None  # attribution_unsupported_rate_mean

    @classmethod
    def of(cls, run: Row, scored: list[Row]) -> Tally:
        facts = [f for r in scored for f in r.get("attribution_facts") or []]
        per_task: dict[str, Counter[str]] = defaultdict(Counter)
        for r in scored:
            per_task[str(r["id"])].update(f["status"] for f in r.get("attribution_facts") or [])
        means = task_means(scored, "attribution_unsupported_rate")
        return cls(run["run"], Counter(f["status"] for f in facts),
                   Counter(c["status"] for r in scored for c in r.get("attribution_claims") or []),
                   dict(per_task), sum(f.get("in_context") is not None for f in facts),
                   sum(means.values()) / len(means) if means else None)

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
        leader = self.cause_test.leader if self.missed else None
        return None if leader is None else CAUSES[leader]

    @property
    def unsupported_pooled(self) -> float | None:
        checked = sum(self.claims.values())
        return self.claims[UNSUPPORTED] / checked if checked else None

    def cell(self, status: str) -> int | None:
        """A status's count; a cause's is None (unknown, never 0) where nothing says what
        was read."""
        return None if status in CAUSES and self.context_unknown else self.facts[status]

    def side(self) -> dict[str, Any]:
        """The run's side of a gap: its missed facts by cause, and the cause that leads."""
        return {"run": self.run, "missed": self.missed, NOT_RETRIEVED: self.facts[NOT_RETRIEVED],
                UNUSED: self.facts[UNUSED], "cause": self.main_cause,
                "context_unknown": self.context_unknown}


@register_analysis("attribution", 30)
def analysis(inputs: Inputs) -> Analysis:
    found = runs_with(inputs, lambda r: bool(r.get("attribution_method")))
    tallies = {run["run_id"]: Tally.of(run, scored) for run, scored in found}
    if not tallies:
        return Analysis()
    rows = [row for run, _ in found for r in inputs.records[run["run_id"]]
            for row in artifact_rows(r["id"], run["run"], r.get("repeat"), r)]
    every = list(tallies.values())
    claims = [overview(every), *(cause(t) for t in every if t.missed), *_gaps(inputs, tallies),
              *(c for run_id, t in tallies.items()
                if (c := _agreement(t, inputs.records.get(run_id, []))) is not None)]
    return Analysis(claims=claims, notes=_notes(every), artifacts={"attribution.jsonl": rows},
                    plots=[partial(plots.attribution_plot, _bars(every))])


def _notes(tallies: list[Tally]) -> list[Note]:
    out = []
    for t in tallies:
        if t.facts[UNKNOWN]:
            out.append(Note("attribution_unknown", SECTION, (t.run,),
                            {"unknown": t.facts[UNKNOWN], "context_unknown": t.context_unknown}))
        if not sum(t.facts.values()):
            out.append(Note("attribution_no_gold", SECTION, (t.run,)))
    return out


def overview(tallies: list[Tally]) -> Claim:
    table = Table(["run", "gold facts", "covered", "retrieved, unused", "not retrieved",
                   "unknown", "claims", "unsupported", "from memory"],
                  [[t.run, sum(t.facts.values()), t.facts[COVERED], t.cell(UNUSED),
                    t.cell(NOT_RETRIEVED), t.facts[UNKNOWN], sum(t.claims.values()),
                    t.claims[UNSUPPORTED], t.claims[FROM_MEMORY]] for t in tallies])
    return Claim("attribution_table", SECTION, tuple(t.run for t in tallies),
                 figures={t.run: {"facts": dict(t.facts), "claims": dict(t.claims),
                                  "context_unknown": t.context_unknown} for t in tallies},
                 table=table)


def cause(t: Tally) -> Claim:
    """Which cause leads a run's missed facts, by the sign test; and its unsupported share
    pooled and per task, each named."""
    test, leader = t.cause_test, t.main_cause
    return Claim("cause", SECTION, (t.run,), p=test.p, n_tasks=len(t.per_task),
                 rule=SIGN_RULE, key=True,
                 figures={"cause": leader, NOT_RETRIEVED: test.first, UNUSED: test.second,
                          "missed": t.missed,
                          "share_of_missed": (t.facts[leader] / t.missed) if leader else None,
                          "tasks_more_not_retrieved": test.more,
                          "tasks_more_unused": test.fewer, "tasks_tied": test.ties,
                          "claims_checked": sum(t.claims.values()),
                          "claims_unsupported": t.claims[UNSUPPORTED],
                          "unsupported_pooled": t.unsupported_pooled,
                          "unsupported_mean_per_task": t.unsupported_mean})


def _gaps(inputs: Inputs, tallies: dict[str, Tally]) -> list[Claim]:
    """For each pair the verdict decided: where the loser's gap lies, beside the winner's."""
    out: dict[tuple[str, str], Claim] = {}
    for d in inputs.decided:
        if (winner := d.better) is None:
            continue
        loser = d.second if winner is d.first else d.first
        pair = (winner["run_id"], loser["run_id"])
        if pair not in out and all(r in tallies for r in pair):
            out[pair] = Claim("attribution_gap", SECTION, (loser["run"], winner["run"]),
                              metric=d.key, key=True,
                              figures={"loser": loser["run"], "winner": winner["run"],
                                       "sides": [tallies[pair[1]].side(), tallies[pair[0]].side()]})
    return list(out.values())


def _agreement(t: Tally, records: list[Row]) -> Claim | None:
    """How often the no-LLM path gives the judge's status, by kind (None: nothing judged)."""
    found = {k: v for k, v in agreement(records).items() if v[1]}
    return Claim("attribution_agreement", SECTION, (t.run,), figures={
        k: {"agree": a, "n": n, "share": a / n} for k, (a, n) in found.items()}) if found else None


def _bars(tallies: list[Tally]) -> list[tuple[str, dict[str, float], float | None]]:
    """Per run: each fact status's share of its facts, and its pooled unsupported share."""
    out = []
    for t in tallies:
        total = sum(t.facts.values()) or 1
        out.append((t.run, {s: t.facts[s] / total for s in (COVERED, UNUSED, NOT_RETRIEVED,
                                                             UNKNOWN)}, t.unsupported_pooled))
    return out


def compare_details(record: dict[str, Any]) -> str:
    """compare.html: the task's missed facts with their cause, and unsupported claims."""
    facts = [f for f in record.get("attribution_facts") or [] if f["status"] != COVERED]
    claims = [c for c in record.get("attribution_claims") or [] if c["status"] != "supported"]
    if not facts and not claims:
        return ""
    items = "".join(f"<li><b>{prefix}{html.escape(x['status'].replace('_', ' '))}</b>: "
                    f"{html.escape(x['text'])}</li>"
                    for prefix, xs in (("", facts), ("claim ", claims)) for x in xs)
    return (f"<details><summary>why it missed ({len(facts)} facts, {len(claims)} claims)"
            f"</summary><ul>{items}</ul></details>")
