"""Words for "What to ship" (``report/analyses/frontier.py``): the recommendation, the
frontier, each routing policy and the section's notes. Nothing here computes a figure; every
number is one the analysis put on the claim or note."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from report.model import Claim
from report.writers.cells import Style, interval, money, p_value, signed
from report.writers.words import Sentences, sentences, words


def _ci(c: Claim) -> str:
    return f" {interval(c.ci, sign=True)}" if c.ci else ""


def _p(c: Claim) -> str:
    return f", Holm-adjusted p = {p_value(c.p_adjusted)}" if c.p_adjusted is not None else ""


def _cost(value: Any) -> str:
    return "cost unknown" if value is None else f"{money(value, 4)} a task"


def _policy(name: str, rule: Mapping[str, Any] | None, style: Style) -> str:
    """A policy as people say it: "stuffing below ~6,000 document_tokens and arag above"."""
    b = style.strong
    if not rule:
        return b(name)
    if isinstance(rule.get("order"), list):
        return f"{b(rule['order'][0])}, escalating to " + ", then ".join(
            b(n) for n in rule["order"][1:]) + " where it declines"
    if not rule.get("below"):
        return b(name)
    if rule.get("feature") == "fits_context":
        return f"{b(rule['below'])} where the document fits the window, {b(rule['above'])} elsewhere"
    if rule["below"] == rule["above"]:
        return f"{b(rule['below'])} on every task"
    return (f"{b(rule['below'])} below ~{rule['threshold']:,.0f} {rule['feature']} and "
            f"{b(rule['above'])} above")


@words("recommendation")
def recommendation(c: Claim, style: Style, short: bool) -> str:
    """"Ship stuffing below ~6,000 document_tokens and arag above: +0.080 rouge2_f1 over
    arag [+0.030, +0.130], out of sample, at $0.041 a task (stuffing $0.017, arag $0.098)"."""
    f = c.figures
    chosen, versus = c.runs
    if f.get("why") == "same_cost":  # every cost the same: cost chooses nothing
        return (f"Nothing to ship on cost: every system costs the same here "
                f"({_cost(f.get('cost_usd_per_task'))}), and none is shown better on "
                f"{style.code(str(c.metric))} than the cheapest.")
    if c.difference is None:
        gain = "the cheapest point of the frontier; no costlier point's gain is significant"
    elif f.get("why") == "budget":
        gain = (f"the best within the budget; it gives up {signed(c.difference)} "
                f"{style.code(str(c.metric))} against the best overall, "
                f"{style.strong(versus)}{_ci(c)}")
    else:
        gain = (f"{signed(c.difference)} {style.code(str(c.metric))} over "
                f"{style.strong(versus)}{_ci(c)}{_p(c)}" + (", out of sample" if f.get("rule")
                                                           else ""))
    costs = ", ".join(f"{n} {money(v, 4)}" for n, v in (f.get("member_costs") or {}).items())
    text = (f"Ship {_policy(chosen, f.get('rule'), style)}: {gain}, at "
            f"{_cost(f.get('cost_usd_per_task'))} ({costs}).")
    return text if short else text + f" Run it: {style.code(str(f.get('command')))}"


@words("nothing_fits")
def nothing_fits(c: Claim, style: Style, short: bool) -> str:
    limits = ", ".join(style.code(f"report.budget.{k}={v:g}")
                       for k, v in c.figures["budget"].items() if v is not None)
    return (f"Nothing fits the budget ({limits}): no system or policy of this sweep meets it; "
            "raise the budget or add a cheaper system.")


@words("frontier")
def frontier(c: Claim, style: Style, short: bool) -> str:
    points = ", ".join(style.strong(r) for r in c.runs) or "no point of known cost"
    text = f"The cost-quality frontier on {style.code(str(c.metric))}, cheapest first: {points}."
    if short:
        return text
    return (text + f" Over {c.n_tasks} tasks ({c.n_documents} documents); a point is dominated "
            "only when a cheaper one exists and the costlier one's gain is shown below the "
            f"equivalence margin ({style.code('report.equivalence_margin')}). "
            f"![frontier](plots/frontier.png)" if style.markdown else text)


@words("route")
def route(c: Claim, style: Style, short: bool) -> str:
    f = c.figures
    name, best = c.runs
    rule = f.get("rule") or {}
    sample = ("in sample: it sees the answers, an unattainable bound" if rule.get("in_sample")
              else "out of sample (cross-fitted)")
    said = "better than" if f.get("better") else "not shown better than"
    diff = "" if c.difference is None else f" ({signed(c.difference)}{_ci(c)}{_p(c)})"
    regret = "" if f.get("regret") is None else f"; regret against the oracle {f['regret']:.3f}"
    return (f"{f.get('policy')}: {_policy(name, rule, style)}, {sample}: {said} the best single "
            f"system, {style.strong(best)}{diff}, at {_cost(f.get('cost_usd_per_task'))}{regret}.")


@words("no_frontier")
def no_frontier(c: Claim, style: Style, short: bool) -> str:
    return (f"There is no frontier: {c.figures.get('runs', 0)} system(s) compared on "
            f"{style.code(str(c.metric))}; a frontier and routing need two or more.")


sentences(
    unknown_cost=Sentences(
        "{runs}: cost unknown (the records do not carry it), so placed on quality alone: never "
        "dominated, never dominating, outside any cost budget."),
    frontier_descriptive=Sentences(
        "A sequential sweep: the frontier and the policies are descriptive (its anytime-valid "
        "intervals decide), so nothing is recommended to ship."),
)
