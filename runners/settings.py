"""A job's config, read once at the entry point into typed objects the job passes down.

Hydra hands the task function (and a sweep's pre-flight) a ``DictConfig``. ``read`` checks
it (``validation.validate_config``) and turns it into ``Settings``: the typed ``RunConfig``
(enums are enum members, lists are lists, every interpolation resolved), the typed judges
of ``judge.panel``, and the resolved tree a run logs as params and is identified by. Below
the entry points nothing reads a ``DictConfig``: the job, the system, the scorers and the
tracker take these objects. A config is checked once per process: a sweep's pre-flight
reads every job's config, and the job reading it again gets the same ``Settings``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.config import JudgeConfig
from arag.llm.registry import require_credentials
from runners.config import RunConfig
from runners.identity import input_files, predictions_identity, resolved, run_identity
from runners.judges import panel_configs
from runners.validation import validate_config


@dataclass(frozen=True)
class Settings:
    """One job's config, checked and typed."""

    config: RunConfig
    # the judges judge.panel names, composed from their config options, each typed
    panel: dict[str, JudgeConfig]
    # the resolved config, enums as their names: the run's params
    tree: dict[str, Any]
    yaml: str  # the same as YAML: the run's config.yaml, which mode=evaluate reads back
    # the run's identity (tag config_hash) and its predictions' folder (identity.py):
    # of the config alone until the dataset is loaded (``with_dataset``), then of both
    config_hash: str
    predictions_hash: str
    # the content of files the config points to (identity.input_files)
    files: dict[str, str | None]
    dataset_digest: str | None = None  # Dataset.digest, once loaded

    def with_dataset(self, digest: str) -> Settings:
        """These settings identified by their dataset's content as well as their config."""
        return replace(self, dataset_digest=digest,
                       config_hash=run_identity(self.tree, self.files, digest),
                       predictions_hash=predictions_identity(self.tree, self.files, digest))


_READ: dict[str, Settings] = {}


def read(cfg: DictConfig) -> Settings:
    """``cfg`` checked (ConfigError naming the key and the fix) and typed; the same config
    read again in this process is not checked again."""
    files = input_files(cfg)
    key = OmegaConf.to_yaml(cfg) + json.dumps(files)  # an edited file: read anew
    if key not in _READ:
        validate_config(cfg)
        panel = {name: _typed(node, JudgeConfig) for name, node in panel_configs(cfg).items()}
        config = _typed(cfg, RunConfig)
        tree = resolved(cfg)
        _READ[key] = Settings(config, panel, tree, OmegaConf.to_yaml(cfg, resolve=True),
                              run_identity(tree, files), predictions_identity(tree, files),
                              files)
    return copy.deepcopy(_READ[key])  # a caller that changes its copy changes no other job's


def require_keys(settings: Settings) -> None:
    """The model, judge, panel and reference model of this run have their credentials, so
    a missing key stops everything before any run opens or any call is paid for."""
    cfg = settings.config
    nodes: dict[str, Any] = {f"judge={cfg.judge.name}": cfg.judge}
    if cfg.mode != "evaluate":
        nodes[f"model={cfg.model.name}"] = cfg.model
    if cfg.dataset.reference_model is not None:
        nodes[f"dataset/reference_model={cfg.dataset.reference_model.name}"] = \
            cfg.dataset.reference_model
    nodes.update({f"judge.panel={name}": node for name, node in settings.panel.items()})
    require_credentials(nodes)


def _typed(node: DictConfig, schema: type) -> Any:
    typed = OmegaConf.to_object(node)
    assert isinstance(typed, schema), f"{type(typed).__name__} is not a {schema.__name__}"
    return typed


def data_label(dataset: Any) -> str:
    """``ectsum/val[:30]``: the dataset, its split and its limit, for run names, so a 30-task
    check and a full run do not look alike in the runs list."""
    split = f"/{dataset.split}" if dataset.split else ""
    limit = f"[:{dataset.limit}]" if dataset.limit is not None else ""
    return f"{dataset.name}{split}{limit}"
