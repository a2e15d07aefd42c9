"""A sweep paced by the rate-limit headers, against one paced by a fixed concurrency.

A-RAG and naive predictions (real SDK, real HTTP, real tools and FAISS) against the fake
Messages API holding an input-token bucket (``tests/fake_bucket.py``: the real
``anthropic-ratelimit-input-tokens-*`` headers, ``retry-after`` on a 429). The bucket is
time-scaled (a minute lasts ``--minute`` seconds), so a sweep of many minutes takes
seconds. The same sweep runs twice in one process: paced by the limiter
(``arag.llm.limits``), then as a fixed concurrency that only retries its 429s (the model's
limiter removed). For each it prints the input tokens admitted per minute as a share of
the limit once the first full bucket is spent (target >= 90%), the 429s as a share of the
requests (target <= 2%), the tasks that errored, and the wall time against the limit's
lower bound (every token beyond the first full bucket at the limit's pace).

    .venv/bin/python bench/rate_limits.py [--tasks 48] [--limit 20000] [--minute 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from arag.llm import make_model  # noqa: E402
from arag.llm.limits import forget  # noqa: E402
from runners.job import build_system, prepare  # noqa: E402
from runners.predict import predict  # noqa: E402
from runners.settings import read  # noqa: E402
from tests.anthropic_fake import FakeAnthropic, agent_policy  # noqa: E402
from tests.conftest import compose_cfg, store_overrides, write_mini_dataset  # noqa: E402
from tests.fake_bucket import TokenBucket  # noqa: E402

SYSTEMS = ("arag", "naive")


def sweep(tmp: Path, root: Path, args: argparse.Namespace, paced: bool) -> dict[str, float]:
    """Both systems' predictions against a fresh bucket; what the bucket saw."""
    forget()
    bucket = TokenBucket(args.limit, minute_s=args.minute)
    errors = tasks = 0
    with FakeAnthropic(agent_policy(), delay=args.delay, bucket=bucket) as fake:
        runs = []
        for system in SYSTEMS:  # built before the clock starts: the index is not timed
            # retry waits scaled as the minute is (a 1 s backoff base is 1/60 of a minute)
            cfg = compose_cfg(store_overrides(tmp) + [
                f"dataset.root={root}", f"system={system}", "model=claude-haiku-4-5",
                f"model.base_url={fake.url}", "cache.mode=off",
                f"model.retry_base_delay_s={args.minute / 60}"])
            job = prepare(read(cfg))
            model = make_model(cfg.model)
            if not paced:
                model.limiter = None  # a fixed concurrency: every thread sends at once
            runs.append((system, job, build_system(job, model)))
            runs[-1][2].ctx.index()  # loaded once, as a sweep job does
        started = time.perf_counter()
        for system, job, built in runs:
            outcome = predict(built, job.dataset.tasks, tmp / f"{system}-{paced}.jsonl",
                              source="bench", concurrency=args.concurrency, progress=False)
            errors += sum(1 for p in outcome.predictions if p.error)
            tasks += len(outcome.predictions)
        wall = time.perf_counter() - started
        n_requests = len(fake.requests)
    first = bucket.admitted[0][0]
    windows = bucket.per_minute_admitted(args.minute, after=first + args.minute)
    admitted = sum(n for _, n in bucket.admitted)
    return {"wall_s": wall, "share": sum(windows) / len(windows) / args.limit if windows else
            float("nan"), "windows": len(windows), "refused": bucket.refused,
            "requests": n_requests, "errors": errors, "tasks": tasks,
            "bound_s": max(0.0, admitted - args.limit) / bucket.rate, "tokens": admitted}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=48, help="tasks per system")
    parser.add_argument("--limit", type=int, default=20_000, help="input tokens per minute")
    parser.add_argument("--minute", type=float, default=3.0, help="seconds a minute lasts")
    parser.add_argument("--delay", type=float, default=0.2, help="seconds per API call")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench-not-a-key")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        root = write_mini_dataset(tmp / "data", n_docs=args.tasks, filler=20)
        results = {"paced by the headers": sweep(tmp, root, args, paced=True),
                   f"fixed concurrency {args.concurrency}": sweep(tmp, root, args, paced=False)}
    print(f"{' + '.join(SYSTEMS)}, {args.tasks} tasks each, {args.limit:,} input tokens per "
          f"minute, a minute lasting {args.minute:g} s, {args.delay * 1000:.0f} ms per call, "
          f"concurrency {args.concurrency}")
    for name, r in results.items():
        print(f"{name}:")
        print(f"  input tokens admitted per minute after the first full bucket: "
              f"{r['share']:.1%} of the limit over {r['windows']} minutes (target >= 90%)")
        print(f"  429s: {r['refused']} of {r['requests']} requests, {r['refused'] / r['requests']:.1%}"
              f" (target <= 2%); tasks errored: {r['errors']} of {r['tasks']}")
        print(f"  wall time {r['wall_s']:.1f} s against the limit's lower bound "
              f"{r['bound_s']:.1f} s ({r['tokens']:,} tokens admitted): "
              f"{r['wall_s'] / max(r['bound_s'], 1e-9):.2f}x")


if __name__ == "__main__":
    main()
