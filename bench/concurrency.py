"""A-RAG throughput against a Messages API that answers each call after a fixed delay.

Runs the same A-RAG predictions (real SDK, real HTTP, real tools and FAISS) at
concurrency 1 and at 16, in one process, and prints both wall times and the speedup.
The response cache is off so both runs make every call. Target: >= 12x.

    .venv/bin/python bench/concurrency.py [--tasks 64] [--delay 0.2] [--high 16]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from arag.llm import make_model  # noqa: E402
from runners.job import build_system, prepare  # noqa: E402
from runners.predict import predict  # noqa: E402
from runners.settings import read  # noqa: E402
from tests.conftest import compose_cfg, store_overrides, write_mini_dataset  # noqa: E402


def timed_run(cfg, out: Path, concurrency: int) -> tuple[float, int]:
    job = prepare(read(cfg))
    system = build_system(job, make_model(cfg.model))  # loads the index before timing
    started = time.perf_counter()
    outcome = predict(system, job.dataset.tasks, out, source="bench", concurrency=concurrency,
                      progress=False)
    elapsed = time.perf_counter() - started
    errors = sum(1 for p in outcome.predictions if p.error)
    return elapsed, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=64)  # 4 full waves of 16
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per API call")
    parser.add_argument("--high", type=int, default=16, help="the concurrent run's concurrency")
    args = parser.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench-not-a-key")
    # the API runs in its own process, as a remote API would: it must not share our GIL
    server = subprocess.Popen([sys.executable, "-m", "tests.anthropic_fake", "--delay",
                               str(args.delay)], cwd=ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = write_mini_dataset(Path(tmp) / "data", n_docs=args.tasks, filler=20)
            cfg = compose_cfg(store_overrides(Path(tmp)) + [
                f"dataset.root={root}", "system=arag", "model=claude-haiku-4-5",
                f"model.base_url={url}", "cache.mode=off"])
            serial, e1 = timed_run(cfg, Path(tmp) / "c1.jsonl", 1)
            parallel, e2 = timed_run(cfg, Path(tmp) / "c16.jsonl", args.high)
    finally:
        server.stdin.close()
        server.wait(timeout=30)
    print(f"A-RAG, {args.tasks} tasks, 5 API calls each, {args.delay * 1000:.0f} ms per call "
          "(fake Messages API in its own process)")
    print(f"concurrency 1:  {serial:7.2f} s  ({e1} errors)")
    print(f"concurrency {args.high}: {parallel:7.2f} s  ({e2} errors)")
    print(f"speedup:        {serial / parallel:7.1f}x  (target >= 12x)")


if __name__ == "__main__":
    main()
