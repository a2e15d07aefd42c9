"""Benchmark: creating a local MLflow store and writing scores on traces into it.

    .venv/bin/python bench/store_writes.py             # 20 traces x 15 scores, 3 stores each way

Prints, measured in one run (this machine is noisy, so compare the ratios):
- store creation: MLflow's own migration from nothing vs a copy of the cached empty store
  (``tracking/sqlite_store.py``);
- scores on traces (``mlflow.log_feedback``, one commit each): sqlite's rollback journal
  with a sync per commit (MLflow's default) vs write-ahead logging synced at checkpoints.
Each way runs in its own process, so no setting leaks from one to the other.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHILD = """
import json, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
import mlflow
from mlflow.entities import AssessmentSource
from tracking import sqlite_store
from tracking.storage import prepare_sqlite

work, way, traces, scores = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
db = work / "mlflow.db"
if way == "mlflow":  # MLflow's own creation, default journal, default sync
    sqlite_store.template_path = lambda: None
    started = time.perf_counter()
    sqlite_store._open(db)
else:
    started = time.perf_counter()
    prepare_sqlite(db, str(db))
created = time.perf_counter() - started
mlflow.set_tracking_uri(f"sqlite:///{{db}}")
exp = mlflow.create_experiment("bench", artifact_location=str(work / "artifacts"))
mlflow.set_experiment(experiment_id=exp)
ids = []
for i in range(traces):
    with mlflow.start_span(name=f"task{{i}}") as span:
        pass
    ids.append(span.trace_id)
mlflow.flush_trace_async_logging()
source = AssessmentSource(source_type="CODE", source_id="bench")
started = time.perf_counter()
for trace_id in ids:
    for k in range(scores):
        mlflow.log_feedback(trace_id=trace_id, name=f"metric_{{k}}", value=0.5, source=source)
written = time.perf_counter() - started
print(json.dumps({{"create_s": created, "score_ms": 1000 * written / (traces * scores)}}))
"""


def run(way: str, traces: int, scores: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as work:
        out = subprocess.run([sys.executable, "-c", CHILD.format(root=str(ROOT)), work, way,
                              str(traces), str(scores)], capture_output=True, text=True,
                             check=True, cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=20)
    parser.add_argument("--scores", type=int, default=15, help="scores per trace")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    run("ours", 1, 1)  # the first creation of a machine writes the template
    results: dict[str, list[dict[str, float]]] = {"mlflow": [], "ours": []}
    for _ in range(args.rounds):  # interleaved, so load drifts hit both ways alike
        for way in results:
            results[way].append(run(way, args.traces, args.scores))
    print(f"load average: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    for key, label in (("create_s", "store creation (s)"), ("score_ms", "ms per score")):
        base = sorted(r[key] for r in results["mlflow"])[args.rounds // 2]
        ours = sorted(r[key] for r in results["ours"])[args.rounds // 2]
        print(f"{label:22s} MLflow default {base:8.3f}   template + WAL {ours:8.3f}   "
              f"{base / ours:5.1f}x")


if __name__ == "__main__":
    main()
