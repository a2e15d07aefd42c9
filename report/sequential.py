"""A sequential sweep's looks: each comparison of the family on the decision metrics, with
its anytime-valid interval over the first ``n`` tasks of the seeded order
(``metrics.sequential``). The runner looks after each round; the report rebuilds the last
look from the records, so its verdict comes from the same intervals."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

from metrics import declared_metrics
from metrics.sequential import Look, compare, paired, run_order

Row = dict[str, Any]


def looks_at(records: Mapping[str, Sequence[Row]], decide_on: Sequence[str], seed: int,
             n: int, margins: Mapping[str, float] | None = None) -> list[Look]:
    """Every pair of systems (``records``: label -> eval records) on every decision metric,
    over the first ``n`` tasks of the order any of them scored."""
    metrics = {m.name: m for m in declared_metrics()}
    ids = (r["id"] for rows in records.values() for r in rows)
    order = run_order(ids, seed)[:n]
    pairs = list(combinations(records.items(), 2))
    return compare([paired(metrics[key], first, second, order, (margins or {}).get(key))
                    for key in decide_on for first, second in pairs])
