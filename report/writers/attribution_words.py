"""Words for "Why each system loses" (``report/analyses/attribution.py``): the table of
gold facts and claims, each run's leading cause (or that neither leads), where a loser
falls short, how far text matching agrees with the judge, and the notes on unknown facts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from report.model import Claim
from report.writers.cells import Style, number, p_value, share
from report.writers.words import Sentences, sentences, words

CAUSE_WORDS = {"not_retrieved": "never retrieved", "retrieved_unused": "in context but unused"}


sentences(
    attribution_table=Sentences(
        "Each run's gold facts by status and its checked claims by support (what each status "
        "means: docs/judging.md#attribution-why-a-system-loses).\n\n"
        "![attribution](plots/attribution.png)"),
    attribution_unknown=Sentences(
        "{runs}: {unknown} gold facts ", short="unknown (no context recorded)",
        full="are unknown: the records say neither what context was read ({code[contexts]}) "
        "nor which chunks ({code[retrieved_chunk_ids]}), so only the claims are checked."),
    attribution_no_gold=Sentences(
        "{runs}: no gold facts", short=", only the answers' claims are checked",
        full=" (the dataset has neither gold lines nor references, or the reference restates "
        "none of them): only the answers' claims are checked."),
)


def _unsupported(f: Mapping[str, Any], short: bool) -> str:
    parts = []
    if f.get("unsupported_pooled") is not None:
        parts.append(f"{share(f['unsupported_pooled'])} of all its checked claims unsupported"
                     + ("" if short else f" ({f['claims_unsupported']} of "
                                         f"{f['claims_checked']})"))
    if f.get("unsupported_mean_per_task") is not None:
        parts.append(f"mean per task {number(f['unsupported_mean_per_task'])}"
                     + ("" if short else " (attribution_unsupported_rate_mean)"))
    return "; " + ", ".join(parts) if parts else ""


@words("cause")
def cause(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    (run,) = c.runs
    test = "" if c.p is None else f", sign test p = {p_value(c.p)} over {c.n_tasks} tasks"
    if f["cause"] is None:
        said = (f"{run}: neither cause leads ({f['not_retrieved']} never retrieved vs "
                f"{f['retrieved_unused']} in context but unused{test})")
    else:
        said = (f"{run}: main failure cause {CAUSE_WORDS[f['cause']]} "
                f"({share(f['share_of_missed'])} of its {f['missed']} missed gold facts{test})")
    return said + _unsupported(f, short) + "."


def _side(side: Mapping[str, Any]) -> str:
    if side["context_unknown"]:
        return f"{side['run']}: causes unknown (its records do not say what it read)"
    if not side["missed"]:
        return f"{side['run']}: no missed gold fact"
    counts = (f"{side['not_retrieved']} never retrieved, {side['retrieved_unused']} in "
              "context but unused")
    if side["cause"] is None:
        return f"{side['run']}: {side['missed']} missed facts, neither cause leads ({counts})"
    return (f"{side['run']}: {side['missed']} missed facts, mostly "
            f"{CAUSE_WORDS[side['cause']]} ({counts})")


@words("attribution_gap")
def gap(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    return (f"{f['loser']} loses to {f['winner']} on {style.code(c.metric or '')}: "
            + "; ".join(_side(s) for s in f["sides"]) + ".")


@words("attribution_agreement")
def agreement(c: Claim, style: Style, short: bool) -> str:
    (run,) = c.runs
    parts = [f"{x['agree']} of {x['n']} {kind.replace('facts', 'gold facts')} "
             f"({share(x['share'])})" for kind, x in c.figures.items()]
    return (f"{run}: text matching gives the judge's status to " + " and ".join(parts)
            + f" ({style.code('attribution_agreement_*')}).")
