"""Checks before any run opens: config values the schema's types cannot express, and the
credentials of every provider the run will call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from arag.config import ConfigError
from arag.llm.registry import require_credentials
from arag.retrieval import check_precision
from arag.systems import SYSTEMS
from runners.judges import panel_configs


def validate_config(cfg: DictConfig) -> None:
    """Value checks the schema's types cannot express; each names the key and the fix."""
    missing = [k for k in missing_keys(cfg) if not k.startswith("hydra.")]
    if missing:  # ``???`` in a config file: a value only the user can give
        raise ConfigError(f"{', '.join(missing)} must be set. Fix: add {missing[0]}=<value> to "
                          "the command (e.g. dataset.root=<your folder> for dataset=folder)")
    checks = [
        ("max_loops", cfg.max_loops >= 1, "a positive integer, the agent's model-call budget",
         "max_loops=6"),
        ("target_length", cfg.target_length >= 1, "a positive number of words",
         "target_length=50"),
        ("runner.concurrency", cfg.runner.concurrency >= 1, "at least 1", "runner.concurrency=4"),
        ("retrieval.top_k", cfg.retrieval.top_k >= 1, "at least 1", "retrieval.top_k=5"),
        ("retrieval.chunk_size", cfg.retrieval.chunk_size >= 1, "a positive number of words",
         "retrieval.chunk_size=120"),
        ("retrieval.chunk_overlap", cfg.retrieval.chunk_overlap >= 0, "0 or more sentences",
         "retrieval.chunk_overlap=0"),
        ("retrieval.fusion_k", cfg.retrieval.fusion_k >= 1, "at least 1 (60 is usual)",
         "retrieval.fusion_k=60"),
        ("retrieval.dense_weight", 0.0 <= cfg.retrieval.dense_weight <= 1.0,
         "a share from 0 (bm25 only) to 1 (dense only)", "retrieval.dense_weight=0.5"),
        ("retrieval.neighbors", cfg.retrieval.neighbors >= 0, "0 or more chunks each side",
         "retrieval.neighbors=1"),
        ("retrieval.rerank_candidates", cfg.retrieval.rerank_candidates >= 1,
         "at least 1 chunk for the reranker to order", "retrieval.rerank_candidates=20"),
        ("retrieval.parent_chunk_size", cfg.retrieval.parent_chunk_size is None
         or cfg.retrieval.parent_chunk_size > cfg.retrieval.chunk_size,
         f"more words than retrieval.chunk_size ({cfg.retrieval.chunk_size}), or null for off",
         f"retrieval.parent_chunk_size={cfg.retrieval.chunk_size * 4}"),
        ("retrieval.reranker_path",
         str(getattr(cfg.retrieval.rerank, "value", cfg.retrieval.rerank)) != "cross_encoder"
         or bool(cfg.retrieval.reranker_path) and Path(cfg.retrieval.reranker_path).is_dir(),
         "a folder holding a sentence-transformers CrossEncoder (rerank=cross_encoder)",
         "retrieval.reranker_path=/path/to/cross-encoder"),
        ("retrieval.context_budget", cfg.retrieval.context_budget is None
         or cfg.retrieval.context_budget >= 1, "at least 1 chunk, or null for retrieval.top_k",
         "retrieval.context_budget=null"),
        ("model.offline.max_chunks_read", cfg.model.offline.max_chunks_read is None
         or cfg.model.offline.max_chunks_read >= 1,
         "at least 1 chunk, or null for the context budget", "model.offline.max_chunks_read=null"),
        ("runner.max_error_rate", 0 <= cfg.runner.max_error_rate <= 1,
         "a share of tasks from 0 (any error fails the run) to 1", "runner.max_error_rate=0.05"),
        ("runner.max_parse_failure_rate", 0 <= cfg.runner.max_parse_failure_rate <= 1,
         "a share of answered tasks from 0 to 1", "runner.max_parse_failure_rate=0.5"),
        ("runner.max_cost_usd", cfg.runner.max_cost_usd is None or cfg.runner.max_cost_usd > 0,
         "a positive amount in USD, or null for no cap", "runner.max_cost_usd=5"),
        ("system.kind", SYSTEMS.has(cfg.system.kind), f"a registered system, one of "
         f"{SYSTEMS.names()}", "system=arag"),
        ("mode", cfg.mode in ("run", "evaluate"), "'run' or 'evaluate'", "mode=run"),
        ("source_run_id", cfg.mode != "evaluate" or bool(cfg.source_run_id),
         "the id of the MLflow run to re-score when mode=evaluate",
         "mode=evaluate source_run_id=<run id from the MLflow UI>"),
        ("judge.samples", cfg.judge.get("samples", 1) >= 1,
         "at least 1 independent judge reply per item", "judge.samples=3"),
    ]
    for key, ok, must, example in checks:
        if not ok:
            value = OmegaConf.select(cfg, key)
            raise ConfigError(f"{key}={value!r} is invalid: it must be {must}. Fix: {example}")
    try:  # bf16 where the CPU has no bfloat16 instructions
        check_precision(str(cfg.retrieval.embedder.precision.value))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    panel_configs(cfg)  # every judge.panel entry is a judge option that can judge


def missing_keys(cfg: DictConfig, prefix: str = "") -> list[str]:
    """Keys left ``???``, found without resolving anything (``OmegaConf.missing_keys``
    resolves interpolations, and one that reads a missing key raises instead)."""
    found = []
    for key in map(str, cfg.keys()):
        if OmegaConf.is_missing(cfg, key):
            found.append(f"{prefix}{key}")
            continue
        node = cfg._get_node(key)
        if isinstance(node, DictConfig):
            found += missing_keys(node, f"{prefix}{key}.")
    return found


def require_keys(cfg: DictConfig, more: dict[str, Any] | None = None) -> None:
    """The model, judge and reference model of this run (and ``more``: those a sweep's
    other jobs choose, choice -> config with a ``provider``) have their credentials, so a
    missing key stops everything before any run opens or any call is paid for."""
    nodes: dict[str, Any] = {f"judge={cfg.judge.name}": cfg.judge}
    if cfg.mode != "evaluate":
        nodes[f"model={cfg.model.name}"] = cfg.model
    reference = cfg.dataset.get("reference_model")
    if reference is not None:
        nodes[f"dataset/reference_model={reference.name}"] = reference
    try:
        panel = panel_configs(cfg)
    except ConfigError:  # validate_config reports it, naming the fix, before the job runs
        panel = {}
    for name, node in panel.items():
        nodes[f"judge.panel={name}"] = node
    require_credentials({**nodes, **(more or {})})
