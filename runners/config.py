"""The run-level config schema, registered with Hydra's ConfigStore.

``conf/config.yaml`` starts its defaults list with ``base_config`` (this schema), so every
group option and override is type-checked at compose time.
"""

from __future__ import annotations

from dataclasses import dataclass, field, make_dataclass
from enum import Enum
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from arag.config import (
    CacheConfig,
    DatasetConfig,
    JudgeConfig,
    ModelConfig,
    RetrievalConfig,
    SummarizationStyle,
    SystemConfig,
    TaskType,
    positive,
    ranged,
)
from arag.datasets.features import NUMERIC


@dataclass
class TrackingConfig:
    # $MLFLOW_TRACKING_URI when set (MLflow's convention for a team's server), else the
    # project's store; tracking.uri on the command line wins. Relative sqlite paths resolve
    # against the project.
    uri: str = "${oc.env:MLFLOW_TRACKING_URI,'sqlite:///mlruns/mlflow.db'}"
    # null: beside a sqlite store (sqlite:///X/mlflow.db -> X/artifacts; the default store's:
    # mlruns/artifacts); a server keeps its own (tracking/paths.py: artifact_location)
    artifact_location: str | None = None
    experiment: str | None = None  # None: the dataset's name


# runner.repeats above this is refused before anything runs: a study of run-to-run spread
# needs a handful of repeats (docs/running.md: Repeats), and a mistyped count (1000000000)
# must not start a paid run; a larger study runs several sweeps
MAX_REPEATS = 100


@dataclass
class RunnerConfig:
    concurrency: int = positive(4, "tasks at once")
    # a bar (ETA, place in the sweep) for each job and every long step; false: none
    progress: bool = True
    runs_dir: str = "data/runs"  # predictions per config hash: what a re-run resumes from
    max_cost_usd: float | None = ranged(None, low=0, above=True,
                                        must="a positive amount in USD, or null for no cap")
    dry_run: bool = False
    # before a sweep's first job, each model and judge endpoint is asked once for its model
    # list (free): one that does not answer stops the sweep at once (runners/endpoints.py)
    check_endpoints: bool = True
    rerun: bool = False
    # errors are not results: the same command predicts errored tasks again
    retry_errors: bool = True
    # share of errored tasks (or failed judge calls) above which the run ends FAILED and
    # the command exits non-zero
    max_error_rate: float = ranged(0.0, low=0, high=1, must="a share of tasks from 0 (any "
                                   "error fails the run) to 1")
    # share of answered tasks on which a judge-scored field (G-Eval, taxonomy, factual
    # consistency, citation support, QA) may be unreadable before the run ends FAILED
    max_parse_failure_rate: float = ranged(0.5, low=0, high=1,
                                           must="a share of answered tasks from 0 to 1")
    # 0: quiet (our INFO, one bar per job); 1: the libraries' INFO lines (HTTP requests,
    # ...); 2: DEBUG
    verbose: int = ranged(0, low=0, high=2, must="0 (quiet), 1 (the libraries' INFO) or 2 "
                          "(DEBUG)")
    # every task is answered this many times by every system (records carry ``repeat``,
    # from 0; the repeat index is part of each request's cache key)
    repeats: int = ranged(1, low=1, high=MAX_REPEATS,
                          must=f"from 1 to {MAX_REPEATS} (answers per task and system)")
    # a sweep that runs in rounds and stops as soon as its comparisons on report.decide_on
    # are decided or futile (anytime-valid intervals, docs/verdict.md); every system answers
    # the same tasks, in an order fixed by order_seed, batch_size more each round
    sequential: bool = False
    order_seed: int = 0
    batch_size: int = positive(20, "tasks per round of a sequential sweep")
    # a sequential sweep stops after this many tasks, decided or not; null: every task
    max_tasks: int | None = positive(None, "tasks at most")
    # set by the sequential sweep for each round (the first round_tasks of the order); not
    # part of a run's identity, so every round continues the same run
    round_tasks: int | None = positive(None, "tasks this round")


def metrics_config() -> type:
    """``metrics``: which scorers run, and one node of options per scorer that declares them
    (``Scorer.Options``), so a new scorer's options are type-checked with no edit here."""
    from metrics import SCORERS

    options = [(name, cls.Options, field(default_factory=cls.Options))
               for name, cls in SCORERS.items() if cls.Options is not None]
    names = SCORERS.names()
    # importable as runners.config.MetricsConfig, so configs pickle by reference (joblib)
    return make_dataclass("MetricsConfig", [
        ("scorers", list[str], field(default_factory=lambda: list(names))), *options],
        namespace={"__module__": __name__})


MetricsConfig = metrics_config()


class ConsoleMode(str, Enum):
    summary = "summary"  # the verdict in at most 30 lines of 120 characters
    full = "full"  # everything the report says


@dataclass
class PPIConfig:
    """``report.ppi``: the judge corrected by people's labels (docs/validate-your-judge.md)."""

    # a corrected comparison of two runs decides only with at least this many tasks
    # labelled for both (fewer: its figures are shown, nothing is decided)
    min_shared: int = positive(10, "tasks labelled for both runs of a corrected comparison")


@dataclass
class BudgetConfig:
    """What a recommendation may cost: ``report.budget.cost_usd_per_task`` (uncached USD a
    task) and ``report.budget.latency_ms_p90`` (ms); null: no limit."""

    cost_usd_per_task: float | None = None
    latency_ms_p90: float | None = None


@dataclass
class ReportConfig:
    """What the sweep's verdict decides on and what it is held against (no model calls)."""

    # the metrics the verdict decides on, in order; empty: the documented default
    # (report/policy.py)
    decide_on: list[str] = field(default_factory=list)
    # a finished sweep to compare with task by task: its parent run id, its name or a tag
    # value; None: no baseline
    baseline: str | None = None
    # regressions that fail the command: ["<metric>:<margin>", ...] (docs/ci.md)
    fail_on: list[str] = field(default_factory=list)
    # what a fail_on rule whose CI straddles the margin does to the exit status: "fail"
    # (a gate the data cannot settle does not pass; docs/ci.md says why) or "pass"
    on_inconclusive: str = "fail"
    # the baseline comparison is refused below this share of common task ids (common
    # over the larger sweep's tasks)
    min_overlap: float = ranged(0.9, low=0, high=1, must="a share of tasks from 0 to 1")
    # runs whose names differ, paired: ["<candidate run name>=<baseline run name>", ...]
    baseline_map: list[str] = field(default_factory=list)
    # a JSON-lines file of people's labels ({task_id, system, dimension, score, labeller})
    # the sweep's report holds the judge against (docs/validate-your-judge.md); None: only
    # the HUMAN feedback on its traces
    human_labels: str | None = None
    # document features to slice every compared pair by ("Where each system wins",
    # docs/verdict.md): [document_tokens, company, ...]; empty: no slices
    slice_by: list[str] = field(default_factory=list)
    # quantile bins of a numeric feature (4: quartiles of the compared tasks)
    slice_bins: int = ranged(4, low=2, must="at least 2 (bins of a numeric feature)")
    # explicit inner edges of a numeric feature's bins, increasing:
    # report.slice_edges.document_tokens=[8000,32000,128000] (they replace its quantiles)
    # (every numeric feature is a key, so an override needs no "+"; empty: quantiles)
    slice_edges: dict[str, list[float]] = field(default_factory=lambda: {
        name: [] for name in sorted(NUMERIC)})
    # a difference not worth having, per metric: {<metric>: <margin in the metric's units>};
    # a metric left out gets 2% of its declared range (metrics.sequential.margin_for). Two
    # uses: a sequential sweep calls two systems equivalent when its anytime-valid interval
    # lies within +-margin, and "What to ship" calls a run dominated when a cheaper one
    # exists and the upper CI bound of (costlier - cheaper) lies below the margin
    equivalence_margin: dict[str, float] = field(default_factory=dict)
    # "What to ship" (docs/verdict.md): the numeric features a threshold policy may route
    # by, known before any system answers (document_tokens, n_documents; never
    # evidence_position, which comes from the gold)
    route_by: list[str] = field(default_factory=lambda: ["document_tokens"])
    # folds of whole documents the policies are cross-fitted over
    route_folds: int = ranged(5, low=2, must="at least 2 (folds of whole documents)")
    # the what-if cascade's order, run names of the sweep ([naive,arag]: naive first,
    # arag where it declined); empty: the order best on the training folds, cheaper first
    cascade: list[str] = field(default_factory=list)
    # the recommendation is the best system or policy within these (null: no limit)
    budget: BudgetConfig = field(default_factory=lambda: BudgetConfig())
    # what the terminal shows at a sweep's end: summary (a screen: the answer, caveats by
    # kind, the headline table, the most important findings) or full (everything)
    console: ConsoleMode = ConsoleMode.summary
    ppi: PPIConfig = field(default_factory=PPIConfig)


@dataclass
class RunConfig:
    system: SystemConfig = MISSING
    dataset: DatasetConfig = MISSING
    model: ModelConfig = MISSING
    judge: JudgeConfig = MISSING
    retrieval: RetrievalConfig = MISSING
    metrics: MetricsConfig = MISSING  # type: ignore[valid-type]
    tracking: TrackingConfig = MISSING
    cache: CacheConfig = MISSING
    runner: RunnerConfig = field(default_factory=RunnerConfig)
    report: ReportConfig = field(default_factory=ReportConfig)
    # A-RAG's tool-use budget (model calls); swept like any other key
    max_loops: int = positive(22, "the agent's model-call budget")
    # what a task asks for: the defaults are the sample's and ECTSum's (earnings-call
    # summaries); the other datasets (conf/dataset) set their own
    task_type: TaskType = TaskType.summarization
    summarization_style: SummarizationStyle = SummarizationStyle.earnings_call
    target_length: int = positive(50, "words")  # of the answer the prompt asks for
    # run: predict and score; evaluate: re-score the predictions of source_run_id (no model
    # calls)
    mode: str = "run"
    source_run_id: str | None = None


def folder_name(root: str) -> str:
    """``${folder_name:${dataset.root}}``: the folder's own name (``~/calls/`` -> ``calls``),
    so a folder's runs land in an experiment named after it."""
    path = Path(str(root)).expanduser()
    return path.name or path.resolve().name or "documents"


def register_configs() -> None:
    ConfigStore.instance().store(name="base_config", node=RunConfig)
    OmegaConf.register_new_resolver("folder_name", folder_name, replace=True)


register_configs()
