"""Why a system loses: its missed gold facts blamed on retrieval or on generation, and its
unsupported claims, from the ``attribution`` scorer's per-task facts and claims.

Findings: a table and a stacked bar per system (covered / retrieved but unused / not
retrieved / unknown, and the share of claims unsupported); one key line per system naming
its main failure cause; for each pair the verdict decided, where the loser's gap lies; for
each judged run, how often text matching gives the judge's status (the agreement of the
no-LLM path with the judged one, over its gold facts and claims). The
parent run gets ``attribution.jsonl`` (one row per task, system, repeat and fact or claim)
and, in compare.html, each task's causes with the fact text.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

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
from report import plots
from report.findings import Finding, Row, Table
from report.model import Analysis, register_analysis
from report.verdict import Decision

SECTION = "Why each system loses"
CAUSES = {NOT_RETRIEVED: "never retrieved", UNUSED: "in context but unused"}


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
    """One run's gold facts and answer claims by status, over all its answers."""

    run: str
    facts: Counter[str]
    claims: Counter[str]

    @property
    def missed(self) -> int:
        return self.facts[NOT_RETRIEVED] + self.facts[UNUSED]

    @property
    def main_cause(self) -> tuple[str, float] | None:
        """The larger cause of missed facts and its share of them (None: nothing missed)."""
        if not self.missed:
            return None
        cause = max(CAUSES, key=lambda s: self.facts[s])
        return cause, self.facts[cause] / self.missed

    @property
    def unsupported_share(self) -> float | None:
        total = sum(self.claims.values())
        return self.claims[UNSUPPORTED] / total if total else None


def tally(run: Row, records: list[Row]) -> Tally | None:
    """A run's tally, or None when its records have no attribution (the scorer did not run)."""
    scored = [r for r in records if r.get("attribution_method")]
    if not scored:
        return None
    facts = Counter(f["status"] for r in scored for f in r.get("attribution_facts") or [])
    claims = Counter(c["status"] for r in scored for c in r.get("attribution_claims") or [])
    return Tally(run["run"], facts, claims)


@register_analysis("attribution", 30)
def analysis(inputs: Inputs) -> Analysis:
    tallies = {run["run_id"]: t for run in inputs.finished
               if (t := tally(run, inputs.records.get(run["run_id"], []))) is not None}
    if not tallies:
        return Analysis()
    rows = [row for run in inputs.finished if run["run_id"] in tallies
            for r in inputs.records[run["run_id"]]
            for row in artifact_rows(r["id"], run["run"], r.get("repeat"), r)]
    found = [_overview(list(tallies.values())), *_caveats(list(tallies.values())),
             *(_cause(t) for t in tallies.values() if t.main_cause is not None),
             *_gaps(inputs, tallies), *_agreement(inputs, tallies)]
    return Analysis(findings=found, artifacts={"attribution.jsonl": rows},
                    plots=[partial(plots.attribution_plot, _bars(list(tallies.values())))])


def _overview(tallies: list[Tally]) -> Finding:
    table = Table(["run", "gold facts", "covered", "retrieved, unused", "not retrieved",
                   "unknown", "claims", "unsupported", "from memory"],
                  [[t.run, sum(t.facts.values()), t.facts[COVERED], t.facts[UNUSED],
                    t.facts[NOT_RETRIEVED], t.facts[UNKNOWN], sum(t.claims.values()),
                    t.claims[UNSUPPORTED], t.claims[FROM_MEMORY]] for t in tallies])
    text = ("Each gold fact is covered (the answer reflects it), retrieved but unused (in the "
            "context the system read, not in its answer), not retrieved, or unknown (the "
            "record does not say what was read); each checkable answer sentence is supported "
            "by that context, from memory (not in it, but in the reference) or unsupported "
            "(docs/judging.md).\n\n![attribution](plots/attribution.png)")
    return Finding("attribution", SECTION, text,
                   {t.run: {"facts": dict(t.facts), "claims": dict(t.claims)} for t in tallies},
                   table=table)


def _caveats(tallies: list[Tally]) -> list[Finding]:
    out = []
    for t in tallies:
        if t.facts[UNKNOWN]:
            out.append(Finding("attribution", SECTION,
                               f"{t.run}: {t.facts[UNKNOWN]} gold facts are unknown: its records "
                               "say neither what context it read (`contexts`) nor which chunks "
                               "(`retrieved_chunk_ids`), so only its claims are checked.",
                               {"run": t.run, "unknown": t.facts[UNKNOWN]}, caveat=True))
        if not sum(t.facts.values()):
            out.append(Finding("attribution", SECTION,
                               f"{t.run}: no gold facts (the dataset has neither gold lines nor "
                               "references): only its answers' claims are checked.",
                               {"run": t.run}, caveat=True))
    return out


def _cause(t: Tally) -> Finding:
    cause, share = t.main_cause or ("", 0.0)
    text = (f"{t.run}: main failure cause {CAUSES[cause]} ({share:.0%} of its {t.missed} "
            "missed gold facts)")
    if t.unsupported_share is not None:
        text += f"; {t.unsupported_share:.0%} of its checked claims unsupported"
    return Finding("attribution", SECTION, text + ".",
                   {"run": t.run, "cause": cause, "share_of_missed": share, "missed": t.missed,
                    "unsupported_share": t.unsupported_share}, key=True)


def _gaps(inputs: Inputs, tallies: dict[str, Tally]) -> list[Finding]:
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
        parts = [_gap_words(tallies[loser["run_id"]]), _gap_words(tallies[winner["run_id"]])]
        out.append(Finding("attribution", SECTION,
                           f"{loser['run']} loses to {winner['run']} on {d.key}: "
                           + "; ".join(parts) + ".",
                           {"key": d.key, "loser": loser["run"], "winner": winner["run"],
                            "loser_causes": dict(tallies[loser["run_id"]].facts),
                            "winner_causes": dict(tallies[winner["run_id"]].facts)}, key=True))
    return out


def _agreement(inputs: Inputs, tallies: dict[str, Tally]) -> list[Finding]:
    """Per judged run: how often the no-LLM path gives the judge's status, by kind."""
    out = []
    for run_id, t in tallies.items():
        found = agreement(inputs.records.get(run_id, []))
        parts = [f"{same} of {n} {kind.replace('facts', 'gold facts')} ({same / n:.0%})"
                 for kind, (same, n) in found.items() if n]
        if parts:
            out.append(Finding("attribution", SECTION,
                               f"{t.run}: text matching gives the judge's status to "
                               + " and ".join(parts) + " (attribution_agreement_*).",
                               {"run": t.run, **{k: {"agree": a, "n": n,
                                                     "share": a / n if n else None}
                                                 for k, (a, n) in found.items()}}))
    return out


def _gap_words(t: Tally) -> str:
    if t.main_cause is None:
        return f"{t.run}: no missed gold fact"
    cause, share = t.main_cause
    return f"{t.run}: {share:.0%} of {t.missed} missed facts {CAUSES[cause]}"


def _bars(tallies: list[Tally]) -> list[tuple[str, dict[str, float], float | None]]:
    """Per run: each fact status's share of all its facts, and its unsupported claim share."""
    out = []
    for t in tallies:
        total = sum(t.facts.values())
        shares = {s: t.facts[s] / total if total else 0.0
                  for s in (COVERED, UNUSED, NOT_RETRIEVED, UNKNOWN)}
        out.append((t.run, shares, t.unsupported_share))
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
