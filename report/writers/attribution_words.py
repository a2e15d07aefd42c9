"""The words of the attribution analysis's claims and notes (``report/analyses/attribution``):
one function per kind, each taking the Claim or Note and returning Markdown. No figure is
computed here; every number is the claim's."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from report.model import Claim, Note

CAUSE_WORDS = {"not_retrieved": "never retrieved", "retrieved_unused": "in context but unused"}


def attribution_table(claim: Claim) -> str:
    return ("Each gold fact is covered (the answer reflects it), retrieved but unused (in the "
            "context the system read, not in its answer), not retrieved, or unknown (the "
            "record does not say what was read); each checkable answer sentence is supported "
            "by that context, from memory (not in it, but in the reference) or unsupported "
            "(docs/judging.md). A gold line the reference does not restate is not a gold "
            "fact.\n\n![attribution](plots/attribution.png)")


def _unsupported(f: Mapping[str, Any]) -> str:
    parts = []
    if f.get("unsupported_pooled") is not None:
        parts.append(f"{f['unsupported_pooled']:.0%} of all its checked claims unsupported "
                     f"({f['claims_unsupported']} of {f['claims_checked']})")
    if f.get("unsupported_mean_per_task") is not None:
        parts.append(f"mean per task {f['unsupported_mean_per_task']:.3f} "
                     "(attribution_unsupported_rate_mean)")
    return "; " + ", ".join(parts) if parts else ""


def cause(claim: Claim) -> str:
    f = claim.figures
    (run,) = claim.runs
    p = "" if claim.p is None else f", sign test p = {claim.p:.2g} over {claim.n_tasks} tasks"
    if f["cause"] is None:
        said = (f"{run}: neither cause leads ({f['not_retrieved']} never retrieved vs "
                f"{f['retrieved_unused']} in context but unused{p})")
    else:
        said = (f"{run}: main failure cause {CAUSE_WORDS[f['cause']]} "
                f"({f['share_of_missed']:.0%} of its {f['missed']} missed gold facts{p})")
    return said + _unsupported(f) + "."


def _side(side: dict[str, Any]) -> str:
    if side["context_unknown"]:
        return f"{side['run']}: causes unknown (its records do not say what it read)"
    if not side["missed"]:
        return f"{side['run']}: no missed gold fact"
    counts = (f"{side['not_retrieved']} never retrieved, {side['retrieved_unused']} in "
              "context but unused")
    if side["cause"] is None:
        return f"{side['run']}: {side['missed']} missed facts, neither cause leads ({counts})"
    return (f"{side['run']}: {side['missed']} missed facts, mostly {CAUSE_WORDS[side['cause']]}"
            f" ({counts})")


def attribution_gap(claim: Claim) -> str:
    f = claim.figures
    return (f"{f['loser']} loses to {f['winner']} on {claim.metric}: "
            + "; ".join(_side(s) for s in f["sides"]) + ".")


def attribution_agreement(claim: Claim) -> str:
    (run,) = claim.runs
    parts = [f"{x['agree']} of {x['n']} {kind.replace('facts', 'gold facts')} "
             f"({x['share']:.0%})" for kind, x in claim.figures.items()]
    return (f"{run}: text matching gives the judge's status to " + " and ".join(parts)
            + " (attribution_agreement_*).")


def attribution_unknown(note: Note) -> str:
    (run,) = note.runs
    return (f"{run}: {note.counts['unknown']} gold facts are unknown: its records say neither "
            "what context it read (`contexts`) nor which chunks (`retrieved_chunk_ids`), so "
            "only its claims are checked.")


def attribution_no_gold(note: Note) -> str:
    (run,) = note.runs
    return (f"{run}: no gold facts (the dataset has neither gold lines nor references, or the "
            "reference restates none of them): only its answers' claims are checked.")


WORDS: dict[str, Callable[[Any], str]] = {
    "attribution_table": attribution_table, "cause": cause, "attribution_gap": attribution_gap,
    "attribution_agreement": attribution_agreement, "attribution_unknown": attribution_unknown,
    "attribution_no_gold": attribution_no_gold}
