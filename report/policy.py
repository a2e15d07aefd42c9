"""How the report ranks systems: which scores it compares on, in what order, and which it
shows. Every part of the report (verdict, console, plots, compare page, traces' assessments)
asks this module; none orders metrics itself."""

from __future__ import annotations

from metrics import Metric, declared_metrics


def comparison_order() -> list[str]:
    """The scores a sweep may compare on, in the order the scorers declare: the first that
    any run has is used (G-Eval coverage when judged, ROUGE-2 with references, retrieval
    precision last, so a sweep with neither references nor a judge still gets a finding)."""
    ranked = [m for m in declared_metrics() if m.compare_priority is not None]
    return [m.name for m in sorted(ranked, key=lambda m: m.compare_priority or 0)]


def report_metrics() -> list[Metric]:
    """The quality table's columns: what scorers declare for the report, comparison
    metrics first."""
    order = {name: i for i, name in enumerate(comparison_order())}
    return sorted((m for m in declared_metrics() if m.report),
                  key=lambda m: (order.get(m.name, len(order)), m.name))
