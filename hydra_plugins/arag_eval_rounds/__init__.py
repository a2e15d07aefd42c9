"""The sweeper of every multirun: Hydra's basic sweeper, and with ``runner.sequential=true``
a sweep in rounds that stops as soon as its comparisons are settled (``runners.sweeper``).
Selected in ``conf/config.yaml`` (``hydra.sweeper``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf


class RoundsSweeper(BasicSweeper):
    def sweep(self, arguments: list[str]) -> Any:
        assert self.config is not None and self.launcher is not None
        if not self.config.runner.sequential or self.config.runner.dry_run:
            return super().sweep(arguments)
        assert self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        jobs = self.split_arguments(parser.parse_overrides(arguments), None)[0]
        sweep_dir = Path(self.config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        from runners.sweeper import Rounds

        return Rounds(self.config, jobs, sweep_dir).run(self.launcher)
