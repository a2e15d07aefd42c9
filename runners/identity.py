"""What identifies a run and its predictions: hashes of the resolved config.

``config_hash`` names a run (tag ``config_hash``): a re-run of the same config continues or
reuses it. ``predictions_hash`` names the folder of its predictions: only keys that can
change what the systems answer, so a new judge or new references re-score the same
predictions. Both take the dataset's digest once it is loaded (``Dataset.digest``): a
changed document, task or reference is a new run and new predictions, not a resume.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.agent import PROMPT_VERSION
from arag.records import content_hash
from arag.systems import SYSTEMS
from metrics.geval import PROMPT_VERSION as JUDGE_PROMPT_VERSION
from tracking.paths import resolve

# keys that change how a run is executed or recorded, not what it computes
# how a model is reached, not which model answers
_TRANSPORT = ("max_retries", "retry_base_delay_s", "retry_after_max_s", "timeout_s", "requests_per_minute",
              "tokens_per_minute", "input_tokens_per_minute", "output_tokens_per_minute",
              "base_url", "api_key_env")
COSMETIC_KEYS = (
    "runner.concurrency", "runner.progress", "runner.verbose", "runner.rerun", "runner.retry_errors",
    "runner.dry_run", "runner.runs_dir", "runner.max_cost_usd", "runner.max_error_rate",
    "runner.max_parse_failure_rate", "judge.reask_unreadable", "runner.check_endpoints",
    # a sequential sweep's rounds continue one run; its tasks' answers do not depend on them
    "runner.sequential", "runner.order_seed", "runner.batch_size", "runner.max_tasks",
    "runner.round_tasks",
    "tracking", "cache.mode", "report",
    *(f"{node}.{key}" for node in ("model", "judge", "dataset.reference_model")
      for key in _TRANSPORT),
    # where parsed PDFs are cached and how many processes parse them: not what is computed
    "dataset.options.cache_dir", "dataset.options.parse_workers",
    "dataset.options.reference_concurrency",
)
# keys that decide the predictions (scoring settings are not among them)
PREDICTION_KEYS = ("system", "dataset", "model", "retrieval", "max_loops", "task_type",
                   "summarization_style", "target_length")
# ...except these: what the references are scored against, not what the systems see
REFERENCE_KEYS = ("dataset.reference_model", "dataset.references", "dataset.options.reference_words",
                  "dataset.options.spot_check_fraction")


def resolved(cfg: DictConfig) -> dict[str, Any]:
    return OmegaConf.to_container(cfg, resolve=True, enum_to_str=True)  # type: ignore[return-value]


# keys added after runs were recorded: left out at their defaults, so the runs that never
# set them keep their identity (and resume)
_NEWER_DEFAULTS: dict[str, Any] = {
    "system.predictions": None, "system.allow_missing": False, "system.options": {},
    "system.id_map": None, "system.ignore_extra": False, "system.model_label": None,
    "dataset.references": None, "judge.pairwise": False,
    "judge.pairwise_pairs": "agent_baselines", "runner.repeats": 1, "judge.reask_unreadable": 2,
    **{f"{node}.options.send_temperature": True
       for node in ("model", "judge", "dataset.reference_model")},
}


def _without(data: dict[str, Any], dotted: tuple[str, ...]) -> dict[str, Any]:
    data = json.loads(json.dumps(data))
    for key, default in _NEWER_DEFAULTS.items():
        node, last = _parent(data, key)
        if node is not None and last in node and node[last] == default:
            del node[last]
    for key in dotted:
        node, last = _parent(data, key)
        if node is not None:  # a null node (no reference model) has nothing to drop
            node.pop(last, None)
    return data


def _parent(data: dict[str, Any], dotted: str) -> tuple[dict[str, Any] | None, str]:
    """The node holding ``dotted``'s last key (None: a parent is missing or null), and
    that key."""
    node: Any = data
    *parents, last = dotted.split(".")
    for p in parents:
        node = node.get(p) if isinstance(node, dict) else None
    return (node if isinstance(node, dict) else None), last


def unread_settings(kind: Any) -> tuple[str, ...]:
    """``system.<key>`` settings that another kind declares its own (``System.own_settings``)
    and this one never reads: not part of this kind's identity."""
    mine = SYSTEMS.get(str(kind)).own_settings if SYSTEMS.has(str(kind)) else ()
    return tuple(sorted({f"system.{key}" for _, system in SYSTEMS.items()
                         for key in system.own_settings if key not in mine}))


def _unread(tree: dict[str, Any]) -> tuple[str, ...]:
    return unread_settings((tree.get("system") or {}).get("kind"))


def prompt_versions() -> dict[str, str]:
    """The versions of the prompts a run sends: logged as params, part of its identity."""
    return {"prompt_version": PROMPT_VERSION, "judge_prompt_version": JUDGE_PROMPT_VERSION}


# config keys naming files whose content, not their path, decides what a run computes
INPUT_FILE_KEYS = ("system.predictions", "system.id_map", "dataset.references")


def input_files(cfg: DictConfig) -> dict[str, str | None]:
    """The content of files the config points to whose answers it does not hold itself
    (``system.predictions``, its ``system.id_map``, ``dataset.references``): an edited file
    is a new run, not a resume of the old one."""
    digests = {}
    unread = unread_settings(OmegaConf.select(cfg, "system.kind"))
    for key in INPUT_FILE_KEYS:
        path = OmegaConf.select(cfg, key) if key not in unread else None
        if path:
            file = resolve(str(path))
            digests[key] = hashlib.sha256(file.read_bytes()).hexdigest() if file.is_file() \
                else None
    return digests


def config_hash(cfg: DictConfig) -> str:
    """Identity of a run: the resolved config without cosmetic keys, and its prompts."""
    return run_identity(resolved(cfg), input_files(cfg))


def run_identity(tree: dict[str, Any], files: dict[str, str | None],
                 dataset_digest: str | None = None) -> str:
    """``config_hash`` of a config already resolved (``resolved``) with its ``input_files``
    and, once the dataset is loaded, its digest."""
    return content_hash("run", _without(tree, COSMETIC_KEYS + _unread(tree)), prompt_versions(),
                        *_if_any(files), *_if_any(_data(dataset_digest)))


def _if_any(files: dict[str, str | None]) -> list[dict[str, str | None]]:
    return [files] if files else []  # configs without input files keep their old hashes


def _data(dataset_digest: str | None) -> dict[str, str | None]:
    return {"dataset_digest": dataset_digest} if dataset_digest else {}


def predictions_hash(cfg: DictConfig) -> str:
    """Identity of a run's predictions: only what can change them, the systems' prompts
    included."""
    return predictions_identity(resolved(cfg), input_files(cfg))


def predictions_identity(tree: dict[str, Any], files: dict[str, str | None],
                         dataset_digest: str | None = None) -> str:
    """``predictions_hash`` of a config already resolved with its ``input_files`` and, once
    the dataset is loaded, its digest."""
    data = _without(tree, COSMETIC_KEYS + REFERENCE_KEYS + _unread(tree))
    answers = {k: v for k, v in files.items() if k not in REFERENCE_KEYS}  # not references
    return content_hash("predictions", {k: data.get(k) for k in PREDICTION_KEYS},
                        PROMPT_VERSION, *_if_any(answers), *_if_any(_data(dataset_digest)))
