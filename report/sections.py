"""The sentence of "Retrieval and the loop budget": how an agent's loops go with its recall."""

from __future__ import annotations

from metrics.stats import correlation


def loops_recall(points: list[tuple[float, float]]) -> str:
    """Spearman's correlation of an agent's loops with its retrieval recall, with its CI."""
    found = correlation([p[0] for p in points], [p[1] for p in points]) if points else None
    if found is None:
        return ("Loops vs recall: too few agentic tasks with both numbers, or one of them "
                "never varies, to correlate.\n")
    ci = (f" [95% CI {found.ci_low:+.2f}, {found.ci_high:+.2f}]" if found.ci_low is not None
          else "")
    reading = ("no clear relation" if found.ci_includes_zero else
               "more loops go with higher recall" if found.rho > 0 else
               "more loops go with lower recall (the agent keeps searching when it is lost)")
    return (f"**Loops vs recall:** Spearman's rho {found.rho:+.2f}{ci} over {found.n} "
            f"agentic tasks: {reading}.\n")
