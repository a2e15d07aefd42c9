"""The words of the "What to ship" section (``report/analyses/frontier.py``): one function per
claim or note kind, each taking the claim or note and returning Markdown. Nothing here
computes a figure; every number is one the analysis put on the claim."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from report.model import Claim, Note


def _money(value: Any) -> str:
    return "cost unknown" if value is None else f"${value:.4g} a task"


def _ci(claim: Claim) -> str:
    return f" [{claim.ci[0]:+.3f}, {claim.ci[1]:+.3f}]" if claim.ci else ""


def _p(claim: Claim) -> str:
    return f", Holm-adjusted p = {claim.p_adjusted:.3g}" if claim.p_adjusted is not None else ""


def _policy(name: str, rule: Mapping[str, Any] | None) -> str:
    """A policy as people say it: "stuffing below ~6,000 document_tokens and arag above"."""
    if not rule:
        return f"**{name}**"
    if "order" in rule and isinstance(rule["order"], list):
        return "**" + "**, escalating to **".join(rule["order"]) + "** where it declines"
    if rule.get("feature") == "fits_context":
        return f"**{rule['below']}** where the document fits the window, **{rule['above']}** elsewhere"
    if rule.get("below") == rule.get("above"):
        return f"**{rule['below']}** on every task"
    return (f"**{rule['below']}** below ~{rule['threshold']:,.0f} {rule['feature']} and "
            f"**{rule['above']}** above")


def recommendation(claim: Claim) -> str:
    """"Ship stuffing below ~6,000 tokens and arag above: +0.08 rouge2_f1 over stuffing
    alone [0.03, 0.13], out of sample, at $0.041 a task (stuffing $0.017, arag $0.098)"."""
    f = claim.figures
    chosen, versus = claim.runs
    what = _policy(chosen, f.get("rule"))
    costs = ", ".join(f"{n} {_money(c).replace(' a task', '')}"
                      for n, c in (f.get("member_costs") or {}).items())
    if claim.difference is None:
        gain = "the cheapest point of the frontier; no costlier point's gain is significant"
    elif f.get("why") == "budget":
        gain = (f"within the budget; it gives up {claim.difference:+.3f} `{claim.metric}` "
                f"against the best overall, **{versus}**{_ci(claim)}")
    else:
        gain = (f"{claim.difference:+.3f} `{claim.metric}` over **{versus}**{_ci(claim)}"
                f"{_p(claim)}" + (", out of sample" if f.get("rule") else ""))
    return (f"**Ship** {what}: {gain}, at {_money(f.get('cost_usd_per_task'))} ({costs}). "
            f"Run it: `{f.get('command')}`")


def nothing_fits(claim: Claim) -> str:
    limits = ", ".join(f"`report.budget.{k}={v:g}`" for k, v in claim.figures["budget"].items()
                       if v is not None)
    return (f"Nothing fits the budget ({limits}): no system or policy of this sweep meets it "
            f"on `{claim.metric}`'s tasks; raise the budget or add a cheaper system.")


def frontier(claim: Claim) -> str:
    return (f"On `{claim.metric}` over {claim.n_tasks} tasks ({claim.n_documents} documents), "
            f"the frontier, cheapest first: {', '.join(f'**{r}**' for r in claim.runs)}. "
            "A point is dominated only when a cheaper one exists and the costlier one's gain "
            "is shown to be below the equivalence margin (`report.equivalence_margin`).")


def route(claim: Claim) -> str:
    f = claim.figures
    name, best = claim.runs
    sample = ("in sample: it sees the answers, an unattainable bound"
              if (f.get("rule") or {}).get("in_sample") else "out of sample (cross-fitted)")
    said = "better than" if f.get("better") else "not shown better than"
    diff = "" if claim.difference is None else f" ({claim.difference:+.3f}{_ci(claim)}{_p(claim)})"
    regret = "" if f.get("regret") is None else f"; regret against the oracle {f['regret']:.3f}"
    return (f"{_policy(name, f.get('rule'))} ({f.get('policy')}), {sample}: {said} the best "
            f"single system, **{best}**{diff}, at {_money(f.get('cost_usd_per_task'))}{regret}.")


def no_frontier(note: Note) -> str:
    return (f"There is no frontier: {note.counts.get('runs', 0)} system(s) compared on "
            f"`{note.counts.get('metric')}`; a frontier and routing need two or more.")


def unknown_cost(note: Note) -> str:
    return (f"{', '.join(note.runs)}: cost unknown (the records do not carry it), so placed on "
            "quality alone: never dominated, never dominating, outside any cost budget.")


def frontier_descriptive(note: Note) -> str:
    return ("A sequential sweep: the frontier and the policies are descriptive (its "
            "anytime-valid intervals decide), so nothing is recommended to ship.")


WORDS: dict[str, Callable[[Any], str]] = {
    "recommendation": recommendation, "nothing_fits": nothing_fits, "frontier": frontier,
    "route": route, "no_frontier": no_frontier, "unknown_cost": unknown_cost,
    "frontier_descriptive": frontier_descriptive}
