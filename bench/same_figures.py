"""Do two stores hold the same figures? For a change that must not move any number.

    .venv/bin/python bench/same_figures.py BEFORE_DIR AFTER_DIR

Each DIR holds the ``mlflow.db`` of the same sweep run on two commits (run the sweep with
``tracking.uri=sqlite:///DIR/mlflow.db``). Every logged metric of every run, matched by
system (the parent as PARENT), is compared exactly; latency and timing metrics are left
out because they measure the machine, not the code.
"""

from __future__ import annotations

import argparse
import sys

from mlflow import MlflowClient

TIMING = ("latency", "time", "duration", "seconds", "_ms", "_s_")


def figures(store: str) -> dict[str, dict[str, float]]:
    client = MlflowClient(tracking_uri=f"sqlite:///{store}/mlflow.db")
    experiments = [e.experiment_id for e in client.search_experiments()]
    out: dict[str, dict[str, float]] = {}
    for run in client.search_runs(experiments):
        tags = run.data.tags
        name = tags.get("system", run.info.run_name) if "mlflow.parentRunId" in tags else "PARENT"
        out[name] = dict(run.data.metrics)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    args = parser.parse_args()
    before, after = figures(args.before), figures(args.after)
    compared = differ = 0
    for run, values in sorted(before.items()):
        for key, value in sorted(values.items()):
            if any(t in key for t in TIMING):
                continue
            compared += 1
            other = after.get(run, {}).get(key)
            if other != value:
                differ += 1
                print(f"differs: {run} {key}: {value} -> {other}")
    print(f"{compared} figures compared over runs {sorted(before)} (timing left out); "
          f"{differ} differ")
    return 1 if differ or sorted(before) != sorted(after) else 0


if __name__ == "__main__":
    sys.exit(main())
