"""Entry point: compose the config with Hydra, run one job (or a sweep with -m)."""

import importlib.util
import sys

# the project's dependencies, looked for before anything imports them: a Python without
# them (the system's python3 outside .venv) is told what to run instead of a traceback
_MISSING = [m for m in ("hydra", "cachetools", "mlflow") if importlib.util.find_spec(m) is None]
if _MISSING and __name__ == "__main__":
    sys.exit(f"error: {sys.executable} does not have the project's dependencies "
             f"({', '.join(_MISSING)} not installed). Fix: .venv/bin/python run.py "
             f"{' '.join(sys.argv[1:])}, or make run (it creates .venv first)".rstrip())

from arag.memory import pause_for_imports  # noqa: E402

if __name__ == "__main__":  # the program (not a module a test imports): the imports below make
    pause_for_imports()  # millions of objects that live as long as it; no collection walks
    # them until the sweep or the first job starts (arag.memory.settle_imports)

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import runners.config  # noqa: E402, F401  (registers the config schema)
from runners.cli import interrupted, prepare_command_line  # noqa: E402
from runners.experiment import main as run_job  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict | None:
    return run_job(cfg)


if __name__ == "__main__":
    prepare_command_line()  # URL credentials redacted; closest-key suggestions
    try:
        main()
    except KeyboardInterrupt:  # Ctrl-C: what was answered is kept; the same command resumes
        sys.exit(interrupted())
