"""Entry point: compose the config with Hydra, run one job (or a sweep with -m)."""

import hydra
from omegaconf import DictConfig

import runners.config  # noqa: F401  (registers the config schema)
from runners.cli import prepare_command_line
from runners.experiment import main as run_job


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg: DictConfig) -> dict | None:
    return run_job(cfg)


if __name__ == "__main__":
    prepare_command_line()  # URL credentials redacted; closest-key suggestions
    main()
