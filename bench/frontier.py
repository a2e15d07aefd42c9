"""What the "What to ship" section costs a sweep report: the frontier analysis
(``report.analyses.frontier``: every point's clustered CIs, the dominance tests, the oracle,
fits, the cross-fitted threshold and cascade policies, the plot left undrawn) over 495 tasks x
3 systems (synthetic records: ECTSum test's size, lengths drawn at random, costs and latency
per task, some stuffing skips; the analysis is timed, not any scoring).

    .venv/bin/python bench/frontier.py                  # 495 tasks, best of 3
    .venv/bin/python bench/frontier.py --tasks 2000 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from report.analyses import Inputs
from report.analyses.frontier import frontier_analysis
from report.verdict import decisions, task_sets

SYSTEMS = {"arag": 0.09, "naive": 0.02, "stuffing": 0.04}  # system -> cost per task (USD)


def records(n: int, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(2_000, 30_000, size=n)
    out: dict[str, list[dict[str, Any]]] = {}
    for s, (system, cost) in enumerate(SYSTEMS.items()):
        skip = (system == "stuffing") & (tokens > 26_000)
        out[system] = [{"id": f"t{k}", "doc_ids": [f"d{k // 2}"], "error": None,
                        "skipped": bool(skip[k]), "null_reasons": {}, "predicted": "p",
                        "document_tokens": int(tokens[k]), "n_documents": 1,
                        "fits_context": bool(tokens[k] <= 26_000),
                        "rouge2_f1": None if skip[k] else float(rng.uniform(0, 0.3) + 0.02 * s),
                        "cost_usd_uncached": cost * float(rng.uniform(0.5, 1.5)),
                        "latency_ms": float(rng.uniform(500, 5000))} for k in range(n)]
    return out


def row(name: str) -> dict[str, Any]:
    return {"run": name, "run_id": name, "status": "FINISHED", "system": name,
            "agentic": name == "arag", "retrieves": name != "stuffing",
            "long_context": name == "stuffing", "bound": False}


def timed(n: int) -> float:
    recs = records(n)
    rows = [row(s) for s in SYSTEMS]
    sets = task_sets(rows, recs)
    inputs = Inputs(rows, rows, recs, sets, ["rouge2_f1"], decisions(sets, ["rouge2_f1"]),
                    {"route_by": ["document_tokens", "n_documents"]})
    start = time.perf_counter()
    out = frontier_analysis(inputs)
    seconds = time.perf_counter() - start
    assert out.artifacts["routers.jsonl"]  # every policy was scored
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=495)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    times = [timed(args.tasks) for _ in range(args.repeat)]
    print(f"frontier analysis, {args.tasks} tasks x {len(SYSTEMS)} systems: best "
          f"{min(times):.3f} s, median {float(np.median(times)):.3f} s of {args.repeat} "
          f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
