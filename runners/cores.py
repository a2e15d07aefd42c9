"""How many math threads a job's process uses, and sharing the cores among parallel jobs.

torch (the embedder, BERTScore) starts a thread per core, and its OpenMP threads spin while
they wait: jobs run side by side on one machine (``hydra/launcher=joblib``), each with a
thread per core, slow each other down far more than they gain (two such processes on this
project's 2-core reference machine ran sweeps 1.6x slower than with a thread each).
"""

from __future__ import annotations

import os
import sys
from typing import Any

THREADS_ENV = "OMP_NUM_THREADS"


def parallel_jobs(launcher: Any) -> int:
    """Jobs the sweep's launcher runs at once on this machine (1 unless it is joblib)."""
    if launcher is None or "joblib" not in str(launcher.get("_target_", "")).lower():
        return 1
    n_jobs = int(launcher.get("n_jobs") or 1)
    cores = os.cpu_count() or 1
    return max(1, cores + 1 + n_jobs) if n_jobs < 0 else n_jobs  # joblib: -1 is every core


def share_cores(launcher: Any) -> None:
    """Give each of the launcher's parallel jobs its share of the cores, before it starts
    them (the job processes inherit the setting); a value the user set is kept."""
    jobs = parallel_jobs(launcher)
    if jobs > 1 and THREADS_ENV not in os.environ:
        os.environ[THREADS_ENV] = str(max(1, (os.cpu_count() or 1) // jobs))


def math_threads() -> int:
    """The threads this process's math runs on (torch's, once loaded)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    return int(os.environ.get(THREADS_ENV) or os.cpu_count() or 1)
