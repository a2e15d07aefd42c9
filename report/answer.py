"""The one rule that composes a sweep's answer from the analyses' claims, in order of
authority (``report.model.Authority``): a regression is always stated first; a sequential
sweep's anytime-valid intervals answer alone; labels' corrected differences outrank raw judge
means; else the fixed-sample family's differences with any significant interaction (the
answer when no average difference is declared), and a recommendation of what to ship; with
nothing decisive, what would decide. The rule for a reader: docs/verdict.md ("The answer's
rule"). The writers render the ``Answer``; nothing here makes a sentence."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from report.model import Authority, Claim


@dataclass(frozen=True)
class Answer:
    """What the answer states: ``mode`` says which rule answered (``sequential``,
    ``corrected``, ``decided``, ``crossover``, ``undecided``); ``claims`` the decisive
    claims it states, regressions first; ``pending``: for an undecided answer, the claims
    that say what would decide (each with its minimum detectable difference)."""

    mode: str
    claims: list[Claim] = field(default_factory=list)
    pending: list[Claim] = field(default_factory=list)
    dataset: str = ""
    family: int = 0  # the fixed-sample tests adjusted together (Holm)
    undecided: int = 0  # of them, those that decide nothing

    @property
    def descriptive_family(self) -> bool:
        """Whether the fixed-sample tests are descriptive here (a sequential sweep)."""
        return self.mode == "sequential" or any(
            c.authority == Authority.sequential for c in self.pending)


def compose(claims: Sequence[Claim], keys: Sequence[str]) -> list[Answer]:
    """The answer, one per dataset the claims name (a sweep over one dataset: one)."""
    datasets = list(dict.fromkeys(str(c.figures.get("dataset") or "") for c in claims
                                  if c.authority == Authority.fixed_sample))
    if len(datasets) <= 1:
        return [_compose(claims, keys, datasets[0] if datasets else "")]
    shared = [c for c in claims if c.authority != Authority.fixed_sample
              and not c.figures.get("dataset")]
    return [_compose([c for c in claims if c.figures.get("dataset") == name] + shared, keys,
                     name) for name in datasets]


def _compose(claims: Sequence[Claim], keys: Sequence[str], dataset: str) -> Answer:
    tests = [c for c in claims if c.authority == Authority.fixed_sample
             and c.kind in ("difference", "no_difference", "untestable")]
    family = max((int(c.figures.get("family") or 1) for c in tests), default=0)
    answer = _rule(claims, keys, dataset)
    return replace(answer, family=family,
                   undecided=sum(not c.decisive for c in tests) if answer.mode == "decided" else 0)


def _rule(claims: Sequence[Claim], keys: Sequence[str], dataset: str) -> Answer:
    regressions = [c for c in claims if c.authority == Authority.regression and c.decisive]
    sequential = [c for c in claims if c.authority == Authority.sequential]
    if sequential:
        decided = [c for c in sequential if c.decisive]
        return Answer("sequential" if decided else "undecided", regressions + decided,
                      [] if decided else sequential, dataset)
    corrected = [c for c in claims if c.authority == Authority.corrected and c.decisive
                 and c.metric in keys]
    shipping = [c for c in claims if c.authority == Authority.recommendation and c.decisive]
    if corrected:
        return Answer("corrected", regressions + corrected + shipping, [], dataset)
    differences = [c for c in claims if c.authority == Authority.fixed_sample and c.decisive]
    crossovers = [c for c in claims if c.authority == Authority.interaction and c.decisive]
    if differences or crossovers or regressions:
        mode = "decided" if differences or regressions else "crossover"
        return Answer(mode, regressions + differences + crossovers + shipping, [], dataset)
    # nothing decided on quality: a recommendation (the cheapest, say) follows that, never
    # stands for it
    pending = [c for c in claims if c.authority == Authority.fixed_sample and c.key
               and c.kind in ("no_difference", "untestable", "no_test")]
    return Answer("undecided", shipping, sorted(pending, key=_nearest), dataset)


def _nearest(claim: Claim) -> tuple[int, float]:
    """Why nothing could be tested first, then the comparison closest to a decision: the
    fewest tasks needed."""
    needed = claim.figures.get("needed")
    return (claim.kind != "no_test",
            float(needed) if isinstance(needed, int | float) else float("inf"))
