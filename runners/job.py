"""One job's objects, built from its config before any MLflow run opens: the dataset, the
system with its model, the index (loaded once), the judge and the scorers."""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from arag.config import CacheConfig, CacheMode, Scope
from arag.datasets import Dataset, load_dataset
from arag.datasets.references import with_references
from arag.llm import ChatModel, Prices, make_model
from arag.llm.budget import CappedModel, SpendCap
from arag.llm.cache import CachedModel, MeteredModel, SpendJournal
from arag.llm.offline import OfflineModel
from arag.llm.window import WindowedModel, judge_window
from arag.records import Prediction, Task, content_hash
from arag.retrieval import (
    KeywordStandIn,
    RetrievalSettings,
    SearchIndex,
    build_chunks,
    dry_run_index,
    load_or_build_index,
)
from arag.retrieval.chunk_context import write_contexts
from arag.retrieval.chunking import chunk_document
from arag.systems import SYSTEMS, RunSetup, System, SystemContext
from metrics import Scorer, ScorerEnv, build_scorers
from metrics.base import NO_JUDGE
from metrics.sequential import run_order
from runners.config import RunConfig
from runners.settings import Settings
from runners.validation import ConfigError
from tracking.paths import resolve

log = logging.getLogger(__name__)
SPEND_FILE = "spend.jsonl"
# above this share of documents inside the context budget, retrieval cannot tell systems apart
MOST = 0.5


@dataclass
class Job:
    """Everything one run needs, built before any MLflow run is opened."""

    settings: Settings
    dataset: Dataset
    predictions_path: Path
    # the class that answers, as it declared itself for this run (System.configure)
    system_class: type[System]
    # what the dataset lets a comparison show (dataset_metrics), logged with the run
    dataset_metrics: dict[str, float] = field(default_factory=dict)
    # names this attempt's lines in the spend journal: what it paid, apart from what
    # earlier attempts paid for the answers it carries over
    attempt: str = field(default_factory=lambda: uuid.uuid4().hex, init=False)
    # the sweep run this job runs under (None: a single run), named on each journal line
    sweep_run: str | None = field(default=None, init=False)
    _index: SearchIndex | None = field(default=None, init=False, repr=False)
    # runner.max_cost_usd held call by call, once the run's model is ``capped``
    spend_cap: SpendCap | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    @property
    def cfg(self) -> RunConfig:
        return self.settings.config

    @property
    def config_hash(self) -> str:
        return self.settings.config_hash

    @property
    def spend_path(self) -> Path:
        """The journal of every paid call made for these predictions (``SpendJournal``)."""
        return self.predictions_path.with_name(SPEND_FILE)

    def judge_spend_path(self, run_id: str) -> Path:
        """The journal of every paid judge call of one MLflow run (panel and samples
        included): named by the run, since runs with other judges share the predictions
        folder, and a continued run keeps its id while ``runner.rerun=true`` or a re-score
        opens a new one."""
        return self.predictions_path.with_name(f"judge_spend.{run_id}.jsonl")

    def journaled(self, model: ChatModel) -> ChatModel:
        """The run's model with its paid calls journaled as they return (``spend_path``),
        so a kill loses no spend; the free offline model as it is."""
        if model.provider == "offline":
            return model
        return MeteredModel(model, Prices.from_config(self.cfg.model),
                            SpendJournal(self.spend_path, self.attempt, self.journal_tags))

    @property
    def journal_tags(self) -> dict[str, Any]:
        """What each spend-journal line of this job says of who paid: the sweep run and the
        round (``runner.round_tasks``: a sequential sweep's looks sum the spend of their
        rounds, however often the sweep was run again)."""
        return {"sweep_run": self.sweep_run, "round_tasks": self.cfg.runner.round_tasks}

    def capped(self, model: ChatModel) -> ChatModel:
        """The run's model with every call reserving its cost against
        ``runner.max_cost_usd`` before it is sent (``arag.llm.budget``), starting from the
        spend journal's total (every paid call for these predictions, as the tag, report and
        console state it); as it is without a cap or for the free offline model. Wrap the
        provider's model, inside the response cache: a cached reply spends nothing."""
        limit = self.cfg.runner.max_cost_usd
        if limit is None or model.provider == "offline":
            return model
        self.spend_cap = SpendCap(limit, SpendJournal(self.spend_path).spend_total)
        return CappedModel(model, Prices.from_config(self.cfg.model), self.spend_cap)

    def index_loader(self) -> SearchIndex:
        """The search index, loaded (or built) once, on first use."""
        with self._lock:
            if self._index is None and self.cfg.runner.dry_run:  # a dry run embeds nothing
                self._index = dry_run_index(self.dataset.corpus, self.cfg.retrieval,
                                            resolve(self.cfg.cache.dir), self.chunk_contexts())
            elif self._index is None:
                self._index = load_or_build_index(self.dataset.corpus, self.cfg.retrieval,
                                                  resolve(self.cfg.cache.dir),
                                                  self.cfg.cache.mode, self.chunk_contexts())
            return self._index

    def chunk_contexts(self) -> dict[str, str] | None:
        """The contexts the run's model writes for every chunk (``retrieval.llm_context``),
        through the response cache and journaled like the system's calls; a dry run has
        the offline model stand in (it prices the real requests apart)."""
        cfg = self.cfg
        if not cfg.retrieval.llm_context:
            return None
        chunks = build_chunks(self.dataset.corpus, cfg.retrieval.chunk_size,
                              cfg.retrieval.chunk_overlap)
        model = OfflineModel() if cfg.runner.dry_run else self.journaled(
            cached(make_model(cfg.model), cfg.cache))
        contexts = write_contexts(model, self.dataset.corpus, chunks, cfg.runner.concurrency)
        if isinstance(model, MeteredModel):
            log.info("chunk contexts: %d chunks, %d model calls (%d from the response cache), "
                     "$%.4f", len(chunks), model.calls, model.cached_calls, model.cost_usd)
        return contexts

    def task_digests(self) -> dict[str, str]:
        """What each task's answer rests on (``Dataset.task_digests``): with corpus-wide
        retrieval any document can change any answer, so each task's takes the whole
        dataset's."""
        digests = self.dataset.task_digests
        if self.cfg.retrieval.scope == Scope.corpus and self.system_class.retrieves:
            return {k: content_hash(v, self.dataset.digest) for k, v in digests.items()}
        return digests

    @property
    def index_estimated(self) -> str | None:
        """Why the dry run searched a keyword stand-in (no readable index of the corpus in
        the cache), or None when it searched a real index."""
        return self._index.reason if isinstance(self._index, KeywordStandIn) else None

    def index_metrics(self) -> dict[str, float]:
        """index_sentences_embedded/_reused and index_embed_seconds; none if nothing searched."""
        return self._index.stats.metrics() if self._index is not None else {}


def prepare(settings: Settings, call_models: bool = True,
            recorded: list[Prediction] | None = None, dataset: Dataset | None = None) -> Job:
    """The job of ``settings``; ``recorded``: a run's own predictions being re-scored;
    ``dataset``: the tasks already loaded for this config (preflight loads each once)."""
    cfg = settings.config
    dataset = dataset if dataset is not None else load_tasks(cfg, call_models)
    settings = settings.with_dataset(dataset.digest)  # the run is of this data
    system_class = configure_system(cfg, dataset, recorded)
    tasks = [t for t in this_round(dataset.tasks, cfg.runner) if system_class.answers(t)]
    n_of_data = len(dataset.tasks)
    if len(tasks) < len(dataset.tasks):
        log.info("system %s answers %d of %d tasks", cfg.system.name, len(tasks),
                 len(dataset.tasks))
    dataset = replace(dataset, tasks=tasks, notes=list(dataset.notes))  # preflight shares it
    budget = {**dataset_metrics(dataset, cfg), "n_tasks_asked": float(len(tasks)),
              "n_tasks_of_data": float(n_of_data)}
    if budget["docs_within_context_budget_share"] > MOST:
        dataset.notes.append(budget_warning(budget))
        log.warning("dataset %s: %s", dataset.name, dataset.notes[-1])
    runs_dir = resolve(cfg.runner.runs_dir)
    return Job(settings, dataset, runs_dir / settings.predictions_hash / "predictions.jsonl",
               system_class, budget)


def this_round(tasks: list[Task], runner: Any) -> list[Task]:
    """A sequential sweep's round answers the first ``runner.round_tasks`` of the seeded
    order (the data's digest is of every task, so each round continues the same run)."""
    if not getattr(runner, "sequential", False) or runner.round_tasks is None:
        return tasks
    kept = set(run_order((t.id for t in tasks), runner.order_seed)[:runner.round_tasks])
    return [t for t in tasks if t.id in kept]


def configure_system(cfg: RunConfig, dataset: Dataset, recorded: list[Prediction] | None
                     ) -> type[System]:
    """The system class as it declares itself for this run and dataset (System.configure)."""
    setup = RunSetup(cfg.system, dataset.corpus, dataset.tasks,
                     lambda: build_chunks(dataset.corpus, cfg.retrieval.chunk_size,
                                          cfg.retrieval.chunk_overlap),
                     resolve("."), recorded, frozenset(dataset.past_limit))
    return SYSTEMS.get(cfg.system.kind).configure(setup)


def load_tasks(cfg: RunConfig, call_models: bool = True) -> Dataset:
    """The dataset, its tasks narrowed to the run's task_type."""
    dataset = load_dataset(cfg.dataset, resolve("."), call_models)
    for note in dataset.notes:
        log.info("dataset %s: %s", dataset.name, note)
    wanted = cfg.task_type.value
    tasks = [t for t in dataset.tasks if t.task_type == wanted]
    if not tasks:
        raise ConfigError(f"task_type={wanted!r}: dataset {dataset.name!r} has no tasks of that "
                          "type; set task_type to the dataset's type")
    if len(tasks) < len(dataset.tasks):
        log.info("task_type=%s: %d of %d tasks", wanted, len(tasks), len(dataset.tasks))
    dataset.tasks = tasks
    if cfg.dataset.references:  # the team's own references, in place of the dataset's
        dataset = with_references(dataset, resolve(cfg.dataset.references))
        log.info("dataset %s: %s", dataset.name, dataset.notes[-1])
    return dataset


def dataset_metrics(dataset: Dataset, cfg: RunConfig) -> dict[str, float]:
    """Run metrics that say what the dataset lets a comparison show: the share of the
    tasks' documents whose every chunk fits in the retrieval context budget (each system
    then sees nearly all of the document, so retrieval cannot make a difference), the
    budget in chunks, and how many tasks have no reference."""
    budget = cfg.retrieval.context_budget or cfg.system.top_k or cfg.retrieval.top_k
    doc_ids = {d for t in dataset.tasks for d in t.doc_ids}
    sizes = [len(chunk_document(dataset.corpus.documents[d], cfg.retrieval.chunk_size,
                                cfg.retrieval.chunk_overlap)) for d in sorted(doc_ids)]
    within = sum(1 for n in sizes if n <= budget)
    return {"docs_within_context_budget_share": within / len(sizes) if sizes else 0.0,
            "docs_within_context_budget": float(within), "n_documents": float(len(sizes)),
            "context_budget_chunks": float(budget),
            "n_tasks_without_reference": float(sum(1 for t in dataset.tasks
                                                   if not t.reference.strip()))}


def budget_warning(metrics: dict[str, float]) -> str:
    return (f"{metrics['docs_within_context_budget']:.0f} of {metrics['n_documents']:.0f} "
            f"documents ({metrics['docs_within_context_budget_share']:.0%}) fit inside the "
            f"retrieval context budget of {metrics['context_budget_chunks']:.0f} chunks: every "
            "system sees nearly all of each, so retrieval cannot make a difference here. Use "
            "longer documents, or a smaller retrieval.top_k / retrieval.chunk_size")


def cached(model: ChatModel, cache: CacheConfig, reask_unreadable: int = 0) -> ChatModel:
    """Every model and judge call goes through the content-addressed response cache; a
    judge's asks again a reply that could not be read up to ``reask_unreadable`` times."""
    if cache.mode == CacheMode.off or model.provider == "offline":
        return model  # the offline model is deterministic and free: nothing to save
    return CachedModel(model, resolve(cache.dir), cache.mode.value, reask_unreadable)


def make_judge(cfg: RunConfig, journal: SpendJournal | None = None
               ) -> tuple[MeteredModel | None, str]:
    """(judge model, reason) — the model is None when there is no usable judge;
    ``journal``: where its paid calls are written as they return. A request that does not
    fit ``judge.context_limit`` is never sent (``arag.llm.window``)."""
    if cfg.judge.provider == "none":
        return None, NO_JUDGE
    judge = make_model(cfg.judge)
    if not judge.can_judge:
        return None, f"judge={cfg.judge.name}: the offline model is not a judge"
    windowed = WindowedModel(judge, cfg.judge.context_limit, judge_window())
    return MeteredModel(cached(windowed, cfg.cache, cfg.judge.reask_unreadable),
                        Prices.from_config(cfg.judge), journal), ""


def make_panel(settings: Settings, journal: SpendJournal | None = None
               ) -> dict[str, MeteredModel]:
    """The further judges ``judge.panel`` names, each held to its own context window,
    cached, metered and journaled like the judge."""
    return {name: MeteredModel(cached(WindowedModel(
        make_model(node), node.context_limit, judge_window(name)),
        settings.config.cache, node.reask_unreadable), Prices.from_config(node), journal)
            for name, node in settings.panel.items()}


def make_scorers(settings: Settings, journal: SpendJournal | None = None
                 ) -> tuple[list[Scorer], dict[str, MeteredModel]]:
    """The run's scorers, and the judges they share by option name (the primary judge
    first, then its panel; empty without a judge); ``journal``: the run's judge spend
    journal (``Job.judge_spend_path``)."""
    cfg = settings.config
    judge, reason = make_judge(cfg, journal)
    panel = make_panel(settings, journal) if judge is not None else {}
    env = ScorerEnv(judge=judge, judge_reason=reason or NO_JUDGE,
                    judge_id=f"{cfg.judge.provider}/{cfg.judge.model_id}",
                    judge_batch=cfg.judge.batch, judge_samples=cfg.judge.samples,
                    panel=dict(panel),
                    cache_dir=resolve(cfg.cache.dir), concurrency=cfg.runner.concurrency,
                    device=str(cfg.retrieval.embedder.device))
    judges = {cfg.judge.name: judge, **panel} if judge is not None else {}
    return build_scorers(cfg.metrics, env), judges


def warm_up(index: SearchIndex) -> None:
    """One throwaway query: the first encode of a process pays torch's one-time set-up
    (hundreds of ms), which would otherwise land on whichever task and job came first."""
    if index.embedder is not None and index.chunks:
        for query in ("revenue guidance", "margin outlook"):  # the second still pays some
            index.semantic_search(query, 1)


def build_system(job: Job, model: ChatModel) -> System:
    cfg = job.cfg
    ctx = SystemContext(
        model=model, prices=Prices.from_config(cfg.model), corpus=job.dataset.corpus,
        index_loader=job.index_loader, style=cfg.summarization_style.value,
        target_length=cfg.target_length, max_loops=cfg.max_loops,
        top_k=cfg.system.top_k or cfg.retrieval.top_k, scope=cfg.retrieval.scope.value,
        tools=list(cfg.system.tools), max_tokens=cfg.system.max_tokens,
        temperature=cfg.system.temperature, context_limit=cfg.model.context_limit,
        snippet_words=cfg.retrieval.snippet_words,
        retrieval=RetrievalSettings.from_config(cfg.retrieval), citations=cfg.system.citations,
    )
    system = job.system_class(cfg.system.name, ctx)
    if system.retrieves and system.searches:
        warm_up(ctx.index())  # before the clock starts: task latency excludes loading
    return system
