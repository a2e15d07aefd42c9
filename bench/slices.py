"""What slicing adds to a sweep report: ``build_report`` over 495 tasks x 3 systems, without
and with ``report.slice_by`` (synthetic records: ECTSum test's size, lengths and scores
drawn at random; the report's own work is what is timed, not any scoring).

    .venv/bin/python bench/slices.py                 # slice_by=[document_tokens,company]
    .venv/bin/python bench/slices.py --repeat 3 --features document_tokens
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np

from report.analyses import Inputs
from report.analyses.slices import slices_analysis
from report.report import build_report
from report.verdict import decisions, task_sets

SYSTEMS = ("arag", "naive", "stuffing")


def records(n: int, seed: int = 0) -> dict[str, list[dict[str, Any]]]:
    rng = np.random.default_rng(seed)
    tokens = rng.integers(2_000, 30_000, size=n)
    companies = [f"C{k % 60}" for k in range(n)]  # many companies under 6 tasks: "other"
    out = {}
    for s, system in enumerate(SYSTEMS):
        out[system] = [{"id": f"t{k}", "doc_ids": [f"d{k}"], "error": None, "skipped": False,
                        "null_reasons": {}, "predicted": "p", "reference": "r", "question": "q",
                        "document_tokens": int(tokens[k]), "company": companies[k],
                        "rouge2_f1": float(rng.uniform(0, 0.3) + 0.02 * s),
                        "geval_coverage": None} for k in range(n)]
    return out


def row(name: str) -> dict[str, Any]:
    return {"run": name, "run_id": name, "status": "FINISHED", "system": name,
            "agentic": name == "arag", "retrieves": name != "stuffing",
            "model_provider": "offline", "judge_provider": "offline", "judge": "none",
            "synthetic": False, "target_length": "45", "judge_panel": [], "judge_samples": "1",
            "judge_calls": 0.0}


def timed(recs: dict[str, list[dict[str, Any]]], options: dict[str, Any]) -> float:
    start = time.perf_counter()
    build_report([row(s) for s in SYSTEMS], recs, "bench", ["rouge2_f1"], options=options)
    return time.perf_counter() - start


def analysis_only(recs: dict[str, list[dict[str, Any]]], options: dict[str, Any]) -> float:
    """The slicing analysis alone, on the verdict's task sets and family (what it adds
    whatever else the report does)."""
    rows = [row(s) for s in SYSTEMS]
    sets = task_sets(rows, recs)
    inputs = Inputs(rows, rows, recs, sets, ["rouge2_f1"], decisions(sets, ["rouge2_f1"]),
                    options)
    start = time.perf_counter()
    slices_analysis(inputs)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=495)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--features", default="document_tokens,company")
    args = parser.parse_args()
    recs = records(args.tasks)
    sliced = {"slice_by": args.features.split(","), "slice_bins": 4}
    timed(recs, {})  # imports and first-call set-up are not the report's
    plain = min(timed(recs, {}) for _ in range(args.repeat))
    with_slices = min(timed(recs, sliced) for _ in range(args.repeat))
    print(f"{args.tasks} tasks x {len(SYSTEMS)} systems, slice_by={sliced['slice_by']}, "
          f"load average {os.getloadavg()[0]:.2f}")
    alone = min(analysis_only(recs, sliced) for _ in range(args.repeat))
    print(f"the slicing analysis alone: {alone:.2f} s")
    print(f"report without slices {plain:.2f} s, with {with_slices:.2f} s: slicing adds "
          f"{with_slices - plain:.2f} s (best of {args.repeat})")


if __name__ == "__main__":
    main()
