"""The run-level config schema, registered with Hydra's ConfigStore.

``conf/config.yaml`` starts its defaults list with ``base_config`` (this schema), so every
group option and override is type-checked at compose time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from arag.config import (
    CacheConfig,
    DatasetConfig,
    JudgeConfig,
    ModelConfig,
    RetrievalConfig,
    SummarizationStyle,
    SystemConfig,
    TaskType,
)


@dataclass
class TrackingConfig:
    uri: str = "sqlite:///mlruns/mlflow.db"  # relative sqlite paths resolve against the project
    artifact_location: str = "mlruns/artifacts"
    experiment: str | None = None  # None: the dataset's name


@dataclass
class RunnerConfig:
    concurrency: int = 4
    progress: bool = True
    runs_dir: str = "data/runs"  # predictions per config hash: what a re-run resumes from
    max_cost_usd: float | None = None
    dry_run: bool = False
    rerun: bool = False
    retry_errors: bool = False


@dataclass
class RougeConfig:
    use_stemmer: bool = True


@dataclass
class BertScoreConfig:
    model_path: str | None = None  # None: the packaged MiniLM (offline)
    num_layers: int = 6
    batch_size: int = 32


@dataclass
class GEvalConfig:
    regenerate_criteria: bool = False


@dataclass
class RankingConfig:
    ks: list[int] = field(default_factory=lambda: [1, 3, 5, 10])


@dataclass
class MetricsConfig:
    scorers: list[str] = field(
        default_factory=lambda: ["rouge", "bertscore", "retrieval", "ranking", "length",
                                 "numeric", "geval", "qa"])
    rouge: RougeConfig = field(default_factory=RougeConfig)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)
    geval: GEvalConfig = field(default_factory=GEvalConfig)
    ranking: RankingConfig = field(default_factory=RankingConfig)


@dataclass
class RunConfig:
    system: SystemConfig = MISSING
    dataset: DatasetConfig = MISSING
    model: ModelConfig = MISSING
    judge: JudgeConfig = MISSING
    retrieval: RetrievalConfig = MISSING
    metrics: MetricsConfig = MISSING
    tracking: TrackingConfig = MISSING
    cache: CacheConfig = MISSING
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    max_loops: int = 22
    task_type: TaskType = TaskType.summarization
    summarization_style: SummarizationStyle = SummarizationStyle.earnings_call
    target_length: int = 50  # words
    # run: predict and score; evaluate: re-score the predictions of source_run_id
    mode: str = "run"
    source_run_id: str | None = None


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=RunConfig)


register_configs()
