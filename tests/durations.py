"""The suite's test files by how long they take, for ordering them across xdist workers.

    .venv/bin/python -m tests.durations JUNIT.xml   # writes tests/durations.json

JUNIT.xml is pytest's ``--junitxml`` report of a whole CI run (``.ci/run`` with
``PYTEST_ADDOPTS=--junitxml=...``); each file's time is the sum of its tests' (set-up,
call and tear-down). With ``--dist loadfile`` a file is one unit of work, and xdist sends
the files in collection order when ``--no-loadscope-reorder`` is given: ``conftest``
collects them longest first, so the long end-to-end files start early and the many short
ones fill in at the end (longest-processing-time-first). xdist's own order (most tests
first) left the long single-test files for last. Also printed: how long two workers would
take by each order, replayed from the same report (the finishing time of the later one).
"""

from __future__ import annotations

import heapq
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

FILE = Path(__file__).with_name("durations.json")


def per_file(junit: Path) -> tuple[dict[str, float], dict[str, int]]:
    """File -> seconds and file -> number of tests, from a junit report."""
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for case in ET.parse(junit).iter("testcase"):
        name = "tests/" + case.get("classname", "").split(".")[1] + ".py"
        seconds[name] += float(case.get("time") or 0.0)
        count[name] += 1
    return dict(seconds), dict(count)


def makespan(order: list[str], seconds: dict[str, float], workers: int = 2) -> float:
    """When the last of ``workers`` finishes, each taking the next file as it frees."""
    free = [0.0] * workers
    for name in order:
        heapq.heappush(free, heapq.heappop(free) + seconds[name])
    return max(free)


def load() -> dict[str, float]:
    """The committed durations (file -> seconds); empty when there are none."""
    return json.loads(FILE.read_text()) if FILE.exists() else {}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not Path(argv[0]).is_file():
        print("usage: python -m tests.durations JUNIT.xml (pytest's --junitxml report of a "
              "whole CI run)", file=sys.stderr)
        return 2
    seconds, count = per_file(Path(argv[0]))
    longest = sorted(seconds, key=lambda n: -seconds[n])
    by_count = sorted(seconds, key=lambda n: -count[n])  # xdist's own order (stable sort)
    FILE.write_text(json.dumps({n: round(seconds[n], 1) for n in longest}, indent=1) + "\n")
    print(f"{FILE}: {len(seconds)} files, {sum(seconds.values()) / 60:.1f} min of tests")
    print(f"two workers, most tests first (xdist's order): "
          f"{makespan(by_count, seconds) / 60:.1f} min")
    print(f"two workers, longest first (this order):        "
          f"{makespan(longest, seconds) / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
