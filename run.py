"""Entry point: compose the config with Hydra, run one job (or a sweep with -m)."""

from arag.memory import pause_for_imports

if __name__ == "__main__":  # the program (not a module a test imports): the imports below make
    pause_for_imports()  # millions of objects that live as long as it; no collection walks
    # them until the sweep or the first job starts (arag.memory.settle_imports)

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

import runners.config  # noqa: E402, F401  (registers the config schema)
from runners.cli import prepare_command_line  # noqa: E402
from runners.experiment import main as run_job  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict | None:
    return run_job(cfg)


if __name__ == "__main__":
    prepare_command_line()  # URL credentials redacted; closest-key suggestions
    main()
