"""Hydra callback: one MLflow parent run per multirun, opened before any job starts.

Opening it first also creates the sqlite schema, so parallel jobs (joblib launcher) never
race to migrate a fresh store. Jobs find the parent through ``mlflow_parent.json`` in the
sweep directory (works across processes). When the sweep ends the parent gets the
comparison of its children and is closed: FAILED if any job failed (and the command then
exits non-zero), FINISHED otherwise. A crash of the sweep itself closes it as FAILED.
"""

from __future__ import annotations

import atexit
import json
import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from runners import track

log = logging.getLogger(__name__)


def _check_keys(config: DictConfig) -> None:
    """A model, judge or reference model of any job whose provider lacks its credentials
    stops the sweep before its parent run opens."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from arag.llm.base import MissingCredentials
    from runners.validation import require_keys

    chosen: dict[str, Any] = {}
    for o in OverridesParser.create().parse_overrides(list(config.hydra.overrides.task)):
        if o.key_or_group in ("model", "judge", "dataset/reference_model"):
            for choice in (o.sweep_string_iterator() if o.is_sweep_override()
                           else [o.value()]):
                node = _model_node(o.key_or_group, str(choice))
                if node is not None:
                    chosen[f"{o.key_or_group}={choice}"] = node
    try:
        require_keys(config, chosen)
    except MissingCredentials as exc:
        log.error("%s", exc)
        raise SystemExit(2) from None


def _model_node(group: str, choice: str) -> DictConfig | None:
    """The model config a model/judge option names (judge options reuse a model's file)."""
    from omegaconf import OmegaConf

    from runners.paths import PROJECT_ROOT

    path = PROJECT_ROOT / "conf" / group / f"{choice}.yaml"
    if not path.exists():
        return None
    node = OmegaConf.load(path)
    if not isinstance(node, DictConfig):
        return None
    if "provider" in node:
        return node
    for entry in node.get("defaults", []):
        if isinstance(entry, dict | DictConfig):
            for key, value in entry.items():
                if str(key).startswith("/model"):
                    return _model_node("model", str(value))
    return None


def sweep_size(overrides: list[str]) -> int:
    """How many jobs the sweep runs (the product of its swept values), for "job 2/3"."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    size = 1
    for o in OverridesParser.create().parse_overrides(overrides):
        if o.is_sweep_override():
            size *= len(list(o.sweep_string_iterator()))
    return size


def swept_keys(overrides: list[str]) -> list[str]:
    """The keys a sweep varies (``system=a,b``, ``max_loops=3,6``): they name the child runs."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(overrides)
    return [o.key_or_group for o in parsed if o.is_sweep_override()]


class MLflowSweepCallback(Callback):
    def __init__(self) -> None:
        self.parent: dict[str, Any] | None = None
        self.client: Any = None
        self.sweep_dir: Path | None = None
        self.result: Any = None  # the sweep report's findings, for the console's verdict

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from runners.console import quiet

        quiet(config.runner.verbose)
        sweep_dir = Path(config.hydra.sweep.dir)
        sweep_dir.mkdir(parents=True, exist_ok=True)
        self.sweep_dir = sweep_dir
        if config.runner.dry_run:
            return  # a dry run calls no model and records nothing
        _check_keys(config)
        self.client = track.connect(config.tracking)
        name = config.tracking.experiment or config.dataset.name
        experiment_id = track.ensure_experiment(self.client, name, config.tracking)
        overrides = list(config.hydra.overrides.task)
        swept = swept_keys(overrides)
        sweep_id = sweep_dir.name if sweep_dir.name else "sweep"
        sweep_id = f"{sweep_dir.parent.name}_{sweep_id}"
        run = self.client.create_run(
            experiment_id,
            run_name=f"sweep {' '.join(o for o in overrides if o.split('=')[0] in swept)}"[:250],
            tags={"sweep_id": sweep_id, "sweep_overrides": " ".join(overrides),
                  "sweep_dir": str(sweep_dir.resolve()),
                  "git_commit": track.git_commit(), "role": "sweep_parent"},
        )
        self.parent = {"run_id": run.info.run_id, "experiment_id": experiment_id,
                       "sweep_id": sweep_id, "sweep_dir": str(sweep_dir), "swept_keys": swept,
                       "n_jobs": sweep_size(overrides)}
        (sweep_dir / track.PARENT_FILE).write_text(json.dumps(self.parent))
        atexit.register(self._close_if_open)
        log.info("MLflow parent run %s (experiment %r, sweep %s)", run.info.run_id, name,
                 sweep_id)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from runners import console, dryrun

        failures = _read_failures(self.sweep_dir) if self.sweep_dir else []
        if self.parent and self.client is not None:
            self._close_parent(failures)
        if self.result is not None:
            print(console.verdict(self.result, str(config.tracking.uri)), flush=True)
        if config.runner.dry_run and self.sweep_dir:
            print(dryrun.sweep_total(self.sweep_dir), flush=True)
        if failures:
            lines = "\n".join(f"  [{f['job']}] {f['error']}" for f in failures)
            log.error("%d job(s) of the sweep failed:\n%s", len(failures), lines)
            # Hydra turns callback exceptions into warnings; SystemExit sets the exit code
            raise SystemExit(1)

    def _close_parent(self, failures: list[dict[str, str]]) -> None:
        from runners.report import write_sweep_report

        assert self.parent is not None
        try:
            self.result = write_sweep_report(self.client, self.parent)
        except Exception as exc:  # noqa: BLE001 - a report problem must not hide the result
            log.exception("could not build the sweep comparison")
            # visible on the parent: rebuild with python -m runners.report <parent run id>
            self.client.set_tag(self.parent["run_id"], "report_error",
                                f"{type(exc).__name__}: {exc}"[:5000])
        if failures:
            self.client.set_tag(self.parent["run_id"], "failed_jobs",
                                json.dumps(failures)[:5000])
        self.client.set_terminated(self.parent["run_id"], "FAILED" if failures else "FINISHED")
        self.parent = None

    def _close_if_open(self) -> None:
        if self.parent and self.client is not None:
            try:
                self.client.set_terminated(self.parent["run_id"], "FAILED")
            except Exception:  # noqa: BLE001 - best effort at interpreter exit
                pass


def _read_failures(sweep_dir: Path) -> list[dict[str, str]]:
    path = sweep_dir / track.FAILED_JOBS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
